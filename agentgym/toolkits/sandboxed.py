"""``SandboxedEnv``: the base of an env whose every episode works in a sandbox of its own.

An episode's setup (:meth:`SandboxedEnv.setup_episode`) opens its sandbox from the task
(:meth:`~SandboxedEnv.open_sandbox`: the backend :meth:`~SandboxedEnv.backend_for` names,
the :class:`~agentgym.core.sandbox.SandboxSpec` :meth:`~SandboxedEnv.sandbox_spec` gives),
hands it to the episode (``episode.resources["sandbox"]``, closed when the env ends the
episode: :meth:`Episode.keep <agentgym.core.episode.Episode.keep>`), lets the env prepare
it (:meth:`~SandboxedEnv.prepare_sandbox`) and binds the env's
:attr:`~agentgym.core.env.AgentEnv.toolsets` to it. The env keeps no sandbox of its own: a
grader reads the sandbox of the episode it grades (:func:`episode_sandbox`), so episodes
that overlap on one env (the next one starting while the last is graded) never mix.

A subclass names its toolsets, says where a task's sandbox runs (override
:meth:`~SandboxedEnv.sandbox_spec`, and :meth:`~SandboxedEnv.backend_for` or the
``backend`` attribute; or :meth:`~SandboxedEnv.open_sandbox` itself), and grades::

    class ScriptEnv(SandboxedEnv):
        toolsets = (functools.partial(BashTools, command_timeout_s=30), EditorTools)

        async def sandbox_spec(self, task):
            return SandboxSpec(template=task.metadata["folder"])

        async def grade(self, episode):
            box = episode_sandbox(episode)
            ran = await box.exec("python3 hello.py", timeout=30)
            return RewardResult(float(ran.output.strip() == "goodbye"))

**MCP servers.** An env that sets :attr:`~SandboxedEnv.mcp_servers` (a list of
:class:`~agentgym.toolkits.mcp.MCPServer`, often from an ``mcp_servers`` argument) offers
their tools too, after its toolsets' and before its own: each episode starts its servers
in its sandbox (or on the host, for those that say so) once the sandbox is prepared, and
stops them when it ends; their tools are listed once, on a sandbox of the first task
(:mod:`agentgym.toolkits.mcp`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentgym.core.env import AgentEnv, AnyTool
from agentgym.core.episode import SANDBOX, Episode
from agentgym.core.registry import open_sandbox
from agentgym.core.sandbox import Sandbox, SandboxSpec, extra_mounts
from agentgym.core.task import Task
from agentgym.core.tools import describe

#: Where an episode keeps its connections to the env's MCP servers.
MCP = "mcp"


def episode_sandbox(episode: Episode) -> Sandbox | None:
    """``episode``'s sandbox; None when its setup never opened one (it failed, timed out
    or the episode ended first)."""
    return episode.resources.get(SANDBOX)


class SandboxedEnv(AgentEnv):
    """An :class:`~agentgym.core.env.AgentEnv` whose episodes each get a sandbox (module
    docstring); takes :class:`AgentEnv`'s arguments."""

    #: The sandbox backend (``agentgym list sandboxes``) of every task, unless
    #: :meth:`backend_for` says otherwise; None for ``local``. Often set in ``__init__``
    #: from a ``backend`` argument (what ``agentgym validate --backend`` passes).
    backend: str | None = None
    #: MCP servers whose tools every episode offers (:class:`~agentgym.toolkits.mcp.MCPServer`;
    #: module docstring). A class attribute, or set per instance in ``__init__``.
    mcp_servers: Sequence[Any] = ()

    def backend_for(self, task: Task) -> str:
        """The backend ``task``'s sandbox runs on. Default: :attr:`backend`."""
        return self.backend or "local"

    async def sandbox_spec(self, task: Task) -> SandboxSpec:
        """What ``task``'s sandbox holds. Default: an empty workspace, default limits."""
        return SandboxSpec()

    async def open_sandbox(self, task: Task) -> Sandbox:
        """Open ``task``'s sandbox: :meth:`sandbox_spec` on :meth:`backend_for`. Override
        it when opening is more than a spec (a check of the first sandbox, a cache)."""
        return await open_sandbox(self.backend_for(task), await self.sandbox_spec(task))

    async def prepare_sandbox(self, sandbox: Sandbox, episode: Episode) -> None:
        """Called with the episode's new sandbox before the toolsets are bound to it (write
        the task's files, record what grading needs in ``episode.resources``). Default:
        nothing."""

    async def setup_episode(self, task: Task) -> None:
        episode = self.episode
        assert episode is not None  # AgentEnv sets it before the setup starts
        session = None
        if self.mcp_servers:
            from agentgym.toolkits.mcp import MCPSession

            classes = await self.amcp_toolsets()
            session = MCPSession(self.mcp_servers)
            await episode.keep(MCP, session, session.aclose)
        with extra_mounts(session.mounts if session is not None else None):
            box = await self.open_sandbox(task)
        await episode.keep(SANDBOX, box, box.close)  # nothing awaited in between: no leak
        await self.prepare_sandbox(box, episode)
        connections = await session.start(box) if session is not None else {}
        bound = self.bind_toolsets(box)
        if session is not None:  # no await since binding: the tools change at once
            episode.toolsets = [*bound, *(cls(connections[cls.server.name]) for cls in classes)]

    def mcp_toolsets(self) -> list[Any]:
        """The toolset classes of :attr:`mcp_servers`, listed once (on a sandbox of the
        first task, on the env's own event loop) and kept."""
        found = getattr(self, "_mcp_toolsets", None)
        return found if found is not None else self.run_coroutine(self.amcp_toolsets())

    async def amcp_toolsets(self) -> list[Any]:
        """:meth:`mcp_toolsets`, listed on the running event loop (the one that plays the
        episodes: a sandbox's processes belong to the loop that started them)."""
        found = getattr(self, "_mcp_toolsets", None)
        if found is None:
            from agentgym.toolkits.mcp import MCPServer, discover_tools

            self.mcp_servers = [MCPServer.from_dict(s) for s in self.mcp_servers]
            first = self.tasks.get(self.task_ids()[0])

            async def sandbox_of_first_task(mounts: Mapping[str, str]) -> Sandbox:
                with extra_mounts(mounts):
                    return await self.open_sandbox(first)

            found = await discover_tools(self.mcp_servers, sandbox_of_first_task)
            self._mcp_toolsets = found
        return found

    async def areset(self, *, seed: int | None = None, options: Any = None) -> Any:
        if self.mcp_servers:
            await self.amcp_toolsets()  # the first observation lists their tools
        return await super().areset(seed=seed, options=options)

    def tools(self) -> Sequence[AnyTool]:
        tools = list(super().tools())
        episode = self.episode
        if not self.mcp_servers or (episode is not None and episode.toolsets is not None):
            return tools  # bound: the episode's toolsets hold the MCP servers' too
        shared = sum(len(describe(factory)) for factory in self.toolsets)
        described = [t for cls in self.mcp_toolsets() for t in cls.definitions()]
        return [*tools[:shared], *described, *tools[shared:]]
