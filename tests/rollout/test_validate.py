"""Task validity checks (agentgym.rollout.validate) on the calculator env's real grader."""

import json

import pytest

from agentgym.core import Reward, RewardResult
from agentgym.core.errors import UnknownIdError
from agentgym.plugins.calculator.env import CalculatorEnv, make_task
from agentgym.rollout.validate import NoBackendError, env_kwargs_with_backend, validate


def submit(answer):
    return {"content": "", "tool_calls": [{"name": "submit", "arguments": {"answer": answer}}]}


def calculator_tasks(path, count=4, edit=None):
    """A task file of the calculator's first ``count`` tasks, each row passed to ``edit``;
    without their known-wrong solutions, which the tests that want them set themselves."""
    rows = [make_task(i).to_dict() for i in range(count)]
    for index, row in enumerate(rows):
        del row["metadata"]["wrong_solutions"]
        if edit:
            edit(index, row)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_valid_tasks_pass_every_check():
    report = validate("calculator", n=5)
    assert report.ok and not report.failed and not report.skipped
    assert report.task_ids == [f"calculator-train-{i}" for i in range(5)]
    # A calculator task carries three known-wrong solutions, and its submit(answer) tool
    # gets the built-in answer-stuffing probe: six checks each.
    assert [(r.task_id, r.check) for r in report.results[:6]] == [
        ("calculator-train-0", "oracle"), ("calculator-train-0", "noop"),
        ("calculator-train-0", "wrong solution #1"), ("calculator-train-0", "wrong solution #2"),
        ("calculator-train-0", "wrong solution #3"), ("calculator-train-0", "probe answer.stuff")]
    assert [t.reward for t in report.trajectories] == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0] * 5
    assert report.results[5].attack == "answer-stuffing"
    assert report.to_dict() == {
        "env": "calculator", "tasks": 5, "checked": 30, "failed": [], "skipped": [],
        "probes": {"answer.stuff": {"attack": "answer-stuffing", "played": 5, "paid": 0,
                                    "not_applicable": 0}},
        "ok": True}
    assert report.summary().endswith("; 1 exploit probe played 5 times, paid 0")


def test_a_broken_task_fails_its_oracle_check_and_the_others_still_run(tmp_path):
    def wrong_answer(index, row):
        if index == 1:
            row["metadata"]["answer"] = "-1"  # the grader now rejects the true result

    tasks = calculator_tasks(tmp_path / "t.jsonl", edit=wrong_answer)
    report = validate("calculator", {"tasks": tasks}, n=None, probes=False)
    assert not report.ok and len(report.results) == 8
    [failure] = report.failed
    assert (failure.task_id, failure.check, failure.reward) == ("calculator-train-1",
                                                                "oracle", 0.0)
    assert failure.finish_reason == "submitted"
    # the grader's metrics, in brief: what it was held to, and what it got
    assert failure.reason.startswith("submitted=true parsed=true expected=-1 got="), \
        failure.reason


def test_a_failed_check_names_the_solution_s_tool_errors(tmp_path):
    """A reference solution whose action failed says so first: that explains its reward."""
    def broken_step(index, row):
        if index == 1:
            row["solution"][0]["tool_calls"][0]["arguments"]["expression"] = "42 *"
            row["metadata"]["answer"] = "-1"

    report = validate("calculator", {"tasks": calculator_tasks(tmp_path / "t.jsonl",
                                                               edit=broken_step)}, n=None)
    [failure] = report.failed
    assert failure.reason.startswith("1 tool error (first: calculator: "), failure.reason
    assert "; submitted=true parsed=true expected=-1 got=" in failure.reason


