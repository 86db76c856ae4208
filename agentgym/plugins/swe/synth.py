"""swe-synth: repair tasks made by injecting bugs into a PyPI project, validated by its tests.

:func:`synthesize` turns ``(package, version, n, seed)`` into ``n`` rows of the SWE-bench
instance schema, the same rows for the same arguments on every machine:

1. :func:`agentgym.plugins.swe.repo.prepare` gives the clean repository and its test env;
   the whole suite runs once on it, and the tests that pass there are the candidates for
   ``FAIL_TO_PASS`` and ``PASS_TO_PASS``.
2. libcst lists every mutation site inside the project's functions (tests excluded), one
   of :data:`MUTATION_KINDS`: flip or shift a comparison, change an operator, change a
   constant, invert a condition, drop a statement, swap two arguments. The sites are
   shuffled by a generator seeded from ``(package, version, seed)`` and taken one kind after
   another, so that the tasks vary.
3. Each mutant runs the suite (in a fresh local sandbox with the env mounted read-only, or
   in a subprocess where no sandbox can run; ``PYTHONHASHSEED=0``, so that set orders in
   messages are the same everywhere). It is kept when some tests that passed now fail
   (``FAIL_TO_PASS``, at most ``max_fail_to_pass``) and every other passing test still
   passes (``PASS_TO_PASS``); a mutant that breaks an import or collection, times out, or
   that no test catches is rejected. One task per function at most.
4. The gold ``patch`` is the reverse diff (mutant -> clean, ``git diff`` format, for
   ``git apply``); ``base_commit`` is the root commit of the mutated tree made by
   :func:`agentgym.plugins.swe.repo.build_task_repo`, which rebuilds it from the task file
   alone. ``test_patch`` is empty: the project's own tests catch the bug. The problem
   statement names the failing tests and excerpts their error messages, never the patch
   or the code's location.
5. The real grader has the last word (:mod:`agentgym.plugins.swe.validation`): the row is
   graded as an episode of ``swe-synth`` on ``backend`` grades it (the workspace rebuilt
   from the row, which also checks ``base_commit``; the listed tests run in the grader's
   order, not the suite's). Its gold patch must score 1.0 and no change 0.0, else the
   candidate is rejected (``gold patch < 1.0``: a suite whose tests depend on one another
   often gives this; ``no change > 0.0``). The verdict goes into the row's
   ``validation`` field; :class:`SynthesisReport` counts the rejections and the time the
   grader took.

Rows are reproducible: the same ``(package, version, seed, options)`` gives byte-identical
rows on every machine, whatever the cache folder, working directory or runner. Test output
quoted in a statement is normalised (:func:`normalise_output`): no workspace, temporary or
cache paths, object addresses or durations.

Results are cached in ``<cache>/tasks``, keyed by the arguments, :data:`FORMAT` and the
grader's version, and grown on demand: asking for fewer tasks than are cached is
immediate, asking for more resumes where the last run stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agentgym.core.cache import file_lock
from agentgym.plugins.swe import repo as repos
from agentgym.plugins.swe import validation
from agentgym.plugins.swe.repo import ENV_MOUNT, Project, RepoError

#: Bump when a change here changes which tasks come out (it keys the cache).
FORMAT = 3
MUTATION_KINDS = ("comparison", "operator", "constant", "condition", "statement", "arguments")
#: Set before every suite run: ``set`` orders (in messages) the same on every machine.
HASH_SEED = "PYTHONHASHSEED=0"
#: Statuses of a test that counts as passing.
PASSING = {"PASSED", "XFAIL"}
#: ``created_at`` of every synthesized task: the fixed date of its commits.
CREATED_AT = "2000-01-01T00:00:00Z"
#: The workspace root as test output in a sandbox shows it; runners elsewhere write their
#: own root as this before the output is normalised (:func:`normalise_output`).
WORKSPACE = "/workspace"
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")
_NOISE = re.compile(r"(?i)\buse -v+ to (show|get)\b")
_WORKSPACE_PATH = re.compile(rf"(?<![\w./-]){re.escape(WORKSPACE)}(/|(?![\w.-]))")
_PYTEST_TMP = re.compile(r"/tmp/pytest-of-[^/\s'\"]+/pytest-\d+")
_TEMPFILE_NAME = re.compile(r"(?<=/)tmp[a-z0-9_]{8}(?![\w])")
_DURATION = re.compile(r"\b\d+\.\d{2,}\s?(?:s|ms|us|µs|ns|sec|secs|seconds)\b")


# ---- mutations ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Site:
    """One mutation a file admits: the ``index``-th offered while walking its syntax tree."""

    path: str
    index: int
    kind: str
    function: str  # qualified name of the enclosing function
    change: str  # e.g. "< -> >="


def _code(node: Any) -> str:
    import libcst as cst

    return cst.Module([]).code_for_node(node)


def _mutator_class() -> type:
    """The libcst transformer, built on first use so that importing this module stays fast."""
    import libcst as cst

    negated = {cst.LessThan: cst.GreaterThanEqual, cst.GreaterThan: cst.LessThanEqual,
               cst.LessThanEqual: cst.GreaterThan, cst.GreaterThanEqual: cst.LessThan,
               cst.Equal: cst.NotEqual, cst.NotEqual: cst.Equal, cst.Is: cst.IsNot,
               cst.IsNot: cst.Is, cst.In: cst.NotIn, cst.NotIn: cst.In}
    shifted = {cst.LessThan: cst.LessThanEqual, cst.LessThanEqual: cst.LessThan,
               cst.GreaterThan: cst.GreaterThanEqual, cst.GreaterThanEqual: cst.GreaterThan}
    binary = {cst.Add: cst.Subtract, cst.Subtract: cst.Add, cst.Multiply: cst.Divide,
              cst.Divide: cst.Multiply, cst.FloorDivide: cst.Divide, cst.Modulo: cst.FloorDivide,
              cst.Power: cst.Multiply, cst.LeftShift: cst.RightShift,
              cst.RightShift: cst.LeftShift, cst.BitOr: cst.BitAnd, cst.BitAnd: cst.BitOr,
              cst.BitXor: cst.BitOr}
    augmented = {cst.AddAssign: cst.SubtractAssign, cst.SubtractAssign: cst.AddAssign,
                 cst.BitOrAssign: cst.BitAndAssign, cst.BitAndAssign: cst.BitOrAssign}
    boolean = {cst.And: cst.Or, cst.Or: cst.And}
    strings = (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)

    def same_spacing(old: Any, new_class: type) -> Any:
        kwargs = {k: getattr(old, k) for k in ("whitespace_before", "whitespace_after")
                  if hasattr(old, k)}
        return new_class(**kwargs)

    def negate(expr: Any) -> Any:
        if (isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not)
                and not expr.lpar):
            return expr.expression
        # Parenthesized where `not` would bind differently or read ambiguously (`not a is b`).
        if isinstance(expr, (cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda,
                             cst.NamedExpr)) and not expr.lpar:
            expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.UnaryOperation(operator=cst.Not(), expression=expr)

    def is_docstring(statement: Any) -> bool:
        return (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
                and isinstance(statement.body[0], cst.Expr)
                and isinstance(statement.body[0].value, strings))

    class Mutator(cst.CSTTransformer):
        """Lists the mutation sites of a module (``target=None``), or applies one."""

        def __init__(self, path: str, target: int | None = None):
            super().__init__()
            self.path, self.target = path, target
            self.sites: list[Site] = []
            self.scope: list[tuple[str, bool]] = []  # (name, is a function)
            self.annotations = 0

        def offer(self, kind: str, node: Any, change: str) -> bool:
            """Record a site; True when it is the one to apply."""
            if self.annotations or not any(is_function for _, is_function in self.scope):
                return False
            index = len(self.sites)
            function = ".".join(name for name, _ in self.scope)
            self.sites.append(Site(self.path, index, kind, function, change))
            return index == self.target

        # scope
        def visit_ClassDef(self, node: Any) -> None:
            self.scope.append((node.name.value, False))

        def leave_ClassDef(self, original: Any, updated: Any) -> Any:
            self.scope.pop()
            return updated

        def visit_FunctionDef(self, node: Any) -> None:
            self.scope.append((node.name.value, True))

        def leave_FunctionDef(self, original: Any, updated: Any) -> Any:
            self.scope.pop()
            return updated

        def visit_Annotation(self, node: Any) -> None:
            self.annotations += 1

        def leave_Annotation(self, original: Any, updated: Any) -> Any:
            self.annotations -= 1
            return updated

        # comparison
        def leave_Comparison(self, original: Any, updated: Any) -> Any:
            for i, target in enumerate(updated.comparisons):
                for table in (negated, shifted):
                    new_class = table.get(type(target.operator))
                    if new_class is None:
                        continue
                    new = same_spacing(target.operator, new_class)
                    change = f"{_code(target.operator).strip()} -> {_code(new).strip()}"
                    if self.offer("comparison", original, change):
                        comparisons = list(updated.comparisons)
                        comparisons[i] = target.with_changes(operator=new)
                        return updated.with_changes(comparisons=comparisons)
            return updated

        # operator
        def leave_BinaryOperation(self, original: Any, updated: Any) -> Any:
            new_class = binary.get(type(updated.operator))
            on_strings = isinstance(updated.left, strings) or isinstance(updated.right, strings)
            if new_class is None or (on_strings  # concatenation, %-formatting
                                     and isinstance(updated.operator, (cst.Add, cst.Modulo))):
                return updated
            new = same_spacing(updated.operator, new_class)
            if self.offer("operator", original,
                          f"{_code(updated.operator).strip()} -> {_code(new).strip()}"):
                return updated.with_changes(operator=new)
            return updated

        def leave_BooleanOperation(self, original: Any, updated: Any) -> Any:
            new = same_spacing(updated.operator, boolean[type(updated.operator)])
            if self.offer("operator", original,
                          f"{_code(updated.operator).strip()} -> {_code(new).strip()}"):
                return updated.with_changes(operator=new)
            return updated

        def leave_AugAssign(self, original: Any, updated: Any) -> Any:
            new_class = augmented.get(type(updated.operator))
            if new_class is None:
                return updated
            new = same_spacing(updated.operator, new_class)
            if self.offer("operator", original,
                          f"{_code(updated.operator).strip()} -> {_code(new).strip()}"):
                return updated.with_changes(operator=new)
            return updated

        # constant
        def leave_Integer(self, original: Any, updated: Any) -> Any:
            try:
                value = int(updated.value, 0)
            except ValueError:
                return updated
            new = 0 if value == 1 else value + 1
            if self.offer("constant", original, f"{updated.value} -> {new}"):
                return updated.with_changes(value=str(new))
            return updated

        def leave_Name(self, original: Any, updated: Any) -> Any:
            if updated.value not in ("True", "False"):
                return updated
            new = "False" if updated.value == "True" else "True"
            if self.offer("constant", original, f"{updated.value} -> {new}"):
                return updated.with_changes(value=new)
            return updated

        # condition
        def leave_If(self, original: Any, updated: Any) -> Any:
            if self.offer("condition", original.test, "if c -> if not c"):
                return updated.with_changes(test=negate(updated.test))
            return updated

        def leave_IfExp(self, original: Any, updated: Any) -> Any:
            if self.offer("condition", original.test, "x if c else y -> x if not c else y"):
                return updated.with_changes(test=negate(updated.test))
            return updated

        # statement
        def leave_IndentedBlock(self, original: Any, updated: Any) -> Any:
            body = list(updated.body)
            for i, statement in enumerate(body):
                if not isinstance(statement, cst.SimpleStatementLine) or is_docstring(
                        statement) or any(isinstance(s, (cst.Pass, cst.Global, cst.Nonlocal))
                                          for s in statement.body):
                    continue
                last = i == len(body) - 1
                # A comment above the dropped line would vanish and hint at the fix.
                if last and any(line.comment for line in statement.leading_lines):
                    continue
                text = _code(statement).strip().splitlines()[-1][:60]
                if not self.offer("statement", original.body[i], f"drop {text!r}"):
                    continue
                if len(body) == 1 or (len(body) == 2 and is_docstring(body[0])):
                    body[i] = statement.with_changes(body=[cst.Pass()])
                else:
                    if not last:
                        body[i + 1] = body[i + 1].with_changes(
                            leading_lines=[*statement.leading_lines,
                                           *body[i + 1].leading_lines])
                    del body[i]
                return updated.with_changes(body=body)
            return updated

        # arguments
        def leave_Call(self, original: Any, updated: Any) -> Any:
            args = list(updated.args)
            if len(args) < 2 or any(a.keyword is not None or a.star for a in args[:2]):
                return updated
            first, second = _code(args[0].value), _code(args[1].value)
            if first == second:
                return updated
            if self.offer("arguments", original, f"f({first[:25]}, {second[:25]}) swapped"):
                args[0], args[1] = (args[0].with_changes(value=args[1].value),
                                    args[1].with_changes(value=args[0].value))
                return updated.with_changes(args=args)
            return updated

    return Mutator


def mutation_sites(source: str, path: str) -> list[Site]:
    """Every mutation site of ``source`` (the module at ``path``), in a fixed order."""
    import libcst as cst

    mutator = _mutator_class()(path)
    cst.parse_module(source).visit(mutator)
    return mutator.sites


def apply_mutation(source: str, site: Site) -> str:
    """``source`` with the mutation ``site`` applied."""
    import libcst as cst

    mutator = _mutator_class()(site.path, target=site.index)
    mutated = cst.parse_module(source).visit(mutator).code
    found = mutator.sites[site.index] if len(mutator.sites) > site.index else None
    if found != site:
        raise ValueError(f"site {site} is not in {site.path} any more")
    return mutated


def candidate_order(sites: list[Site], rng: random.Random) -> list[Site]:
    """Sites shuffled within each kind, then taken one kind after another."""
    by_kind: dict[str, list[Site]] = {kind: [] for kind in MUTATION_KINDS}
    for site in sites:
        by_kind[site.kind].append(site)
    for kind in MUTATION_KINDS:
        rng.shuffle(by_kind[kind])
    ordered: list[Site] = []
    while any(by_kind.values()):
        for kind in MUTATION_KINDS:
            if by_kind[kind]:
                ordered.append(by_kind[kind].pop())
    return ordered


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


def problem_statement(package: str, version: str, failing: list[str],
                      excerpts: dict[str, list[str]], max_tests: int = 3,
                      max_lines: int = 8) -> str:
    """An issue describing the failing behaviour: the tests that fail and what they report,
    with no word of where the fault is or how to fix it."""
    lines = [f"Tests fail in {package} {version}", "",
             f"{len(failing)} test{'s' if len(failing) > 1 else ''} of the project's own suite"
             f" fail{'' if len(failing) > 1 else 's'}:", ""]
    lines += [f"- `{test}`" for test in failing]
    for test in failing[:max_tests]:
        name = test.split("::", 1)[1].replace("::", ".")
        message = next((excerpt for title, excerpt in excerpts.items()
                        if name == title or name.endswith("." + title)), None)
        if not message:
            continue
        shown = [line[:200] for line in message[:max_lines]]
        if len(message) > max_lines:
            shown.append("...")
        lines += ["", f"`{test}` reports:", "", "```", *shown, "```"]
    lines += ["", "The tests are correct and must not be changed; the library's behaviour is"
                  " what is wrong. Make these tests pass without breaking the others."]
    return "\n".join(lines) + "\n"


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
    raise ValueError(f"runner must be 'auto', 'sandbox' or 'subprocess', got {runner!r}")


# ---- synthesis ----------------------------------------------------------------------------


@dataclass
class _State:
    """What a synthesis has done so far (the cache file's content).

    ``outcomes`` holds one ``[function, reason, grader seconds or None]`` per candidate
    tried, in order; ``reason`` is ``"kept"`` for each of ``tasks``, in the same order."""

    outcomes: list[list[Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    exhausted: bool = False

    @property
    def tried(self) -> int:
        return len(self.outcomes)

    @property
    def functions(self) -> set[str]:
        """Functions holding a task."""
        return {function for function, reason, _ in self.outcomes if reason == "kept"}


@dataclass(frozen=True)
class SynthesisReport:
    """What a synthesis gave, and what finding it took, counted up to its last task.

    Attributes:
        package, version, backend: the project, and the backend the grader ran in.
        tasks: the rows.
        tried: candidates (mutation sites) tried to find them.
        rejected: why the others were not kept, and how many: the mutant checks'
            reasons (``uncaught``, ``too broad``, ...) and the grader's
            (:data:`~agentgym.plugins.swe.validation.REASONS`).
        graded: candidates the grader validated (the tasks and the grader's rejections).
        grading_seconds: the grader's wall time over those, in all.
        exhausted: every candidate was tried and fewer tasks were found than asked for.
        outcomes: per candidate tried, in order: ``(path::function, reason)``, the reason
            ``"kept"`` for each task (in the order of ``tasks``).
    """

    package: str
    version: str
    backend: str
    tasks: list[dict[str, Any]]
    tried: int
    rejected: dict[str, int]
    graded: int
    grading_seconds: float
    exhausted: bool
    outcomes: list[tuple[str, str]] = field(default_factory=list)

    @property
    def grader_rejected(self) -> int:
        """Candidates the mutant checks kept and the grader rejected."""
        return sum(self.rejected.get(reason, 0) for reason in validation.REASONS)

    @property
    def validated_fraction(self) -> float:
        """Tasks kept per candidate tried."""
        return len(self.tasks) / self.tried if self.tried else 0.0

    def summary(self) -> str:
        """One line: ``N tasks written; M candidates rejected by the grader (k: gold patch
        < 1.0, j: no change > 0.0), ...``."""
        grader = ", ".join(f"{self.rejected.get(reason, 0)}: {reason}"
                           for reason in validation.REASONS)
        others = ", ".join(f"{count} {reason}" for reason, count in sorted(
            self.rejected.items(), key=lambda item: (-item[1], item[0]))
            if reason not in validation.REASONS)
        per_task = self.grading_seconds / self.graded if self.graded else 0.0
        return (f"{len(self.tasks)} tasks written; {self.grader_rejected} candidates rejected"
                f" by the grader ({grader}), {self.tried} candidates tried"
                f"{f' ({others})' if others else ''}; grader validation on {self.backend}:"
                f" {per_task:.1f} s per candidate, {self.grading_seconds:.1f} s in all")


def _report(project: Project, backend: str, state: _State, n: int) -> SynthesisReport:
    """The report of ``state``'s first ``n`` tasks."""
    kept = [i for i, (_, reason, _) in enumerate(state.outcomes) if reason == "kept"]
    outcomes = state.outcomes[:kept[n - 1] + 1] if 0 < n <= len(kept) else state.outcomes
    if n == 0:
        outcomes = []
    rejected: dict[str, int] = {}
    for _, reason, _ in outcomes:
        if reason != "kept":
            rejected[reason] = rejected.get(reason, 0) + 1
    timed = [seconds for _, _, seconds in outcomes if seconds is not None]
    return SynthesisReport(project.package, project.version, backend, state.tasks[:n],
                           len(outcomes), rejected, len(timed), sum(timed),
                           state.exhausted and len(state.tasks) < n,
                           [(function, reason) for function, reason, _ in outcomes])


@dataclass
class _Progress:
    """A rich progress bar on stderr, or nothing."""

    enabled: bool
    total: int
    label: str

    def __enter__(self) -> _Progress:
        self._bar = None
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TextColumn("{task.fields[note]}"),
                                 TimeElapsedColumn(), console=Console(stderr=True),
                                 transient=False)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.label, total=self.total, note="")
        return self

    def update(self, done: int, note: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=done, note=note)

    def log(self, message: str) -> None:
        if self._bar is not None:
            self._bar.console.print(message)

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


