"""The SWE env on the docker backend: a SWE-bench-format task file and a per-instance image
built locally (named as the official harness names them), as `swe-verified` runs them."""

from __future__ import annotations

import contextlib
import json
import subprocess
from pathlib import Path

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the envs)
from agentgym.plugins.swe.instance import image_name
from agentgym.testing import check_env, play_turns
from agentgym.toolkits import episode_sandbox

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
def engine():
    """The docker client, with the default sandbox image built; skips where no engine runs."""
    docker = pytest.importorskip("docker", reason="the docker SDK is not installed")
    try:
        docker.from_env(timeout=5).ping()
    except Exception as e:
        pytest.skip(f"no Docker engine reachable ({type(e).__name__}): start dockerd")

    from agentgym.sandboxes.image import DEFAULT_IMAGE, ensure_image

    client = docker.from_env()
    ensure_image(DEFAULT_IMAGE, client)
    return client


def build_instance_image(client, instance_id: str, files: dict[str, Path]) -> list[str]:
    """Build ``files`` (path in the image -> host path) on the default sandbox image with
    the docker backend's image capability, and name it as the official harness names the
    instance's image; returns the names to remove afterwards."""
    from agentgym.core.registry import sandbox_backend

    tag = image_name(instance_id)
    repository = tag.rsplit(":", 1)[0]
    built = sandbox_backend("docker").build_image(files=files, repository=repository)
    client.images.get(built).tag(repository, "latest")
    return [tag, built]


def remove_images(client, names: list[str]) -> None:
    for name in names:
        with contextlib.suppress(Exception):
            client.images.remove(name, force=True)


@pytest.fixture(scope="module")
def swe_image(engine, tmp_path_factory) -> tuple[Path, str]:
    """Builds the instance's image on the default sandbox image; yields the task file."""
    root = tmp_path_factory.mktemp("swe-docker")
    repo, base, patch = _repository(root)
    names = build_instance_image(engine, INSTANCE_ID, {"/testbed": repo})
    row = {
        "instance_id": INSTANCE_ID, "repo": "demo/calc", "base_commit": base,
        "patch": patch, "test_patch": "", "version": "1.0",
        "problem_statement": "add(2, 3) returns -1 instead of 5.",
        "hints_text": "", "created_at": "2026-01-01T00:00:00Z",
        "environment_setup_commit": base,
        # JSON-encoded lists, as the hub datasets store them
        "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]),
        "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_mul"]),
        # no test_cmd: the default command, in an image that has python3 and no python
    }
    tasks = root / "tasks.jsonl"
    tasks.write_text(json.dumps(row) + "\n")
    yield tasks, names[0]
    remove_images(engine, names)


def _play(env, turns) -> tuple[float, dict]:
    return play_turns(env, turns, seed=0)


@pytest.mark.slow
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
        assert episode_sandbox(raw.episode).workdir == "/testbed"
        oracle = [raw.task.solution[0], raw.task.solution[1]]
        reward, info = _play(env, oracle)
        assert reward == 1.0, info
        metrics = info["reward_metrics"]
        assert metrics["f2p_passed"] == 1 and metrics["p2p_passed"] == 1
        assert metrics["tests"] == {"tests/test_calc.py::test_add": "PASSED",
                                    "tests/test_calc.py::test_mul": "PASSED"}
        # the default command, the file run whole, and what the run printed
        assert metrics["test_command"] == (
            "python3 -m pytest -rA -p no:cacheprovider tests/test_calc.py")
        assert metrics["exit_code"] == 0 and metrics["missing"] == {}
        assert "PASSED tests/test_calc.py::test_add" in metrics["log_tail"]
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


@pytest.mark.slow
def test_check_env_passes_for_the_docker_ids(swe_image):
    tasks, _ = swe_image
    for env_id in ("swe-verified", "swe-lite", "swe-gym"):
        check_env(gym.make(env_id, tasks=str(tasks)))


@pytest.mark.slow
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

        box = episode_sandbox(raw.episode)
        assert isinstance(box, DockerSandbox)
        # the default image, with the project's dependency env bound read-only
        assert DEFAULT_IMAGE in box.container.image.tags
        mounts = {m["Destination"]: m for m in box.container.attrs["Mounts"]}
        assert mounts[ENV_MOUNT]["RW"] is False
        # the workspace is the task's repository, at its base commit
        assert box.workdir == "/workspace"
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


# --- SWE-bench's own runners: a Django-style and a SymPy-style repository -----------------

OPS = '''\
def add(a, b):
    return a + b


def clamp(x, lo, hi):
    return max(lo, min(x, lo))
'''
FIXED_OPS = OPS.replace("min(x, lo)", "min(x, hi)")
WRONG_OPS = OPS.replace("max(lo, min(x, lo))", "hi")  # passes nothing but clamp's top