def test_known_wrong_solutions_are_played_and_one_that_scores_is_reported(tmp_path):
    def wrong_solutions(index, row):
        if index == 2:
            answer = row["metadata"]["answer"]
            row["metadata"]["wrong_solutions"] = [
                [submit(str(int(answer) + 1))],  # off by one: scores 0, as it should
                row["solution"],  # the right solution filed as wrong: must be reported
            ]

    report = validate("calculator", {"tasks": calculator_tasks(tmp_path / "t.jsonl",
                                                               edit=wrong_solutions)}, n=None,
                      probes=False)
    checks = [(r.task_id, r.check, r.passed) for r in report.results
              if r.task_id == "calculator-train-2"]
    assert checks == [("calculator-train-2", "oracle", True), ("calculator-train-2", "noop", True),
                      ("calculator-train-2", "wrong solution #1", True),
                      ("calculator-train-2", "wrong solution #2", False)]
    assert [(r.check, r.reward) for r in report.failed] == [("wrong solution #2", 1.0)]
    assert report.to_dict()["failed"][0]["check"] == "wrong solution #2"


def test_a_task_without_a_solution_is_skipped_unless_solutions_are_required(tmp_path):
    def drop_solution(index, row):
        if index == 0:
            del row["solution"]

    tasks = calculator_tasks(tmp_path / "t.jsonl", count=2, edit=drop_solution)
    report = validate("calculator", {"tasks": tasks}, n=None, probes=False)
    assert report.ok and len(report.results) == 3  # its noop check still ran
    assert [(r.task_id, r.check, r.reason) for r in report.skipped] == [
        ("calculator-train-0", "oracle", "no solution")]
    assert "1 without a solution" in report.summary()
    strict = validate("calculator", {"tasks": tasks}, n=None, require_solutions=True,
                      probes=False)
    assert not strict.ok and not strict.skipped
    assert [(r.task_id, r.check, r.reason) for r in strict.failed] == [
        ("calculator-train-0", "oracle", "no solution")]


def test_a_crashed_episode_fails_its_check_without_stopping_the_run(tmp_path):
    def malformed(index, row):
        if index == 0:
            row["metadata"]["wrong_solutions"] = "submit 42"  # not a list: reset raises

    report = validate("calculator", {"tasks": calculator_tasks(tmp_path / "t.jsonl",
                                                               edit=malformed)}, n=None)
    assert {(r.task_id, r.check) for r in report.failed} == {
        ("calculator-train-0", "oracle"), ("calculator-train-0", "noop")}
    assert all(r.finish_reason == "error" and "crashed before grading" in r.reason
               and "must be a list of solutions" in r.reason for r in report.failed)
    assert all(r.passed for r in report.results if r.task_id != "calculator-train-0")


class PaysAnything(Reward):
    """A broken grader: full marks whatever the agent did."""

    name = "pays_anything"

    def score(self, episode):
        return RewardResult(1.0, {"reason": "pays whatever was done", "tests": {"a": 1}})


class LenientCalculator(CalculatorEnv):
    reward = PaysAnything()


def test_a_grader_that_pays_for_doing_nothing_fails_the_noop_check():
    report = validate("calculator", n=2, make_env=LenientCalculator)
    # It pays the calculator's known-wrong solutions (the bare expression, a near miss, a
    # misread expression) and the answer-stuffing probe too.
    assert [(r.task_id, r.check) for r in report.failed] == [
        (f"calculator-train-{i}", check) for i in range(2)
        for check in ("noop", "wrong solution #1", "wrong solution #2", "wrong solution #3",
                      "probe answer.stuff")]
    assert report.failed[0].reward == 1.0
    assert report.failed[0].reason == "pays whatever was done"  # the metrics' reason
    assert report.failed[4].reason == ("paid 1 (pass threshold 1) for no work: pays whatever"
                                       " was done")
    assert report.probe_counts() == {"answer.stuff": {"attack": "answer-stuffing",
                                                      "played": 2, "paid": 2,
                                                      "not_applicable": 0}}


def test_task_ids_pick_tasks_and_unknown_ones_are_named():
    report = validate("calculator", task_ids=["calculator-train-7"])
    assert report.task_ids == ["calculator-train-7"] and report.ok
    with pytest.raises(UnknownIdError, match="calculator-train-x"):
        validate("calculator", task_ids=["calculator-train-x"])


def test_backend_goes_to_envs_that_take_one():
    with pytest.raises(NoBackendError, match="'calculator' takes no backend"):
        env_kwargs_with_backend("calculator", {}, "local")
    assert env_kwargs_with_backend("swe-synth", {"max_turns": 3}, "local") == {
        "max_turns": 3, "backend": "local"}
    with pytest.raises(UnknownIdError, match="Did you mean 'docker'"):
        env_kwargs_with_backend("swe-synth", {}, "dockr")
    with pytest.raises(ValueError, match="two backends"):
        env_kwargs_with_backend("swe-synth", {"backend": "docker"}, "local")


