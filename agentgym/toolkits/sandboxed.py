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
"""

from __future__ import annotations

from agentgym.core.env import AgentEnv
from agentgym.core.episode import SANDBOX, Episode
from agentgym.core.registry import open_sandbox
from agentgym.core.sandbox import Sandbox, SandboxSpec
from agentgym.core.task import Task


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
        box = await self.open_sandbox(task)
        await episode.keep(SANDBOX, box, box.close)  # nothing awaited in between: no leak
        await self.prepare_sandbox(box, episode)
        self.bind_toolsets(box)