# Behaves like Django's tests/runtests.py: test modules as labels, relative to tests/,
# run by unittest at the given verbosity. Its "python" exists only in the testbed env.
DJANGO_RUNTESTS = '''\
#!/usr/bin/env python
import argparse, os, sys, unittest

parser = argparse.ArgumentParser()
parser.add_argument("modules", nargs="*")
parser.add_argument("-v", "--verbosity", type=int, default=1)
parser.add_argument("--settings")
parser.add_argument("--parallel", type=int, default=0)
args = parser.parse_args()
here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [here, os.path.dirname(here)]
__import__(args.settings or "test_sqlite")
print(f"Testing against Django installed in '{os.path.dirname(here)}/calc'")
suite = unittest.defaultTestLoader.loadTestsFromNames(args.modules or ["app.tests"])
result = unittest.TextTestRunner(verbosity=args.verbosity).run(suite)
sys.exit(not result.wasSuccessful())
'''
DJANGO_TESTS = '''\
import unittest

from calc.ops import add


class OpsTests(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_add_zero(self):
        """Adding zero is identity."""
        self.assertEqual(add(7, 0), 7)
'''
DJANGO_NEW_TEST = '''
    def test_clamp(self):
        from calc.ops import clamp
        self.assertEqual((clamp(5, 0, 3), clamp(-1, 0, 3), clamp(2, 0, 3)), (3, 0, 2))
'''
# A stand-in for the images' conda: `conda activate testbed` puts the env's bin first.
CONDA_ACTIVATE = '''\
conda() {
    if [ "$1" = activate ] && [ -d "/opt/miniconda3/envs/$2/bin" ]; then
        export PATH="/opt/miniconda3/envs/$2/bin:$PATH" CONDA_DEFAULT_ENV="$2"
    else
        echo "conda: no environment named $2" >&2
        return 1
    fi
}
'''

# Behaves like SymPy's bin/test --verbose: each file's tests in order, then the failures.
SYMPY_BIN_TEST = '''\
#!/usr/bin/env python3
import importlib.util, os, sys, traceback

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, root)
files = [a for a in sys.argv[1:] if not a.startswith("-")]
print("=" * 29, "test process starts", "=" * 30)
print("executable:         " + sys.executable)
print()
passed = failed = errors = 0
reports = []
for path in files:
    spec = importlib.util.spec_from_file_location(path[:-3].replace("/", "."), path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception:
        print(f"{path}[?]   Failed to import" + " " * 30 + "[FAIL]")
        reports.append((path, traceback.format_exc()))
        errors += 1
        continue
    tests = [n for n in vars(module) if n.startswith("test_")]
    line = f"{path}[{len(tests)}] "
    ok = True
    for name in tests:
        print(line)
        try:
            getattr(module, name)()
            line, passed = f"{name} ok", passed + 1
        except AssertionError:
            line, failed, ok = f"{name} F", failed + 1, False
            reports.append((f"{path}:{name}", traceback.format_exc()))
        except Exception:
            line, errors, ok = f"{name} E", errors + 1, False
            reports.append((f"{path}:{name}", traceback.format_exc()))
    print(line + " " * 20 + ("[OK]" if ok else "[FAIL]"))
print()
for where, text in reports:
    print("_" * 80)
    print(f"{'_' * 10} {where} {'_' * 10}")
    print(text)
print(f"{'=' * 13} tests finished: {passed} passed, {failed} failed, {errors} exceptions,"
      f" in 0.01 seconds {'=' * 13}")
sys.exit(bool(failed or errors))
'''
SYMPY_TESTS = '''\
from sympy.core.ops import add


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert add(2, 2) == 4
'''
SYMPY_NEW_TEST = '''

def test_clamp():
    from sympy.core.ops import clamp
    assert (clamp(5, 0, 3), clamp(-1, 0, 3), clamp(2, 0, 3)) == (3, 0, 2)
'''


def _commit_repo(repo: Path, files: dict[str, str], fixed: dict[str, str],
                 wrong: dict[str, str], tests: dict[str, str]) -> dict[str, str]:
    """Commit ``files`` as the base; the gold patch (``fixed``), a wrong patch and the
    test_patch (``tests``) as diffs against it, the checkout left at the base."""
    for path, content in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(content)
    for script in ("tests/runtests.py", "bin/test"):
        if (repo / script).exists():
            (repo / script).chmod(0o755)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    diffs = {"base_commit": _git(repo, "rev-parse", "HEAD").strip()}
    for key, changes in (("patch", fixed), ("wrong_patch", wrong), ("test_patch", tests)):
        for path, content in changes.items():
            (repo / path).write_text(content)
        diffs[key] = _git(repo, "diff")
        _git(repo, "checkout", "-q", "--", ".")
    return diffs


def _row(instance_id: str, repo: str, version: str, diffs: dict[str, str],
         f2p: list[str], p2p: list[str]) -> dict:
    return {"instance_id": instance_id, "repo": repo, "version": version,
            "base_commit": diffs["base_commit"], "patch": diffs["patch"],
            "test_patch": diffs["test_patch"], "problem_statement": "clamp ignores hi",
            "hints_text": "", "created_at": "2026-01-01T00:00:00Z",
            "environment_setup_commit": diffs["base_commit"],
            "FAIL_TO_PASS": json.dumps(f2p), "PASS_TO_PASS": json.dumps(p2p)}