def _cache_file(project: Project, seed: int, max_fail_to_pass: int, backend: str,
                cache: Path) -> Path:
    key = json.dumps([FORMAT, repos.canonical(project.package), project.version, seed,
                      max_fail_to_pass, backend, validation.GRADER_VERSION,
                      repos.PYTEST_REQUIREMENT])
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return cache / "tasks" / (f"{repos.canonical(project.package)}-{project.version}"
                              f"-seed{seed}-{backend}-{digest}.json")


def _load_state(path: Path) -> _State:
    try:
        data = json.loads(path.read_text())
        return _State(data["outcomes"], data["tasks"], data["exhausted"])
    except (OSError, ValueError, KeyError):
        return _State()


def _save_state(path: Path, state: _State) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_suffix(f".{os.getpid()}.tmp")
    staging.write_text(json.dumps(state.__dict__))
    staging.replace(path)


def synthesize(package: str, version: str, n: int, seed: int = 0, progress: bool = True,
               *, runner: str = "auto", backend: str = "local", jobs: int = 1,
               max_fail_to_pass: int = 10, cache: Path | None = None) -> list[dict[str, Any]]:
    """``n`` validated bug-fix tasks for ``package==version`` as SWE-bench instance dicts
    (see the module docstring); fewer, with a warning on the progress display, when the
    project runs out of mutants its tests catch and the grader accepts. Same arguments,
    same tasks, byte for byte.

    Args:
        package, version: the PyPI project (it must ship its tests in its sdist).
        n: how many tasks.
        seed: picks which mutants are tried first.
        progress: show a progress bar on stderr.
        runner: where mutants' tests run: ``auto``, ``sandbox``, ``subprocess``.
        backend: the sandbox backend the tasks will be graded in; the grader validates
            every task there (``local``, ``docker``, ...: ``agentgym list sandboxes``).
        jobs: candidates checked at once, grader validations included (the order of
            acceptance stays the same).
        max_fail_to_pass: mutants failing more tests are rejected (too easy to locate).
        cache: the cache root (default :func:`agentgym.plugins.swe.repo.cache_dir`).
    """
    return synthesize_report(package, version, n, seed, progress, runner=runner,
                             backend=backend, jobs=jobs, max_fail_to_pass=max_fail_to_pass,
                             cache=cache).tasks


