"""swe-synth: repair tasks made by injecting bugs into a PyPI project, validated by its tests.

:func:`synthesize` turns ``(package, version, n, seed, difficulty)`` into ``n`` rows of the
SWE-bench instance schema, the same rows for the same arguments on every machine:

1. :func:`agentgym.plugins.swe.repo.prepare` gives the clean repository and its test env;
   the whole suite runs once on it, and the tests that pass there are the candidates for
   ``FAIL_TO_PASS`` and ``PASS_TO_PASS``.
2. libcst lists every mutation site inside the project's functions (tests excluded;
   :mod:`agentgym.plugins.swe.mutations`): the point kinds for ``easy`` (flip or shift a
   comparison, change an operator or a constant, invert a condition, drop a statement,
   swap two arguments), and for ``medium`` and ``hard`` also the block kinds (swap the
   branches of an ``if``/``else``, drop a small ``if`` block such as an early return,
   swap two dependent statements, shorten a loop bound, ``break`` <-> ``continue``). The
   sites are shuffled by a generator seeded from ``(package, version, seed)`` and taken one
   kind after another, so that the tasks vary. A mutant whose diff gives the bug away
   (``not (a not in b)``, ``i + 0``, a body reduced to ``pass``, a whitespace-only change:
   :func:`~agentgym.plugins.swe.mutations.giveaway`) is rejected (``giveaway``).
3. Each mutant runs the suite (in a fresh local sandbox with the env mounted read-only, or
   in a subprocess where no sandbox can run; ``PYTHONHASHSEED=0``, so that set orders in
   messages are the same everywhere). It is kept when some tests that passed now fail
   (``FAIL_TO_PASS``, at most ``max_fail_to_pass``) and every other passing test still
   passes (``PASS_TO_PASS``); a mutant that breaks an import or collection, times out, or
   that no test catches is rejected. Each failing test's error type is read from the
   output (:func:`failure_types`): an assertion or an unmet ``pytest.raises`` is a wrong
   value, anything else (``TypeError``, ``NameError``, ...) a crash.
4. ``easy`` (:data:`DIFFICULTIES`): a task is one mutation, one task per function until
   every site was tried, then the skipped sites of functions that hold a task already
   (so ``n`` may exceed the project's functions). ``medium`` (two mutations in two
   functions) and ``hard`` (three, in three functions, one of them multi-line while the
   project has such mutants left): single mutations are judged first, and groups of those
   the tests catch are formed greedily in the site order (:func:`next_group`), preferring
   mutants that do not crash: first non-crashing singles, one task per function; then
   functions may hold several tasks; only then crashing singles (and, for hard, last,
   groups without a multi-line mutation). A group is kept when its mutant is caught as above, its
   failures do not crash (while crashing singles are left out), and every mutation
   matters: reverting any one of them alone still leaves some ``FAIL_TO_PASS`` test
   failing, and each alone fails some of them (``a mutation does not matter`` otherwise).
   Each single joins one group at most.
5. The gold ``patch`` is the reverse diff of all the task's mutations (mutant -> clean,
   ``git diff`` format, for ``git apply``); ``base_commit`` is the root commit of the
   mutated tree made by :func:`agentgym.plugins.swe.repo.build_task_repo`, which rebuilds
   it from the task file alone. ``test_patch`` is empty: the project's own tests catch the
   bug. The row also records ``difficulty``, ``mutations`` (``[{"kind", "file",
   "function"}]``, so curricula can filter), ``failure_types`` (error type -> how many
   ``FAIL_TO_PASS`` tests fail with it) and ``statement_writer``.
6. The real grader has the last word (:mod:`agentgym.plugins.swe.validation`), whatever
   the difficulty: the row is graded as an episode of ``swe-synth`` on ``backend`` grades
   it (the workspace rebuilt from the row, which also checks ``base_commit``; the listed
   tests run in the grader's order, not the suite's). Its gold patch must score 1.0 and
   no change 0.0, else the candidate is rejected (``gold patch < 1.0``: a suite whose
   tests depend on one another often gives this; ``no change > 0.0``). The verdict goes
   into the row's ``validation`` field; :class:`SynthesisReport` counts the rejections and
   the time the grader took.
7. The problem statement is written last (:mod:`agentgym.plugins.swe.statements`): by
   default the template, which names the failing tests (unless ``test_ids=False``) and
   excerpts their error messages, never the patch or the code's location; or a writer
   such as ``policy:POLICY``, whose text is checked for leaks and falls back to the
   template. Grading does not read the statement, so the validation holds for any.

Rows are reproducible: the same ``(package, version, seed, options)`` gives byte-identical
rows on every machine, whatever the cache folder, working directory, runner or ``jobs``,
when the statements are the template's (a policy's are not reproducible across policies;
each row names its ``statement_writer``). Test output quoted in a statement is normalised
(:func:`normalise_output`): no workspace, temporary or cache paths, object addresses or
durations.

Results are cached in ``<cache>/tasks``, keyed by the arguments (the statement writer
aside), :data:`FORMAT` and the grader's version, and grown on demand: asking for fewer tasks
than are cached is immediate, asking for more resumes where the last run stopped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym.core.cache import file_lock
from agentgym.core.errors import InvalidArgumentError
from agentgym.plugins.swe import repo as repos
from agentgym.plugins.swe import validation
from agentgym.plugins.swe.mutations import (
    ALL_KINDS,
    MULTI_LINE_KINDS,
    MUTATION_KINDS,
    Site,
    apply_mutations,
    candidate_order,
    giveaway,
    mutation_sites,
)
from agentgym.plugins.swe.repo import Project, RepoError
from agentgym.plugins.swe.statements import (
    NO_TEST_IDS,
    TEMPLATE,
    BugEvidence,
    LeakGuard,
    Statement,
    TemplateWriter,
    build_statement_writer,
    failing_test_sources,
    problem_statement,
    write_statement,
)
from agentgym.plugins.swe.suite import (
    PASSING,
    UNKNOWN_ERROR,
    SuiteRun,
    crashes,
    errors_by_test,
    failure_excerpts,
    failure_types,
    make_runner,
)

#: Bump when a change here changes which tasks come out (it keys the cache).
FORMAT = 4
#: ``created_at`` of every synthesized task: the fixed date of its commits.
CREATED_AT = "2000-01-01T00:00:00Z"


# ---- synthesis ----------------------------------------------------------------------------

#: Mutations per task, by difficulty.
DIFFICULTIES = {"easy": 1, "medium": 2, "hard": 3}
KEPT = "kept"
FUNCTION_TAKEN = "function taken"
#: Why a medium or hard candidate (a group of mutations) is rejected besides :func:`judge`'s
#: reasons and the grader's.
CRASHES = "crashes"
DOES_NOT_MATTER = "a mutation does not matter"
#: (allow crashing failures, one task per function, hard: a multi-line mutation required):
#: the phases of a medium or hard search, each begun once the one before has run out of
#: singles. The last two matter for hard tasks of projects with few multi-line mutants.
_GROUP_PHASES = ((False, True, True), (False, False, True), (True, False, True),
                 (False, False, False), (True, False, False))


def kinds_for(difficulty: str) -> tuple[str, ...]:
    """The mutation kinds tasks of ``difficulty`` use: the point kinds for ``easy``, every
    kind for ``medium`` and ``hard``."""
    if difficulty not in DIFFICULTIES:
        raise InvalidArgumentError(
            f"difficulty must be one of {', '.join(DIFFICULTIES)}, got"
            f" {difficulty!r}")
    return MUTATION_KINDS if difficulty == "easy" else ALL_KINDS


def _key(site: Site) -> str:
    return f"{site.path}::{site.function}"


@dataclass
class _State:
    """What a synthesis has done so far (the cache file's content).

    ``outcomes`` holds one ``[functions, reason, grader seconds or None, members]`` per
    candidate tried, in order (``functions``: ``path::function`` of each mutation;
    ``members``: the candidates' positions in the site order); ``reason`` is ``"kept"``
    for each of ``tasks``, in the same order. ``screened`` (medium and hard) holds one
    ``[reason, failing tests, error types]`` per single mutation judged, in the site
    order; ``phase`` is the current entry of :data:`_GROUP_PHASES`. ``evidence`` holds each
    task's error lines per failing test, which statements are written from."""

    outcomes: list[list[Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    exhausted: bool = False
    screened: list[list[Any]] = field(default_factory=list)
    phase: int = 0
    evidence: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    @property
    def tried(self) -> int:
        return len(self.outcomes)

    @property
    def functions(self) -> set[str]:
        """Functions holding a task."""
        return {function for functions, reason, *_ in self.outcomes if reason == KEPT
                for function in functions}

    @property
    def used(self) -> set[int]:
        """Candidates that were part of a tried group."""
        return {member for *_, members in self.outcomes for member in members}


@dataclass(frozen=True)
class SynthesisReport:
    """What a synthesis gave, and what finding it took, counted up to its last task.

    Attributes:
        package, version, backend: the project, and the backend the grader ran in.
        tasks: the rows.
        tried: candidates tried to find them (single mutations for ``easy``, groups of
            mutations for ``medium`` and ``hard``).
        rejected: why the others were not kept, and how many: the mutant checks'
            reasons (``uncaught``, ``too broad``, ``giveaway``, ...), the group checks'
            (``crashes``, ``a mutation does not matter``) and the grader's
            (:data:`~agentgym.plugins.swe.validation.REASONS`).
        graded: candidates the grader validated (the tasks and the grader's rejections).
        grading_seconds: the grader's wall time over those, in all.
        exhausted: every candidate was tried and fewer tasks were found than asked for.
        outcomes: per candidate tried, in order: ``(path::function[ + ...], reason)``, the
            reason ``"kept"`` for each task (in the order of ``tasks``).
        difficulty: the tasks' difficulty.
        screened: medium and hard: single mutations judged to build the groups from.
        statements: how the statements were written: ``writer``, ``written`` (by it),
            ``fell_back`` (to the template after every attempt was rejected) and
            ``rejections`` (reason -> count over all rejected attempts).
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
    difficulty: str = "easy"
    screened: int = 0
    statements: dict[str, Any] = field(default_factory=dict)

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
        screened = f" from {self.screened} single mutations" if self.screened else ""
        line = (f"{len(self.tasks)} tasks written; {self.grader_rejected} candidates rejected"
                f" by the grader ({grader}), {self.tried} candidates tried{screened}"
                f"{f' ({others})' if others else ''}; grader validation on {self.backend}:"
                f" {per_task:.1f} s per candidate, {self.grading_seconds:.1f} s in all")
        if self.statements.get("fell_back") or self.statements.get("rejections"):
            why = ", ".join(f"{count} {reason}" for reason, count in
                            self.statements["rejections"].items())
            line += (f"; statements by {self.statements['writer']}:"
                     f" {self.statements['written']} written,"
                     f" {self.statements['fell_back']} fell back to the template"
                     f" (rejected attempts: {why or 'none'})")
        return line


def _report(project: Project, backend: str, state: _State, n: int,
            difficulty: str) -> SynthesisReport:
    """The report of ``state``'s first ``n`` tasks."""
    kept = [i for i, outcome in enumerate(state.outcomes) if outcome[1] == KEPT]
    outcomes = state.outcomes[:kept[n - 1] + 1] if 0 < n <= len(kept) else state.outcomes
    if n == 0:
        outcomes = []
    rejected: dict[str, int] = {}
    for _, reason, *_ in outcomes:
        if reason != KEPT:
            rejected[reason] = rejected.get(reason, 0) + 1
    timed = [outcome[2] for outcome in outcomes if outcome[2] is not None]
    return SynthesisReport(project.package, project.version, backend, state.tasks[:n],
                           len(outcomes), rejected, len(timed), sum(timed),
                           state.exhausted and len(state.tasks) < n,
                           [(" + ".join(functions), reason)
                            for functions, reason, *_ in outcomes],
                           difficulty, len(state.screened))


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
                difficulty: str, cache: Path) -> Path:
    key = json.dumps([FORMAT, repos.canonical(project.package), project.version, seed,
                      max_fail_to_pass, backend, difficulty, validation.GRADER_VERSION,
                      repos.PYTEST_REQUIREMENT])
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return cache / "tasks" / (f"{repos.canonical(project.package)}-{project.version}"
                              f"-seed{seed}-{backend}-{difficulty}-{digest}.json")


def _load_state(path: Path) -> _State:
    try:
        data = json.loads(path.read_text())
        return _State(**data)
    except (OSError, ValueError, TypeError):
        return _State()


def _save_state(path: Path, state: _State) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_suffix(f".{os.getpid()}.tmp")
    staging.write_text(json.dumps(state.__dict__))
    staging.replace(path)


def synthesize(package: str, version: str, n: int, seed: int = 0, progress: bool = True,
               *, runner: str = "auto", backend: str = "local", jobs: int = 1,
               max_fail_to_pass: int = 10, difficulty: str = "easy",
               statement: str = "template", test_ids: bool = True,
               cache: Path | None = None) -> list[dict[str, Any]]:
    """``n`` validated bug-fix tasks for ``package==version`` as SWE-bench instance dicts
    (see the module docstring); fewer, with a warning on the progress display, when the
    project runs out of mutants its tests catch and the grader accepts. Same arguments,
    same tasks, byte for byte (with the ``template`` statement writer).

    Args:
        package, version: the PyPI project (it must ship its tests in its sdist).
        n: how many tasks.
        seed: picks which mutants are tried first.
        progress: show a progress bar on stderr.
        runner: where mutants' tests run: ``auto``, ``sandbox``, ``subprocess``.
        backend: the sandbox backend the tasks will be graded in; the grader validates
            every task there (``local``, ``docker``, ...: ``agentgym list sandboxes``).
        jobs: mutants checked at once, grader validations included (the tasks do not
            depend on it).
        max_fail_to_pass: mutants failing more tests are rejected (too easy to locate).
        difficulty: ``easy`` (one point mutation), ``medium`` (two mutations in two
            functions) or ``hard`` (three mutations in three functions, one of them
            multi-line while any is left); see :data:`DIFFICULTIES` and the module
            docstring.
        statement: the statement writer (``template``, ``policy:POLICY``, or a plugin's:
            :mod:`agentgym.plugins.swe.statements`).
        test_ids: whether the template statement (the writer's or the fallback) names the
            failing tests.
        cache: the cache root (default :func:`agentgym.plugins.swe.repo.cache_dir`).
    """
    return synthesize_report(package, version, n, seed, progress, runner=runner,
                             backend=backend, jobs=jobs, max_fail_to_pass=max_fail_to_pass,
                             difficulty=difficulty, statement=statement, test_ids=test_ids,
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
                             max_fail_to_pass: int = 10, difficulty: str = "easy",
                             statement: str = "template", test_ids: bool = True,
                             cache: Path | None = None) -> SynthesisReport:
    """:func:`synthesize_report`, for callers inside an event loop."""
    from agentgym.core.registry import sandbox_backend

    if n < 0 or jobs < 1 or max_fail_to_pass < 1:
        raise InvalidArgumentError(
            f"need n >= 0, jobs >= 1 and max_fail_to_pass >= 1; got n={n},"
            f" jobs={jobs}, max_fail_to_pass={max_fail_to_pass}")
    kinds_for(difficulty)  # an unknown difficulty fails now
    sandbox_backend(backend)  # an unknown name fails now, with the list of backends
    if statement == TEMPLATE and not test_ids:
        statement = f"{TEMPLATE}:{NO_TEST_IDS}"
    writer = build_statement_writer(statement)  # a bad name or policy fails before the search
    cache = cache or repos.cache_dir()
    try:
        with _Progress(progress, n, f"{package}=={version}") as bar:
            bar.log(f"[dim]preparing {package}=={version} (sdist, repository, test env)[/]")
            project = await asyncio.to_thread(repos.prepare, package, version, cache, bar.log)
            cache_file = _cache_file(project, seed, max_fail_to_pass, backend, difficulty,
                                     cache)
            with file_lock(cache_file.with_suffix(".lock")):
                state = _load_state(cache_file)
                if len(state.tasks) < n and not state.exhausted:
                    search = _Search(project, difficulty, runner, backend, jobs,
                                     max_fail_to_pass, cache, bar)
                    try:
                        await search.start(seed)
                        if difficulty == "easy":
                            await _grow_singles(search, state, n, cache_file)
                        else:
                            await _grow_groups(search, state, n, cache_file)
                    finally:
                        await search.close()
                report = _report(project, backend, state, n, difficulty)
                evidence = {task["instance_id"]: state.evidence.get(task["instance_id"], {})
                            for task in report.tasks}
            bar.update(len(report.tasks), f"tried {report.tried}")
            report = await _with_statements(project, report, evidence, writer,
                                             TemplateWriter(test_ids), bar)
            bar.log(f"[dim]{report.summary()}[/]")
            if len(report.tasks) < n:
                bar.log(f"[yellow]{package}=={version} gave only {len(report.tasks)} tasks"
                        f" (every mutant was tried)[/]")
            return report
    finally:
        close = getattr(writer, "close", None)
        if callable(close):
            close()


class _Search:
    """What checking candidates of one project needs: its sources and mutation sites in
    the seed's order, the runner, the clean run's passing tests, the grader, and a scratch
    copy of the repository for task commits. :meth:`start` first, :meth:`close` last."""

    def __init__(self, project: Project, difficulty: str, runner: str, backend: str,
                 jobs: int, max_fail_to_pass: int, cache: Path, bar: _Progress):
        self.project, self.difficulty, self.backend = project, difficulty, backend
        self.jobs, self.max_fail_to_pass, self.cache, self.bar = (
            jobs, max_fail_to_pass, cache, bar)
        self.kinds = kinds_for(difficulty)
        self.runner = make_runner(project, runner)
        self.validator: validation.TaskValidator | None = None
        self.scratch = Path(tempfile.mkdtemp(prefix="agentgym-synth-git-"))
        self.sources: dict[str, str] = {}
        self.candidates: list[Site] = []
        self.passing: list[str] = []
        self.timeout = 600.0

    async def start(self, seed: int) -> None:
        project = self.project
        self.sources = {path: (project.repo / path).read_text()
                        for path in repos.source_files(project.repo)}
        sites: list[Site] = []
        for path, source in self.sources.items():
            try:
                sites += await asyncio.to_thread(mutation_sites, source, path, self.kinds)
            except Exception:  # libcst cannot parse it (newer syntax): no mutations there
                continue
        rng = random.Random(f"{repos.canonical(project.package)}=={project.version}#{seed}")
        self.candidates = candidate_order(sites, rng)
        shutil.copytree(project.repo, self.scratch / "repo", symlinks=True)
        baseline = await self.runner.run({}, timeout=600)
        self.passing = sorted(t for t, s in baseline.statuses.items() if s in PASSING)
        if baseline.timed_out or not self.passing:
            raise RepoError(
                f"the test suite of {project.package}=={project.version} does not pass on the"
                f" clean repository ({len(self.passing)} passing tests"
                f"{', timed out' if baseline.timed_out else ''}); its last output:\n"
                + baseline.output[-3000:])
        self.timeout = max(30.0, 5 * baseline.seconds + 10)
        self.validator = validation.TaskValidator(self._env_grader, self.backend)
        self.bar.log(f"[dim]{len(self.passing)} tests pass on the clean repository"
                     f" ({baseline.seconds:.1f} s); {len(self.candidates)} mutation sites[/]")

    def _env_grader(self, row: dict[str, Any]) -> validation.DiffGrader:
        """Rows are graded as the ``swe-synth`` env on this backend grades episodes."""
        from agentgym.plugins.swe.env import SWEEnv

        return SWEEnv([row], backend=self.backend, cache=self.cache,
                      test_timeout_s=self.timeout, env_id="swe-synth")

    def mutant(self, sites: list[Site]) -> tuple[dict[str, str] | None, str | None]:
        """The files of the mutant with ``sites`` applied, or ``(None, reason)``: the
        mutation is ``invalid`` (it does not compile) or a ``giveaway``."""
        files: dict[str, str] = {}
        for path in sorted({site.path for site in sites}):
            try:
                mutated = apply_mutations(self.sources[path],
                                          [s for s in sites if s.path == path], self.kinds)
                compile(mutated, path, "exec")
            except Exception:
                return None, "invalid"
            if giveaway(self.sources[path], mutated) is not None:
                return None, "giveaway"
            files[path] = mutated
        return files, None

    async def run(self, files: dict[str, str]) -> SuiteRun:
        return await self.runner.run(files, self.timeout)

    async def accept(self, sites: list[Site], files: dict[str, str], run: SuiteRun,
                     failing: list[str], still: list[str], taken: set[str],
                     ) -> tuple[str, dict[str, Any] | None, float | None, dict[str, Any]]:
        """The row of a mutant the checks kept, once the grader agrees: ``(reason, row,
        grader seconds, errors per failing test)``; ``duplicate`` when its instance id is
        in ``taken``."""
        errors = errors_by_test(failing, failure_excerpts(run.output))
        row = await asyncio.to_thread(
            _task, self.project, files, sites, self.difficulty,
            failure_types(run.output, failing), errors, failing, still, self.scratch / "repo")
        if row["instance_id"] in taken:
            return "duplicate", None, None, {}
        assert self.validator is not None
        verdict = await self.validator.validate(row)
        if verdict.reason is not None:
            self.bar.log(f"[yellow]{row['instance_id']} rejected by the grader on"
                         f" {self.backend}: {verdict.reason} ({verdict.detail})[/]")
            return verdict.reason, None, verdict.seconds, {}
        row["validation"] = verdict.record()
        return KEPT, row, verdict.seconds, errors

    def note(self, state: _State) -> str:
        rejected = _report(self.project, self.backend, state, len(state.tasks),
                           self.difficulty).rejected
        why = ", ".join(f"{count} {reason}" for reason, count in
                        sorted(rejected.items(), key=lambda item: -item[1]))
        screened = f", screened {len(state.screened)}" if state.screened else ""
        return f"tried {state.tried}{screened}" + (f" (rejected: {why})" if why else "")

    async def close(self) -> None:
        await self.runner.close()
        if self.validator is not None:
            await self.validator.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


async def _in_order(count: int, done: int, jobs: int, check: Any, record: Any,
                    enough: Any) -> None:
    """Check positions ``done`` to ``count`` with ``check(position)``, ``jobs`` at once,
    handing each result to ``record(position, result)`` in order, until ``enough()``;
    checks still running then are cancelled."""
    pending: list[asyncio.Task] = []
    position = done
    try:
        while not enough() and (position < count or pending):
            while len(pending) < jobs and position < count:
                pending.append(asyncio.create_task(check(position)))
                position += 1
            record(done, await pending.pop(0))
            done += 1
    finally:
        for task in pending:  # past the last one needed, or after an error
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


def _keep(state: _State, functions: list[str], reason: str, row: dict[str, Any] | None,
          seconds: float | None, members: list[int], errors: dict[str, Any]) -> None:
    state.outcomes.append([functions, reason, seconds, members])
    if row is not None:
        state.tasks.append(row)
        state.evidence[row["instance_id"]] = errors


async def _grow_singles(search: _Search, state: _State, n: int, cache_file: Path) -> None:
    """Easy: check single mutations in the site order until ``n`` tasks are in ``state``,
    one task per function; when every site was tried, again the sites skipped for their
    function (so a project gives more tasks than it has functions)."""
    candidates = search.candidates
    first = len(candidates)
    order = list(range(first))  # positions in the site order, then the second pass's

    async def check(position: int) -> tuple[Any, ...]:
        """(reason, row, grader seconds, errors): the candidate's fate. With the cap, a
        function already holding a task is not tried again (the set only grows, so the
        verdict is the one a serial run gives)."""
        site = candidates[order[position]]
        capped = position < first
        if capped and _key(site) in state.functions:
            return FUNCTION_TAKEN, None, None, {}
        files, reason = search.mutant([site])
        if files is None:
            return reason, None, None, {}
        run = await search.run(files)
        reason, failing, still = judge(run, search.passing, search.max_fail_to_pass)
        if reason != KEPT or (capped and _key(site) in state.functions):
            return reason if reason != KEPT else FUNCTION_TAKEN, None, None, {}
        return await search.accept([site], files, run, failing, still,
                                   {task["instance_id"] for task in state.tasks})

    def record(position: int, result: tuple[Any, ...]) -> None:
        reason, row, seconds, errors = result
        site = candidates[order[position]]
        if position < first and _key(site) in state.functions:
            reason, row = FUNCTION_TAKEN, None  # taken by a candidate checked alongside
        _keep(state, [_key(site)], reason, row, seconds, [order[position]], errors)
        search.bar.update(len(state.tasks), search.note(state))
        _save_state(cache_file, state)

    def enough() -> bool:
        return len(state.tasks) >= n

    await _in_order(first, state.tried, search.jobs, check, record, enough)
    if not enough() and state.tried >= first:
        order += [i for i, outcome in enumerate(state.outcomes[:first])
                  if outcome[1] == FUNCTION_TAKEN]
        await _in_order(len(order), state.tried, search.jobs, check, record, enough)
    if not enough() and state.tried >= len(order):
        state.exhausted = True
        _save_state(cache_file, state)


def next_group(screened: list[tuple[int, Site, bool]], size: int, *, used: set[int],
               taken: set[str], allow_crash: bool, multi_line: bool) -> list[int] | None:
    """The next group of mutations to try, as positions of ``screened`` entries
    ``(position, site, crashes)`` (the single mutations the tests catch, in the site
    order), or None when they hold no group yet.

    Greedy in the site order: an entry joins unless it was ``used`` in a group before,
    its failures crash and ``allow_crash`` is off, its function is ``taken`` (by a task) or
    already in the group, or it is nested in a function of the group (or holds one);
    with ``multi_line`` the last place goes only to a multi-line kind unless one joined
    already. The choice depends only on the entries up to its last member, so screening
    more singles never changes a group once it can be formed."""
    group: list[tuple[int, Site]] = []
    for position, site, crashing in screened:
        if position in used or (crashing and not allow_crash) or _key(site) in taken:
            continue
        if any(site.path == other.path and (
                site.function == other.function
                or site.function.startswith(other.function + ".")
                or other.function.startswith(site.function + ".")) for _, other in group):
            continue
        if (multi_line and len(group) == size - 1 and site.kind not in MULTI_LINE_KINDS
                and not any(other.kind in MULTI_LINE_KINDS for _, other in group)):
            continue
        group.append((position, site))
        if len(group) == size:
            return [position for position, _ in group]
    return None


async def _grow_groups(search: _Search, state: _State, n: int, cache_file: Path) -> None:
    """Medium and hard: judge single mutations in the site order (``state.screened``) and
    try groups of them (:func:`next_group`) until ``n`` tasks are in ``state``. Phases
    (:data:`_GROUP_PHASES`): first non-crashing singles with one task per function, then
    functions may hold several tasks, then crashing singles join; hard groups hold a
    multi-line mutation until none is left to try."""
    candidates = search.candidates
    size = DIFFICULTIES[search.difficulty]

    async def screen(position: int) -> list[Any]:
        files, reason = search.mutant([candidates[position]])
        if files is None:
            return [reason, [], {}]
        run = await search.run(files)
        reason, failing, _ = judge(run, search.passing, search.max_fail_to_pass)
        return [reason, failing, failure_types(run.output, failing) if reason == KEPT else {}]

    def record(position: int, result: list[Any]) -> None:
        state.screened.append(result)

    while len(state.tasks) < n:
        allow_crash, capped, multi_line = _GROUP_PHASES[state.phase]
        viable = [(i, candidates[i], crashes(types))
                  for i, (reason, _, types) in enumerate(state.screened) if reason == KEPT]
        members = next_group(viable, size, used=state.used,
                             taken=state.functions if capped else set(),
                             allow_crash=allow_crash,
                             multi_line=multi_line and search.difficulty == "hard")
        if members is None:
            if len(state.screened) < len(candidates):
                batch = len(state.screened) + search.jobs
                await _in_order(min(batch, len(candidates)), len(state.screened), search.jobs,
                                screen, record, lambda: False)
            elif state.phase + 1 < len(_GROUP_PHASES):
                state.phase += 1
            else:
                state.exhausted = True
            _save_state(cache_file, state)
            search.bar.update(len(state.tasks), search.note(state))
            if state.exhausted:
                return
            continue
        reason, row, seconds, errors = await _check_group(search, state, members, allow_crash)
        _keep(state, [_key(candidates[i]) for i in members], reason, row, seconds, members,
              errors)
        search.bar.update(len(state.tasks), search.note(state))
        _save_state(cache_file, state)


async def _check_group(search: _Search, state: _State, members: list[int],
                       allow_crash: bool) -> tuple[Any, ...]:
    """(reason, row, grader seconds, errors) of the mutant with every mutation of
    ``members``: kept when the tests catch it (:func:`judge`), its failures do not crash
    (unless ``allow_crash``), every mutation matters, and the grader agrees. A mutation
    matters when the mutant without it still fails some of its ``FAIL_TO_PASS`` tests (so
    fixing the others alone does not solve the task) and, alone, fails some of them too."""
    sites = [search.candidates[i] for i in members]
    files, reason = search.mutant(sites)
    if files is None:
        return reason, None, None, {}
    run = await search.run(files)
    reason, failing, still = judge(run, search.passing, search.max_fail_to_pass)
    if reason != KEPT:
        return reason, None, None, {}
    if not allow_crash and crashes(failure_types(run.output, failing)):
        return CRASHES, None, None, {}
    alone = [state.screened[i][1] for i in members]
    without: list[SuiteRun] = []
    if len(members) > 2:  # with two, the mutant without one is the other alone
        rests = [search.mutant([s for s in sites if s != site])[0] for site in sites]
        if any(rest is None for rest in rests):
            return DOES_NOT_MATTER, None, None, {}
        without = list(await asyncio.gather(*(search.run(rest) for rest in rests if rest)))
    if not every_mutation_matters(failing, alone, without):
        return DOES_NOT_MATTER, None, None, {}
    return await search.accept(sites, files, run, failing, still,
                               {task["instance_id"] for task in state.tasks})


def every_mutation_matters(failing: list[str], alone: list[list[str]],
                           without: list[SuiteRun]) -> bool:
    """Whether each mutation of a mutant whose ``FAIL_TO_PASS`` tests are ``failing``
    matters: ``alone[i]`` are the tests mutation ``i`` fails on its own, which must include
    some of ``failing``; ``without[i]`` (three or more mutations) is the run of the mutant
    less mutation ``i``, which must still fail some of them, or fixing the others would
    solve the task. With two mutations the mutant less one is the other alone, so
    ``alone`` says both (``without`` is then empty)."""
    if not all(set(tests) & set(failing) for tests in alone):
        return False
    if len(alone) > 2 and len(without) != len(alone):
        raise InvalidArgumentError(
            f"{len(alone)} mutations need {len(alone)} runs without one of them,"
            f" got {len(without)}")
    return all(any(run.statuses.get(test) not in PASSING for test in failing)
               for run in without)


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
    return KEPT, failing, still


def _task(project: Project, files: dict[str, str], sites: list[Site], difficulty: str,
          types: dict[str, str], errors: dict[str, list[str]], failing: list[str],
          still: list[str], scratch: Path) -> dict[str, Any]:
    """The instance row of a kept mutant (``files``: its mutated files; ``scratch``: a copy
    of the clean repository). Not yet validated: the grader's workspace rebuilds it from
    the row alone."""
    message = repos.commit_message(project.package, project.version)
    base_commit = repos.task_commit(scratch, files, message)
    # The fix: from the mutant's tree back to the clean one (a/ b/ prefixes, for git apply).
    patch = repos.git(scratch, "diff", "--no-color", "--no-ext-diff", base_commit,
                      project.commit)
    digest = hashlib.sha256(patch.encode()).hexdigest()[:8]
    name = repos.canonical(project.package)
    counts: dict[str, int] = {}
    for test in failing:
        counts[types.get(test, UNKNOWN_ERROR)] = counts.get(types.get(test, UNKNOWN_ERROR),
                                                            0) + 1
    task = {
        "instance_id": f"pypi__{name}-{project.version}-{digest}",
        "repo": project.repo_name,
        "base_commit": base_commit,
        "patch": patch,
        "test_patch": "",
        "problem_statement": problem_statement(project.package, project.version, failing,
                                               errors),
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
        "difficulty": difficulty,
        "mutations": [{"kind": site.kind, "file": site.path, "function": site.function}
                      for site in sorted(sites, key=lambda s: (s.path, s.index))],
        "failure_types": dict(sorted(counts.items())),
        "statement_writer": TEMPLATE,
    }
    return task


async def _with_statements(project: Project, report: SynthesisReport,
                           evidence: dict[str, dict[str, list[str]]], writer: Any,
                           fallback: TemplateWriter, bar: _Progress) -> SynthesisReport:
    """``report`` with its tasks' statements written by ``writer`` (the rows hold the
    template's, with test ids, as synthesized)."""
    if isinstance(writer, TemplateWriter) and writer.test_ids:
        return report
    bar.log(f"[dim]writing {len(report.tasks)} statements with {writer.name}[/]")

    async def one(task: dict[str, Any]) -> tuple[dict[str, Any], Statement]:
        failing = tuple(task["FAIL_TO_PASS"])
        facts = BugEvidence(project.package, project.version, _import_name(project, task),
                            failing, evidence.get(task["instance_id"], {}),
                            await asyncio.to_thread(failing_test_sources, project.repo,
                                                    failing))
        written = await write_statement(writer, facts, LeakGuard.for_task(task, facts),
                                        fallback)
        if written.fell_back:
            bar.log(f"[yellow]{task['instance_id']}: every statement by {writer.name} was"
                    f" rejected ({'; '.join(', '.join(r) for r in written.rejected)});"
                    " the template's is used[/]")
        return {**task, "problem_statement": written.text,
                "statement_writer": written.writer}, written

    done = await asyncio.gather(*(one(task) for task in report.tasks))
    rejections: dict[str, int] = {}
    for _, written in done:
        for reasons in written.rejected:
            for reason in reasons:
                rejections[reason] = rejections.get(reason, 0) + 1
    fell_back = sum(written.fell_back for _, written in done)
    statements = {"writer": writer.name, "written": len(done) - fell_back,
                  "fell_back": fell_back, "rejections": dict(sorted(rejections.items()))}
    return dataclasses.replace(report, tasks=[task for task, _ in done], statements=statements)


def _import_name(project: Project, task: dict[str, Any]) -> str:
    """The top-level import of the package the task's patch changes."""
    path = task["mutations"][0]["file"] if task.get("mutations") else ""
    root = "" if project.import_root == "." else project.import_root.rstrip("/") + "/"
    parts = Path(path.removeprefix(root)).with_suffix("").parts
    return parts[0] if parts else repos.canonical(project.package).replace("-", "_")


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


__all__ = ["DIFFICULTIES", "FORMAT", "SynthesisReport", "asynthesize", "asynthesize_report",
           "check_task", "every_mutation_matters", "judge", "kinds_for", "next_group",
           "synthesize", "synthesize_report", "write_jsonl"]
