"""assert_valid: the agentgym validate checks as a plugin test's assertion."""

import json

import pytest

from agentgym.plugins.calculator.env import make_task
from agentgym.testing import TaskValidityError, assert_valid


def test_valid_tasks_pass_and_the_report_comes_back():
    report = assert_valid("calculator", n=3, split="test")
    assert report.ok and report.task_ids == [f"calculator-test-{i}" for i in range(3)]


def test_failures_raise_an_assertion_that_lists_them(tmp_path):
    rows = [make_task(i).to_dict() for i in range(2)]
    truth, rows[0]["metadata"]["answer"] = rows[0]["metadata"]["answer"], "-1"
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(AssertionError) as error:
        assert_valid("calculator", n=None, tasks=str(tasks))
    assert isinstance(error.value, TaskValidityError)
    assert str(error.value).splitlines()[1:] == [
        "  calculator-train-0 [oracle] reward=0.0 finish=submitted: submitted=true parsed=true"
        f" expected=-1 got={truth}"]
    assert error.value.report.task_ids == ["calculator-train-0", "calculator-train-1"]
