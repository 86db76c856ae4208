"""Problem statements: the template, the leak guard, and writers through synthesis (a
plugin's text policy that leaks, then does not; one that always leaks; a tiny token
model), on the three-function stand-in's tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import agentgym
from agentgym.core.contributions import Spec
from agentgym.core.errors import AgentGymError, UnknownIdError
from agentgym.core.hookspecs import hookimpl
from agentgym.core.plugins import plugin_host, set_plugin_host
from agentgym.plugins.swe.statements import (
    CODE,
    EMPTY,
    FILE,
    FUNCTION,
    MODULE,
    NO_REPRODUCTION,
    TEST,
    BugEvidence,
    LeakGuard,
    build_statement_writer,
    failing_test_sources,
    has_reproduction,
    problem_statement,
    report_prompt,
)
from agentgym.plugins.swe.synth import synthesize, synthesize_report
from agentgym.testing import ScriptedPolicy

# ---- the template --------------------------------------------------------------------------

FAILING = ["tests/test_a.py::TestB::test_b[x-1]", "tests/test_a.py::test_d"]
ERRORS = {FAILING[0]: ["assert 3 == 2", "+  where 3 = <function f at 0x...>(1)"],
          FAILING[1]: ["RuntimeError: fixture broke"]}


def test_the_problem_statement_names_tests_and_messages_not_the_fix() -> None:
    text = problem_statement("pkg", "1.0", FAILING, ERRORS)
    assert "2 tests" in text and all(f"`{t}`" in text for t in FAILING)
    assert "assert 3 == 2" in text and "RuntimeError: fixture broke" in text


def test_the_template_can_leave_the_test_ids_out() -> None:
    text = problem_statement("pkg", "1.0", FAILING, ERRORS, test_ids=False)
    assert not any(part in text for test in FAILING for part in (test, "test_b", "test_d"))
    assert "2 tests of the project's own suite fail." in text
    assert "Failing test 1 reports:" in text and "assert 3 == 2" in text
    assert "\n\n\n" not in text


# ---- leaks ---------------------------------------------------------------------------------

PATCH = """\
diff --git a/pkg/sub/mod.py b/pkg/sub/mod.py
index 1111111..2222222 100644
--- a/pkg/sub/mod.py
+++ b/pkg/sub/mod.py
@@ -10,6 +10,8 @@ class Box:
     def ready(self, n):
-        total = count - offset
+        total = count + offset
+        if n:
+            return _normalise(total)
         return total
"""
TEST_ID = "tests/test_mod.py::test_ready[1]"
ROW = {"patch": PATCH, "FAIL_TO_PASS": [TEST_ID],
       "mutations": [{"kind": "operator", "file": "pkg/sub/mod.py", "function": "Box.ready"},
                     {"kind": "block", "file": "pkg/sub/mod.py", "function": "_normalise"}]}
EVIDENCE = BugEvidence("pkg", "1.0", "pkg", (TEST_ID,), {TEST_ID: ["assert 3 == 2"]},
                       {TEST_ID: "def test_ready(n):\n    assert Box().ready(n) == 2"})
CLEAN = """\
Box.ready counts one too many

`Box().ready(1)` returns 3 where 2 is right.

```python
from pkg import Box
print(Box().ready(1))
```

