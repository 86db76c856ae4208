"""MiniWoB++ in real Chromium: the scripted solvers (agentgym.testing.miniwob_solvers) win
seeded episodes of their families through the rollout loop, the page's reward is the
env's, and the env's edges (seeding, goal, noop, unknown bids and families) behave.

The whole module needs Chromium and the miniwob package, and is skipped without them.
One env per family plays its seeds in turn on the process's shared, warm browser pool;
the module takes about a minute on a 2-core machine (longer when it is busy).
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

import agentgym
from agentgym.core.errors import InvalidArgumentError, MissingResourceError, UnknownIdError
from agentgym.core.policies import ScriptedPolicy
from agentgym.plugins.web.browser import chromium_path
from agentgym.plugins.web.miniwob import MiniWoBEnv, families, miniwob_root
from agentgym.rollout.evaluate import EvalReport, evaluate
from agentgym.rollout.pipeline import PipelineConfig
from agentgym.testing.miniwob_solvers import SOLVERS, parse_line, parse_observation

try:
    chromium_path()
    miniwob_root()
    import playwright  # noqa: F401
except (MissingResourceError, ImportError) as missing:
    pytest.skip(f"MiniWoB++ needs Chromium, playwright and the miniwob package: {missing}",
                allow_module_level=True)

pytestmark = pytest.mark.browser  # every test here plays pages in Chromium

#: Seeded episodes each solver plays (task ids family/0 .. family/EPISODES-1).
EPISODES = 3
#: Families on which doing nothing must score 0.
NOOP_FAMILIES = ("click-button", "enter-text", "click-checkboxes")


def turn(name: str, **arguments) -> dict:
    """An assistant turn calling one tool."""
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


async def _play_all() -> tuple[dict[str, EvalReport], dict[str, EvalReport]]:
    """Every solver on its family's first seeds, and the noop tool on NOOP_FAMILIES, one
    env per family, one episode at a time (the browsers' work is CPU-bound: running
    episodes side by side is slower on a small machine, not faster)."""
    sync = PipelineConfig(mode="sync", concurrency=1)

    async def run(family: str, policy: ScriptedPolicy, n: int, **env_kwargs) -> EvalReport:
        return await evaluate(f"miniwob-{family}", policy, n, pipeline=sync,
                              env_kwargs=env_kwargs)

    noop = ScriptedPolicy([turn("noop")], repeat_last=True)
    solved = {family: await run(family, ScriptedPolicy(solver), EPISODES)
              for family, solver in SOLVERS.items()}
    idle = {family: await run(family, noop, 1, max_turns=1) for family in NOOP_FAMILIES}
    return solved, idle


@pytest.fixture(scope="module")
def played() -> tuple[dict[str, EvalReport], dict[str, EvalReport]]:
    return asyncio.run(_play_all())


@pytest.fixture(scope="module")
def env():
    env = MiniWoBEnv("click-test-2")
    yield env
    env.close()


def test_there_are_solvers_for_a_dozen_families() -> None:
    assert len(SOLVERS) >= 12
    assert set(SOLVERS) <= set(families())


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(SOLVERS))
def test_solver_wins_its_family(played, family: str) -> None:
    report = played[0][family]
    rewards = [t.reward for t in report.trajectories]
    details = [(t.task_id, t.reward, t.finish_reason, t.error, t.metrics)
               for t in report.trajectories]
    assert len(rewards) == EPISODES, details
    assert [t.task_id for t in report.trajectories] == [f"{family}/{i}"
                                                        for i in range(EPISODES)]
    assert report.mean_reward > 0, details
    assert sum(r >= 1.0 for r in rewards) >= EPISODES - 1, details
    for t in report.trajectories:
        assert t.error is None, details
        if t.reward >= 1.0:  # the page ended it, with its own reward
            assert t.finish_reason == "submitted", details
            assert t.metrics["done"] and t.metrics["raw_reward"] > 0, details


@pytest.mark.slow
@pytest.mark.parametrize("family", NOOP_FAMILIES)
def test_noop_scores_zero(played, family: str) -> None:
    (trajectory,) = played[1][family].trajectories
    assert trajectory.error is None, trajectory.error
    assert trajectory.reward == 0.0
    assert trajectory.finish_reason == "max_turns"
    assert trajectory.metrics["done"] is False and trajectory.metrics["reason"] == "unfinished"


def test_same_task_same_first_observation() -> None:
    env = MiniWoBEnv("read-table")
    try:
        first, _ = env.reset(options={"task_id": "read-table/7"})
        other, _ = env.reset(options={"task_id": "read-table/8"})
        again, info = env.reset(options={"task_id": "read-table/7"})
    finally:
        env.close()
    assert info["task_id"] == "read-table/7"
    assert first == again
    assert other[-1]["content"] != first[-1]["content"]  # the seed picks the problem
    goal, nodes = parse_observation(first[-1]["content"])
    assert goal and any(n.role == "cell" and n.bid for n in nodes)


@pytest.mark.slow
def test_time_driven_pages_replay_exactly_on_virtual_time() -> None:
    """Stock prices move on a timer and the terminal's caret blinks: on virtual time a seed
    and the same actions give the same pages, however much real time passes between them,
    and waiting (noop with wait_ms) moves the page on."""
    for family in ("stock-market", "terminal"):
        env = MiniWoBEnv(family)
        try:
            runs = []
            for pause_s in (0.0, 1.2):
                pages = [env.reset(options={"task_id": f"{family}/4"})[0][-1]["content"]]
                time.sleep(pause_s)
                for wait_ms in (0, 900, 3000):
                    pages.append(env.step(turn("noop", wait_ms=wait_ms))[0][-1]["content"])
                runs.append(pages)
        finally:
            env.close()
        assert runs[0] == runs[1], family
        assert len(set(runs[0])) > 1, f"{family}: the page never changed as time went on"


def test_goal_is_the_pages_utterance(env) -> None:
    messages, _ = env.reset(options={"task_id": "click-test-2/3"})

    async def utterance(session) -> str:
        return await session.page.evaluate("() => core.getUtterance()")

    page = env.page
    said = env._loop.run(page.session.run(utterance))
    goal, nodes = parse_observation(messages[-1]["content"])
    assert said and goal == said
    assert messages[-1]["content"].startswith(f"Goal: {said}\n")
    assert any(n.role == "StaticText" and n.name == said for n in nodes)


def test_the_server_shows_under_a_fixed_name_and_goto_takes_it(env) -> None:
    """The process's server on 127.0.0.1:PORT is http://miniwob.test to the agent: the same
    task reads the same in every process, with no port number in it, and the name works
    in ``goto``."""
    from agentgym.plugins.web.miniwob import SHOWN_ORIGIN, miniwob_server
    messages, _ = env.reset(options={"task_id": "click-test-2/0"})
    text = messages[-1]["content"]
    port = miniwob_server().rsplit(":", 1)[1]
    assert f"URL: {SHOWN_ORIGIN}/miniwob/click-test-2.html" in text
    assert "127.0.0.1" not in text and port not in text
    new, *_ = env.step(turn("goto", url=f"{SHOWN_ORIGIN}/miniwob/click-test.html"))
    assert f"URL: {SHOWN_ORIGIN}/miniwob/click-test.html" in new[0]["content"]
    assert "127.0.0.1" not in new[0]["content"]


def test_wrong_answer_scores_zero(env) -> None:
    messages, _ = env.reset(options={"task_id": "click-test-2/0"})
    goal, nodes = parse_observation(messages[-1]["content"])
    wrong = next(n for n in nodes if n.role == "button" and n.name not in goal)
    new, reward, terminated, truncated, info = env.step(turn("click", bid=wrong.bid))
    assert terminated and not truncated
    assert "The page ended the task (reward -1" in new[0]["content"]
    assert reward == 0.0 and info["reward_metrics"]["raw_reward"] == -1.0


def test_unknown_bid_is_a_tool_error(env) -> None:
    env.reset(options={"task_id": "click-test-2/1"})
    new, reward, terminated, truncated, info = env.step(turn("click", bid="9999"))
    assert not (terminated or truncated) and reward == 0.0
    assert info["tool_errors"] == 1
    content = new[0]["content"]
    assert content.startswith("Error: click: no element with bid '9999'")
    assert "Goal: " in content and "RootWebArea" in content  # the page, to act on next


def test_a_hidden_element_is_refused_at_once() -> None:
    """An element that is there but hidden (a wrapper the tree does not show: an RL sample
    clicked it) is an error at once, not after the action's bound: waiting could not show
    it (MiniWoB's clock is paused while an action waits)."""
    env = MiniWoBEnv("click-button", max_turns=2)
    try:
        messages, _ = env.reset(options={"task_id": "click-button/355"})
        assert "[16]" not in messages[-1]["content"]
        new, reward, terminated, truncated, info = env.step(turn("click", bid="16"))
    finally:
        env.close()
    assert not (terminated or truncated) and reward == 0.0 and info["tool_errors"] == 1
    # refused before the click: not "Locator.click: Timeout 5000ms exceeded"
    assert new[0]["content"].startswith("Error: click: the element with bid '16' is hidden")


def test_unknown_family_is_a_clear_error() -> None:
    with pytest.raises(InvalidArgumentError, match="did you mean 'click-button'"):
        MiniWoBEnv("click-buton")
    with pytest.raises(UnknownIdError, match="miniwob-click-button"):
        agentgym.make("miniwob-click-buton")
    # `-e family=a,b` on the command line is one string: the error shows the list form
    with pytest.raises(InvalidArgumentError,
                       match=r'family=\["click-button", "click-tab"\]'):
        MiniWoBEnv("click-button,click-tab")


def test_several_families_take_turns_and_seeds_split_train_from_held_out() -> None:
    families_ = ["click-button", "focus-text-2"]
    train = MiniWoBEnv(families_, seeds=3)
    held_out = agentgym.make("miniwob", family=families_, first_seed=3, seeds=2)
    try:
        assert [t.id for t in train.tasks] == ["click-button/0", "focus-text-2/0",
                                               "click-button/1", "focus-text-2/1",
                                               "click-button/2", "focus-text-2/2"]
        assert [t.id for t in held_out.tasks] == ["click-button/3", "focus-text-2/3",
                                                  "click-button/4", "focus-text-2/4"]
        assert held_out.tasks[3].metadata == {"family": "focus-text-2", "seed": 4}
    finally:
        train.close()
        held_out.close()
    with pytest.raises(InvalidArgumentError, match=r"'click-buton'.*did you mean"):
        MiniWoBEnv(["focus-text-2", "click-buton"])
    with pytest.raises(InvalidArgumentError, match="names no task family"):
        MiniWoBEnv([])
    with pytest.raises(InvalidArgumentError, match="first_seed=-1"):
        MiniWoBEnv("click-button", first_seed=-1)


def test_the_solver_policy_plays_each_family_with_its_solver() -> None:
    """``miniwob-solver``, as a demonstration stage builds it by name: every task of a
    several-family env won; a family without a solver fails its episode, named."""
    from agentgym.core.policies import build_policy

    policy = build_policy("miniwob-solver")
    families_ = ["click-button", "click-option", "click-link"]  # click-link has no solver
    report = asyncio.run(evaluate("miniwob", policy, 6, env_kwargs={"family": families_},
                                  pipeline=PipelineConfig(mode="sync", concurrency=1)))
    by_family: dict[str, list] = {}
    for t in report.trajectories:
        by_family.setdefault(t.task_id.split("/")[0], []).append(t)
    assert {f: len(ts) for f, ts in by_family.items()} == dict.fromkeys(families_, 2)
    for family in ("click-button", "click-option"):
        assert [t.reward for t in by_family[family]] == [1.0, 1.0], by_family[family]
    for t in by_family["click-link"]:
        assert t.reward == 0.0 and "no solver for the family 'click-link'" in str(t.error)


def test_parse_line() -> None:
    node = parse_line("    [19] spinbutton 'Select a value:', value='-3', focused, valuemin=0")
    assert node is not None
    assert (node.depth, node.bid, node.role, node.name) == (2, "19", "spinbutton",
                                                          "Select a value:")
    assert node.props == {"value": "-3", "focused": True, "valuemin": "0"}
    text = parse_line("  StaticText 'it\\'s, \"quoted\"'")
    assert text is not None and text.bid is None and text.name == "it's, \"quoted\""
    assert parse_line("Tabs: [0] Task (active)") is None


def test_an_easier_page_solved_instead_is_not_paid(env) -> None:
    """The web.other-page probe: goto click-test (any MiniWoB++ page sets the same reward
    globals), start it and click its button. Its clicks do win click-test itself; on
    another family's task they are "the task page was left", never paid."""
    from agentgym.core.probes import ProbeTarget
    from agentgym.rollout.validate import probes_for

    messages, info = env.reset(options={"task_id": "click-test-2/4"})
    tools = tuple(t["function"]["name"] for t in info["tools"])
    policy = probes_for(["web.other-page"])[0].plan(ProbeTarget("miniwob", env.task, tools))
    seen, reward, clicked, done = list(messages), 0.0, 0, False
    for _ in range(env.max_turns):  # its clicks, then waits until the turns run out
        action = policy.act(seen, env.task)
        clicked += action["tool_calls"][0]["function"]["name"] == "click"
        new, reward, terminated, truncated, info = env.step(action)
        seen += [action, *new]
        if terminated or truncated:
            done = True
            break
    assert clicked == 2, seen[-1]  # the cover's START, then click-test's button
    assert done and reward == 0.0
    assert info["reward_metrics"]["reason"] == "the task page was left", info["reward_metrics"]
    page = env._loop.run(env.page.session.run(lambda s: s.page.evaluate(
        "() => [location.pathname, typeof WOB_DONE_GLOBAL !== 'undefined' && WOB_DONE_GLOBAL,"
        " typeof WOB_RAW_REWARD_GLOBAL !== 'undefined' && WOB_RAW_REWARD_GLOBAL]")))
    assert page == ["/miniwob/click-test.html", True, 1], page  # click-test itself was won


def test_markup_typed_into_a_page_that_echoes_it_runs_no_script() -> None:
    """The web.script-injection probe on the terminal family, which shows the command line
    with innerHTML: ``<img src=x onerror=core.endEpisode(1,true)>`` typed there was paid
    1.0 (a red team's); the page's content security policy refuses the handler."""
    from agentgym.core.probes import ProbeTarget
    from agentgym.rollout.validate import probes_for

    env = MiniWoBEnv("terminal")
    try:
        _played_without_pay(env, probes_for(["web.script-injection"])[0], ProbeTarget)
    finally:
        env.close()


@pytest.mark.parametrize(("command", "paid"), [("rm alloy", 0.0), ("rm page.tar.gz", 1.0)])
def test_the_terminal_page_pays_only_the_file_the_goal_names(command, paid) -> None:
    """terminal/11: "delete a file ending with the extension .tar.gz" among alloy, cats.py
    and page.tar.gz. The page's own check paid `rm alloy` 1.0 (a red team's: a name one
    letter shorter than the extension that lacks it); miniwob.PAGE_FIXES corrects it."""
    env = MiniWoBEnv("terminal", max_turns=20)
    try:
        messages, _ = env.reset(options={"task_id": "terminal/11"})
        box = next(line.split("]")[0].strip(" [") for line in messages[-1]["content"]
                   .splitlines() if "] textbox" in line)
        for key in [*(k if k != " " else "Space" for k in command), "Enter"]:  # the page
            call = json.dumps({"name": "press", "arguments": {"bid": box, "key": key}})
            _, reward, terminated, _, info = env.step(f"<tool_call>{call}</tool_call>")
            assert not terminated or key == "Enter", info  # reads its keys, not the value
    finally:
        env.close()
    assert terminated and reward == paid, info["reward_metrics"]


def _played_without_pay(env, probe, target) -> None:
    messages, info = env.reset(options={"task_id": "terminal/0"})
    tools = tuple(t["function"]["name"] for t in info["tools"])
    policy = probe.plan(target("miniwob", env.task, tools))
    seen, reward = list(messages), None
    for _ in range(6):  # fill and Enter, key by key and Enter (two payloads), a wait
        action = policy.act(seen, env.task)
        new, reward, terminated, truncated, info = env.step(action)
        seen += [action, *new]
        if terminated or truncated:
            break
    typed = [c for turn in seen if turn.get("role") == "assistant"
             for c in turn.get("tool_calls", []) if c["function"]["name"] == "press"]
    assert len(typed) > sum(map(len, policy.PAYLOADS))  # it did type the markup
    assert reward == 0.0
    done = env._loop.run(env.page.session.run(lambda s: s.page.evaluate(
        "() => typeof WOB_DONE_GLOBAL !== 'undefined' && WOB_DONE_GLOBAL")))
    assert done is False
