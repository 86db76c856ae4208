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
    # A calculator task carries three known-wrong solutions: five checks each.
    assert [(r.task_id, r.check) for r in report.results[:5]] == [
        ("calculator-train-0", "oracle"), ("calculator-train-0", "noop"),
        ("calculator-train-0", "wrong solution #1"), ("calculator-train-0", "wrong solution #2"),
        ("calculator-train-0", "wrong solution #3")]
    assert [t.reward for t in report.trajectories] == [1.0, 0.0, 0.0, 0.0, 0.0] * 5
    assert report.to_dict() == {"env": "calculator", "tasks": 5, "checked": 25, "failed": [],
                                "skipped": [], "probes": {}, "ok": True}


def test_a_broken_task_fails_its_oracle_check_and_the_others_still_run(tmp_path):
    def wrong_answer(index, row):
        if index == 1:
            row["metadata"]["answer"] = "-1"  # the grader now rejects the true result

    tasks = calculator_tasks(tmp_path / "t.jsonl", edit=wrong_answer)
    report = validate("calculator", {"tasks": tasks}, n=None)
    assert not report.ok and len(report.results) == 8
    [failure] = report.failed
    assert (failure.task_id, failure.check, failure.reward) == ("calculator-train-1",
                                                                "oracle", 0.0)
    assert failure.finish_reason == "submitted"
    assert failure.reason == "submitted=true parsed=true"  # the grader's metrics, in brief


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
    assert failure.reason.endswith("; submitted=true parsed=true")


def test_known_wrong_solutions_are_played_and_one_that_scores_is_reported(tmp_path):
    def wrong_solutions(index, row):
        if index == 2:
            answer = row["metadata"]["answer"]
            row["metadata"]["wrong_solutions"] = [
                [submit(str(int(answer) + 1))],  # off by one: scores 0, as it should
                row["solution"],  # the right solution filed as wrong: must be reported
            ]

    report = validate("calculator", {"tasks": calculator_tasks(tmp_path / "t.jsonl",
                                                               edit=wrong_solutions)}, n=None)
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
    report = validate("calculator", {"tasks": tasks}, n=None)
    assert report.ok and len(report.results) == 3  # its noop check still ran
    assert [(r.task_id, r.check, r.reason) for r in report.skipped] == [
        ("calculator-train-0", "oracle", "no solution")]
    assert "1 without a solution" in report.summary()
    strict = validate("calculator", {"tasks": tasks}, n=None, require_solutions=True)
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
    # misread expression) too.
    assert [(r.task_id, r.check) for r in report.failed] == [
        (f"calculator-train-{i}", check) for i in range(2)
        for check in ("noop", "wrong solution #1", "wrong solution #2", "wrong solution #3")]
    assert report.failed[0].reward == 1.0
    assert report.failed[0].reason == "pays whatever was done"  # the metrics' reason


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
