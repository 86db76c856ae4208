"""WebArena's task files: the shipped ones load, missing or unreachable servers are named,
and WebArena Verified's evaluators grade episodes against a stand-in server on 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse

import pytest

import agentgym
from agentgym.core import MissingResourceError
from agentgym.plugins.web.webarena import WebArenaEnv, read_tasks, verified_file
from agentgym.testing import assert_valid, check_env


def webarena_missing() -> str:
    try:
        verified_file()
    except MissingResourceError as error:
        return str(error)
    return ""


def test_the_verified_task_files_load() -> None:
    if webarena_missing():
        pytest.skip(f"needs WebArena's task files: {webarena_missing()}")
    rows = read_tasks()
    assert len(rows) == 812
    assert {s for r in rows for s in r["sites"]} == {
        "shopping", "shopping_admin", "reddit", "gitlab", "wikipedia", "map"}
    assert all(r["eval"] and r["intent"] for r in rows)


def test_missing_servers_are_named(monkeypatch, tmp_path) -> None:
    for name in ("SHOPPING", "SHOPPING_ADMIN", "REDDIT", "GITLAB", "WIKIPEDIA", "MAP"):
        monkeypatch.delenv(f"WEBARENA_{name}", raising=False)
        monkeypatch.delenv(f"WA_{name}", raising=False)
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps(TASKS))
    with pytest.raises(MissingResourceError, match="WEBARENA_SHOPPING"):
        WebArenaEnv(tasks)
    with pytest.raises(MissingResourceError, match="WEBARENA_REDDIT"):
        WebArenaEnv(tasks, base_urls={"shopping": "http://127.0.0.1:9"},
                    sites=("shopping", "reddit"))
    with pytest.raises(MissingResourceError, match=r"shopping server at http://127.0.0.1:9"):
        WebArenaEnv(tasks, base_urls={"shopping": "http://127.0.0.1:9"})
    monkeypatch.setenv("WEBARENA_SHOPPING", "http://127.0.0.1:9")
    with pytest.raises(MissingResourceError, match="not reachable"):
        agentgym.make("webarena", tasks=str(tasks))


# ---- a stand-in shop, and tasks in WebArena Verified's format over it ------------------------

PAGE = """<!doctype html><title>Stand-in shop</title><h1>Orders</h1>
<p>Your last order: #000000170, total $65.32</p>
<form method=post action=/cart/add><label for=q>Quantity</label>
<input id=q name=qty value=1><input type=hidden name=product value=B07>
<button>Add to cart</button></form>"""


class StandIn(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = PAGE.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(303)
        self.send_header("Location", "/")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


TASKS = [
    {"sites": ["shopping"], "task_id": 1, "intent_template_id": 1, "revision": 1,
     "start_urls": ["__SHOPPING__/"], "intent": "What was the total of my last order?",
     "intent_template": "", "instantiation_dict": {},
     "eval": [{"evaluator": "AgentResponseEvaluator",
               "results_schema": {"type": "array", "items": {"type": "string"}},
               "expected": {"task_type": "retrieve", "status": "SUCCESS",
                            "retrieved_data": ["65.32"]}}]},
    {"sites": ["shopping"], "task_id": 2, "intent_template_id": 2, "revision": 1,
     "start_urls": ["__SHOPPING__/"], "intent": "Add 3 of the product to the cart.",
     "intent_template": "", "instantiation_dict": {},
     "eval": [{"evaluator": "AgentResponseEvaluator", "results_schema": {"type": "null"},
               "expected": {"task_type": "mutate", "status": "SUCCESS",
                            "retrieved_data": None}},
              {"evaluator": "NetworkEventEvaluator",
               "expected": {"url": "__SHOPPING__/cart/add", "http_method": "POST",
                            "post_data": {"qty": "3", "product": "B07"},
                            "headers": {"referer": "__SHOPPING__/"}}}]},
]


@pytest.fixture
def stand_in(chromium, tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps(TASKS))
    yield f"http://127.0.0.1:{server.server_address[1]}", tasks
    server.shutdown()


def call(name: str, **arguments) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def test_verified_evaluators_grade_episodes(stand_in) -> None:
    url, tasks = stand_in
    env = WebArenaEnv(tasks, base_urls={"shopping": url})
    try:
        messages, _ = env.reset(seed=0, options={"task_id": "webarena/1"})
        assert '"retrieved_data"' in messages[-1]["content"]  # the answer format is asked for
        *_, info = env.step(call("send_msg_to_user", text=json.dumps(
            {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["$65.32"]})))
        assert info["reward_metrics"]["failed"] == [], info
        env.reset(seed=0, options={"task_id": "webarena/1"})
        _, reward, *_ = env.step(call("send_msg_to_user", text="65.32"))
        assert reward == 0.0  # not the JSON object asked for

        page, _ = env.reset(seed=0, options={"task_id": "webarena/2"})
        text = page[-1]["content"]
        quantity = next(line.split("]")[0].strip()[1:] for line in text.splitlines()
                        if "textbox 'Quantity'" in line)
        button = next(line.split("]")[0].strip()[1:] for line in text.splitlines()
                      if "button 'Add to cart'" in line)
        env.step(call("fill", bid=quantity, value="3"))
        env.step(call("click", bid=button))
        _, reward, _, _, info = env.step(call("send_msg_to_user", text=json.dumps(
            {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None})))
        assert reward == 1.0, info
        assert info["reward_metrics"]["unchecked"] == ["headers"]
        posted = [r for r in env.page.session.requests if r["method"] == "POST"]
        assert posted[0]["post_data"] == {"qty": "3", "product": "B07"}, posted
        assert posted[0]["status"] == 303

        env.reset(seed=0, options={"task_id": "webarena/2"})
        _, reward, *_ = env.step(call("send_msg_to_user", text=json.dumps(
            {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None})))
        assert reward == 0.0  # said so, but never added to the cart
    finally:
        env.close()


@pytest.mark.slow
def test_check_env(stand_in) -> None:
    url, tasks = stand_in
    host = urllib.parse.urlsplit(url)
    assert host.hostname == "127.0.0.1"
    check_env(agentgym.make("webarena", tasks=str(tasks), base_urls={"shopping": url}))


@pytest.mark.slow
def test_probes_are_not_paid_on_the_stand_in(stand_in) -> None:
    """The web probes that apply (reach: the base URL's origin is the only one open) on
    the stand-in's tasks, as `agentgym validate webarena` plays them offline."""
    url, tasks = stand_in
    report = assert_valid("webarena", task_ids=["webarena/1", "webarena/2"], probes=True,
                          tasks=str(tasks), base_urls={"shopping": url})
    assert report.probe_counts()["web.reach"]["played"] == 2