def test_repeat_plays_the_oracle_k_times_and_a_flaky_grader_fails():
    """--repeat K: a grader that does not pay the reference solution every time is flaky."""
    class Flaky(Reward):
        name = "flaky"

        def __init__(self):
            self.calls = 0

        def score(self, episode):
            if episode.submission is None:
                return RewardResult(0.0, {"reason": "nothing submitted"})
            self.calls += 1  # every other correct submission is refused
            return RewardResult(float(self.calls % 2 == 1), {"reason": f"call {self.calls}"})

    flaky = Flaky()

    class FlakyCalculator(CalculatorEnv):
        reward = flaky

    steady = validate("calculator", n=2, repeat=3, probes=False)
    assert steady.ok and [r.check for r in steady.results[:4]] == [
        "oracle", "oracle (repeat 2)", "oracle (repeat 3)", "noop"]
    report = validate("calculator", n=1, repeat=4, probes=False, make_env=FlakyCalculator,
                      concurrency=1)
    assert [(r.check, r.passed) for r in report.results if r.check.startswith("oracle")] == [
        ("oracle", True), ("oracle (repeat 2)", False), ("oracle (repeat 3)", True),
        ("oracle (repeat 4)", False)]


def test_probes_are_selected_by_id_and_an_unknown_id_is_named():
    report = validate("calculator", n=1, probes=["answer.stuff"])
    assert [r.check for r in report.results if r.probe] == ["probe answer.stuff"]
    with pytest.raises(UnknownIdError, match=r"shell\.nope"):
        validate("calculator", n=1, probes=["shell.nope"])


def test_a_failures_reason_ends_with_the_end_of_the_graders_log():
    from agentgym.rollout.validate import LOG_CHARS, _metrics_reason

    log = "line one\n" + "x" * 500 + "\nFAIL the server did not answer on port 9090\n"
    reason = _metrics_reason({"reason": "/logs/verifier/reward.txt says 0", "log_tail": log})
    assert reason.startswith("/logs/verifier/reward.txt says 0; log: ...")
    assert reason.endswith("FAIL the server did not answer on port 9090")
    assert len(reason) <= len("/logs/verifier/reward.txt says 0; log: ...") + LOG_CHARS
    assert _metrics_reason({"reason": "no log here"}) == "no log here"


def test_a_probe_that_finds_nothing_to_attack_is_skipped_not_played():
    """A probe policy that raises ProbeNotApplicable once it sees the task is listed in
    ``skipped`` with its reason, and counted apart from the probes that played."""
    from agentgym.core.hookspecs import hookimpl
    from agentgym.core.plugins import PluginHost, set_plugin_host
    from agentgym.core.policies import TextPolicy
    from agentgym.core.probes import ExploitProbe, ProbeNotApplicable

    class Looks(TextPolicy):
        def act(self, messages, task):
            raise ProbeNotApplicable(f"nothing to spray on {task.id}")

    class Plugin:
        @staticmethod
        @hookimpl
        def agentgym_exploit_probes():
            return [ExploitProbe("test.looks", lambda target: Looks(), "looks, then stops",
                                 attack="collateral")]

    host = PluginHost()
    host.register(Plugin, "looks")
    old = set_plugin_host(host)
    try:
        report = validate("calculator", n=2, probes=["test.looks", "answer.stuff"])
    finally:
        set_plugin_host(old)
    assert report.ok
    assert [(r.task_id, r.check, r.reason) for r in report.skipped] == [
        (f"calculator-train-{i}", "probe test.looks",
         f"not applicable: nothing to spray on calculator-train-{i}") for i in range(2)]
    assert report.probe_counts()["test.looks"] == {"attack": "collateral", "played": 0,
                                                   "paid": 0, "not_applicable": 2}
    assert report.summary().endswith(
        "; 2 exploit probes played 2 times, paid 0 (2 found nothing to attack)")
