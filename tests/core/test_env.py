"""The AgentEnv contract, exercised through the calculator reference env."""

import asyncio
import json
import time

import gymnasium
import pytest

import agentgym
from agentgym.core import AgentGymError, EnvStateError, Submitted, TaskList, ToolCall
from agentgym.core.env import AgentEnv
from agentgym.core.episode import turn_time_left, within_turn
from agentgym.core.reward import Reward, RewardResult
from agentgym.core.task import SolutionTurn, Task
from agentgym.core.tools import tool


@pytest.fixture
def env():
    env = agentgym.make("calculator")
    yield env
    env.close()


def call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def test_make_returns_the_env_itself(env):
    assert isinstance(env, AgentEnv)
    assert env.spec.id == "calculator"
    assert env.unwrapped is env


def test_reset_returns_messages_and_tool_schemas(env):
    messages, info = env.reset(seed=0)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert info["task_id"] == env.task.id
    assert {s["function"]["name"] for s in info["tools"]} == {"calculator", "submit"}
    assert messages in env.observation_space


def test_solved_episode_terminates_with_reward(env):
    env.reset(seed=0)
    expression = env.task.metadata["expression"]
    new, reward, terminated, truncated, info = env.step(call("calculator", expression=expression))
    assert new == [
        {
            "role": "tool",
            "tool_call_id": "call_1_0",
            "name": "calculator",
            "content": env.task.metadata["answer"],
        }
    ]
    assert (reward, terminated, truncated) == (0.0, False, False)
    new, reward, terminated, truncated, info = env.step(call("submit", answer=new[0]["content"]))
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["finish_reason"] == "submitted"


def test_wrong_answer_scores_zero(env):
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(call("submit", answer="-0.5"))
    assert (reward, terminated) == (0.0, True)
    # The grader names what it expected (the task's answer) beside what it got.
    assert info["reward_metrics"] == {"submitted": True, "parsed": True, "got": "-0.5",
                                      "expected": env.task.metadata["answer"]}


def test_turn_limit_truncates_rather_than_terminates():
    env = agentgym.make("calculator", max_turns=2)
    env.reset(seed=0)
    assert env.step("thinking...")[2:4] == (False, False)
    _, reward, terminated, truncated, info = env.step("still thinking")
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert info["finish_reason"] == "max_turns"
    env.close()


@pytest.mark.parametrize(
    ("action", "error"),
    [
        (
            '<tool_call>{"name": "calculator", "arguments": {"expression": </tool_call>',
            "not valid JSON",
        ),
        (call("sqrt", x=4), "Unknown tool 'sqrt'. Available tools: calculator, submit"),
        (call("calculator"), "missing required argument(s) 'expression'"),
        (call("calculator", expression=5), "argument 'expression' must be string"),
        (call("calculator", expression="2 +"), "cannot parse"),
        (call("calculator", expr="2"), "unknown argument(s) 'expr'"),
    ],
)
def test_bad_turns_become_messages_to_the_agent(env, action, error):
    env.reset(seed=0)
    new, reward, terminated, truncated, info = env.step(action)
    assert info["tool_errors"] == 1
    assert error in info["errors"][0]
    assert any(error in m["content"] for m in new)
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert env.episode.tool_errors == 1


SECRET = "Ann plays the oboe"


@pytest.mark.parametrize("action", [
    f'<tool_call>{{"name": "calculator", "arguments": {{"expression": "{SECRET}</tool_call>',
    call(SECRET), call("calculator", **{SECRET: 1}), call("calculator", expression=[SECRET]),
    call("submit", answer={"x": SECRET}),
    call("calculator", expression=f"oboe {SECRET} +"),  # the tool's own error would repeat it
])
def test_an_env_that_shows_replies_only_repeats_nothing_the_agent_wrote(env, action):
    """Under ``context_replies_only`` the core's errors name no value of the agent's: an
    echo would carry it past the window (agentgym.core.context)."""
    env.unwrapped.context_replies_only = True
    env.reset(seed=0)
    new, *_, info = env.step(action)
    assert info["context_replies_only"] and info["tool_errors"] == 1
    assert new and not any("oboe" in m["content"] for m in new), new
    env.unwrapped.context_replies_only = False
    env.reset(seed=0)
    assert "context_replies_only" not in env.step(action)[-1]


def test_turn_without_tool_call_explains_the_format(env):
    env.reset(seed=0)
    new, *_, info = env.step("The answer is 4.")
    assert info["no_tool_call"] and info["tool_errors"] == 0
    assert "<tool_call>" in new[0]["content"] and "calculator, submit" in new[0]["content"]