def synthesize_report(package: str, version: str, n: int, seed: int = 0,
                      progress: bool = True, **options: Any) -> SynthesisReport:
    """:func:`synthesize`, with what it took (a :class:`SynthesisReport`)."""
    return asyncio.run(asynthesize_report(package, version, n, seed, progress, **options))


async def asynthesize(package: str, version: str, n: int, seed: int = 0,
                      progress: bool = True, **options: Any) -> list[dict[str, Any]]:
    """:func:`synthesize`, for callers inside an event loop."""
    return (await asynthesize_report(package, version, n, seed, progress, **options)).tasks


async def asynthesize_report(package: str, version: str, n: int, seed: int = 0,
                             progress: bool = True, *, runner: str = "auto",
                             backend: str = "local", jobs: int = 1,
                             max_fail_to_pass: int = 10, cache: Path | None = None,
                             ) -> SynthesisReport:
    """:func:`synthesize_report`, for callers inside an event loop."""
    from agentgym.core.registry import sandbox_backend

    if n < 0 or jobs < 1 or max_fail_to_pass < 1:
        raise ValueError(f"need n >= 0, jobs >= 1 and max_fail_to_pass >= 1; got n={n},"
                         f" jobs={jobs}, max_fail_to_pass={max_fail_to_pass}")
    sandbox_backend(backend)  # an unknown name fails now, with the list of backends
    cache = cache or repos.cache_dir()
    with _Progress(progress, n, f"{package}=={version}") as bar:
        bar.log(f"[dim]preparing {package}=={version} (sdist, repository, test env)[/]")
        project = await asyncio.to_thread(repos.prepare, package, version, cache, bar.log)
        cache_file = _cache_file(project, seed, max_fail_to_pass, backend, cache)
        with file_lock(cache_file.with_suffix(".lock")):
            state = _load_state(cache_file)
            if len(state.tasks) < n and not state.exhausted:
                await _grow(project, state, n, seed, runner, backend, jobs,
                            max_fail_to_pass, cache_file, cache, bar)
            report = _report(project, backend, state, n)
            bar.update(len(report.tasks), f"tried {report.tried}")
            bar.log(f"[dim]{report.summary()}[/]")
            if len(report.tasks) < n:
                bar.log(f"[yellow]{package}=={version} gave only {len(report.tasks)} tasks"
                        f" (every mutant was tried)[/]")
        return report


