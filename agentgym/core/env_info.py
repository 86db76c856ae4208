"""The dicts that cross the env protocol beside the messages: ``reset``'s options, and the
info of ``reset`` and ``step``, as ``TypedDict``s.

Each key is specified here, where it is declared; :mod:`agentgym.core.env` says when each
call sets it. These are the keys agentgym itself sets and reads. An env may add keys of
its own (an :class:`~agentgym.core.env.AgentEnv` through its ``extra_info`` hook); the
rollout loop reads only those below, each with ``.get``, since an env written against the
protocol alone (not an ``AgentEnv``) may leave the optional ones out.
"""

# No ``from __future__ import annotations``: TypedDict reads NotRequired from real
# annotations (its required and optional keys are introspected by tests).
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

if TYPE_CHECKING:
    from agentgym.core.task import Task


class ResetOptions(TypedDict, total=False):
    """``reset(options=...)``: every key optional."""

    #: Which task (one of ``task_ids()``); otherwise drawn with the seeded generator.
    task_id: str
    #: Return the opening messages at once and finish the episode's setup (its sandbox)
    #: before the first ``step`` needs it.
    overlap_setup: bool
    #: The step that ends the episode returns reward 0.0 with ``grading_deferred``;
    #: ``agrade()`` scores it later, outside a generation slot.
    defer_grading: bool
    #: Which attempt of its task this episode is (0, 1, ... for k attempts).
    attempt: int
    #: Its group of attempts (the k attempts of pass@k, a GRPO group).
    group: int
    #: Seconds the setup may run; a setup still running then is cancelled.
    setup_timeout_s: float
    #: Read-only mounts (path inside -> host path) the episode's sandbox gets besides what
    #: its env's spec mounts: a harness's program and the bridge to the model server
    #: (:mod:`agentgym.core.harness`). Every sandbox the setup opens through
    #: ``open_sandbox`` gets them (:func:`agentgym.core.sandbox.extra_mounts`).
    sandbox_mounts: dict[str, str]


#: The reset options' names (what :class:`ResetOptions` declares).
RESET_OPTIONS = tuple(ResetOptions.__annotations__)


class ExtraInfo(TypedDict, total=False):
    """Keys an env adds to reset and step info for what it alone knows (``extra_info``);
    the loop reads them."""

    #: PNG bytes of what the agent sees (web envs made with ``screenshot=True``); the loop
    #: keeps each in the trajectory with the latest message.
    screenshot: bytes
    #: Where the agent's context window now starts, an index into the conversation
    #: (:mod:`agentgym.core.context`); steps only.
    context_start: int


class ResetInfo(ExtraInfo):
    """``reset``'s info."""

    #: The task's id.
    task_id: str
    #: The episode's tools as OpenAI function schemas.
    tools: list[dict[str, Any]]
    #: The task, its solution rendered in the env's tool-call format: what text-level
    #: policies such as ``oracle`` read.
    task: "Task"
    #: The ``attempt`` and ``group`` reset options as the episode took them.
    attempt: NotRequired[int]
    group: NotRequired[int]


class StepInfo(ExtraInfo, total=False):
    """``step``'s info. :class:`~agentgym.core.env.AgentEnv` sets every key but the last
    step's on every step; an env written against the protocol alone needs only
    ``assistant_message`` and ``tool_errors``."""

    #: Assistant turns played so far, this one included.
    turn: int
    #: The turn as the env recorded it: parsed, its tool calls in OpenAI format with ids.
    assistant_message: dict[str, Any]
    #: The turn's parsed tool calls: ``{"id", "name", "arguments"}`` each.
    tool_calls: list[dict[str, Any]]
    #: How many of this turn's calls went wrong (malformed, unknown, failed).
    tool_errors: int
    #: Their error messages.
    errors: list[str]
    #: The turn called no tool (and had no malformed call).
    no_tool_call: bool
    #: The agent's context window shows the env's replies only, none of its own messages
    #: (:attr:`AgentEnv.context_replies_only <agentgym.core.env.AgentEnv.context_replies_only>`,
    #: :mod:`agentgym.core.context`); set on every step by an env that wants it.
    context_replies_only: bool
    #: Last step only: why the episode ended (``submitted``, ``max_turns``, ...).
    finish_reason: str
    #: Last step only, without ``defer_grading``: what the reward reported.
    reward_metrics: dict[str, Any]
    #: Last step only, with ``defer_grading``: the reward is left to ``agrade()``.
    grading_deferred: bool
