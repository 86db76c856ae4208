"""The terminal envs: do a job in a shell (set up a service, repair a git history, process
logs, query a database, build a program); the task's own tests say whether it is done.

One env class serves every id; the ids differ in where tasks come from:

=======================  ==============================================================
id                       default tasks
=======================  ==============================================================
terminal                 agentgym's own tasks, shipped with the package (Harbor format)
terminal-agentbench-os   AgentBench-OS, from the ``inspect-evals`` package's data
terminal-nl2bash         NL2Bash filesystem tasks (InterCode), from the ``icalfa`` package
=======================  ==============================================================

``tasks=`` points any id at a folder of task folders, Harbor or Terminal-Bench format
(:mod:`agentgym.plugins.terminal.formats`): a clone of a task repository, or one task.

**Where an episode runs.** A task whose Dockerfile the local backend can rebuild runs
there (``backend=None``), its workspace a cached template
(:mod:`agentgym.plugins.terminal.workspace`); any other task runs on ``docker`` in its
image, built locally from its Dockerfile. ``backend="docker"`` builds every task as an
image; ``backend="local"`` refuses tasks that need one, when the env is made. Either way the
sandbox has ``/tests`` and ``/logs`` (empty until grading), no network, and the workspace
is the Dockerfile's ``WORKDIR`` (default ``/app``).

**Tools.** ``terminal`` (an interactive terminal: :mod:`agentgym.toolkits.terminal`),
``bash`` (one non-interactive command in the sandbox's shell, with its exit code) and
``submit``. ``tools=("terminal",)`` leaves ``bash`` out. The prompt states the task, the
working directory and the programs on PATH.

**Reward.** When the episode ends, the agent's processes are stopped and the task's tests
run in its sandbox (:func:`agentgym.plugins.terminal.grading.grade_task`): copied in only
then into folders made anew, run from a fresh shell with an environment and home the agent
never wrote, scored all-or-nothing or as the fraction passed per the task's ``reward``.
A task's reference solution (``oracle``) types its script into the terminal (as it
reads, where a terminal can type it: :func:`solution_turns`) and submits;
its known-wrong scripts (``solution/wrong*.sh``) are checked by ``agentgym validate`` to
score below 1.0.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import os
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym.core.episode import Episode, Submitted
from agentgym.core.errors import InvalidArgumentError, UnknownIdError
from agentgym.core.harbor import HarborTask, NotExportableError
from agentgym.core.parsers import ToolCall
from agentgym.core.registry import sandbox_backend
from agentgym.core.reward import RewardResult
from agentgym.core.sandbox import Sandbox, SandboxLimits, SandboxSpec, SandboxSpecError
from agentgym.core.task import WRONG_SOLUTIONS, SolutionTurn, Task, TaskList, split_by_id
from agentgym.core.tools import tool
from agentgym.plugins.terminal.formats import LOGS_DIR, TESTS_DIR, TerminalTask, load_tasks
from agentgym.plugins.terminal.grading import GITCONFIG, grade_task, take_snapshot
from agentgym.toolkits import BashTools, SandboxedEnv, TerminalTools, episode_sandbox

#: The folder of agentgym's own tasks (package data).
BUILTIN_TASKS = Path(__file__).parent / "tasks"
#: Tool names the ``tools`` option accepts, and their toolsets.
TOOLSETS = {"terminal": TerminalTools, "bash": BashTools}
#: Programs the prompt names when the workspace has them.
PROGRAMS = ("python3", "pip3", "git", "sqlite3", "curl", "make", "gcc", "tar", "gzip",
            "zip", "unzip", "jq", "less", "vim", "nano")
#: Variables of the sandbox's starting environment that belong to one shell, not to it.
_SHELL_VARIABLES = {"PWD", "OLDPWD", "SHLVL", "_"}
#: Where an episode keeps its sandbox's starting environment (grading runs with it).
START_ENV = "start_env"
#: Where the task's start snapshot (``[verifier] snapshot``) is kept until grading.
SNAPSHOT = "terminal_snapshot"

#: The heredoc delimiter a reference solution is typed in (:func:`solution_turns`).
HEREDOC_END = "AGENTGYM_EOF"
#: Longer reference solutions are typed as base64, one line, so that the terminal's echo
#: of them does not fill the episode's context.
TYPED_SCRIPT_MAX_CHARS = 16_000

SYSTEM_PROMPT = """\
You are working in a Linux terminal to complete a task. Run commands with the tools, check \
your work as you go, and call submit when the task is done; your work is then checked by \
tests you cannot see."""


def solution_turns(script: str) -> list[SolutionTurn]:
    """A script replayed through the terminal, then a wait until the terminal is idle (a
    long script may outlast one call), then submit.

    A script a person could type is typed as it reads, from its first command on, into a
    child shell (``bash <<'AGENTGYM_EOF'`` ... ``AGENTGYM_EOF``): an ``exit`` or ``set -e``
    in it ends that shell, not the session, and an oracle's episodes are demonstrations a
    model can learn from (``sft: {demonstrations: {policy: oracle}}``). A script a terminal
    cannot type as it is (a tab, which the shell takes for completion; another control
    character; a line over the terminal's 4,096-character line buffer) is typed as one
    line that decodes it from base64 into a file and runs that."""
    lines = script.splitlines()
    while lines and (not lines[0].strip() or lines[0].lstrip().startswith("#")):
        lines.pop(0)  # the shebang and the opening comments: no part of a heredoc yet
    typable = (lines and len(script) <= TYPED_SCRIPT_MAX_CHARS
               and HEREDOC_END not in (line.strip() for line in lines)
               and all(len(line) < 4000 and line.isprintable() for line in lines))
    if typable:
        command = "\n".join([f"bash <<'{HEREDOC_END}'", *lines, HEREDOC_END])
    else:
        encoded = base64.b64encode(script.encode()).decode()
        command = (f"echo {encoded} | base64 -d > /tmp/.solution.sh && bash /tmp/.solution.sh;"
                   " rm -f /tmp/.solution.sh")
    return [SolutionTurn([ToolCall("terminal", {"input": command})]),
            SolutionTurn([ToolCall("terminal", {})]),
            SolutionTurn([ToolCall("submit", {})])]


#: The package-sourced env ids: the converter module (under
#: :mod:`agentgym.plugins.terminal.sources`) that writes their task folders, and its splits.
SOURCES = {"terminal-agentbench-os": ("agentbench", ("dev", "test")),
           "terminal-nl2bash": ("nl2bash", ("all",))}


def default_tasks(env_id: str) -> list[TerminalTask]:
    """The tasks of a built-in env id (see the module docstring)."""
    if env_id not in SOURCES:
        return load_tasks(BUILTIN_TASKS)
    return load_tasks(source_tasks(env_id))


def source_tasks(env_id: str) -> Path:
    """The folder of a package-sourced env id's task folders, every split of its source,
    written on first use and cached until the converter or the package changes."""
    import hashlib
    import importlib
    import importlib.metadata

    from agentgym.core.cache import cache_root, file_lock

    name, splits = SOURCES[env_id]
    module = importlib.import_module(f"agentgym.plugins.terminal.sources.{name}")
    try:
        version = importlib.metadata.version(module.PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = "missing"  # materialize() says how to install it
    from agentgym.plugins.terminal.sources import PROCESSES_BEFORE, STOP_THEN_REWARD

    # The converter, the shared parts of its test scripts, and the package's version.
    digest = hashlib.sha256(Path(module.__file__).read_bytes() + PROCESSES_BEFORE.encode()
                            + STOP_THEN_REWARD.encode() + version.encode())
    target = cache_root() / "terminal" / "sources" / f"{env_id}-{digest.hexdigest()[:16]}"
    if target.is_dir():
        return target
    with file_lock(target.with_name(target.name + ".lock")):
        if not target.is_dir():
            staging = target.with_name(f".{target.name}.{os.getpid()}")
            shutil.rmtree(staging, ignore_errors=True)
            try:
                for split in splits:
                    module.materialize(staging, split)
                staging.rename(target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return target


class TerminalEnv(SandboxedEnv):
    """Do a job in a terminal; the task's tests grade it (see the module docstring).

    Args:
        tasks: a folder of task folders (or one task folder), Harbor or Terminal-Bench
            format, or a list of :class:`TerminalTask`. ``None``: the env id's own.
        backend: ``None`` (each task where it can run: ``local`` when its Dockerfile needs
            no image, else ``docker``), ``local`` or ``docker``.
        tools: which of ``terminal`` and ``bash`` the agent gets (``submit`` always).
        max_turns: turns before truncation.
        command_timeout_s: the most one tool call waits for a command.
        test_timeout_s: the grading tests' time limit; None for each task's own.
        limits: the sandboxes' resource limits.
        parser: tool-call format (``hermes``, ``xml``, ``openai`` or a parser object).
        turn_timeout_s: time budget of one turn's tool calls (see ``AgentEnv``).
        env_id: which built-in tasks ``tasks=None`` means.
        split: ``None`` for every task; ``"train"`` or ``"test"`` for one side of a fixed
            split (``test_share`` of the tasks held out, chosen by a hash of their ids:
            :func:`~agentgym.core.task.split_by_id`), to train on one and evaluate on the
            other.
        test_share: the share of tasks ``split="test"`` holds.
        mcp_servers: MCP servers whose tools the agent gets besides, each started in the
            episode's sandbox (:class:`~agentgym.toolkits.mcp.MCPServer` or its fields as a
            mapping; docs/mcp.md).
    """

    system_prompt = SYSTEM_PROMPT
    #: The toolsets of the default ``tools`` (each instance sets those its ``tools`` name).
    toolsets = tuple(TOOLSETS.values())

    def __init__(
        self,
        tasks: str | os.PathLike | Sequence[TerminalTask] | None = None,
        *,
        backend: str | None = None,
        tools: Sequence[str] = ("terminal", "bash"),
        max_turns: int = 50,
        command_timeout_s: float = 60.0,
        test_timeout_s: float | None = None,
        limits: SandboxLimits | None = None,
        parser: Any = "hermes",
        turn_timeout_s: float | None = 600.0,
        render_mode: str | None = None,
        env_id: str = "terminal",
        mcp_servers: Sequence[Any] = (),
        split: str | None = None,
        test_share: float = 0.25,
    ):
        if tasks is None:
            loaded = default_tasks(env_id)
        elif isinstance(tasks, (str, os.PathLike)):
            loaded = load_tasks(tasks)
        else:
            loaded = list(tasks)
        if not loaded:
            raise InvalidArgumentError(f"tasks={tasks!r} holds no terminal tasks")
        if split is not None:
            loaded = split_by_id(loaded, split, lambda task: task.id, test_share)
        ids = [task.id for task in loaded]
        if len(set(ids)) != len(ids):
            twice = sorted({i for i in ids if ids.count(i) > 1})
            raise InvalidArgumentError(f"task ids must be unique; given twice: {twice}")
        unknown = [name for name in tools if name not in TOOLSETS]
        if unknown or not tools:
            raise InvalidArgumentError(f"tools={tuple(tools)!r}: choose from"
                                       f" {', '.join(TOOLSETS)} (at least one)")
        if backend not in (None, "local", "docker"):
            sandbox_backend(backend)  # a plugin's backend: it must exist, and take images
        self.terminal_tasks = {task.id: task for task in loaded}
        self.backend = backend
        self.command_timeout_s = command_timeout_s
        self.test_timeout_s = test_timeout_s
        self.limits = limits or SandboxLimits(timeout_s=command_timeout_s, memory_mb=2048,
                                              pids=512)
        self.toolsets = tuple(functools.partial(TOOLSETS[name],
                                                command_timeout_s=command_timeout_s)
                              for name in tools)
        for task in loaded:
            self._check_backend(task)
        if mcp_servers:
            from agentgym.toolkits.mcp import MCPServer

            self.mcp_servers = [MCPServer.from_dict(s) for s in mcp_servers]
        super().__init__(TaskList([self._task(t) for t in loaded]), parser=parser,
                         max_turns=max_turns, turn_timeout_s=turn_timeout_s,
                         render_mode=render_mode)

    # ---- tasks ------------------------------------------------------------------------------

    def backend_of(self, task: TerminalTask) -> str:
        """Where ``task`` runs (see the class docstring)."""
        if self.backend is not None:
            return self.backend
        return "local" if task.runs_locally else "docker"

    def _check_backend(self, task: TerminalTask) -> None:
        if self.backend_of(task) == "local" and not task.runs_locally:
            raise SandboxSpecError(
                f"task {task.id!r} needs its own image ({task.dockerfile}: {task.local_reason}),"
                " which the local backend cannot give; use backend='docker' (or None, which"
                " picks docker for such tasks)")

    def _task(self, task: TerminalTask) -> Task:
        metadata: dict[str, Any] = {"format": task.format, "workdir": task.workdir,
                                    "backend": self.backend_of(task), **task.metadata}
        if task.wrong_solutions:
            metadata[WRONG_SOLUTIONS] = [solution_turns(s) for s in task.wrong_solutions]
        return Task(id=task.id, prompt=self._prompt(task), metadata=metadata,
                    solution=solution_turns(task.solution) if task.solution else None)

    def _prompt(self, task: TerminalTask) -> str:
        programs = self._programs(task)
        where = (f"Your terminal starts in {task.workdir}, where the task's files are."
                 f" Programs on PATH include {', '.join(programs)}." if programs else
                 f"Your terminal starts in {task.workdir}, where the task's files are.")
        return (f"{task.instruction}\n\n{where} There is no network (only 127.0.0.1)."
                " Call submit when you are done.")

    def _programs(self, task: TerminalTask) -> list[str]:
        """The :data:`PROGRAMS` a task's workspace has: on the local backend the host's
        (its /usr is the sandbox's); in the backend's default image, those the backend says
        it has (:class:`~agentgym.core.sandbox.SandboxImage`); otherwise unknown until the
        image is built (none named)."""
        if self.backend_of(task) == "local":
            path = "/usr/local/bin:/usr/bin:/bin"
            return [p for p in PROGRAMS if shutil.which(p, path=path)]
        image = sandbox_backend(self.backend_of(task)).default_image
        if task.image or image is None:
            return []
        if task.dockerfile is None or task.plan is not None or _base_image(task) == image.name:
            return [p for p in PROGRAMS if p in image.programs]
        return []

    def terminal_task(self, task: Task | None = None) -> TerminalTask:
        task = task or self.task
        assert task is not None
        return self.terminal_tasks[task.id]

    def harbor_task(self, task_id: str) -> HarborTask:
        """Task ``task_id`` as a Harbor task folder, as the task is played here: its
        instruction, its image (a Dockerfile the local backend rebuilds is written so that
        ``docker build`` makes the same workspace), its tests, solutions and settings
        (:mod:`agentgym.plugins.terminal.harbor`). Raises
        :class:`~agentgym.core.harbor.NotExportableError` saying why a task cannot be."""
        from agentgym.plugins.terminal.harbor import harbor_task

        if task_id not in self.terminal_tasks:
            raise UnknownIdError("task", task_id, self.terminal_tasks, "agentgym eval ENV -n N")
        if self.mcp_servers:
            raise NotExportableError(
                f"task {task_id!r} is played here with MCP servers' tools"
                f" ({', '.join(s.name for s in self.mcp_servers)}), which a Harbor folder"
                " cannot give its agent; export the env without mcp_servers")
        return harbor_task(self.terminal_tasks[task_id])

    # ---- tools ------------------------------------------------------------------------------

    @tool
    def submit(self) -> str:
        """Say that the task is done: your work is then checked. This ends the episode."""
        raise Submitted(None, "Submitted: your work will be checked.")

    # ---- episodes ---------------------------------------------------------------------------

    async def workspace_spec(self, task: TerminalTask) -> SandboxSpec:
        """The sandbox ``task`` starts in (building its template or image on first use)."""
        from agentgym.plugins.terminal.workspace import local_template, task_image

        scratch = (TESTS_DIR, LOGS_DIR)
        limits = self.limits
        if task.cpus is not None or task.memory_mb is not None:  # the task's own resources
            limits = dataclasses.replace(limits, cpus=task.cpus or limits.cpus,
                                         memory_mb=task.memory_mb or limits.memory_mb)
        if self.backend_of(task) == "local":
            assert task.plan is not None
            template = await local_template(task)
            return SandboxSpec(template=str(template), workdir=task.plan.workdir,
                               env=dict(task.plan.env), limits=limits, scratch_dirs=scratch)
        image = await asyncio.to_thread(task_image, task, self.backend_of(task))
        return SandboxSpec(image=image, workdir=task.workdir, limits=limits,
                           scratch_dirs=scratch)

    def backend_for(self, task: Task) -> str:
        return self.backend_of(self.terminal_task(task))

    async def sandbox_spec(self, task: Task) -> SandboxSpec:
        return await self.workspace_spec(self.terminal_task(task))

    async def prepare_sandbox(self, sandbox: Sandbox, episode: Episode) -> None:
        episode.resources[START_ENV] = env = await _start_environment(sandbox)
        task = self.terminal_task(episode.task)
        if task.snapshot:
            episode.resources[SNAPSHOT] = await take_snapshot(sandbox, task, env)
            # The snapshot ran the task's reference command through the session shell,
            # whose memory the agent's code may read: the agent gets a shell that never
            # saw it.
            await sandbox.fresh_session()

    async def grade(self, episode: Episode) -> RewardResult:
        """Run the task's tests in the episode's sandbox (see the module docstring)."""
        box = episode_sandbox(episode)
        if box is None:
            return RewardResult(0.0, {"reason": "the episode's sandbox never started"})
        return await grade_task(box, self.terminal_task(episode.task),
                                env=episode.resources.get(START_ENV),
                                snapshot=episode.resources.get(SNAPSHOT),
                                timeout=self.test_timeout_s)


async def _start_environment(box: Sandbox) -> dict[str, str]:
    """Prepare a fresh sandbox for a person: ``/logs`` folders, a git identity (unless the
    home has a ``.gitconfig``); and read its environment, which grading runs with."""
    result = await box.exec(
        f"mkdir -p {LOGS_DIR}/agent {LOGS_DIR}/verifier;"
        f" [ -e ~/.gitconfig ] || printf %s {shlex.quote(GITCONFIG)} > ~/.gitconfig;"
        " env -0 | base64 -w0", timeout=30)
    if not result.ok:
        raise SandboxSpecError(f"the sandbox could not be prepared: {result.output[-500:]}")
    pairs = base64.b64decode(result.output.strip().splitlines()[-1]).split(b"\0")
    env = {}
    for pair in pairs:
        name, sep, value = pair.decode(errors="replace").partition("=")
        if sep and name not in _SHELL_VARIABLES:
            env[name] = value
    return env


def _base_image(task: TerminalTask) -> str:
    from agentgym.plugins.terminal.formats import dockerfile_instructions

    assert task.dockerfile is not None
    for keyword, args in dockerfile_instructions(task.dockerfile.read_text()):
        if keyword == "FROM":
            return args.split()[0] if args else ""
    return ""
