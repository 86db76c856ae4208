"""Every MiniWoB++ family's env starts its page in Chromium: a seeded problem with a goal,
elements with bids, an action step, and the page's grade. (``check_env`` runs on ``miniwob``,
which draws tasks from every family, in tests/test_all_envs.py; the families differ only in
their page, which this test loads one by one: 30 of them a run, every one under
``AGENTGYM_TEST_FULL=1``.)"""

from __future__ import annotations

import contextlib

import pytest

import agentgym
from agentgym.plugins.web.browser import BrowserCrashed
from agentgym.plugins.web.miniwob import families

pytestmark = pytest.mark.usefixtures("chromium")

NOOP = {"role": "assistant", "content": "", "tool_calls": [
    {"type": "function", "function": {"name": "noop", "arguments": "{}"}}]}


def family_problems(env, family: str) -> list[str]:
    """What is wrong with ``family``'s first step (nothing: [])."""
    problems = []
    messages, _ = env.reset(seed=0, options={"task_id": f"{family}/3"})
    text = messages[-1]["content"]
    goal = text.split("\n")[0].removeprefix("Goal: ").strip()
    if not text.startswith("Goal: ") or not goal:
        problems.append(f"{family}: no goal in {text[:200]!r}")
    if "] " not in text.split("\n\n", 1)[-1]:
        problems.append(f"{family}: no element with a bid")
    new, reward, terminated, _, step_info = env.step(NOOP)
    if step_info["tool_errors"] or terminated or reward:
        problems.append(f"{family}: noop gave {new[0]['content'][:200]!r}")
    return problems


@pytest.mark.slow
def test_every_family_starts_a_seeded_problem(sample) -> None:
    assert len(families()) >= 100
    problems = []
    env = agentgym.make("miniwob")
    try:
        for family in sample(families(), 30):
            try:
                problems += family_problems(env, family)
            except BrowserCrashed as crash:
                # A browser starved past its deadline on a loaded machine (CI runs the
                # web load test beside this one) ends its episode, as designed; the family
                # is played again in a fresh browser, and a page that hangs Chromium
                # hangs it again and fails here.
                try:
                    problems += family_problems(env, family)
                except BrowserCrashed as again:
                    problems.append(f"{family}: the browser crashed twice: {crash}; {again}")
    finally:
        env.close()
    assert not problems, "\n".join(problems)


# A policy violation of the page's own code, to be ignored: jQuery's feature test sets an
# inline handler attribute to see whether the browser supports it (and does not run it).
JQUERY_FEATURE_TEST = "jquery.js:4743"


@pytest.mark.slow
def test_every_family_runs_its_own_scripts_under_its_content_security_policy() -> None:
    """Every page is served with a policy that runs only its own scripts (their files and
    hashed inline scripts: what typed markup cannot be); none of its own is refused while
    the problem starts and its buttons, fields and links are clicked."""
    from agentgym.plugins.web.browser import sync_chromium
    from agentgym.plugins.web.miniwob import _HIDE_CSS, _START, miniwob_server

    refused = {}
    with sync_chromium() as browser:
        page = browser.new_page()
        page.add_init_script("document.addEventListener('securitypolicyviolation', e =>"
                             " (window.__refused = window.__refused || []).push("
                             "e.violatedDirective + ' ' + e.sourceFile + ':' + e.lineNumber))")
        for family in families():
            response = page.goto(f"{miniwob_server()}/miniwob/{family}.html")
            policy = response.headers["content-security-policy"]
            assert "/core/core.js " in policy and "frame-src 'none'" in policy, policy
            page.evaluate(_START, [family, 3, _HIDE_CSS])
            for element in page.query_selector_all(
                    "#area button, #area input, #area span, #area a")[:6]:
                # hidden or covered: the page's handlers ran for the others
                with contextlib.suppress(Exception):
                    element.click(timeout=300)
            found = [v for v in page.evaluate("window.__refused || []")
                     if JQUERY_FEATURE_TEST not in v]
            if found:
                refused[family] = found
    assert not refused, refused