async def _grow(project: Project, state: _State, n: int, seed: int, runner_name: str,
                backend: str, jobs: int, max_fail_to_pass: int, cache_file: Path,
                cache: Path, bar: _Progress) -> None:
    """Check candidates from ``state.tried`` on until ``n`` tasks are in ``state``."""
    sources = {path: (project.repo / path).read_text()
               for path in repos.source_files(project.repo)}
    sites: list[Site] = []
    for path, source in sources.items():
        try:
            sites += await asyncio.to_thread(mutation_sites, source, path)
        except Exception:  # libcst cannot parse it (newer syntax): no mutations there
            continue
    rng = random.Random(f"{repos.canonical(project.package)}=={project.version}#{seed}")
    candidates = candidate_order(sites, rng)
    runner = make_runner(project, runner_name)
    validator: validation.TaskValidator | None = None
    pending: list[asyncio.Task] = []
    scratch = Path(tempfile.mkdtemp(prefix="agentgym-synth-git-"))
    try:
        shutil.copytree(project.repo, scratch / "repo", symlinks=True)
        baseline = await runner.run({}, timeout=600)
        passing = sorted(t for t, s in baseline.statuses.items() if s in PASSING)
        if baseline.timed_out or not passing:
            raise RepoError(
                f"the test suite of {project.package}=={project.version} does not pass on the"
                f" clean repository ({len(passing)} passing tests"
                f"{', timed out' if baseline.timed_out else ''}); its last output:\n"
                + baseline.output[-3000:])
        timeout = max(30.0, 5 * baseline.seconds + 10)
        validator = validation.TaskValidator(backend, cache, test_timeout_s=timeout)
        bar.log(f"[dim]{len(passing)} tests pass on the clean repository"
                f" ({baseline.seconds:.1f} s); {len(candidates)} mutation sites[/]")

        async def check(site: Site) -> tuple[str, dict[str, Any] | None, float | None]:
            """(reason, row, grader seconds): the candidate's fate, ``"kept"`` with its row
            when it makes a task. A function already holding a task is not tried again
            (the set only grows, so the verdict is the one a serial run gives)."""
            function = f"{site.path}::{site.function}"
            if function in state.functions:
                return "function taken", None, None
            try:
                mutated = apply_mutation(sources[site.path], site)
                compile(mutated, site.path, "exec")
            except Exception:
                return "invalid", None, None
            run = await runner.run({site.path: mutated}, timeout)
            reason, failing, still = judge(run, passing, max_fail_to_pass)
            if reason != "kept" or function in state.functions:
                return reason if reason != "kept" else "function taken", None, None
            row = await asyncio.to_thread(_task, project, site.path, mutated, run, failing,
                                          still, scratch / "repo")
            verdict = await validator.validate(row)
            if verdict.reason is not None:
                bar.log(f"[yellow]{row['instance_id']} rejected by the grader on {backend}:"
                        f" {verdict.reason} ({verdict.detail})[/]")
                return verdict.reason, None, verdict.seconds
            row["validation"] = verdict.record()
            return "kept", row, verdict.seconds

        def note() -> str:
            rejected = _report(project, backend, state, len(state.tasks)).rejected
            why = ", ".join(f"{count} {reason}" for reason, count in
                            sorted(rejected.items(), key=lambda item: -item[1]))
            return f"tried {state.tried}" + (f" (rejected: {why})" if why else "")

        position = state.tried
        while len(state.tasks) < n and (position < len(candidates) or pending):
            while len(pending) < jobs and position < len(candidates):
                pending.append(asyncio.create_task(check(candidates[position])))
                position += 1
            site = candidates[state.tried]
            reason, row, seconds = await pending.pop(0)
            function = f"{site.path}::{site.function}"
            if function in state.functions:  # taken by a candidate checked alongside
                reason, row = "function taken", None
            state.outcomes.append([function, reason, seconds])
            if row is not None:
                state.tasks.append(row)
            bar.update(len(state.tasks), note())
            _save_state(cache_file, state)
        if len(state.tasks) < n and state.tried >= len(candidates):
            state.exhausted = True
            _save_state(cache_file, state)
    finally:
        for task in pending:  # past the last task needed, or after an error
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await runner.close()
        if validator is not None:
            await validator.close()
        shutil.rmtree(scratch, ignore_errors=True)


