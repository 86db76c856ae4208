"""Terminal tasks written back as Harbor task folders: what
:meth:`TerminalEnv.harbor_task <agentgym.plugins.terminal.env.TerminalEnv.harbor_task>`
returns (``agentgym export-tasks terminal --format harbor DIR``; the contract is
:mod:`agentgym.core.harbor`).

**The image** (``environment/``):

* A Dockerfile the local backend rebuilds (:func:`~agentgym.plugins.terminal.formats.
  local_plan`: ``FROM agentgym/sandbox:default``, ``WORKDIR``, ``COPY``, ``ENV``, ``RUN``)
  is written as :func:`workspace_dockerfile` writes it: one that ``docker build`` and the
  local backend read as the same workspace. Built as written, the original would run its
  ``RUN`` steps as the image's unprivileged user over a ``WORKDIR`` and files root owns,
  and fail. Only the files its ``COPY`` steps name go into ``environment/``. A task
  without a Dockerfile (an empty ``/app``) gets one that makes its workspace.
* Any other Dockerfile is written as it is, with its build context, as the docker backend
  builds it; a task with a prebuilt image keeps ``[environment] docker_image``.
* A Terminal-Bench task's context is its whole folder: everything but its tests, its
  solutions and its config goes into ``environment/``, and a task whose Dockerfile copies
  those into the image is refused (Harbor copies the tests in only to grade, where the
  agent cannot have read or changed them). A task whose environment is only a
  ``docker-compose.yaml`` is refused (agentgym does not run one, so nothing could check
  the folder).

**The grader** (``tests/``): a Harbor task's ``tests/`` as it is. A Terminal-Bench task's
``tests/`` and ``run-tests.sh``, with a ``test.sh`` (:func:`terminal_bench_test_script`)
that runs them as agentgym does (``TEST_DIR=/tests``, in the workspace), stops every
process they started, and writes the share of tests pytest's ``-rA`` summary lists as
passed (``fraction``), or 1 only when all passed (``binary``), to
``/logs/verifier/reward.txt``.

**The rest:** the instruction, the reference solution (``solution/solve.sh``; a
``solution.yaml``'s commands as a script), the known-wrong ones (``solution/wrong*.sh``),
the metadata, the time limits, ``reward``, ``[verifier] env``, ``cpus`` and
``memory_mb``, ``allow_internet = false`` (the sandboxes have no network) unless the task
says otherwise, and every other key of a Harbor task's ``task.toml``, kept as it is.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path, PurePosixPath
from typing import Any

from agentgym.core.harbor import FileSource, HarborTask, NotExportableError
from agentgym.core.registry import sandbox_backend
from agentgym.core.sandbox import SandboxImage
from agentgym.plugins.terminal.formats import (
    TESTS_DIR,
    TerminalTask,
    copy_arguments,
    dockerfile_instructions,
)
from agentgym.plugins.terminal.sources import PROCESSES_BEFORE, STOP_LEFTOVERS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: The empty folder of ``environment/`` copied to make the workspace (and folders in it)
#: the image user's where no ``COPY`` makes them.
EMPTY_FOLDER = "empty"
#: What a Terminal-Bench task folder holds besides its image's build context.
TERMINAL_BENCH_OWN = ("task.yaml", "run-tests.sh", "tests", "solution.sh", "solution.yaml",
                      "docker-compose.yaml", "docker-compose.yml")
#: ``task.toml`` keys the terminal plugin reads into a task (the rest is kept as it is).
_READ_KEYS = {"verifier": ("timeout_sec", "reward", "env"), "agent": ("timeout_sec",),
              "environment": ("docker_image", "cpus", "memory", "memory_mb",
                              "allow_internet")}
# A COPY path the shell form of COPY takes as it is (else the JSON form is written).
_PLAIN_PATH = re.compile(r"[^\s\"'\\\[\]$]+")


def harbor_task(task: TerminalTask, image: SandboxImage | None = None) -> HarborTask:
    """``task`` as a Harbor task folder (see the module docstring). ``image``: the image
    a local-backend Dockerfile builds on, with its user (default: the docker backend's
    default image). Raises :class:`NotExportableError` saying why a task cannot be."""
    image = image or sandbox_backend("docker").default_image
    if image is None:
        raise NotExportableError("the docker backend names no default image to build on")
    if task.format == "harbor":
        tests: dict[str, FileSource] = {p.name: p for p in _entries(task.folder / "tests")}
        config = tomllib.loads((task.folder / "task.toml").read_text())
        extra = _unread(config)
        allow_internet = config.get("environment", {}).get("allow_internet", False)
    else:
        tests = _terminal_bench_tests(task)
        extra, allow_internet = {}, False
    return HarborTask(
        id=task.id, instruction=task.instruction, tests=tests,
        environment=_environment(task, image), solution=task.solution,
        wrong_solutions=task.wrong_solutions, metadata=dict(task.metadata),
        agent_timeout_s=task.agent_timeout_s, test_timeout_s=task.test_timeout_s,
        reward=task.reward, verifier_env=dict(task.verifier_env), docker_image=task.image,
        cpus=task.cpus, memory_mb=task.memory_mb, allow_internet=bool(allow_internet),
        extra=extra)


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.iterdir()) if folder.is_dir() else []


def _unread(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` without what the terminal plugin read from it (``[metadata]`` and
    :data:`_READ_KEYS`)."""
    rest = {key: value for key, value in config.items() if key != "metadata"}
    for table, keys in _READ_KEYS.items():
        if isinstance(rest.get(table), dict):
            rest[table] = {k: v for k, v in rest[table].items() if k not in keys}
    return rest