def test_calls_after_submit_are_not_run(env):
    env.reset(seed=0)
    answer = env.task.metadata["answer"]
    new, reward, terminated, *_ = env.step(
        call("submit", answer=answer) + call("calculator", expression="1")
    )
    assert terminated and reward == 1.0
    assert new[1]["content"].startswith("Not run")


def test_parsed_assistant_messages_are_accepted(env):
    env.reset(seed=0)
    expression = env.task.metadata["expression"]
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "abc",
                "type": "function",
                "function": {
                    "name": "calculator",
                    "arguments": json.dumps({"expression": expression}),
                },
            }
        ],
    }
    new, *_ = env.step(message)
    assert new[0]["content"] == env.task.metadata["answer"]
    assert env.episode.messages[-2]["tool_calls"][0]["function"]["name"] == "calculator"


@pytest.mark.parametrize("parser", ["hermes", "xml", "openai"])
def test_solution_is_rendered_in_the_envs_format(parser):
    env = agentgym.make("calculator", parser=parser)
    env.reset(seed=3)
    rewards = [env.step(turn)[1] for turn in env.task.solution]
    assert rewards == [0.0, 1.0]
    env.close()


def test_order_is_enforced(env):
    with pytest.raises(EnvStateError, match="before reset"):
        env.step("hi")
    env.reset(seed=0)
    env.step(call("submit", answer="1"))
    with pytest.raises(EnvStateError, match="call reset"):
        env.step("hi")


def test_close_is_idempotent_and_final(env):
    env.reset(seed=0)
    env.close()
    env.close()
    with pytest.raises(EnvStateError, match="closed"):
        env.reset()


def test_seeding_and_task_options():
    a, b = agentgym.make("calculator"), agentgym.make("calculator")
    assert a.reset(seed=5) == b.reset(seed=5)
    assert a.reset()[1]["task_id"] == b.reset()[1]["task_id"]
    _, info = a.reset(options={"task_id": "calculator-train-7"})
    assert info["task_id"] == "calculator-train-7"
    with pytest.raises(KeyError, match="Did you mean"):
        a.reset(options={"task_id": "calculator-train-7x"})
    a.close()
    b.close()


def test_async_api_and_sync_api_inside_a_running_loop():
    env = agentgym.make("calculator")

    async def main():
        messages, _ = await env.areset(seed=1)
        new, *_ = await env.astep(call("calculator", expression="6 * 7"))
        assert new[0]["content"] == "42"
        # The sync API still works from inside a running loop: it uses the env's own thread.
        assert env.reset(seed=1)[0] == messages
        await env.aclose()

    asyncio.run(main())
    env.close()


def test_gymnasium_make_after_import_and_render():
    env = gymnasium.make("calculator", render_mode="ansi")
    env.reset(seed=0)
    env.step(call("calculator", expression="1+1"))
    text = env.render()
    assert "[user] What is" in text and "-> calculator" in text and "[tool] 2" in text
    env.close()


def test_train_and_test_splits_are_disjoint():
    train = agentgym.make("calculator", split="train", num_tasks=1000).unwrapped
    test = agentgym.make("calculator", split="test", num_tasks=300).unwrapped
    expressions = {t.metadata["expression"] for t in train.tasks}
    assert not expressions & {t.metadata["expression"] for t in test.tasks}
    train.close()
    test.close()


