"""Reading task folders: both formats, the errors a malformed folder gets, and which
Dockerfiles the local backend rebuilds without an image."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgym.plugins.terminal.formats import (
    TaskFormatError,
    dockerfile_instructions,
    load_task,
    load_tasks,
    local_plan,
)

DATA = Path(__file__).parent / "data"


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


HARBOR = {"instruction.md": "Do it.\n", "task.toml": "[verifier]\ntimeout_sec = 5\n",
          "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
          "solution/solve.sh": "true\n"}


def test_harbor_and_terminal_bench_folders() -> None:
    harbor = load_task(DATA / "harbor-image")
    assert (harbor.format, harbor.workdir, harbor.reward) == ("harbor", "/app", "binary")
    assert harbor.test_command == "bash /tests/test.sh" and harbor.test_timeout_s == 60
    assert harbor.solution.startswith("#!/bin/bash") and len(harbor.wrong_solutions) == 1
    assert harbor.plan is None and "USER" in harbor.local_reason
    tb = load_task(DATA / "tb-image")
    assert (tb.format, tb.reward, tb.agent_timeout_s) == ("terminal-bench", "fraction", 120)
    assert [name for name, _ in tb.tests] == ["", "run-tests.sh"]
    assert tb.test_command == "TEST_DIR=/tests bash /tests/run-tests.sh"
    assert tb.metadata["category"] == "system-administration"
    local = load_task(DATA / "local-task")
    assert local.runs_locally and local.dockerfile is None and local.workdir == "/app"
    assert [t.id for t in load_tasks(DATA)] == ["harbor-image", "local-task", "tb-image"]


def test_terminal_bench_solution_yaml(tmp_path: Path) -> None:
    write(tmp_path / "t", {"task.yaml": "instruction: go\n", "run-tests.sh": "true\n",
                           "solution.yaml": "- command: cd /app\n- command: make\n"})
    assert load_task(tmp_path / "t").solution == "cd /app\nmake\n"


@pytest.mark.parametrize(("change", "message"), [
    ({"task.toml": "[verifier]\ntimeout_sec = 'soon'\n"},
     r"task.toml: verifier.timeout_sec must be a number of seconds > 0, got 'soon'"),
    ({"task.toml": "[verifier\n"}, r"task.toml: not valid TOML"),
    ({"task.toml": "[verifier]\nreward = 'partial'\n"},
     r"verifier.reward must be 'binary' or 'fraction', got 'partial'"),
    ({"task.toml": "agent = 3\n"}, r"\[agent\] must be a table"),
])
def test_malformed_harbor_fields_are_named(tmp_path: Path, change, message) -> None:
    folder = write(tmp_path / "t", {**HARBOR, **change})
    with pytest.raises(TaskFormatError, match=message):
        load_task(folder)


def test_missing_files_are_named(tmp_path: Path) -> None:
    folder = write(tmp_path / "t", {k: v for k, v in HARBOR.items() if k != "tests/test.sh"})
    with pytest.raises(TaskFormatError, match=r"tests/test.sh is missing"):
        load_task(folder)
    folder = write(tmp_path / "u", {"task.yaml": "author_name: x\n", "run-tests.sh": ""})
    with pytest.raises(TaskFormatError, match=r"task.yaml: field 'instruction' is missing"):
        load_task(folder)
    with pytest.raises(TaskFormatError, match=r"neither task.toml .* nor task.yaml"):
        load_task(tmp_path)
    with pytest.raises(TaskFormatError, match="holds no task folders"):
        load_tasks(write(tmp_path / "empty", {"README": "x"}))


def test_dockerfile_instructions_join_continuations() -> None:
    text = "# c\nFROM x\nRUN a \\\n  && b\n\nENV A=1 B=2\n"
    assert dockerfile_instructions(text) == [("FROM", "x"), ("RUN", "a  && b"),
                                             ("ENV", "A=1 B=2")]


def test_local_plan(tmp_path: Path) -> None:
    context = write(tmp_path / "env", {"app/data.txt": "x", "setup.sh": "true"})
    dockerfile = context / "Dockerfile"
    dockerfile.write_text("FROM agentgym/sandbox:default\nWORKDIR /srv/app\nCOPY app/ ./\n"
                          "COPY setup.sh /srv/app/tools/\nENV MODE=test\nRUN bash tools/setup.sh\n"
                          "CMD [\"bash\"]\n")
    plan, reason, workdir = local_plan(dockerfile)
    assert reason == "" and workdir == "/srv/app"
    assert [(host.name, rel) for host, rel in plan.copies] == [("app", "."),
                                                               ("setup.sh", "tools/setup.sh")]
    assert plan.env == (("MODE", "test"),) and plan.runs == (("/srv/app", "bash tools/setup.sh"),)
    for text, why in [("FROM debian:12\n", "not the default sandbox image"),
                      ("FROM agentgym/sandbox:default\nUSER root\n", "uses USER"),
                      ("FROM agentgym/sandbox:default\nWORKDIR /app\nCOPY app /etc/app\n",
                       "outside the workspace"),
                      ("FROM agentgym/sandbox:default\nCOPY missing /app/\n",
                       "not in the context")]:
        dockerfile.write_text(text)
        plan, reason, _ = local_plan(dockerfile)
        assert plan is None and why in reason, (text, reason)


def test_harbor_environment_and_verifier_settings(tmp_path: Path) -> None:
    toml = ('[verifier]\nenv = { LEVEL = "strict", RETRIES = 3 }\n'
            '[environment]\ndocker_image = "myorg/task:1"\ncpus = 2\nmemory = "1.5G"\n')
    task = load_task(write(tmp_path / "t", {**HARBOR, "task.toml": toml}))
    assert task.verifier_env == (("LEVEL", "strict"), ("RETRIES", "3"))
    assert (task.image, task.cpus, task.memory_mb) == ("myorg/task:1", 2.0, 1536)
    assert not task.runs_locally and "prebuilt image 'myorg/task:1'" in task.local_reason
    bad = {**HARBOR, "task.toml": "[environment]\nmemory = 'lots'\n"}
    with pytest.raises(TaskFormatError, match=r"environment\.memory must be megabytes"):
        load_task(write(tmp_path / "u", bad))


def test_a_compose_only_terminal_bench_task_says_so(tmp_path: Path) -> None:
    folder = write(tmp_path / "t", {"task.yaml": "instruction: go\n", "run-tests.sh": "true\n",
                                    "docker-compose.yaml": "services: {}\n"})
    task = load_task(folder)
    assert not task.runs_locally and "docker-compose.yaml" in task.local_reason
