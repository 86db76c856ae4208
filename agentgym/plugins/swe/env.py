"""The SWE envs: make a repository's failing tests pass without breaking the passing ones.

One env class serves every id; the ids differ in where tasks come from and where they run:

============  ==========================================  =========  ======================
id            default tasks                               backend    workspace
============  ==========================================  =========  ======================
swe-verified  princeton-nlp/SWE-bench_Verified (hub)      docker     the instance's image
swe-lite      princeton-nlp/SWE-bench_Lite (hub)          docker     the instance's image
swe-gym       SWE-Gym/SWE-Gym (hub, split train)          docker     the instance's image
swe-synth     swe-synth-default (synthesized, cached)     local      the sdist's repository
============  ==========================================  =========  ======================

``tasks=`` points any id at a local file (JSONL, JSON or parquet of SWE-bench instances)
or another dataset. An episode's workspace is the repository at ``base_commit``:

* SWE-bench instances: the instance's image (``image`` field, else the official
  harness's name, :func:`~agentgym.plugins.swe.instance.image_name`) with the repository
  at ``/testbed``, which becomes the workspace: ``SandboxSpec(image=..., workdir=
  "/testbed")``. Only a backend that supports images runs them (``docker``); any other
  refuses them when the env is made.
* Instances that name a PyPI ``package``/``package_version`` (what ``agentgym swe synth``
  writes), on any backend: their repository is rebuilt from the sdist once, cached, and
  is the template of every episode's workspace; the project's dependency env is built
  once and mounted read-only (``SandboxSpec(template=repo, mounts=project.mounts,
  env=project.sandbox_env())``), so a reset never installs anything. The env's ``bin`` is
  first on PATH: ``python``, ``python3``, ``pip`` and ``pytest`` are the project's, and
  import the workspace's code. On ``docker`` the container runs the default sandbox
  image, whose ``python3`` runs the env as the host's does (checked at the first
  workspace of each project).

The task's prompt says how to run its tests (:func:`run_tests_hint`): ``python -m
pytest -x -q`` for a task rebuilt from its sdist, the grader's command for one in an image.

The agent has ``bash`` and ``str_replace_editor`` (the shared toolkits,
:mod:`agentgym.toolkits`), ``search`` (:mod:`agentgym.plugins.swe.search`) and ``submit``,
in that order: the env's :attr:`toolsets`, bound to each episode's sandbox (which the
episode keeps: a :class:`~agentgym.toolkits.sandboxed.SandboxedEnv`), then its own
tool. Grading takes the graded episode's diff, opens a fresh sandbox at the same base, and runs
the files of the FAIL_TO_PASS and PASS_TO_PASS tests with the test files, the test runner's
configuration, start-up hooks and packaging metadata restored from the task, reading
pytest's outcomes from the grader's own report (:func:`agentgym.plugins.swe.grading.grade`):
reward 1.0 only if all pass; per-test results, what was dropped from the diff and why, why
any test is missing, any tampering, the command and the log's tail in the metrics.
:mod:`agentgym.plugins.swe.probes` holds the exploit probes ``agentgym validate`` plays on
these tasks. A task's
reference solution (``oracle``) applies the gold patch with ``bash`` and submits.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgym.core.cache import file_lock
from agentgym.core.episode import Episode, Submitted
from agentgym.core.errors import InvalidArgumentError, MissingResourceError
from agentgym.core.parsers import ToolCall
from agentgym.core.registry import build, open_sandbox, sandbox_backend
from agentgym.core.reward import RewardResult
from agentgym.core.sandbox import (
    Sandbox,
    SandboxLimits,
    SandboxSpec,
    SandboxSpecError,
    UnsupportedFieldError,
)
from agentgym.core.task import WRONG_SOLUTIONS, SolutionTurn, Task, TaskList, TaskSource
from agentgym.core.tools import tool
from agentgym.plugins.swe.instance import SWEInstance, image_name, load_instances, patch_files
from agentgym.plugins.swe.search import RepoEditorTools, SearchTools
from agentgym.toolkits import BashTools, SandboxedEnv, episode_sandbox

if TYPE_CHECKING:
    from agentgym.plugins.swe.grading import GradeResult
    from agentgym.plugins.swe.repo import Project

#: Default tasks per env id: a hub dataset name, with its split.
DATASETS = {
    "swe-verified": ("princeton-nlp/SWE-bench_Verified", "test"),
    "swe-lite": ("princeton-nlp/SWE-bench_Lite", "test"),
    "swe-gym": ("SWE-Gym/SWE-Gym", "train"),
}
#: Default tasks per env id: a registered task source (``agentgym list task_sources``),
#: built with the env's ``backend``; ``swe-synth``'s is synthesized on first use
#: (:mod:`agentgym.plugins.swe.default_tasks`).
TASK_SOURCES = {"swe-synth": "swe-synth-default"}
#: Where the repository is in SWE-bench's per-instance images.
TESTBED = "/testbed"
#: Marks the end of a patch in the oracle's heredoc (never a line of a real patch).
_PATCH_END = "AGENTGYM_PATCH_END"

SYSTEM_PROMPT = """\
You are a software engineer fixing an issue in a Python repository. The repository is \
checked out in your working directory. Explore it with the tools, find the cause, and edit \
the source so that the behaviour described in the issue is fixed without breaking other \
behaviour. You may write and run scripts and tests to check your work; changes to existing \
test files are ignored when your work is graded. When you are done, call submit."""


#: How an agent runs the tests of a task rebuilt from its sdist: the project's env is first
#: on the workspace's PATH (:meth:`~agentgym.plugins.swe.repo.Project.sandbox_env`).
PACKAGED_TEST_CMD = "python -m pytest -x -q"


def run_tests_hint(instance: SWEInstance, image: str | None = None) -> str:
    """The sentence of a task's prompt that says how to run its tests.

    A task rebuilt from its sdist (no ``image``) runs pytest from its env
    (:data:`PACKAGED_TEST_CMD`); a task in an image runs what its grader runs: the
    instance's ``test_cmd``, else the grader's default, with test ids (or ``{tests}`` /
    ``{files}``) narrowing it.
    """
    if instance.package and not (image or instance.image):
        return (f"Run the tests with `{PACKAGED_TEST_CMD}` (add a file or a test id such as"
                " path/to/test_file.py::test_name to run fewer).")
    from agentgym.plugins.swe.grading import DEFAULT_TEST_CMD

    command = (instance.test_cmd or DEFAULT_TEST_CMD).strip()
    if "{tests}" in command or "{files}" in command:
        command = command.replace("{tests}", "TEST_IDS").replace("{files}", "TEST_FILES")
        return f"Run the tests with `{command}`."
    return f"Run the tests with `{command}` (followed by test files or ids to run fewer)."


def instance_prompt(instance: SWEInstance, image: str | None = None) -> str:
    """The user message of a task: the issue, hints when the dataset has them, and how to
    run the tests (:func:`run_tests_hint`; ``image``: the env's, if it overrides the
    instances')."""
    text = f"<issue>\n{instance.problem_statement.strip()}\n</issue>"
    if instance.hints_text.strip():
        text += f"\n\n<hints>\n{instance.hints_text.strip()}\n</hints>"
    return (f"{text}\n\n{run_tests_hint(instance, image)} Fix the issue in the"
            " repository, then call submit.")


def oracle_turns(instance: SWEInstance) -> list[SolutionTurn]:
    """Apply the gold patch through the env's own ``bash`` tool, then submit."""
    patch = instance.patch if instance.patch.endswith("\n") else instance.patch + "\n"
    command = (f"cat > /tmp/gold.patch <<'{_PATCH_END}'\n{patch}{_PATCH_END}\n"
               "git apply --whitespace=nowarn /tmp/gold.patch && git status --short")
    return [SolutionTurn([ToolCall("bash", {"command": command})]),
            SolutionTurn([ToolCall("submit", {})])]


def wrong_turns(instance: SWEInstance) -> list[list[SolutionTurn]]:
    """Known-wrong solutions (``agentgym validate`` checks they score < 1.0): delete the
    test files that decide the task (those of the FAIL_TO_PASS ids and of ``test_patch``)
    instead of fixing the code, then submit. Grading restores them, so this never pays."""
    files = sorted({test.split("::")[0] for test in instance.FAIL_TO_PASS if "::" in test}
                   | set(patch_files(instance.test_patch)))
    if not files:
        return []
    command = f"rm -f -- {' '.join(map(shlex.quote, files))} && git status --short"
    return [[SolutionTurn([ToolCall("bash", {"command": command})]),
             SolutionTurn([ToolCall("submit", {})])]]


def instance_task(instance: SWEInstance, image: str | None = None) -> Task:
    metadata: dict[str, Any] = {"instance": instance.to_dict()}
    wrong = wrong_turns(instance)
    if wrong:
        metadata[WRONG_SOLUTIONS] = wrong
    return Task(id=instance.instance_id, prompt=instance_prompt(instance, image),
                metadata=metadata,
                solution=list(oracle_turns(instance)) if instance.patch else None)


def task_source(instances: Sequence[SWEInstance], image: str | None = None) -> TaskSource:
    return TaskList([instance_task(i, image) for i in instances])


class SWEEnv(SandboxedEnv):
    """Repair a repository so that its failing tests pass (SWE-bench format).

    Args:
        tasks: SWE-bench instances: a local ``.jsonl``/``.json``/``.parquet`` file, a hub
            dataset name (needs network), or a list of :class:`SWEInstance`. ``None``: the
            env id's default (see the module docs).
        split: the dataset split, for hub datasets and dataset folders.
        backend: a sandbox backend (``agentgym list sandboxes``). Instances that name a
            PyPI package run on any; SWE-bench instances need one that supports images
            (``docker``). ``None``: ``local`` when every instance names a package, else
            ``docker``.
        image: a docker image for every instance (overrides the instances' images, and
            makes packaged instances run in it at ``/testbed`` too).
        max_turns: turns before truncation.
        command_timeout_s: wall-time limit of one ``bash`` command.
        test_timeout_s: wall-time limit of the grading test run.
        limits: the sandboxes' resource limits.
        parser: tool-call format (``hermes``, ``xml``, ``openai`` or a parser object).
        turn_timeout_s: time budget of one turn's tool calls, shared by its commands (see
            ``AgentEnv``).
        cache: the SWE cache that packaged instances' sdists, repositories and test envs
            come from (default :func:`agentgym.plugins.swe.repo.cache_dir`).
    """

    system_prompt = SYSTEM_PROMPT
    #: The toolsets every episode offers (each instance sets them with its command timeout).
    toolsets = (BashTools, RepoEditorTools, SearchTools)
    harbor_refusal = (
        "its grader applies only the agent's diff to a fresh sandbox of the repository at"
        " base_commit, restores the task's tests and test configuration, and runs them"
        " under a pytest plugin that detects tampering (docs/swe-grading.md); a Harbor"
        " verifier runs tests/test.sh in the agent's own container, where the interpreter,"
        " site-packages and pytest are whatever the agent (often root there) left, so"
        " agentgym cannot write a grader there that trusts nothing the agent touched"
        " (Harbor's own SWE-bench adapter grades in that container; agentgym does not"
        " export a weaker grader)")

    def __init__(
        self,
        tasks: str | os.PathLike | Sequence[SWEInstance] | None = None,
        *,
        split: str = "test",
        backend: str | None = None,
        image: str | None = None,
        max_turns: int = 50,
        command_timeout_s: float = 120.0,
        test_timeout_s: float = 1800.0,
        limits: SandboxLimits | None = None,
        parser: Any = "hermes",
        turn_timeout_s: float | None = 600.0,
        render_mode: str | None = None,
        env_id: str = "swe-verified",
        cache: str | os.PathLike | None = None,
    ):
        instances = self._instances(tasks, split, env_id, backend)
        if not instances:
            raise InvalidArgumentError(
                f"{tasks!r} holds no SWE instances; pass a file with at least one")
        self.instances = {i.instance_id: i for i in instances}
        packaged = all(i.package for i in instances)
        self.backend = backend or ("local" if packaged else "docker")
        self.image = image
        self.command_timeout_s = command_timeout_s
        self.test_timeout_s = test_timeout_s
        self.cache = Path(cache) if cache is not None else None
        self.limits = limits or SandboxLimits(timeout_s=command_timeout_s, memory_mb=4096,
                                              disk_mb=2048, pids=512)
        # Bound to each episode's sandbox in setup_episode; before that, described.
        self.toolsets = tuple(functools.partial(toolset, command_timeout_s=command_timeout_s)
                              for toolset in SWEEnv.toolsets)
        self._check_backend(instances)
        self._envs_checked: set[Path] = set()
        super().__init__(task_source(instances, image), parser=parser, max_turns=max_turns,
                         turn_timeout_s=turn_timeout_s, render_mode=render_mode)

    @staticmethod
    def _instances(tasks: Any, split: str, env_id: str, backend: str | None,
                   ) -> list[SWEInstance]:
        if tasks is None:
            if env_id in TASK_SOURCES:
                default = build("task_sources", TASK_SOURCES[env_id], backend=backend or "local")
                return [SWEInstance.from_dict(task.metadata["instance"]) for task in default]
            source, split = DATASETS[env_id]
            return load_instances(source, split=split, env_id=env_id)
        if isinstance(tasks, (str, os.PathLike)):
            return load_instances(tasks, split=split)
        return [t if isinstance(t, SWEInstance) else SWEInstance.from_dict(t) for t in tasks]

    # ---- tools ----------------------------------------------------------------------------

    @tool
    def submit(self) -> str:
        """Submit your changes to the repository for grading. This ends the episode."""
        raise Submitted(None, "Submitted: your changes will be graded.")

    # ---- episodes -------------------------------------------------------------------------

    def instance(self, task: Task | None = None) -> SWEInstance:
        task = task or self.task
        assert task is not None
        return self.instances[task.id]

    def image_spec(self, instance: SWEInstance) -> SandboxSpec | None:
        """The workspace of an instance that runs in an image (SWE-bench's, or the env's
        ``image``): the image with its repository at ``/testbed``. None for an instance
        rebuilt from its PyPI sdist (see :meth:`open_workspace`)."""
        image = self.image or instance.image
        if instance.package and not image:
            return None
        return SandboxSpec(image=image or image_name(instance.instance_id), workdir=TESTBED,
                           limits=self.limits)

    def _check_backend(self, instances: Sequence[SWEInstance]) -> None:
        """Refuse, now rather than at the first reset, instances whose workspace the
        backend cannot give (an image on a backend without images)."""
        backend = sandbox_backend(self.backend)
        for instance in instances:
            spec = self.image_spec(instance)
            if spec is None:
                continue
            try:
                backend.check(spec)
            except UnsupportedFieldError as error:
                why = ("names no PyPI package, so its repository comes from its docker image"
                       if not instance.package else "is to run in the image given to the env")
                raise SandboxSpecError(
                    f"instance {instance.instance_id!r} {why} ({spec.image!r}, at"
                    f" {TESTBED}), but {error}; or use tasks from `agentgym swe synth`,"
                    " which every backend runs") from None

    async def open_workspace(self, instance: SWEInstance) -> Sandbox:
        """A sandbox whose workspace is ``instance``'s repository at its base commit."""
        import asyncio

        spec = self.image_spec(instance)
        if spec is not None:
            return await open_sandbox(self.backend, spec)
        # Rebuilt from its sdist: the repository is the template, the test env a mount.
        template, project = await asyncio.to_thread(_task_repository, instance, self.cache)
        box = await open_sandbox(self.backend, SandboxSpec(
            template=str(template), mounts=project.mounts, env=project.sandbox_env(),
            limits=self.limits))
        if project.env not in self._envs_checked:
            try:
                await _check_env_runs(box, project, timeout=self.test_timeout_s)
            except BaseException:
                await box.close()
                raise
            self._envs_checked.add(project.env)
        return box

    async def open_sandbox(self, task: Task) -> Sandbox:
        """The episode's workspace (:meth:`open_workspace`)."""
        return await self.open_workspace(self.instance(task))

    async def grade(self, episode: Episode) -> RewardResult:
        """Run the tests on the agent's diff in a fresh sandbox at the same base."""
        from agentgym.plugins.swe.grading import diff_of

        instance = self.instance(episode.task)
        box = episode_sandbox(episode)
        if box is None:
            return RewardResult(0.0, {"reason": "the episode's sandbox never started"})
        # A new session: nothing the agent defined or left running in its shell (a
        # function named ``git``, a process rewriting files) takes part in the diff.
        await box.fresh_session()
        diff = await diff_of(box, base=instance.base_commit)
        result = await self.grade_diff(instance, diff)
        metrics = {
            "resolved": result.resolved,
            "f2p_passed": result.f2p_passed, "f2p_total": result.f2p_total,
            "p2p_passed": result.p2p_passed, "p2p_total": result.p2p_total,
            "applied": result.applied, "dropped_files": list(result.dropped_files),
            "dropped_reasons": dict(result.dropped_reasons),
            "tests": dict(result.tests), "reason": result.reason,
            # where the statuses came from (the grader's pytest report, or the log of a
            # runner that is not pytest), and what the code under test tampered with
            "outcomes_from": result.source, "tampered": list(result.tampered),
            "diff_chars": len(diff),
            # why each MISSING test is missing, and what ran: enough to debug a 0.0
            "missing": dict(result.missing), "test_command": result.command,
            "exit_code": result.exit_code, "log_tail": result.log_tail,
        }
        return RewardResult(result.reward, metrics)

    async def grade_diff(self, instance: SWEInstance, diff: str) -> GradeResult:
        """Grade ``diff`` (against ``instance.base_commit``) as an episode's change is
        graded: :func:`~agentgym.plugins.swe.grading.grade` in a fresh workspace
        (:meth:`open_workspace`). ``instance`` need not be one of the env's tasks: task
        synthesis validates a new task's gold patch and no change through here."""
        from agentgym.plugins.swe.grading import grade

        fresh = await self.open_workspace(instance)
        try:
            return await grade(fresh, instance, diff, test_cmd=instance.test_cmd,
                               timeout=self.test_timeout_s)
        finally:
            await fresh.close()


async def _check_env_runs(box: Sandbox, project: Project, timeout: float) -> None:
    """The project's dependency env, built on the host, must run inside the sandbox: its
    interpreter is the host's (:data:`~agentgym.plugins.swe.repo.SANDBOX_PYTHON`), found
    in the sandbox only when the sandbox's own is the same version; and its scripts, first
    on the sandbox's PATH, must start. ``timeout`` is the grading run's: a broken env fails
    at once, so only a machine too loaded to grade at all runs out of it."""
    from agentgym.plugins.swe.repo import ENV_MOUNT, ENV_PYTHON, SANDBOX_PYTHON, RepoError

    result = await box.exec(f"{ENV_PYTHON} -c 'import pytest' && pytest --version",
                            timeout=timeout)
    if result.timed_out:
        raise RepoError(
            f"the test env of {project.package}=={project.version} ({project.env}) did not"
            f" start pytest within {timeout:g} s (the env's test_timeout_s): the machine is"
            " too loaded to grade; run fewer episodes at once, or raise test_timeout_s")
    if not result.ok:
        raise RepoError(
            f"the test env of {project.package}=={project.version} ({project.env}), mounted"
            f" at {ENV_MOUNT}, does not run in this sandbox:"
            f" {result.output.strip()[-500:]!r}. Its scripts must come first on the"
            " sandbox's PATH (Project.sandbox_env()), and it was built with"
            f" {SANDBOX_PYTHON}, so it runs only where the sandbox's python3 is the same"
            " version: point AGENTGYM_SWE_PYTHON at a matching interpreter and delete the"
            " env to rebuild it, or use a backend whose python3 matches the host's")


def _task_repository(instance: SWEInstance, cache: Path | None = None,
                     ) -> tuple[Path, Project]:
    """The cached repository of a packaged instance at its base commit, and its project
    (whose dependency env is built on first use), in ``cache`` (default: the SWE cache)."""
    from agentgym.plugins.swe import repo

    if not (instance.package and instance.package_version):
        raise MissingResourceError(f"instance {instance.instance_id!r} names no package")
    project = repo.prepare(instance.package, instance.package_version, cache)
    target = ((cache or repo.cache_dir()) / "tasks"
              / f"{instance.instance_id}-{instance.base_commit[:12]}")
    if not (target / ".git").is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(target.with_suffix(".lock")):
            if not (target / ".git").is_dir():
                staging = target.with_name(target.name + f".tmp{os.getpid()}")
                shutil.rmtree(staging, ignore_errors=True)
                try:
                    commit = repo.build_task_repo(instance.package, instance.package_version,
                                                  instance.patch, staging, cache)
                    if commit != instance.base_commit:
                        raise MissingResourceError(
                            f"rebuilding {instance.instance_id!r} from"
                            f" {instance.package}=={instance.package_version} gave commit"
                            f" {commit[:12]}, but the task says {instance.base_commit[:12]}:"
                            " the task file does not match this sdist; regenerate it with"
                            " `agentgym swe synth`")
                    staging.rename(target)
                finally:
                    with contextlib.suppress(OSError):
                        shutil.rmtree(staging)
    return target, project

