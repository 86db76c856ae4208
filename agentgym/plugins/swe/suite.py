"""Running a project's test suite with some files replaced, and reading what it reports.

:func:`make_runner` gives a :class:`SuiteRunner`: :class:`SandboxRunner` runs each suite in
a fresh local sandbox (the clean repository as the workspace, the project's env mounted
read-only, no network, limits), :class:`SubprocessRunner` in a subprocess on a scratch copy
where no sandbox can run. Both set ``PYTHONHASHSEED=0`` (set orders in messages are the
same everywhere) and return a :class:`SuiteRun` whose output shows the workspace as
:data:`WORKSPACE` whatever the runner.

Reading the output: :func:`parse_pytest_report` (statuses by test id, through the grader's
own parser), :func:`failure_excerpts` and :func:`errors_by_test` (the ``E`` lines of each
failure, normalised by :func:`normalise_output` so that quoting them is the same on every
machine), and :func:`failure_types` (each failing test's error type: an assertion or an
unmet ``pytest.raises`` is a wrong value, :data:`ASSERTION_STYLE`; anything else, such as
``TypeError`` or ``NameError``, a crash: :func:`crashes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agentgym.core.errors import InvalidArgumentError
from agentgym.plugins.swe.repo import ENV_MOUNT, Project, RepoError

#: Set before every suite run: ``set`` orders (in messages) the same on every machine.
HASH_SEED = "PYTHONHASHSEED=0"
#: Statuses of a test that counts as passing.
PASSING = {"PASSED", "XFAIL"}
#: The workspace root as test output in a sandbox shows it; runners elsewhere write their
#: own root as this before the output is normalised (:func:`normalise_output`).
WORKSPACE = "/workspace"
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")
_NOISE = re.compile(r"(?i)\buse -v+ to (show|get)\b")
_WORKSPACE_PATH = re.compile(rf"(?<![\w./-]){re.escape(WORKSPACE)}(/|(?![\w.-]))")
_PYTEST_TMP = re.compile(r"/tmp/pytest-of-[^/\s'\"]+/pytest-\d+")
_TEMPFILE_NAME = re.compile(r"(?<=/)tmp[a-z0-9_]{8}(?![\w])")
_SUMMARY_FAILURE = re.compile(r"^(?:FAILED|ERROR) (\S+?)(?: - (.*))?$")
_ERROR_NAME = re.compile(r"^((?:[A-Za-z_]\w*\.)*([A-Z]\w*))(?::|$)")
#: Error types of a test that saw a wrong value (an assertion, ``pytest.raises`` unmet):
#: every other error is a crash.
ASSERTION_STYLE = frozenset({"AssertionError", "Failed"})
UNKNOWN_ERROR = "unknown"
_DURATION = re.compile(r"\b\d+\.\d{2,}\s?(?:s|ms|us|µs|ns|sec|secs|seconds)\b")



# ---- reading pytest's report --------------------------------------------------------------


def parse_pytest_report(output: str) -> dict[str, str]:
    """Test node id -> status, read by the grader's own parser (so a task validates what
    grading will see), keeping the ids a task can name: test ids (``path::name``) without
    whitespace, which no reader can split reliably, and not skipped."""
    from agentgym.plugins.swe.grading import parse_log_pytest

    return {node: status for node, status in parse_log_pytest(output).items()
            if status != "SKIPPED" and "::" in node and not any(c.isspace() for c in node)}


def normalise_output(text: str) -> str:
    """``text`` (test output) without what differs between runs, machines and sandboxes:
    object addresses (``0x...``), the workspace root (:data:`WORKSPACE`: paths inside it
    become relative), pytest's and :mod:`tempfile`'s temporary folders
    (``/tmp/pytest/...``, ``/tmp/tmpXXXXXXXX``) and measured durations (``0.12s`` ->
    ``N.NNs``)."""
    text = _ADDRESS.sub("0x...", text)
    text = _WORKSPACE_PATH.sub(lambda m: "" if m.group(1) == "/" else ".", text)
    text = _PYTEST_TMP.sub("/tmp/pytest", text)
    text = _TEMPFILE_NAME.sub("tmpXXXXXXXX", text)
    return _DURATION.sub(lambda m: "N.NN" + m.group(0).lstrip("0123456789."), text)


def failure_excerpts(output: str) -> dict[str, list[str]]:
    """The ``E`` lines (assertion and error messages) of each failure section of pytest's
    output, keyed by the section's title (``test_name`` or ``Class.test_name``), normalised
    (:func:`normalise_output`): a statement quoting them is the same on every machine."""
    sections: dict[str, list[str]] = {}
    title: str | None = None
    for line in output.splitlines():
        header = re.match(r"^_{3,} (.+?) _{3,}$", line)
        if header:
            title = header.group(1)
            title = re.sub(r"^ERROR at (setup|teardown) of ", "", title)
            sections.setdefault(title, [])
        elif re.match(r"^={5,}", line):
            title = None
        elif title is not None and line.startswith("E ") and not _NOISE.search(line):
            sections[title].append(normalise_output(line[1:].strip()))
    return sections


def errors_by_test(failing: list[str], excerpts: dict[str, list[str]]) -> dict[str, list[str]]:
    """The error lines of each test of ``failing`` whose failure section ``excerpts``
    (:func:`failure_excerpts`) holds and is not empty, keyed by test id."""
    found: dict[str, list[str]] = {}
    for test in failing:
        name = test.split("::", 1)[1].replace("::", ".")
        lines = next((lines for title, lines in excerpts.items()
                      if name == title or name.endswith("." + title)), None)
        if lines:
            found[test] = lines
    return found


def error_type(message: str) -> str:
    """The exception type a failure message names (``TypeError: ...`` -> ``TypeError``;
    pytest's ``assert ...`` -> ``AssertionError``; ``Failed: DID NOT RAISE`` -> ``Failed``),
    or :data:`UNKNOWN_ERROR`."""
    message = message.strip()
    if message == "assert" or message.startswith("assert "):
        return "AssertionError"
    match = _ERROR_NAME.match(message)
    return match.group(2) if match else UNKNOWN_ERROR


def failure_types(output: str, failing: list[str]) -> dict[str, str]:
    """The error type (:func:`error_type`) of each test of ``failing``, read from the
    ``-rA`` summary line (``FAILED id - TypeError: ...``), else from its failure section."""
    found: dict[str, str] = {}
    for line in output.splitlines():
        match = _SUMMARY_FAILURE.match(line.strip())
        if match and match.group(2):
            found.setdefault(match.group(1), error_type(match.group(2)))
    errors = errors_by_test(failing, failure_excerpts(output))
    for test in failing:
        if found.get(test, UNKNOWN_ERROR) == UNKNOWN_ERROR:
            found[test] = next((kind for kind in map(error_type, errors.get(test, []))
                                if kind != UNKNOWN_ERROR), UNKNOWN_ERROR)
    return {test: found[test] for test in failing}


def crashes(types: dict[str, str]) -> bool:
    """Whether any failure of ``types`` (test -> error type) is a crash (an error other
    than :data:`ASSERTION_STYLE`: the code raised instead of computing a wrong value)."""
    return any(kind not in ASSERTION_STYLE for kind in types.values())


# ---- running the tests --------------------------------------------------------------------


@dataclass
class SuiteRun:
    """The result of one run of the suite."""

    statuses: dict[str, str]
    output: str
    timed_out: bool
    seconds: float


class SuiteRunner(Protocol):
    """Runs the suite of a project with some files replaced."""

    async def run(self, files: dict[str, str], timeout: float) -> SuiteRun: ...

    async def close(self) -> None: ...


class SandboxRunner:
    """Each run in a fresh local sandbox: the clean repository as the workspace, the env
    mounted read-only, no network, memory and process limits."""

    def __init__(self, project: Project, backend: str = "local"):
        self.project, self.backend = project, backend

    async def run(self, files: dict[str, str], timeout: float) -> SuiteRun:
        from agentgym.core.registry import open_sandbox
        from agentgym.core.sandbox import SandboxLimits

        limits = SandboxLimits(timeout_s=timeout, output_bytes=16 * 1024 * 1024,
                               memory_mb=2048, disk_mb=1024, pids=256)
        started = time.monotonic()
        async with await open_sandbox(self.backend, template=str(self.project.repo),
                                      mounts=self.project.mounts, limits=limits) as box:
            for path, content in files.items():
                await box.write_file(path, content)
            result = await box.exec(f"{HASH_SEED} {self.project.test_cmd()}", timeout=timeout)
            output = _as_in_sandbox(result.output, {box.workdir: WORKSPACE})
        return SuiteRun(parse_pytest_report(output), output, result.timed_out,
                        time.monotonic() - started)

    async def close(self) -> None:
        pass


class SubprocessRunner:
    """Each run in a subprocess on a scratch copy of the repository with the env's python,
    for hosts where no sandbox can run: no isolation beyond the copy and a timeout."""

    def __init__(self, project: Project):
        self.project = project
        self.scratch = Path(tempfile.mkdtemp(prefix="agentgym-synth-"))
        shutil.copytree(project.repo, self.scratch / "repo", symlinks=True)
        self._lock = asyncio.Lock()  # one scratch copy: one run at a time

    async def run(self, files: dict[str, str], timeout: float) -> SuiteRun:
        root = self.scratch / "repo"
        async with self._lock:
            originals = {p: (root / p).read_bytes() for p in files}
            for path, content in files.items():
                (root / path).write_text(content)
            started = time.monotonic()
            home = self.scratch / "home"
            home.mkdir(exist_ok=True)
            env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
                   "LANG": "C.UTF-8", "PWD": str(root), "PYTHONHASHSEED": "0"}
            process = await asyncio.create_subprocess_exec(
                "bash", "-c", self.project.test_cmd(python=str(self.project.env / "bin/python")),
                cwd=root, env=env, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL,
                start_new_session=True)
            timed_out = False
            try:
                output, _ = await asyncio.wait_for(process.communicate(), timeout)
            except asyncio.TimeoutError:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                output, _ = await process.communicate()
            finally:
                for path, data in originals.items():
                    (root / path).write_bytes(data)
                shutil.rmtree(home, ignore_errors=True)
        text = _as_in_sandbox(output.decode(errors="replace"), {
            str(root): WORKSPACE, str(root.resolve()): WORKSPACE, str(home): "/tmp",
            str(self.project.env): ENV_MOUNT, str(self.project.env.resolve()): ENV_MOUNT})
        return SuiteRun(parse_pytest_report(text), text, timed_out, time.monotonic() - started)

    async def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


def _as_in_sandbox(output: str, paths: dict[str, str]) -> str:
    """``output`` with each host path of ``paths`` written as a sandbox would show it
    (longest first, so that a folder inside another is replaced whole)."""
    for path in sorted(paths, key=len, reverse=True):
        if path != paths[path]:
            output = output.replace(path, paths[path])
    return output


def local_sandbox_missing() -> str | None:
    """Why the local sandbox cannot run here, or None."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed"
    if os.geteuid() != 0:
        return "the local sandbox needs root"
    return None


def make_runner(project: Project, runner: str = "auto") -> SuiteRunner:
    """``sandbox`` (the local sandbox), ``subprocess``, or ``auto`` (the sandbox when it can
    run here)."""
    if runner == "auto":
        runner = "subprocess" if local_sandbox_missing() else "sandbox"
    if runner == "sandbox":
        missing = local_sandbox_missing()
        if missing:
            raise RepoError(f"runner='sandbox' needs the local sandbox, but {missing}; use"
                            " runner='subprocess' (no isolation) or runner='auto'")
        return SandboxRunner(project)
    if runner == "subprocess":
        return SubprocessRunner(project)
    raise InvalidArgumentError(f"runner must be 'auto', 'sandbox' or 'subprocess', got {runner!r}")


__all__ = ["ASSERTION_STYLE", "HASH_SEED", "PASSING", "UNKNOWN_ERROR", "WORKSPACE",
           "SandboxRunner", "SubprocessRunner", "SuiteRun", "SuiteRunner", "crashes",
           "error_type", "errors_by_test", "failure_excerpts", "failure_types",
           "local_sandbox_missing", "make_runner", "normalise_output", "parse_pytest_report"]