def test_operands_set_how_many_numbers_an_expression_has():
    from agentgym.plugins.calculator.env import make_task

    def counts(**kwargs):
        env = agentgym.make("calculator", num_tasks=200, **kwargs).unwrapped
        found = {len(t.metadata["expression"].split()) // 2 + 1 for t in env.tasks}
        env.close()
        return found

    assert counts() == {2, 3}
    assert counts(operands=2) == {2}
    assert counts(operands=[3, 4]) == {3, 4}
    # The default is the generator as it always was: task ids keep their expressions.
    assert make_task(7).prompt == make_task(7, operands=(2, 3)).prompt
    assert make_task(7, operands=(2,)).prompt != make_task(7, operands=(3,)).prompt
    for bad in (1, 9, [], [2, "3"]):
        with pytest.raises(ValueError, match=r"operands must be .* got"):
            agentgym.make("calculator", operands=bad)


class Always(Reward):
    def score(self, episode):
        return RewardResult(1.0)


class ToyEnv(AgentEnv):
    """A minimal env written against the public API only."""

    reward = Always()

    @tool
    def finish(self, note: str) -> str:
        """Finish the episode.

        Args:
            note: A note.
        """
        raise Submitted(note)

    @tool
    def crash(self) -> str:
        """A tool with a bug."""
        raise RuntimeError("boom")

    def __init__(self, **kwargs):
        task = Task("t", "Finish.", solution=[SolutionTurn([ToolCall("finish", {"note": "x"})])])
        super().__init__(TaskList([task]), **kwargs)


def test_a_crashing_tool_is_reported_to_the_agent_not_raised():
    env = ToyEnv()
    env.reset(seed=0)
    new, _, terminated, _, info = env.step(call("crash"))
    assert "crash failed: RuntimeError: boom" in new[0]["content"]
    assert info["tool_errors"] == 1 and not terminated
    assert env.step(env.task.solution[0])[2] is True
    env.close()


def test_bad_constructor_arguments_are_explained():
    with pytest.raises(ValueError, match="max_turns must be >= 1, got 0"):
        ToyEnv(max_turns=0)
    with pytest.raises(ValueError, match="render_mode 'human' is not supported"):
        ToyEnv(render_mode="human")
    with pytest.raises(KeyError, match=r"Unknown parser 'json'.*agentgym list parsers"):
        ToyEnv(parser="json")


class SlowEnv(ToyEnv):
    """Tools that take their time: one reads the turn's budget, one ignores it."""

    turn_grace_s = 0.1

    @tool
    async def polite(self, seconds: float) -> str:
        """Sleep, but no longer than the turn allows.

        Args:
            seconds: How long.
        """
        budget = within_turn(seconds)
        await asyncio.sleep(budget)
        return f"slept {budget:.1f}"

    @tool
    async def stubborn(self, seconds: float) -> str:
        """Sleep however long it takes.

        Args:
            seconds: How long.
        """
        await asyncio.sleep(seconds)
        return "done"


def test_a_turn_has_one_time_budget_for_all_its_calls():
    env = SlowEnv(turn_timeout_s=0.5)
    env.reset(seed=0)
    turn = "\n".join([call("polite", seconds=0.3), call("stubborn", seconds=30),
                      call("polite", seconds=1)])
    started = time.monotonic()
    new, _, _, _, info = env.step(turn)
    assert time.monotonic() - started < 5
    assert new[0]["content"] == "slept 0.3"
    assert "stubborn was stopped: this turn's time budget (0.5 s) ran out" in new[1]["content"]
    assert "polite was not run: this turn's time budget (0.5 s) is spent" in new[2]["content"]
    assert info["tool_errors"] == 2
    # The next turn has a budget of its own, which a polite tool keeps to.
    new, _, _, _, info = env.step(call("polite", seconds=9))
    assert new[0]["content"] == "slept 0.5" and info["tool_errors"] == 0
    assert turn_time_left() is None  # outside a turn
    env.close()
    with pytest.raises(ValueError, match="turn_timeout_s must be > 0 seconds or None"):
        SlowEnv(turn_timeout_s=0)


def test_tasks_and_reward_by_registry_id():
    from agentgym.core import UnknownIdError
    from agentgym.plugins.calculator.env import CalculatorEnv, NumericAnswer

    env = CalculatorEnv(tasks="calculator-arithmetic")  # a registered task source id
    try:
        assert isinstance(env.reward, NumericAnswer)  # the class names "numeric_answer"
        assert env.task_ids()[:2] == ["calculator-train-0", "calculator-train-1"]
        assert env.task_ids() == CalculatorEnv().task_ids()
    finally:
        env.close()

    class Typo(AgentEnv):
        reward = "numeric_answr"

    with pytest.raises(UnknownIdError, match="numeric_answer"):  # the closest id is named
        Typo(TaskList([Task("t", "p")]))


def test_tasks_as_a_plain_list_are_a_task_list_and_other_values_are_refused():
    from agentgym.core import InvalidArgumentError

    class Plain(AgentEnv):
        reward = Always()

    tasks = [Task("a", "p"), Task("b", "q")]
    env = Plain(tasks)  # eval and validate go by task_ids(), which a list lacks
    try:
        assert env.task_ids() == ["a", "b"] and isinstance(env.tasks, TaskList)
    finally:
        env.close()
    for bad, named in (([], r"tasks=\[\] \(list\)"), ({"a": tasks[0]}, r"\(dict\)"),
                       ([Task("a", "p"), "b"], r"\(list\)")):
        with pytest.raises(InvalidArgumentError, match=named):
            Plain(bad)
    with pytest.raises(InvalidArgumentError, match="1 repeat: 'a'"):  # task_id is ambiguous
        Plain([*tasks, Task("a", "again")])


def test_an_env_that_grades_itself_needs_no_reward():
    class NoGrader(AgentEnv):
        pass

    with pytest.raises(TypeError, match="needs a reward"):
        NoGrader(TaskList([Task("t", "p")]))

    class DuckReward:  # score() alone is not a Reward: refused when the env is built
        def score(self, episode):
            return RewardResult(1.0)

    with pytest.raises(TypeError, match=r"DuckReward, not an agentgym.core.Reward: subclass"):
        NoGrader(TaskList([Task("t", "p")]), reward=DuckReward())
    # an AgentGymError too, so the CLI (validate, eval) shows it as one line, not a traceback
    with pytest.raises(AgentGymError, match=r"not an agentgym\.core\.Reward"):
        NoGrader(TaskList([Task("t", "p")]), reward=DuckReward())

    class SelfGraded(AgentEnv):
        async def grade(self, episode):
            return RewardResult(0.5, {"graded_by": "itself"})

        @tool
        def done(self) -> str:
            """Finish."""
            raise Submitted(None)

    env = SelfGraded(TaskList([Task("t", "p")]))
    try:
        env.reset(seed=0)
        _, reward, terminated, _, info = env.step(call("done"))
        assert (reward, terminated, info["reward_metrics"]) == (0.5, True, {"graded_by": "itself"})
    finally:
        env.close()


def test_deferred_grading_and_overlapped_setup_are_reset_options():
    started = asyncio.Event()

    class Slow(AgentEnv):
        reward = "numeric_answer"

        async def setup_episode(self, task):
            await asyncio.sleep(0.2)
            started.set()

        @tool
        def submit(self, answer: str) -> str:
            """Submit.

            Args:
                answer: The answer.
            """
            raise Submitted(answer)

    async def play():
        env = Slow(TaskList([Task("t", "What is 2?", {"answer": "2"})]))
        try:
            _, info = await env.areset(options={"overlap_setup": True,
                                                "defer_grading": True})
            assert not started.is_set() and info["tools"]  # schemas before the setup ended
            _, reward, terminated, _, info = await env.astep(call("submit", answer="2"))
            assert started.is_set() and terminated
            assert (reward, info["grading_deferred"]) == (0.0, True)
            assert await env.agrade() == (1.0, {"submitted": True, "parsed": True,
                                                "expected": "2", "got": "2"})
            await env.areset()  # options hold for one episode only
            _, reward, *_ = await env.astep(call("submit", answer="2"))
            assert reward == 1.0
        finally:
            await env.aclose()

    asyncio.run(play())


class Noting(ToyEnv):
    """Adds a key of its own to every info, and the turn it was asked at."""

    async def extra_info(self, episode):
        return {"noted_turn": episode.turn, "noted_done": episode.done}


def test_extra_info_adds_an_envs_own_keys_to_reset_and_every_step():
    env = Noting(max_turns=2)
    try:
        _, info = env.reset(seed=0)
        assert (info["noted_turn"], info["noted_done"], info["task_id"]) == (0, False, "t")
        *_, info = env.step("no call")
        assert (info["noted_turn"], info["noted_done"], info["turn"]) == (1, False, 1)
        *_, truncated, info = env.step("no call")
        assert truncated and (info["noted_turn"], info["noted_done"]) == (2, True)
        assert info["finish_reason"] == "max_turns"  # after the episode ended and was graded
        from agentgym.testing import check_env

        check_env(env)  # Gymnasium's checker and the multi-turn checks pass with it
    finally:
        env.close()


def test_extra_info_may_not_replace_a_key_the_base_class_sets():
    class Clashing(ToyEnv):
        async def extra_info(self, episode):
            return {"tools": []}

    env = Clashing()
    try:
        with pytest.raises(EnvStateError, match=r"Clashing.extra_info returned tools, which"
                                                r" the base class sets"):
            env.reset(seed=0)
    finally:
        env.close()


def test_the_reset_options_and_info_keys_are_declared():
    from agentgym.core.env_info import RESET_OPTIONS, ResetInfo, StepInfo

    assert RESET_OPTIONS == ("task_id", "overlap_setup", "defer_grading", "attempt", "group",
                             "setup_timeout_s", "sandbox_mounts")
    env = ToyEnv()
    try:
        _, info = env.reset(seed=0)
        assert ResetInfo.__required_keys__ <= set(info) <= set(ResetInfo.__annotations__)
        *_, info = env.step(env.task.solution[0])
        assert set(info) <= set(StepInfo.__annotations__)  # no undeclared key
    finally:
        env.close()