def judge(run: SuiteRun, passing: list[str], max_fail_to_pass: int,
          ) -> tuple[str, list[str], list[str]]:
    """Whether a mutant whose suite ran as ``run`` makes a task, given the tests ``passing``
    on the clean repository: ``("kept", FAIL_TO_PASS, PASS_TO_PASS)``, or the reason it is
    rejected (``timed out``, ``broke collection`` when passing tests vanished or were
    skipped, ``uncaught``, ``too broad``) with empty lists."""
    if run.timed_out:
        return "timed out", [], []
    failing = [t for t in passing if run.statuses.get(t) in ("FAILED", "ERROR")]
    still = [t for t in passing if run.statuses.get(t) in PASSING]
    if len(failing) + len(still) != len(passing):
        return "broke collection", [], []
    if not failing:
        return "uncaught", [], []
    if len(failing) > max_fail_to_pass:
        return "too broad", [], []
    return "kept", failing, still


def _task(project: Project, path: str, mutated: str, run: SuiteRun, failing: list[str],
          still: list[str], scratch: Path) -> dict[str, Any]:
    """The instance row of a kept mutant (``scratch``: a copy of the clean repository).
    Not yet validated: the grader's workspace rebuilds it from the row alone."""
    message = repos.commit_message(project.package, project.version)
    base_commit = repos.task_commit(scratch, {path: mutated}, message)
    # The fix: from the mutant's tree back to the clean one (a/ b/ prefixes, for git apply).
    patch = repos.git(scratch, "diff", "--no-color", "--no-ext-diff", base_commit,
                      project.commit)
    digest = hashlib.sha256(patch.encode()).hexdigest()[:8]
    name = repos.canonical(project.package)
    task = {
        "instance_id": f"pypi__{name}-{project.version}-{digest}",
        "repo": project.repo_name,
        "base_commit": base_commit,
        "patch": patch,
        "test_patch": "",
        "problem_statement": problem_statement(project.package, project.version, failing,
                                               failure_excerpts(run.output)),
        "hints_text": "",
        "created_at": CREATED_AT,
        "version": project.version,
        "FAIL_TO_PASS": failing,
        "PASS_TO_PASS": still,
        "environment_setup_commit": project.commit,
        "package": project.package,
        "package_version": project.version,
        # The runner alone: grading appends the test files it runs (whole files, in order).
        "test_cmd": project.test_cmd(targets=()),
    }
    return task


def write_jsonl(tasks: list[dict[str, Any]], path: str | os.PathLike[str]) -> None:
    """Write ``tasks`` one JSON object a line."""
    with open(path, "w") as out:
        for task in tasks:
            out.write(json.dumps(task) + "\n")


def check_task(task: dict[str, Any], cache: Path | None = None) -> None:
    """Rebuild ``task``'s repository from its file alone and check that its commit is the
    recorded ``base_commit``; raises :class:`RepoError` when not."""
    with tempfile.TemporaryDirectory(prefix="agentgym-task-") as tmp:
        commit = repos.build_task_repo(task["package"], task["package_version"],
                                       task["patch"], Path(tmp) / "repo", cache)
    if commit != task["base_commit"]:
        raise RepoError(f"rebuilding {task['instance_id']} gave commit {commit}, but the task"
                        f" records base_commit {task['base_commit']}")


__all__ = ["FORMAT", "MUTATION_KINDS", "Site", "SynthesisReport", "apply_mutation",
           "asynthesize", "asynthesize_report", "candidate_order", "check_task",
           "failure_excerpts", "judge", "make_runner", "mutation_sites", "normalise_output",
           "parse_pytest_report", "problem_statement", "synthesize", "synthesize_report",
           "write_jsonl"]
