"""The SWE exploit probes, on both backends: every attack class scores 0, the gold patch 1.

Two levels:

* each probe's shell commands are played in a workspace sandbox, its diff taken as an
  episode's is (:func:`diff_of`) and graded in a fresh sandbox (:func:`grade`), on the
  local backend (the repository's tests run by pytest 8 from a swe-synth test env) and on
  docker (the default image's own pytest 7), for a repository with a bug in ``clamp``;
* ``assert_valid`` with one probe of each attack class on five tasks of ``swe-synth``
  (local) and of each SWE-bench id (docker: five instances in one locally built image),
  as ``agentgym validate`` runs them.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agentgym.core.probes import ProbeTarget
from agentgym.core.registry import open_sandbox
from agentgym.core.task import Task
from agentgym.plugins.swe.grading import GradeResult, diff_of, grade
from agentgym.plugins.swe.instance import SWEInstance
from agentgym.plugins.swe.probes import probes

PROBES = {probe.id: probe for probe in probes()}
TOOLS = ("bash", "str_replace_editor", "search", "submit")

CALC = '''\
def add(a, b):
    return a + b


def mul(a, b):
    return a * b


def clamp(x, lo, hi):
    return max(lo, min(x, lo))


def mean(values):
    return sum(values) / (len(values) + 1)


def scale(values, factor):
    return [v * factor for v in values[1:]]


def first(values):
    return values[-1]


def last(values):
    return values[0]
'''
FIXES = {
    "clamp": ("max(lo, min(x, lo))", "max(lo, min(x, hi))"),
    "mean": ("(len(values) + 1)", "len(values)"),
    "scale": ("values[1:]", "values"),
    "first": ("values[-1]", "values[0]"),
    "last": ("    return values[0]\n", "    return values[-1]\n"),
}
TESTS = '''\
from calc import add, clamp, first, last, mean, mul, scale


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(2, 3) == 6


def test_clamp():
    assert (clamp(5, 0, 3), clamp(-1, 0, 3), clamp(2, 0, 3)) == (3, 0, 2)


def test_mean():
    assert mean([1, 2, 3, 6]) == 3


def test_scale():
    assert scale([1, 2], 3) == [3, 6]


def test_first():
    assert first([1, 2, 3]) == 1


def test_last():
    assert last([1, 2, 3]) == 3
'''


def _git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    return subprocess.run(["git", *identity, *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout


def calc_repository(root: Path) -> tuple[Path, list[dict]]:
    """A git repository with five bugs (each caught by one test) and two correct functions;
    and one SWE-bench row per bug (its test FAIL_TO_PASS, the correct ones PASS_TO_PASS,
    the fix of that bug alone as the gold patch)."""
    repo = root / "testbed"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(CALC)
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    (repo / ".gitignore").write_text("__pycache__/\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    rows = []
    for name, (old, new) in FIXES.items():
        (repo / "calc.py").write_text(CALC.replace(old, new))
        patch = _git(repo, "diff")
        _git(repo, "checkout", "-q", "--", ".")
        rows.append({
            "instance_id": f"demo__calc-{name}", "repo": "demo/calc", "version": "1.0",
            "base_commit": base, "patch": patch, "test_patch": "",
            "problem_statement": f"{name} gives the wrong answer.", "hints_text": "",
            "created_at": "2026-01-01T00:00:00Z", "environment_setup_commit": base,
            "FAIL_TO_PASS": json.dumps([f"tests/test_calc.py::test_{name}"]),
            "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_add",
                                        "tests/test_calc.py::test_mul"])})
    return repo, rows


def _local_missing() -> str | None:
    if shutil.which("bwrap") is None or os.geteuid() != 0:
        return "the local sandbox needs bubblewrap (apt-get install bubblewrap) and root"
    return None


def _docker_missing() -> str | None:
    try:
        import docker

        docker.from_env(timeout=5).ping()
    except Exception as error:
        return f"no Docker engine reachable ({type(error).__name__}): start dockerd"
    return None


@pytest.fixture(scope="module")
def calc(tmp_path_factory) -> tuple[Path, list[dict]]:
    return calc_repository(tmp_path_factory.mktemp("swe-probes"))


@pytest.fixture(scope="module", params=["local", "docker"])
def workspace(request, calc) -> tuple[str, dict, SWEInstance]:
    """``(backend, sandbox options, the clamp instance)``: on local, the repository with a
    swe-synth project's test env mounted (pytest 8) and the command swe-synth writes; on
    docker, the default image's python3 and pytest 7 with the default command."""
    repo, rows = calc
    instance = SWEInstance.from_dict(rows[0])
    if request.param == "local":
        missing = _local_missing()
        if missing:
            pytest.skip(missing)
        from agentgym.plugins.swe import repo as swe_repo

        try:
            mounts = swe_repo.prepare("toolz", "1.2.0").mounts
        except Exception as error:
            pytest.skip(f"cannot build a test env with pytest here (PyPI unreachable?): {error}")
        instance = SWEInstance(**{**instance.__dict__, "test_cmd": (
            f'PYTHONPATH="$PWD" PYTHONDONTWRITEBYTECODE=1 {swe_repo.ENV_PYTHON} -m pytest -rA'
            " --tb=short -p no:cacheprovider")})
        return "local", {"template": repo, "mounts": mounts}, instance
    missing = _docker_missing()
    if missing:
        pytest.skip(missing)
    import docker

    from agentgym.sandboxes.image import DEFAULT_IMAGE, ensure_image

    ensure_image(DEFAULT_IMAGE, docker.from_env())
    return "docker", {"template": repo}, instance