Observed: 3. Expected: 2.
"""


def guard() -> LeakGuard:
    return LeakGuard.for_task(ROW, EVIDENCE)


def test_a_clean_report_is_accepted() -> None:
    # `ready` is what the evidence shows; `pkg` is the public package, not a location.
    assert guard().leaks(CLEAN) == []


@pytest.mark.parametrize("text, reason", [
    (CLEAN + "\nThe bug is in pkg/sub/mod.py.\n", FILE),
    (CLEAN + "\nSee mod.py.\n", FILE),
    (CLEAN.replace("from pkg import Box", "from pkg.sub.mod import Box"), MODULE),
    (CLEAN + "\nIt computes `total=count+offset`.\n", CODE),
    (CLEAN + "\n    total = count  -  offset\n", CODE),
    (CLEAN + "\nThe helper _normalise is wrong.\n", FUNCTION),
    (CLEAN + f"\nSeen in {TEST_ID}.\n", TEST),
    (CLEAN + "\nSeen in tests/test_mod.py.\n", TEST),
    (CLEAN + "\nThe test test_ready fails.\n", TEST),
    ("   \n", EMPTY),
    (CLEAN.replace("```python", "").replace("```", ""), NO_REPRODUCTION),
    (CLEAN.replace("from pkg import Box", "from other import Box"), NO_REPRODUCTION),
    (CLEAN.replace("print(Box().ready(1))", "print(Box(.ready(1))"), NO_REPRODUCTION),
])
def test_each_kind_of_leak_is_rejected(text: str, reason: str) -> None:
    assert reason in guard().leaks(text)


def test_a_doctest_reproduction_counts() -> None:
    assert has_reproduction("```pycon\n>>> import pkg\n>>> pkg.f(1)\n3\n```", "pkg")
    assert not has_reproduction("```\n>>> import pkg\n```", "pkg")  # nothing called


def test_the_prompt_holds_the_failing_behaviour_and_nothing_of_the_patch() -> None:
    text = json.dumps(report_prompt(EVIDENCE))
    assert "Box().ready(n) == 2" in text and "assert 3 == 2" in text
    assert "pkg/sub/mod.py" not in text and "offset" not in text and "_normalise" not in text


def test_test_sources_are_read_with_their_decorators(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_x.py").write_text(
        "import pytest\n\n\nclass TestX:\n    @pytest.mark.parametrize('n', [1])\n"
        "    def test_y(self, n):\n        assert n\n")
    found = failing_test_sources(tmp_path, ["tests/test_x.py::TestX::test_y[1]",
                                            "tests/gone.py::t"])
    assert found == {"tests/test_x.py::TestX::test_y[1]":
                     "@pytest.mark.parametrize('n', [1])\ndef test_y(self, n):\n    assert n"}


def test_writers_are_plugins() -> None:
    assert {"template", "policy"} <= set(plugin_host().entries("statement_writers"))
    assert build_statement_writer("template:no-test-ids").name == "template:no-test-ids"
    with pytest.raises(AgentGymError, match="no-test-ids"):
        build_statement_writer("template:other")
    with pytest.raises(AgentGymError, match="needs a policy"):
        build_statement_writer("policy")
    with pytest.raises(UnknownIdError):
        build_statement_writer("tempalte")


# ---- writers through synthesis -------------------------------------------------------------


@pytest.fixture(scope="module")
def scales_tasks(scales_standin, fresh_task_cache) -> tuple[list[dict], Path]:
    """Two easy tasks of the stand-in, with template statements, in a fresh cache; asking
    again with another writer only writes statements."""
    cache = fresh_task_cache()
    package, version = scales_standin
    return synthesize(package, version, 2, progress=False, cache=cache), cache


def reporter_plugin(policy: ScriptedPolicy, name: str) -> None:
    class Reporter:
        @staticmethod
        @hookimpl
        def agentgym_policies():
            return [Spec(name, lambda argument: policy)]

    agentgym.register_plugin(Reporter, name)


@pytest.fixture
def plugins():
    yield
    set_plugin_host(None)


def clean_report(package: str) -> str:
    return CLEAN.replace("Box.ready", "`scale`").replace(
        "from pkg import Box\nprint(Box().ready(1))",
        f"from {package.replace('-', '_')} import scale\nprint(scale([1, 2, 3], 3))")


def test_a_policy_s_report_is_retried_until_it_does_not_leak(scales_tasks, scales_standin,
                                                             plugins) -> None:
    made, cache = scales_tasks
    package, version = scales_standin
    seen: list[list[dict]] = []
    leaky = clean_report(package) + "\nThe fault is in scales_standin/__init__.py.\n"
    turns = [leaky, clean_report(package)]

    def write(messages, task):
        seen.append(messages)
        return turns[sum(m["role"] == "assistant" for m in messages)]

    reporter_plugin(ScriptedPolicy(write), "reporter")
    report = synthesize_report(package, version, 2, progress=False, cache=cache,
                               statement="policy:reporter")
    assert len(report.tasks) == 2
    for task, before in zip(report.tasks, made, strict=True):
        assert task["problem_statement"] == clean_report(package)
        assert task["statement_writer"] == "policy:reporter"
        assert {k: v for k, v in task.items() if k not in ("problem_statement",
                                                           "statement_writer")} == {
            k: v for k, v in before.items() if k not in ("problem_statement",
                                                         "statement_writer")}
    assert report.statements == {"writer": "policy:reporter", "written": 2, "fell_back": 0,
                                 "rejections": {FILE: 2}}
    # Each retry told the policy why, without quoting the patch; no prompt held the patch.
    assert len(seen) == 4 and all(m[-1]["content"].startswith("That report cannot")
                                  for m in seen if len(m) > 2)
    for messages, task in zip(seen[::2], report.tasks, strict=False):
        text = json.dumps(messages)
        assert "scales_standin/__init__.py" not in text
        for line in task["patch"].splitlines():
            if line[:1] in "+-" and not line.startswith(("+++", "---")) and len(
                    line[1:].strip()) >= 12:
                assert line[1:].strip() not in text


def test_the_template_is_used_when_every_attempt_leaks(scales_tasks, scales_standin,
                                                       plugins) -> None:
    made, cache = scales_tasks
    package, version = scales_standin
    leaky = clean_report(package) + f"\nSee {made[0]['FAIL_TO_PASS'][0]}.\n"
    reporter_plugin(ScriptedPolicy([leaky], repeat_last=True), "leaker")
    report = synthesize_report(package, version, 2, progress=False, cache=cache,
                               statement="policy:leaker", test_ids=False)
    assert report.statements["fell_back"] == 2 and report.statements["written"] == 0
    assert report.statements["rejections"][TEST] >= 3  # the first task's: 3 attempts each
    for task in report.tasks:
        assert task["statement_writer"] == "template:no-test-ids"
        assert not any(test in task["problem_statement"] for test in task["FAIL_TO_PASS"])
    assert "2 fell back to the template" in report.summary()


def test_the_cli_writes_statements_without_test_ids(scales_tasks, scales_standin, tmp_path,
                                                    monkeypatch) -> None:
    from agentgym.cli import main

    made, cache = scales_tasks
    package, version = scales_standin
    monkeypatch.setenv("AGENTGYM_SWE_CACHE", str(cache))
    out = tmp_path / "tasks.jsonl"
    result = CliRunner().invoke(main, ["swe", "synth", f"{package}=={version}", "-n", "2",
                                       "--no-test-ids", "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["statement_writer"] for row in rows] == ["template:no-test-ids"] * 2
    assert [row["instance_id"] for row in rows] == [row["instance_id"] for row in made]
    assert all(row["FAIL_TO_PASS"][0] not in row["problem_statement"] for row in rows)
    bad = CliRunner().invoke(main, ["swe", "synth", f"{package}=={version}", "-n", "2",
                                    "--statement", "policy:nope", "--out", str(out)])
    assert bad.exit_code != 0 and "nope" in bad.output


@pytest.mark.slow
def test_a_tiny_token_model_writes_through_its_chat_template(scales_tasks, scales_standin,
                                                             tmp_path_factory) -> None:
    """The token path end to end: the prompt rendered with the tokenizer's chat template,
    sampled, decoded and checked. An untrained model writes garbage, which is rejected (no
    reproduction), so the template must take over."""
    pytest.importorskip("transformers")
    from agentgym.testing import build_tiny_model

    made, cache = scales_tasks
    package, version = scales_standin
    model = build_tiny_model(tmp_path_factory.getbasetemp() / "tiny-model")
    report = synthesize_report(package, version, 2, progress=False, cache=cache,
                               statement=f"policy:hf:{model}")
    statements = report.statements
    assert statements["writer"] == f"policy:hf:{model}"
    assert statements["written"] + statements["fell_back"] == 2
    for task, before in zip(report.tasks, made, strict=True):
        if task["statement_writer"] == "template":  # fell back: the template's, as cached
            assert task["problem_statement"] == before["problem_statement"]
        else:
            assert LeakGuard.for_task(task, BugEvidence(
                package, version, "scales_standin", tuple(task["FAIL_TO_PASS"]))).leaks(
                task["problem_statement"]) == []
    assert sum(statements["rejections"].values()) == 3 * statements["fell_back"]
