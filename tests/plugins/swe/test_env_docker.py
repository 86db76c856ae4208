"""The SWE env on the docker backend: a SWE-bench-format task file and a per-instance image
built locally (named as the official harness names them), as `swe-verified` runs them."""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
import textwrap
from pathlib import Path

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the envs)
from agentgym.plugins.swe.instance import image_name
from agentgym.testing import check_env, play_turns

INSTANCE_ID = "demo__calc-1"

SOURCE = '''\
def add(a, b):
    return a - b


def mul(a, b):
    return a * b
'''
TESTS = '''\
from calc import add, mul


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(2, 3) == 6
'''


def _git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    return subprocess.run(["git", *identity, *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout


def _repository(root: Path) -> tuple[Path, str, str]:
    """A repository with a bug in ``add``; returns (repo, base commit, gold patch)."""
    repo = root / "testbed"
    repo.mkdir()
    (repo / "calc.py").write_text(SOURCE)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "calc.py").write_text(SOURCE.replace("a - b", "a + b"))
    patch = _git(repo, "diff")
    _git(repo, "checkout", "-q", "--", ".")
    return repo, base, patch


@pytest.fixture(scope="module")
def swe_image(tmp_path_factory) -> tuple[Path, str]:
    """Builds the instance's image on the default sandbox image; yields the task file."""
    docker = pytest.importorskip("docker", reason="the docker SDK is not installed")
    try:
        docker.from_env(timeout=5).ping()
    except Exception as e:
        pytest.skip(f"no Docker engine reachable ({type(e).__name__}): start dockerd")

    from agentgym.sandboxes.image import DEFAULT_IMAGE, ensure_image

    client = docker.from_env()
    ensure_image(DEFAULT_IMAGE, client)
    root = tmp_path_factory.mktemp("swe-docker")
    repo, base, patch = _repository(root)
    dockerfile = textwrap.dedent(f"""\
        FROM {DEFAULT_IMAGE}
        COPY testbed /testbed
        """)
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        tar.add(repo, arcname="testbed")
    context.seek(0)
    tag = image_name(INSTANCE_ID)
    client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True,
                        network_mode="none")
    row = {
        "instance_id": INSTANCE_ID, "repo": "demo/calc", "base_commit": base,
        "patch": patch, "test_patch": "", "version": "1.0",
        "problem_statement": "add(2, 3) returns -1 instead of 5.",
        "hints_text": "", "created_at": "2026-01-01T00:00:00Z",
        "environment_setup_commit": base,
        # JSON-encoded lists, as the hub datasets store them
        "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]),
        "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_mul"]),
        "test_cmd": "python3 -m pytest -rA -p no:cacheprovider",
    }
    tasks = root / "tasks.jsonl"
    tasks.write_text(json.dumps(row) + "\n")
    yield tasks, tag
    client.images.remove(tag, force=True)


def _play(env, turns) -> tuple[float, dict]:
    return play_turns(env, turns, seed=0)


def test_swe_verified_runs_a_local_task_file_on_its_image(swe_image):
    tasks, tag = swe_image
    assert tag == "swebench/sweb.eval.x86_64.demo_1776_calc-1:latest"
    env = gym.make("swe-verified", tasks=str(tasks))
    try:
        raw = env.unwrapped
        assert raw.backend == "docker"
        messages, info = env.reset(seed=0)
        assert "add(2, 3)" in messages[-1]["content"]
        # the command the grader runs is the one the prompt gives
        assert ("Run the tests with `python3 -m pytest -rA -p no:cacheprovider`"
                in messages[-1]["content"])
        assert {t["function"]["name"] for t in info["tools"]} == {
            "bash", "str_replace_editor", "search", "submit"}
        assert raw.box.workdir == "/testbed"
        oracle = [raw.task.solution[0], raw.task.solution[1]]
        reward, info = _play(env, oracle)
        assert reward == 1.0, info
        assert info["reward_metrics"]["f2p_passed"] == 1
        assert info["reward_metrics"]["p2p_passed"] == 1
        # submitting without a fix scores 0
        reward, info = _play(env, ['<tool_call>\n{"name": "submit", "arguments": {}}\n'
                                   '</tool_call>'])
        assert reward == 0.0
        # deleting the failing test does not help: test files are restored for grading
        delete = ('<tool_call>\n{"name": "bash", "arguments": {"command":'
                  ' "rm tests/test_calc.py"}}\n</tool_call>')
        reward, info = _play(env, [delete, '<tool_call>\n{"name": "submit", "arguments":'
                                           ' {}}\n</tool_call>'])
        assert reward == 0.0, info
    finally:
        env.close()


def test_check_env_passes_for_the_docker_ids(swe_image):
    tasks, _ = swe_image
    for env_id in ("swe-verified", "swe-lite", "swe-gym"):
        check_env(gym.make(env_id, tasks=str(tasks)))


def test_swe_synth_runs_on_docker_with_the_project_env_mounted(swe_image, toolz_tasks):
    # swe_image: only for its engine check and the default image it builds
    env = gym.make("swe-synth", tasks=str(toolz_tasks), backend="docker")
    try:
        raw = env.unwrapped
        task = raw.tasks[0]
        instance = raw.instances[task.id]
        env.reset(options={"task_id": task.id})
        from agentgym.plugins.swe.repo import ENV_MOUNT
        from agentgym.sandboxes.docker import DockerSandbox
        from agentgym.sandboxes.image import DEFAULT_IMAGE

        assert isinstance(raw.box, DockerSandbox)
        # the default image, with the project's dependency env bound read-only
        assert DEFAULT_IMAGE in raw.box.container.image.tags
        mounts = {m["Destination"]: m for m in raw.box.container.attrs["Mounts"]}
        assert mounts[ENV_MOUNT]["RW"] is False
        # the workspace is the task's repository, at its base commit
        assert raw.box.workdir == "/workspace"
        reward, info = _play_task(env, task.id, list(raw.task.solution))
        assert reward == 1.0, info["reward_metrics"]
        assert info["reward_metrics"]["f2p_passed"] == len(instance.FAIL_TO_PASS) > 0
        reward, _ = _play_task(env, task.id, [SUBMIT])
        assert reward == 0.0
        files = sorted({test.split("::")[0] for test in instance.FAIL_TO_PASS})
        delete = ('<tool_call>\n' + json.dumps({"name": "bash", "arguments": {
            "command": "rm " + " ".join(files)}}) + '\n</tool_call>')
        reward, info = _play_task(env, task.id, [delete, SUBMIT])
        assert reward == 0.0, info["reward_metrics"]
    finally:
        env.close()
    check_env(gym.make("swe-synth", tasks=str(toolz_tasks), backend="docker"))


SUBMIT = '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>'


def _play_task(env, task_id, turns) -> tuple[float, dict]:
    return play_turns(env, turns, options={"task_id": task_id})