# ---- environment/ ---------------------------------------------------------------------------


def _environment(task: TerminalTask, image: SandboxImage) -> dict[str, FileSource]:
    if task.image is None and task.plan is not None:
        return workspace_dockerfile(task, image)
    if task.dockerfile is None and task.image is None:
        raise NotExportableError(f"task {task.id!r}: {task.local_reason}")
    if task.context is None:
        return {}  # a prebuilt image and nothing to build
    own = _grader_files(task)
    if task.dockerfile is not None:
        for keyword, args in dockerfile_instructions(task.dockerfile.read_text()):
            if keyword in ("COPY", "ADD"):
                _check_copy(task, keyword, args, own)
    return {p.name: p for p in _entries(task.context) if p not in own}


def _grader_files(task: TerminalTask) -> set[Path]:
    """The files of a Terminal-Bench task folder (its build context) that are not the
    image's: its tests, solutions and config."""
    if task.format != "terminal-bench":
        return set()
    return {task.folder / name for name in TERMINAL_BENCH_OWN} | set(
        task.folder.glob("wrong*.sh"))


def _check_copy(task: TerminalTask, keyword: str, args: str, own: set[Path]) -> None:
    flags, words = copy_arguments(args)
    if any(flag.startswith("--from") for flag in flags) or task.context is None:
        return
    context = task.context.resolve()
    for source in words[:-1]:
        hosts = (list(context.glob(source)) if any(c in source for c in "*?[")
                 else [context / source])
        for host in hosts:
            _check_leak(task, host, own, f"its Dockerfile's {keyword} {source}")


def _check_leak(task: TerminalTask, host: Path, own: set[Path], what: str) -> None:
    """Refuse ``task`` when copying ``host`` into the image copies one of ``own``."""
    host = host.resolve()
    for path in own:
        path = path.resolve()
        if path.exists() and (path.is_relative_to(host) or host.is_relative_to(path)):
            raise NotExportableError(
                f"task {task.id!r}: {what} puts {path.name} (its tests, solution or config)"
                " into the image, where the agent can read and change it; a Harbor task keeps"
                " those out of the image (tests/ is copied in only to grade)")


