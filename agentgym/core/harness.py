"""Harnesses: unmodified agent programs that play an env's tasks inside the task's sandbox.

Most teams already have an agent program (mini-swe-agent, their own CLI) that talks to an
OpenAI-compatible endpoint. A :class:`Harness` says how to install and start one; a plugin
contributes it (the ``agentgym_harnesses`` hook; ``agentgym list harnesses``) and any env
whose episodes run in a sandbox can then be played by it instead of by agentgym's own
loop (the rollout package's harness runner):

1. the program is installed once on the host into a read-only Python environment
   (``requirements``, built with the interpreter sandboxes see: :mod:`agentgym.core.pyenv`)
   that is mounted into the task's sandbox at :data:`HARNESS_MOUNT`;
2. the episode starts as any other (the env opens the task's sandbox, with the harness and
   the bridge to the model server mounted: the ``sandbox_mounts`` reset option);
3. ``command`` runs in the sandbox's shell, in its working directory, with the
   environment below, for at most ``time_limit_s`` seconds. Every model call it makes
   goes to the episode's own base URL and is recorded token for token
   (the capture proxy);
4. when it exits (or is stopped at its time limit), the env's grader scores the sandbox
   as it would score an episode of the built-in loop.

The command's environment, besides the sandbox's own:

* ``OPENAI_BASE_URL`` (and ``OPENAI_API_BASE``, the older name): the episode's base URL,
  ``http://127.0.0.1:PORT/episodes/KEY/v1``, reached through the bridge (the sandbox has
  no other network); ``OPENAI_API_KEY``: the episode's key.
* ``AGENTGYM_MODEL``: the model name the server answers to.
* ``AGENTGYM_INSTRUCTION``: the task's instruction (the first user message the env would
  have sent), also in the file ``AGENTGYM_INSTRUCTION_FILE``.
* ``AGENTGYM_HARNESS``: where the harness's environment is mounted (its ``bin`` holds the
  program's scripts: call them by this path, so that the task's own ``python`` stays
  first on ``PATH``).
* ``env``: the harness's own settings (no secrets needed: the key is the episode's).

**Host harnesses.** A Python agent framework (an OpenAI Agents SDK agent, a LangGraph
graph) runs in agentgym's own process instead: a harness whose ``run`` is an async
function of a :class:`HostSession`. It gets the instruction, the episode's base URL on
the host's loopback and key, and the env's tools as OpenAI schemas; each tool call it
makes goes through the env (:meth:`HostSession.call_tool`, one assistant turn of the env's
own loop), so any env can be played this way, sandboxed or not. The episode ends when the
env ends it (a submit tool, the turn limit), when ``run`` returns, or at the time limit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentgym.core.contributions import import_target
from agentgym.core.errors import AgentGymError, InvalidArgumentError

__all__ = ["HARNESS_MOUNT", "EpisodeOver", "Harness", "HostSession"]

#: Where a harness's Python environment is mounted inside the sandbox.
HARNESS_MOUNT = "/opt/agentgym-harness"


@dataclass(frozen=True)
class Harness:
    """An agent program and how to run it on a task (module docstring).

    Args:
        id: the name users give (``env.harness: ID`` in a training config,
            ``agentgym eval ENV --harness ID``).
        command: a bash command run in the sandbox's working directory; reads the
            instruction, the base URL and the key from the environment (module
            docstring), e.g. ``"$AGENTGYM_HARNESS/bin/my-agent" --task
            "$AGENTGYM_INSTRUCTION"``. Its exit ends the episode.
        requirements: pip requirement specifiers installed into the harness's
            environment (a PyPI name, a pinned version, a local wheel's path); empty for a
            program that needs only the sandbox's own ``python3``. A host harness's are
            what must be installed beside agentgym (said when they are missing).
        run: instead of ``command``, a host harness: an async function of a
            :class:`HostSession` (or ``"module:attribute"`` naming one), run in
            agentgym's process.
        time_limit_s: the program is stopped after this many seconds (the episode ends
            ``harness_timeout`` and is graded as it stands).
        env: environment variables the command gets besides the module's.
        description: one line for ``agentgym list harnesses``.
    """

    id: str
    command: str = ""
    requirements: tuple[str, ...] = ()
    time_limit_s: float = 600.0
    env: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    run: Callable[[HostSession], Awaitable[Any]] | str | None = None

    def __post_init__(self) -> None:
        if not self.id or bool(self.command.strip()) == (self.run is not None):
            raise InvalidArgumentError(
                f"Harness(id={self.id!r}, command={self.command!r}, run={self.run!r}): give an"
                " id and exactly one of command (a program in the sandbox) and run (a host"
                " harness's async function)")
        if isinstance(self.requirements, str):
            raise InvalidArgumentError(
                f"Harness {self.id!r}: requirements={self.requirements!r} is one string; give"
                " a tuple of pip specifiers, e.g. ('mini-swe-agent==2.4.6',)")
        if not self.time_limit_s > 0:
            raise InvalidArgumentError(
                f"Harness {self.id!r}: time_limit_s={self.time_limit_s!r} must be > 0")
        object.__setattr__(self, "requirements", tuple(self.requirements))
        object.__setattr__(self, "env", dict(self.env))

    @property
    def on_host(self) -> bool:
        """Whether it runs in agentgym's process (``run``) rather than in the sandbox."""
        return self.run is not None

    def load(self) -> Callable[[HostSession], Awaitable[Any]]:
        """A host harness's ``run``, imported if named by a string; a missing package
        is an error naming the harness's requirements."""
        if self.run is None:
            raise InvalidArgumentError(f"the harness {self.id!r} runs a command in the"
                                       " sandbox; only a host harness has a run to load")
        if callable(self.run):
            return self.run
        try:
            return import_target(self.run)
        except ImportError as e:
            needed = " ".join(self.requirements) or e.name
            raise InvalidArgumentError(
                f"the harness {self.id!r} needs {needed}, which is not installed here"
                f" ({e}): pip install {needed}") from None


class EpisodeOver(AgentGymError):
    """The env ended the episode (a submit tool, its turn limit): a host harness's tool
    call after that is refused with this; its ``run`` may let it propagate."""


class HostSession(Protocol):
    """What a host harness's ``run`` gets for one episode."""

    #: The task's instruction (the env's user messages).
    instruction: str
    #: The episode's base URL (``http://127.0.0.1:PORT/episodes/KEY/v1``) and key.
    base_url: str
    api_key: str
    #: The model name the server answers to.
    model: str
    #: The env's tools for this episode, as OpenAI function schemas.
    tools: list[dict[str, Any]]
    #: Whether the env has ended the episode.
    over: bool

    async def call_tool(self, name: str, arguments: str | dict[str, Any]) -> str:
        """Run one tool call through the env (one assistant turn holding that call) and
        return what the tool returned (an error message for a bad call, as the env's own
        loop would). Raises :class:`EpisodeOver` once the env has ended the episode."""
        ...