@pytest.fixture(scope="module")
def harness_tasks(engine, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A Django-style and a SymPy-style SWE-bench instance, each in its image (named as the
    harness names it): the Django one with a testbed conda env, the SymPy one with only the
    default image's python3. Yields the task file and each instance's wrong patch."""
    root = tmp_path_factory.mktemp("swe-harness")
    django_repo, sympy_repo = root / "django", root / "sympy"
    django = _commit_repo(
        django_repo,
        {"calc/__init__.py": "", "calc/ops.py": OPS, "tests/runtests.py": DJANGO_RUNTESTS,
         "tests/test_sqlite.py": "DATABASES = {}\n", "tests/app/__init__.py": "",
         "tests/app/tests.py": DJANGO_TESTS},
        {"calc/ops.py": FIXED_OPS}, {"calc/ops.py": WRONG_OPS},
        {"tests/app/tests.py": DJANGO_TESTS + DJANGO_NEW_TEST})
    sympy = _commit_repo(
        sympy_repo,
        {"sympy/__init__.py": "", "sympy/core/__init__.py": "", "sympy/core/ops.py": OPS,
         "sympy/core/tests/__init__.py": "", "sympy/core/tests/test_ops.py": SYMPY_TESTS,
         "bin/test": SYMPY_BIN_TEST},
        {"sympy/core/ops.py": FIXED_OPS},
        # wrong: a name the tests import is gone, so the test file no longer imports
        {"sympy/core/ops.py": FIXED_OPS.replace("def add", "def plus")},
        {"sympy/core/tests/test_ops.py": SYMPY_TESTS + SYMPY_NEW_TEST})
    conda = root / "miniconda3"
    (conda / "bin").mkdir(parents=True)
    (conda / "bin" / "activate").write_text(CONDA_ACTIVATE)
    (conda / "envs" / "testbed" / "bin").mkdir(parents=True)
    python = conda / "envs" / "testbed" / "bin" / "python"
    python.write_text('#!/bin/sh\nexec /usr/bin/python3 "$@"\n')
    python.chmod(0o755)
    names = build_instance_image(engine, "django__django-90001",
                                 {"/testbed": django_repo, "/opt/miniconda3": conda})
    names += build_instance_image(engine, "sympy__sympy-90002", {"/testbed": sympy_repo})
    rows = [
        _row("django__django-90001", "django/django", "3.0", django,
             ["test_clamp (app.tests.OpsTests)"],
             ["test_add (app.tests.OpsTests)", "Adding zero is identity."]),
        _row("sympy__sympy-90002", "sympy/sympy", "1.1", sympy,
             ["test_clamp"], ["test_add", "test_mul"]),
    ]
    tasks = root / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(row) + "\n" for row in rows))
    yield tasks, {"django__django-90001": django["wrong_patch"],
                  "sympy__sympy-90002": sympy["wrong_patch"]}
    remove_images(engine, names)


def _apply(patch: str) -> str:
    command = f"cat > /tmp/wrong.patch <<'EOF'\n{patch}EOF\ngit apply /tmp/wrong.patch"
    return ('<tool_call>\n' + json.dumps({"name": "bash", "arguments": {"command": command}})
            + '\n</tool_call>')


@pytest.mark.slow
@pytest.mark.parametrize("instance_id", ["django__django-90001", "sympy__sympy-90002"])
def test_harness_runners_grade_oracle_noop_and_a_wrong_patch(harness_tasks, instance_id):
    tasks, wrong = harness_tasks
    env = gym.make("swe-verified", tasks=str(tasks))
    try:
        raw = env.unwrapped
        env.reset(options={"task_id": instance_id})
        reward, info = _play_task(env, instance_id, list(raw.task.solution))
        metrics = info["reward_metrics"]
        assert reward == 1.0, metrics
        assert set(metrics["tests"].values()) == {"PASSED"} and metrics["missing"] == {}
        if instance_id.startswith("django"):
            # the harness's command, the test_patch's module as a label, and the
            # docstring-named test found; `python` exists only in the activated testbed
            assert metrics["test_command"] == (
                "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
                " app.tests")
            assert "test_add_zero (app.tests.OpsTests" in metrics["log_tail"]
        else:
            assert metrics["test_command"].endswith(
                "bin/test -C --verbose sympy/core/tests/test_ops.py")
        reward, info = _play_task(env, instance_id, [SUBMIT])
        assert reward == 0.0
        reward, info = _play_task(env, instance_id, [_apply(wrong[instance_id]), SUBMIT])
        metrics = info["reward_metrics"]
        assert reward == 0.0 and metrics["applied"], metrics
        if instance_id.startswith("django"):
            assert metrics["tests"]["test_clamp (app.tests.OpsTests)"] == "FAILED"
        else:  # its test file no longer imports: the tests are missing, and why
            assert set(metrics["tests"].values()) == {"MISSING"}
            assert metrics["missing"]["test_clamp"] == (
                "collection error in sympy/core/tests/test_ops.py: ImportError: cannot"
                " import name 'add' from 'sympy.core.ops' (/testbed/sympy/core/ops.py)")
    finally:
        env.close()