def workspace_dockerfile(task: TerminalTask, image: SandboxImage) -> dict[str, FileSource]:
    """``environment/`` for a task the local backend rebuilds: a Dockerfile that ``docker
    build`` and :func:`~agentgym.plugins.terminal.formats.local_plan` read as the same
    workspace, and the files it copies.

    Every ``COPY`` comes first and gives its files to the image's user (``--chown``), then
    ``WORKDIR``, every ``ENV`` (quoted, so that docker expands nothing the local backend
    would not), then each ``RUN`` step, run by bash in its folder: the order and the shell
    the local backend builds with. ``docker build`` gives the user what a ``COPY`` copies
    and its destination, but not the folders above it that it makes: so the workspace, and
    any folder in it a ``COPY`` writes below without making, are made first by copying an
    empty folder there (:data:`EMPTY_FOLDER`, in ``environment/``)."""
    plan = task.plan
    assert plan is not None
    workdir, user = PurePosixPath(plan.workdir), image.user
    files: dict[str, FileSource] = {}
    copies: list[tuple[str, PurePosixPath]] = []
    context = task.context.resolve() if task.context is not None else None
    own = _grader_files(task)
    sources = [host.relative_to(context).as_posix() for host, _ in plan.copies] if (
        context is not None) else []
    empty = EMPTY_FOLDER
    while any(source.split("/")[0] == empty for source in sources):
        empty += "_"
    made: set[PurePosixPath] = set()  # folders of the workspace that are the user's

    def make(folder: PurePosixPath) -> None:
        """Make ``folder`` and the folders above it in the workspace the user's, where no
        ``COPY`` has."""
        for step in [*reversed(folder.parents), folder]:  # ".", "a", "a/b"
            if step not in made:
                files[empty] = {}
                copies.append((empty, workdir / step))
                made.add(step)

    for (host, rel), source in zip(plan.copies, sources, strict=True):
        _check_leak(task, host, own, f"its Dockerfile's COPY of {host.name}")
        files[source] = host
        target = PurePosixPath(rel)
        if target != PurePosixPath("."):
            make(target.parent)
        copies.append((source, workdir / target))
        if host.is_dir():
            made.add(target)
            made.update(target / sub.relative_to(host).as_posix() for sub in host.rglob("*")
                        if sub.is_dir() and not sub.is_symlink())
    make(PurePosixPath("."))  # no COPY made the workspace itself
    lines = [f"FROM {image.name}",
             "# Written by agentgym: docker build and agentgym's local backend make the same",
             "# workspace from it (the files first, owned by the image's user, then each RUN",
             "# step, run by bash as that user in its folder)."]
    for source, target in copies:
        if _PLAIN_PATH.fullmatch(source) and _PLAIN_PATH.fullmatch(str(target)):
            lines.append(f"COPY --chown={user} {source} {target}")
        else:
            lines.append(f"COPY --chown={user} {json.dumps([source, str(target)])}")
    lines.append(f"WORKDIR {workdir}")
    lines += [f"ENV {name}={shlex.quote(value)}" for name, value in plan.env]
    for cwd, command in plan.runs:
        script = (command if PurePosixPath(cwd) == workdir
                  else f"cd {shlex.quote(cwd)} && {{\n{command}\n}}")
        lines.append(f"RUN {json.dumps(['bash', '-c', script])}")
    files["Dockerfile"] = "\n".join(lines) + "\n"
    return files


# ---- tests/ of a Terminal-Bench task --------------------------------------------------------


def _terminal_bench_tests(task: TerminalTask) -> dict[str, FileSource]:
    tests: dict[str, FileSource] = {}
    for name, host in task.tests:
        if name:
            tests[name] = host
        else:
            tests.update({p.name: p for p in _entries(host)})
    if "test.sh" in tests:
        raise NotExportableError(
            f"task {task.id!r}: its tests/ already has a test.sh, the name of Harbor's"
            " grader, which agentgym writes to run run-tests.sh; rename that file")
    tests["test.sh"] = terminal_bench_test_script(task)
    return tests


def terminal_bench_test_script(task: TerminalTask) -> str:
    """The ``tests/test.sh`` of a Terminal-Bench task (see the module docstring)."""
    score = "(p == n ? 1 : 0)" if task.reward == "binary" else "p / n"
    return f"""#!/usr/bin/env bash
# Written by agentgym from the Terminal-Bench task {task.id}: runs its tests as agentgym
# grades them (run-tests.sh, TEST_DIR={TESTS_DIR}, in the workspace), stops every process
# they started, and writes the score of pytest's -rA summary ({task.reward}: {score}, over
# p of the n tests listed passed, XFAIL counting as passed; 0 when none is listed) to
# /logs/verifier/reward.txt.
""" + PROCESSES_BEFORE.format() + f"""\
out=$(mktemp -d) || exit 1
cd {shlex.quote(task.workdir)} 2>/dev/null || true
TEST_DIR={TESTS_DIR} bash {TESTS_DIR}/run-tests.sh > "$out/output" 2>&1
cat "$out/output"
""" + STOP_LEFTOVERS.format() + f"""\
reward=$(awk '/^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)[ \\t]+[^ \\t]/ {{ r[$2] = $1 }}
  END {{ n = 0; p = 0
        for (t in r) {{ n++; if (r[t] == "PASSED" || r[t] == "XFAIL") p++ }}
        if (n == 0) print 0; else printf "%.17g\\n", {score} }}' "$out/output")
rm -rf "$out"
chmod -R u+rwX /logs 2>/dev/null; rm -rf /logs/verifier; mkdir -p /logs/verifier
echo "$reward" > /logs/verifier/reward.txt
echo "reward: $reward"
"""