def play_and_grade(backend: str, options: dict, instance: SWEInstance,
                   probe_id: str | None) -> GradeResult:
    """Play probe ``probe_id``'s shell commands in a workspace (None: apply the gold patch),
    take its diff and grade it in a fresh sandbox."""
    task = Task(id=instance.instance_id, prompt="", metadata={"instance": instance.to_dict()})
    commands = []
    if probe_id is None:
        commands = [f"cat > /tmp/gold.patch <<'EOF'\n{instance.patch}EOF\ngit apply"
                    " /tmp/gold.patch"]
    else:
        for turn in PROBES[probe_id].plan(ProbeTarget("swe-test", task, TOOLS)):
            call = turn["tool_calls"][0]["function"]
            if call["name"] == "bash":
                commands.append(json.loads(call["arguments"])["command"])

    async def main() -> GradeResult:
        async with await open_sandbox(backend, **options) as box:
            for command in commands:
                await box.exec(command, 120)
            await box.fresh_session()  # as SWEEnv.grade does
            diff = await diff_of(box, instance.base_commit)
        async with await open_sandbox(backend, **options) as fresh:
            return await grade(fresh, instance, diff, timeout=120)

    return asyncio.run(main())


def test_the_gold_patch_still_scores_one(workspace):
    result = play_and_grade(*workspace, None)
    assert result.reward == 1.0, (result.reason, result.log_tail)
    assert result.source == "report" and result.tampered == []


# One test per probe: each attack class has several (see agentgym.plugins.swe.probes).
@pytest.mark.slow
@pytest.mark.parametrize("probe_id", sorted(PROBES))
def test_no_probe_is_paid(workspace, probe_id):
    result = play_and_grade(*workspace, probe_id)
    assert result.reward == 0.0, (probe_id, result.reason, result.dropped_reasons,
                                  result.log_tail)
    assert result.f2p_passed == 0, result.tests


