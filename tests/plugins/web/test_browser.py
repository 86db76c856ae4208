"""The browser layer in real Chromium: observations with bids, actions and their errors,
loopback-only networking, and browsers that die or hang ending only their own episode."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from agentgym.core import OraclePolicy, ScriptedPolicy
from agentgym.core.errors import InvalidArgumentError
from agentgym.plugins.web.author import main as author_main
from agentgym.plugins.web.browser import browser_pool
from agentgym.plugins.web.observation import render_tree
from agentgym.plugins.web.sites_env import SiteEnv
from agentgym.rollout.loop import play_episode
from tests.plugins.web.conftest import NOTES

pytestmark = pytest.mark.usefixtures("chromium")


def call(name: str, **arguments) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def bid_of(observation: str, role: str, name: str) -> str:
    for line in observation.splitlines():
        text = line.strip()
        if text.startswith("[") and f"] {role} '{name}'" in text:
            return text[1:text.index("]")]
    raise AssertionError(f"no {role} {name!r} in:\n{observation}")


@pytest.fixture
def notes(notes_tasks):
    env = SiteEnv(NOTES, tasks=notes_tasks, max_turns=20, action_timeout_s=2)
    yield env
    env.close()


def test_observation_shows_goal_url_and_bids(notes) -> None:
    messages, info = notes.reset(seed=0, options={"task_id": "notes-add"})
    text = messages[-1]["content"]
    assert "Add a pinned blue note" in text and "(You are logged in to the site as ann.)" in text
    assert "Goal: Add a pinned blue note saying 'buy milk'." in text
    assert "URL: http://127.0.0.1:" in text and "Tabs: [0] Notes (active)" in text
    for role, name in (("textbox", "Note"), ("combobox", "Colour"), ("checkbox", "Pin it"),
                       ("button", "Add note"), ("link", "Long page")):
        assert bid_of(text, role, name).isdigit()
    assert "checkbox 'Pin it', checked=false" in text
    assert {t["function"]["name"] for t in info["tools"]} >= {
        "click", "fill", "select_option", "press", "scroll", "hover", "goto", "go_back",
        "new_tab", "tab_focus", "tab_close", "send_msg_to_user", "noop"}
    again, _ = notes.reset(seed=0, options={"task_id": "notes-add"})
    assert again == messages  # same page, same bids


def test_actions_change_the_page_and_the_database(notes) -> None:
    messages, _ = notes.reset(seed=0, options={"task_id": "notes-add"})
    page = messages[-1]["content"]
    notes.step(call("fill", bid=bid_of(page, "textbox", "Note"), value="buy milk"))
    new, *_ = notes.step(call("select_option", bid=bid_of(page, "combobox", "Colour"),
                              options="blue"))
    assert "combobox 'Colour', value='blue'" in new[0]["content"]
    new, *_ = notes.step(call("click", bid=bid_of(page, "checkbox", "Pin it")))
    assert "checkbox 'Pin it', focused, checked=true" in new[0]["content"]
    new, *_ = notes.step(call("click", bid=bid_of(page, "button", "Add note")))
    assert "buy milk (blue, pinned)" in new[0]["content"]
    _, reward, terminated, _, info = notes.step(call("send_msg_to_user", text="Done"))
    assert terminated and reward == 1.0, info


def test_failed_actions_are_error_messages_with_the_page(notes) -> None:
    messages, _ = notes.reset(seed=0, options={"task_id": "notes-add"})
    page = messages[-1]["content"]
    cases = [call("click", bid="99999"),
             call("select_option", bid=bid_of(page, "combobox", "Colour"), options="purple"),
             call("fill", bid=bid_of(page, "link", "Long page"), value="x"),
             call("goto", url="file:///etc/passwd"),
             call("goto", url="http://example.com/"),
             call("tab_focus", index=5),
             call("tab_close")]
    errors = []
    for action in cases:
        new, _, terminated, _, info = notes.step(action)
        assert not terminated and info["tool_errors"] == 1, (action, info)
        assert new[0]["content"].startswith("Error: "), new
        errors.append(info["errors"][0])
    assert "no element with bid '99999'" in errors[0]
    assert "only http(s) pages can be opened" in errors[3]
    assert "is blocked: this episode can reach only http://127.0.0.1:" in errors[4]
    assert "no open tab 5" in errors[5] and "last open tab" in errors[6]
    first = notes.step(call("click", bid="99999"))[0][0]["content"]
    assert "no element with bid '99999'" in first and "URL: http://127.0.0.1" in first
    purple = notes.step(call("select_option", bid=bid_of(page, "combobox", "Colour"),
                             options="purple"))[0][0]["content"]
    assert "'red', 'green', 'blue'" in purple


@pytest.mark.slow
def test_tabs_and_history(notes) -> None:
    messages, _ = notes.reset(seed=0, options={"task_id": "notes-count"})
    page = messages[-1]["content"]
    notes.step(call("click", bid=bid_of(page, "link", "Long page")))
    new, *_ = notes.step(call("go_back"))
    assert "Tabs: [0] Notes (active)" in new[0]["content"]
    new, *_ = notes.step(call("new_tab"))
    assert "[1] (untitled) (active)" in new[0]["content"]
    new, *_ = notes.step(call("goto", url=notes.server.base_url + "/long"))
    assert "[1] Long (active)" in new[0]["content"]
    new, *_ = notes.step(call("tab_focus", index=0))
    assert "[0] Notes (active)" in new[0]["content"]
    new, *_ = notes.step(call("tab_focus", index=1))
    new, *_ = notes.step(call("tab_close"))
    assert "[0] Notes (active)" in new[0]["content"]


def test_long_trees_are_cut_with_a_marker(notes_tasks) -> None:
    env = SiteEnv(NOTES, tasks=notes_tasks, max_chars=3000)
    try:
        messages, _ = env.reset(seed=0, options={"task_id": "notes-count"})
        new, *_ = env.step(call("click", bid=bid_of(messages[-1]["content"], "link",
                                                    "Long page")))
        text = new[0]["content"]
        assert "more lines not shown: the tree is cut at 3000 characters" in text
        assert len(text) < 3600
    finally:
        env.close()


def test_shown_origins_rename_a_server_in_text_and_back_in_urls() -> None:
    """PageEpisode.shown/actual (no browser): an origin is renamed where it stands, never
    inside a longer port, and a URL written with the name opens the real server."""
    from agentgym.plugins.web.actions import PageEpisode
    page = PageEpisode(session=None, goal="g",  # type: ignore[arg-type]
                       shown_origins={"http://127.0.0.1:8000": "http://site.test"})
    assert page.shown("URL: http://127.0.0.1:8000/a?b=1, http://127.0.0.1:80001/x") == \
        "URL: http://site.test/a?b=1, http://127.0.0.1:80001/x"
    assert page.actual("http://site.test/a#b") == "http://127.0.0.1:8000/a#b"
    assert page.actual("http://site.test") == "http://127.0.0.1:8000"
    assert page.actual("http://site.testing/a") == "http://site.testing/a"
    assert page.actual("/relative") == "/relative"


def test_render_tree_drops_wrappers_and_repeated_text() -> None:
    nodes = [
        {"nodeId": "1", "role": {"value": "RootWebArea"}, "name": {"value": "T"},
         "childIds": ["2"], "backendDOMNodeId": 1},
        {"nodeId": "2", "parentId": "1", "role": {"value": "generic"}, "name": {"value": ""},
         "childIds": ["3", "5"], "backendDOMNodeId": 2},
        {"nodeId": "3", "parentId": "2", "role": {"value": "button"}, "name": {"value": "Go"},
         "childIds": ["4"], "backendDOMNodeId": 3},
        {"nodeId": "4", "parentId": "3", "role": {"value": "StaticText"},
         "name": {"value": "Go"}, "childIds": [], "backendDOMNodeId": 4},
        {"nodeId": "5", "parentId": "2", "role": {"value": "StaticText"},
         "name": {"value": "Hello"}, "ignored": False, "backendDOMNodeId": 5},
    ]
    text = render_tree(nodes, {3: "7", 5: "9"}, 1000)
    assert text.splitlines() == ["RootWebArea 'T'", "  [7] button 'Go'", "  StaticText 'Hello'"]


def test_screenshots_in_info(notes_tasks) -> None:
    env = SiteEnv(NOTES, tasks=notes_tasks, screenshot=True)
    try:
        _, info = env.reset(seed=0, options={"task_id": "notes-count"})
        assert info["screenshot"].startswith(b"\x89PNG")
        *_, info = env.step(call("noop"))
        assert info["screenshot"].startswith(b"\x89PNG")
    finally:
        env.close()


def test_requests_off_this_machine_are_blocked_and_reported(notes) -> None:
    _messages, _ = notes.reset(seed=0, options={"task_id": "notes-count"})
    new, *_ = notes.step(call("goto", url="/spin"))
    new, *_ = notes.step(call("click", bid=bid_of(new[0]["content"], "button", "Phone home")))
    text = new[0]["content"]
    for _ in range(20):
        if "10.11.12.13" in text:
            break
        text = notes.step(call("noop", wait_ms=100))[0][0]["content"]
    assert "Blocked (this episode can reach only http://127.0.0.1:" in text
    assert "http://example.com/x" in " ".join(notes.page.session.blocked)
    assert "10.11.12.13" in text

    async def status(session, url):
        return await session.page.evaluate(
            "url => fetch(url).then(r => 'reached ' + r.status, e => 'failed')", url)

    session = notes.page.session
    run = notes.run_coroutine
    assert run(session.run(lambda s: status(s, "http://example.com/"))) == "failed"
    assert run(session.run(lambda s: status(s, "http://93.184.215.14/"))) == "failed"
    assert run(session.run(lambda s: status(s, notes.server.base_url + "/long"))) \
        == "reached 200"


@pytest.mark.slow
def test_oracle_replays_authored_solutions(notes_tasks, tmp_path) -> None:
    """The author tool writes each task's solution and the bound on what it may change
    (what the replay changed), and the oracle replays the solution to 1.0."""
    rows = json.loads(notes_tasks.read_text())
    for row in rows:
        row["grade"].pop("changes", None)
    path = tmp_path / "notes.json"
    path.write_text(json.dumps(rows))
    with pytest.raises(InvalidArgumentError, match=r"notes-add.*no grade\.changes.*author notes"):
        SiteEnv(NOTES, tasks=path)
    # the author tool, on a site of one's own named module:attribute
    assert author_main(["tests.plugins.web.conftest:NOTES", "--tasks", str(path)]) == 0
    rows = json.loads(path.read_text())
    assert [row["grade"]["changes"] for row in rows] == [{"notes": 1}, {}]
    assert all(row["solution"] for row in rows)
    env = SiteEnv(NOTES, tasks=path)
    try:
        for row in rows:
            result = env.run_coroutine(play_episode(env, OraclePolicy(), row["id"]))
            assert result.reward == 1.0, (row["id"], result.metrics)
    finally:
        env.close()


def test_a_killed_browser_ends_only_its_episode(notes_tasks) -> None:
    """Kill the browser's process mid-episode: that episode ends with sandbox_error, the
    next episodes (on a new browser) run."""
    from agentgym.rollout.evaluate import rollout

    killed: list[int] = []

    def policy(messages, task):
        turn = sum(m["role"] == "assistant" for m in messages)
        if not killed and turn == 1:  # one browser: episodes may be playing side by side
            pid = browser_pool().leased_pids[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        if turn < 2:
            return call("noop")
        return call("send_msg_to_user", text="2000")

    trajectories = asyncio.run(rollout(
        "notes", ScriptedPolicy(policy), 4,
        make_env=lambda: SiteEnv(NOTES, tasks=notes_tasks)))
    reasons = sorted(t.finish_reason for t in trajectories)
    assert killed
    assert reasons.count("sandbox_error") == 1, [(t.finish_reason, t.error) for t in
                                                  trajectories]
    crashed = next(t for t in trajectories if t.finish_reason == "sandbox_error")
    assert "browser" in crashed.error
    assert reasons.count("submitted") == 3
    assert all(pid not in browser_pool().pids for pid in killed)


@pytest.mark.slow
def test_a_hung_page_is_stopped_and_ends_its_episode(notes_tasks) -> None:
    from agentgym.rollout.evaluate import rollout

    def policy(messages, task):
        page = messages[-1]["content"]
        if "Hang the page" in page:
            return call("click", bid=bid_of(page, "button", "Hang the page"))
        return call("goto", url="/spin")

    trajectories = asyncio.run(rollout(
        "notes", ScriptedPolicy(policy), 1,
        make_env=lambda: SiteEnv(NOTES, tasks=notes_tasks, action_timeout_s=1,
                                 settle_timeout_s=2)))
    assert trajectories[0].finish_reason == "sandbox_error", trajectories[0].error
    assert "did not answer" in trajectories[0].error


@pytest.mark.slow
def test_a_slow_page_load_does_not_fail_the_click(notes_tasks) -> None:
    """The click's own bound covers finding and clicking the element (5 s); the page it
    opens takes 6 s, and the observation is of that page once loaded. With a bound
    shorter than the load, the observation says what was still pending."""
    from .conftest import HELD

    env = SiteEnv(NOTES, tasks=notes_tasks)
    try:
        messages, _ = env.reset(seed=0, options={"task_id": "notes-count"})
        page, _, _, _, info = env.step(call("click", bid=bid_of(messages[-1]["content"],
                                                                "link", "Slow page")))
        assert info["tool_errors"] == 0, page
        assert bid_of(page[0]["content"], "button", "Done waiting")
        assert "Still loading" not in page[0]["content"]
    finally:
        env.close()
    # The held page answers only when released, so the 0.5 s bound runs out however slow
    # the machine is.
    HELD.clear()
    env = SiteEnv(NOTES, tasks=notes_tasks, settle_timeout_s=0.5)
    try:
        messages, _ = env.reset(seed=0, options={"task_id": "notes-count"})
        page, *_ = env.step(call("click", bid=bid_of(messages[-1]["content"], "link",
                                                      "Held page")))
        text = page[0]["content"]
        assert "Still loading after 0.5 s:" in text and "/held" in text, text
        HELD.set()
        for _ in range(30):  # each observation waits at most 0.5 s for the page
            page, *_ = env.step(call("noop", wait_ms=500))
            if "Done waiting" in page[0]["content"]:
                break
        assert bid_of(page[0]["content"], "button", "Done waiting")
    finally:
        HELD.set()
        env.close()
