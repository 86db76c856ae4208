"""The state of one episode, and the exception a tool raises to end it.

An :class:`Episode` is what rewards read when an episode ends: the task, the whole
conversation, what the agent submitted, counters the env keeps while it runs, and the
resources the env set up for it (its sandbox, browser page or store), by name, with the
toolsets bound to them.

An episode is the one home of its resources: the env acquires them in ``setup_episode``
and hands each to the episode with :meth:`Episode.keep`, which releases them when the env
ends the episode (:meth:`Episode.release`: at the next reset, ``arelease`` or ``aclose``).
Graders read them from the episode they grade, never from the env, whose next episode may
already be starting.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from agentgym.core.errors import EnvStateError, PicklableException

if TYPE_CHECKING:
    from agentgym.core.task import Task

Message = dict[str, Any]
R = TypeVar("R")

#: When the current turn's time budget ends (``time.monotonic()``), while its tools run.
_turn_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "agentgym_turn_deadline", default=None)


def turn_time_left() -> float | None:
    """Seconds left of the current turn's time budget (``AgentEnv(turn_timeout_s=...)``),
    for a tool running now; None outside a turn or without a budget.

    A tool that runs commands passes ``min(its timeout, turn_time_left())`` as their
    timeout, so that it stops on its own, with its output, before the env has to cancel it.
    """
    deadline = _turn_deadline.get()
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def within_turn(timeout: float) -> float:
    """``timeout`` shortened to what is left of the current turn's budget (never below a
    tenth of a second, so that a command can still report)."""
    left = turn_time_left()
    return timeout if left is None else max(0.1, min(timeout, left))


class Submitted(PicklableException, Exception):  # a signal, not an error: hence no "Error" suffix
    """Raised by a tool to end the episode (``terminated``): the agent is done.

    Args:
        answer: what the agent submitted, kept as ``episode.submission`` for the reward.
        message: the tool's answer shown to the agent.
    """

    def __init__(self, answer: Any = None, message: str = "Submitted."):
        super().__init__(message)
        self.answer, self.message = answer, message


#: The name of an episode's sandbox in :attr:`Episode.resources` (the convention of every
#: built-in plugin, and where :meth:`AgentEnv.asandbox <agentgym.core.env.AgentEnv.asandbox>`
#: looks).
SANDBOX = "sandbox"


@dataclass
class Episode:
    """One episode's state, owned by its env and read by rewards.

    The env makes it at ``reset`` and updates it at each ``step``; a
    :class:`~agentgym.core.reward.Reward` reads it once the episode has ended.

    Attributes:
        task: the :class:`~agentgym.core.task.Task` played; its ``metadata`` holds what
            the grader needs (an expected answer, tests to run).
        messages: the whole conversation, in OpenAI chat format: the prompt, then each
            assistant turn (its tool calls with their ids) and what came back (tool
            results, error messages).
        turn: how many assistant turns were played.
        submitted: whether a tool raised :class:`Submitted`: the agent said it is done.
        submission: the ``answer`` the agent submitted (``Submitted(answer)``); None
            until then.
        tool_calls: how many well-formed tool calls the agent made.
        tool_errors: how many of its calls went wrong: malformed, an unknown tool, bad
            arguments, a tool that raised :class:`~agentgym.core.tools.ToolError` or
            failed, a turn's time budget spent.
        finish_reason: why the episode ended: ``"submitted"``, ``"max_turns"``, or the
            limit the rollout loop ended it for (``"context_limit"``, ``"wall_time"``);
            None while it runs (:attr:`done` is False).
        reward: the episode's reward once graded; None before.
        metrics: what the reward reported with it (per-test results, the grader's
            reason).
        resources: what the env set up for the episode, by name, for its tools and the
            rewards that check state: ``"sandbox"`` for the episode's
            :class:`~agentgym.core.sandbox.Sandbox` (a convention every built-in plugin
            keeps), ``"page"`` for a browser page, ``"memory"`` for a store. Put there with
            :meth:`keep` what must be released when the episode ends; plain data (answers
            recorded so far) may be set directly.
        toolsets: the env's :class:`~agentgym.core.tools.Toolset` objects bound to this
            episode's resource (``AgentEnv.bind_toolsets``); None until they are bound.
        attempt: which attempt of its task this episode is (0, 1, ... for k attempts; the
            rollout passes it as the reset option ``attempt``).
        group: the group of attempts it belongs to (a GRPO group, the k attempts of
            pass@k; the reset option ``group``).
    """

    task: Task
    messages: list[Message] = field(default_factory=list)
    turn: int = 0
    submitted: bool = False
    submission: Any = None
    tool_calls: int = 0
    tool_errors: int = 0
    finish_reason: str | None = None
    reward: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    toolsets: list[Any] | None = None
    attempt: int = 0
    group: int = 0
    _releases: contextlib.AsyncExitStack = field(
        default_factory=contextlib.AsyncExitStack, init=False, repr=False, compare=False)
    _released: bool = field(default=False, init=False, repr=False, compare=False)
    _uses: int = field(default=0, init=False, repr=False, compare=False)

    @property
    def done(self) -> bool:
        """Whether the episode has ended (it has a ``finish_reason``)."""
        return self.finish_reason is not None

    async def keep(self, name: str, resource: R,
                   release: Callable[[], Awaitable[Any]]) -> R:
        """Hold ``resource`` as ``resources[name]`` until the episode is released, when
        ``await release()`` frees it (resources kept later are released first). Returns
        ``resource``.

        An episode already released (ended from outside while its setup still ran) takes
        nothing: ``resource`` is released at once and :class:`EnvStateError` raised, so
        that a late setup cannot leak what it opened.
        """
        if self._released:  # nothing would release it later
            await release()
            raise EnvStateError(f"episode of task {self.task.id!r} ended before its"
                                f" {name!r} was ready; it was released")
        self.resources[name] = resource
        self._releases.push_async_callback(release)
        return resource

    async def release(self) -> None:
        """Release every resource :meth:`keep` took, last kept first, and drop the bound
        toolsets; while the episode is :meth:`in_use`, that happens when the last use ends.
        Idempotent; every release runs even when one raises (the error is raised once all
        have run)."""
        self._released = True
        if not self._uses:
            await self._close()

    @contextlib.asynccontextmanager
    async def in_use(self) -> AsyncIterator[Episode]:
        """Keep the episode's resources while the block runs, even if the episode is
        released meanwhile (its grader reads its sandbox while the env's next episode
        starts): the release then happens as the block ends. Raises
        :class:`EnvStateError` if the resources are already released."""
        if self._released and not self._uses:
            raise EnvStateError(f"the episode of task {self.task.id!r} was released: its"
                                " resources are gone")
        self._uses += 1
        try:
            yield self
        finally:
            self._uses -= 1
            if self._released and not self._uses:
                await self._close()

    async def _close(self) -> None:
        self.toolsets = None
        await self._releases.aclose()
