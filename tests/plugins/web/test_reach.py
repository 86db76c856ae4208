"""A web episode reaches only its env's own origins: a real HTTP server on another port of
this machine's loopback, holding a secret, is never reached, whatever the agent tries (any
spelling of 127.0.0.1, a redirect from the site, a page that fetches, frames, opens
popups, workers and WebSockets), and its secret never shows in an observation."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from agentgym.plugins.web.probes import SPELLINGS, ReachPolicy
from agentgym.plugins.web.reach import origin_of
from agentgym.plugins.web.sites_env import SiteEnv
from agentgym.rollout.loop import play_episode
from agentgym.testing import assert_valid
from tests.plugins.web.conftest import NOTES

pytestmark = pytest.mark.usefixtures("chromium")
SECRET = "SECRET-7f3a-conversation-and-grader-metrics"


class Secret(http.server.BaseHTTPRequestHandler):
    """Another service on the host (an `agentgym view`, say): answers anything with the
    secret, to anyone (CORS too), and records every request that reached it."""

    hits: list[str] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        body = f"<!doctype html><title>{SECRET}</title><p>{SECRET}</p>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def secret():
    """The secret server on 127.0.0.1 (its port) and the paths that reached it."""
    Secret.hits = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Secret)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], Secret.hits
    server.shutdown()
    server.server_close()


@pytest.fixture
def notes(notes_tasks):
    env = SiteEnv(NOTES, tasks=notes_tasks, max_turns=12)
    yield env
    env.close()


def call(name: str, **arguments) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def texts(messages) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


def test_no_spelling_of_another_loopback_port_reaches_it(notes, secret) -> None:
    """The reach probe's policy, every spelling at the secret's port: all refused where the
    browser routes requests, on the URL Chromium parsed."""
    port, hits = secret
    policy = ReachPolicy([port], every_spelling=True)
    result = notes.run_coroutine(play_episode(notes, policy, "notes-count"))
    seen = texts(result.messages)
    assert SECRET not in seen and hits == []
    assert result.reward == 0.0, result.metrics
    assert seen.count("is blocked: this episode can reach only http://127.0.0.1:") == \
        len(SPELLINGS), seen
    # Each tried address is refused (as Chromium read it), the page stays the site's.
    assert f"http://127.0.0.1:{port}/" in notes.page.session.blocked
    assert f"http://a/@127.0.0.1:{port}/" in notes.page.session.blocked
    assert notes.page.session.page.url.startswith(notes.server.base_url)


def test_redirects_and_pages_that_reach_out_are_refused(notes, secret) -> None:
    """A redirect from the site itself (routing does not see redirect hops: the connection
    guard does), and a page that reaches for the secret every way a page can."""
    port, hits = secret
    other = f"http://127.0.0.1:{port}"
    notes.reset(seed=0, options={"task_id": "notes-count"})
    seen = [notes.step(call("goto", url=f"/go?to={other}/redirected"))[0]]
    seen.append(notes.step(call("goto", url=f"/go?to=/%5C127.0.0.1:{port}/backslash"))[0])
    seen.append(notes.step(call("goto", url=f"/inject?to={other}"))[0])
    # The page's script opens a window: when it opens before the page is observed (under
    # load), the observation is of that window's tab. Find the page's own tab again.
    tabs = iter(range(len(notes.page.session.pages)))
    while True:
        page = seen[-1][0]["content"]
        link = next((line.split("]")[0].strip()[1:] for line in page.splitlines()
                     if "link 'Open popup'" in line), None)
        index = next(tabs, None)
        if link is not None or index is None:
            break
        seen.append(notes.step(call("tab_focus", index=index))[0])
    assert link is not None, page
    seen.append(notes.step(call("click", bid=link))[0])
    seen.append(notes.step(call("noop", wait_ms=1500))[0])
    for index in range(len(notes.page.session.pages)):
        seen.append(notes.step(call("tab_focus", index=index))[0])
    assert SECRET not in texts(m for step in seen for m in step)
    assert hits == [], hits
    assert "READ" not in texts(seen[-1])
    blocked = " ".join(notes.page.session.blocked)
    for path in ("/img", "/iframe", "/fetch", "/worker", "/ws", "/popup-link"):
        assert path in blocked, (path, blocked)
    assert f"127.0.0.1:{port}" in blocked  # the redirect hop, refused by the guard


def test_the_origin_of_a_url_is_chromiums() -> None:
    assert origin_of("http://127.0.0.1:80/x") == "http://127.0.0.1"
    assert origin_of("HTTP://LocalHost:8000") == "http://localhost:8000"
    assert origin_of("http://[::1]:9/") == "http://[::1]:9"


@pytest.mark.slow
def test_the_reach_probe_is_never_paid_and_never_reads_the_secret(secret) -> None:
    """``agentgym validate``'s reach probe, on a task of each site, with the secret server
    listening beside them: every address it finds on the loopback is refused."""
    port, hits = secret
    for env_id, tasks in (("web-shop", ["shop-change-email"]),
                          ("web-forum", ["forum-bob-karma"])):
        report = assert_valid(env_id, task_ids=tasks, probes=["web.reach"])
        probes = [t for t in report.trajectories if t.policy == "probe web.reach"]
        assert len(probes) == len(tasks)
        for trajectory in probes:
            assert SECRET not in texts(trajectory.messages)
            assert f"127.0.0.1:{port}" in texts(trajectory.messages)  # it did try
    assert hits == []