@pytest.mark.slow
def test_what_defeated_each_attack_is_reported(workspace):
    backend, options, instance = workspace
    config = play_and_grade(backend, options, instance, "swe.pyproject-addopts")
    assert config.dropped_reasons == {"pyproject.toml": "test-runner configuration"}
    hooks = play_and_grade(backend, options, instance, "swe.startup-hooks")
    assert hooks.dropped_reasons["sitecustomize.py"] == "interpreter start-up hook"
    shadow = play_and_grade(backend, options, instance, "swe.shadow-runner")
    assert shadow.dropped_reasons == {"pytest.py": "shadows a module the test runner imports"}
    patched = play_and_grade(backend, options, instance, "swe.patch-runner")
    assert any("CallInfo.from_call was replaced" in t for t in patched.tampered), patched
    assert "tampered with the test runner" in patched.reason
    rebound = play_and_grade(backend, options, instance, "swe.xfail-asserts")
    assert any("AssertionError was rebound" in t for t in rebound.tampered), rebound
    called = play_and_grade(backend, options, instance, "swe.xfail-from-source")
    assert any("xfailed where the test does not: pytest.xfail() was called by" in t
               for t in called.tampered), called
    equal = play_and_grade(backend, options, instance, "swe.always-equal-results")
    assert any("_AgpEqual whose __eq__" in t and "equals values no result equals" in t
               for t in equal.tampered), equal
    exited = play_and_grade(backend, options, instance, "swe.exit-at-import")
    assert all(reason.startswith("pytest wrote no report")
               for reason in exited.missing.values()), exited.missing


# --- validate, with the probes, on five tasks per env id ------------------------------------
# Every probe is played above on both backends; here each env id plays one probe of each
# attack class on five tasks (a different one per env id), as `agentgym validate` does.

_BY_CLASS: dict[str, list[str]] = {}
for _probe in probes():
    _BY_CLASS.setdefault(_probe.attack, []).append(_probe.id)


def one_per_class(turn: int) -> list[str]:
    """One probe of each attack class, the ``turn``-th of its class (cycling)."""
    return sorted(ids[turn % len(ids)] for ids in _BY_CLASS.values())


def _played_on(report, chosen: list[str], tasks: int) -> None:
    counts = report.probe_counts()
    assert set(counts) == set(chosen), counts
    assert all(row["played"] == tasks and row["paid"] == 0 for row in counts.values()), counts


@pytest.fixture(scope="module")
def standin_five(scales_standin, tmp_path_factory) -> Path:
    """Five swe-synth tasks of a three-function stand-in project (synthesized here, with
    the local sandbox)."""
    from agentgym.plugins.swe.synth import synthesize

    rows = synthesize(*scales_standin, 5, progress=False)
    assert len(rows) == 5
    path = tmp_path_factory.mktemp("swe-synth-five") / "tasks.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.slow
def test_validate_holds_with_the_probes_on_five_swe_synth_tasks(standin_five):
    from agentgym.testing import assert_valid

    chosen = one_per_class(0)
    report = assert_valid("swe-synth", n=5, backend="local", probes=chosen,
                          tasks=str(standin_five))
    _played_on(report, chosen, 5)


@pytest.fixture(scope="module")
def calc_image(calc) -> tuple[str, Path]:
    """The calc repository at /testbed of an image built on the default one, and a task
    file of its five instances (SWE-bench rows)."""
    missing = _docker_missing()
    if missing:
        pytest.skip(missing)
    import docker

    from agentgym.core.registry import sandbox_backend
    from agentgym.sandboxes.image import DEFAULT_IMAGE, ensure_image

    ensure_image(DEFAULT_IMAGE, docker.from_env())
    repo, rows = calc
    image = sandbox_backend("docker").build_image(files={"/testbed": repo},
                                                  repository="agentgym-test/swe-probes")
    tasks = repo.parent / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return image, tasks


@pytest.mark.slow
@pytest.mark.parametrize(("env_id", "turn"), [("swe-verified", 1), ("swe-lite", 2),
                                              ("swe-gym", 3)])
def test_validate_holds_with_the_probes_on_three_swe_bench_tasks(calc_image, env_id, turn):
    """Each SWE-bench env id plays another probe of each class, on 3 of the 5 instances."""
    from agentgym.testing import assert_valid

    image, tasks = calc_image
    chosen = one_per_class(turn)
    report = assert_valid(env_id, n=3, backend="docker", probes=chosen, tasks=str(tasks),
                          image=image)
    _played_on(report, chosen, 3)
