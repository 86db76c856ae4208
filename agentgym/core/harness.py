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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agentgym.core.errors import InvalidArgumentError

__all__ = ["HARNESS_MOUNT", "Harness"]

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
            program that needs only the sandbox's own ``python3``.
        time_limit_s: the program is stopped after this many seconds (the episode ends
            ``harness_timeout`` and is graded as it stands).
        env: environment variables the command gets besides the module's.
        description: one line for ``agentgym list harnesses``.
    """

    id: str
    command: str
    requirements: tuple[str, ...] = ()
    time_limit_s: float = 600.0
    env: Mapping[str, str] = field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        if not self.id or not self.command.strip():
            raise InvalidArgumentError(
                f"Harness(id={self.id!r}, command={self.command!r}): both must be non-empty")
        if isinstance(self.requirements, str):
            raise InvalidArgumentError(
                f"Harness {self.id!r}: requirements={self.requirements!r} is one string; give"
                " a tuple of pip specifiers, e.g. ('mini-swe-agent==2.4.6',)")
        if not self.time_limit_s > 0:
            raise InvalidArgumentError(
                f"Harness {self.id!r}: time_limit_s={self.time_limit_s!r} must be > 0")
        object.__setattr__(self, "requirements", tuple(self.requirements))
        object.__setattr__(self, "env", dict(self.env))
