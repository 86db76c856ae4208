"""The agent loop: one episode of (env, policy), token in, token out.

An :class:`EpisodeRunner` plays one episode in three stages the pipeline schedules
separately: ``init`` (``env.areset``: sandbox setup, prompt tokenization), ``run`` (turns
of generate-then-step), and ``grade`` (``env.agrade``, deferred so it can overlap other
episodes' generation). :meth:`EpisodeRunner.trajectory` then gives the record.

The runner drives the env only through the env protocol
(:class:`~agentgym.core.env.EnvProtocol`): it never reads or sets the env's attributes.
The conversation it records is the one the calls return: the opening messages, then per
turn ``info["assistant_message"]`` and the new messages.

With a token-level policy the runner keeps the exact sequence the model saw: each sampled
completion is appended as is (loss mask 1, its logprobs kept) and only the environment's
new messages are tokenized with the chat template (loss mask 0, see
:mod:`agentgym.rollout.chat`). With a text-level policy (oracle, noop, chat APIs) the same
stages run on messages and the record has no token ids. Which of the two a policy is, and
what it can take, it declares (:func:`~agentgym.core.policies.policy_level`,
``whole_conversation``, ``takes_attempt``): the loop never probes it.

An env may bound what the agent sees (``info["context_start"]``, see
:mod:`agentgym.core.context`): the policy is then shown only that window, while the record
keeps the whole conversation (and, in ``windows``, where each turn's window started). A
window of the env's replies only (``info["context_replies_only"]``) never shows the agent
its own messages, so every turn's window is new. A token-level policy's sequence cannot
drop tokens, so a window that moves starts a new sample: the sequence so far is closed
into ``Trajectory.earlier_samples`` and the window is tokenized afresh as the next
prompt. The trainer trains every sample of the episode with
its advantage (MemAgent's recipe: one episode, many contexts).

Limits end an episode as *truncated* with their reason: the env's turn limit
(``max_turns``), the total token budget (``context_limit``) and wall time (``wall_time``).
Any exception ends only its own episode (``finish_reason`` ``error``, or
``sandbox_error`` when the sandbox died), with the reason in ``error``.
"""

from __future__ import annotations

import base64
import contextlib
import inspect  # only isawaitable: an act() may return a coroutine
import time
import traceback
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, cast

from agentgym.core.context import visible
from agentgym.core.env import EnvProtocol
from agentgym.core.env_info import ResetInfo, ResetOptions, StepInfo
from agentgym.core.errors import InvalidArgumentError
from agentgym.core.policies import Sampling, TextPolicy, TokenPolicy, policy_level
from agentgym.core.sandbox import SandboxError
from agentgym.core.settings import check_settings
from agentgym.rollout.chat import ChatTokens, with_decoded_arguments
from agentgym.rollout.scheduler import GenerationGate
from agentgym.rollout.trajectory import Trajectory


@dataclass
class RolloutConfig:
    """How episodes are played.

    Args:
        sampling: per-turn sampling (``max_tokens`` is the per-turn cap).
        max_total_tokens: prompt plus completion tokens an episode may reach.
        max_wall_s: wall-clock seconds an episode may run (None: no limit).
        seed: base seed; episode ``i`` resets with ``seed + i``.
        tool_schemas: render the env's tool schemas into token-level prompts (the chat
            template's tools section). Off for a model that learned the env's tool protocol
            from demonstrations, such as the CPU quick start's tiny model: its prompts get
            several times shorter. Trajectories still record the schemas.
    """

    sampling: Sampling = field(default_factory=Sampling)
    max_total_tokens: int = field(default=8192, metadata={"min": 1})
    max_wall_s: float | None = field(default=None, metadata={"gt": 0})
    seed: int = 0
    tool_schemas: bool = True

    def __post_init__(self) -> None:
        check_settings(self)  # the bounds above (agentgym.core.settings)


#: Called with ``("generate" | "tool", seconds, turns played before this one)``.
OnTiming = Callable[[str, float, int], None]


@contextlib.asynccontextmanager
async def _timed(timings: dict[str, float], stage: str) -> AsyncIterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - start


class EpisodeRunner:
    """One episode of ``policy`` on ``env`` for ``task_id``, played in stages."""

    def __init__(self, env: EnvProtocol, policy: TextPolicy | TokenPolicy, task_id: str,
                 episode: int, *,
                 env_id: str = "", policy_name: str = "",
                 config: RolloutConfig | None = None, overlap_setup: bool = False,
                 setup_timeout_s: float | None = None, attempt: int = 0,
                 group: int | None = None):
        self.env, self.policy, self.config = env, policy, config or RolloutConfig()
        #: Which contract the policy keeps; one that keeps neither fails here, not per turn.
        self.level = policy_level(policy)
        #: Which attempt of its task this episode is, and its group of attempts (reset
        #: options; a text policy that declares ``takes_attempt`` gets them).
        self.attempt, self.group = attempt, episode if group is None else group
        #: Generate the first turn while the env's setup runs (the reset option).
        self.overlap_setup = overlap_setup
        #: The reset option ``setup_timeout_s`` (None: the env's setup has no limit).
        self.setup_timeout_s = setup_timeout_s
        self.record = Trajectory(env=env_id or type(env).__name__, task_id=task_id,
                                 episode=episode, policy=policy_name)
        self.tokens: ChatTokens | None = None
        self.ids: list[int] = []
        #: The conversation so far, and the task (for text-level policies), from the env.
        self.messages: list[dict[str, Any]] = []
        self.task: Any = None
        #: Where the agent's context window starts (``info["context_start"]``, see
        #: :mod:`agentgym.core.context`): the conversation before it, but for its system
        #: messages, is no longer shown to the policy.
        self.context_start = 0
        #: Whether the window shows the env's replies only (``info["context_replies_only"]``).
        self.replies_only = False
        #: The window's start at each turn played (``Trajectory.windows``).
        self.windows: list[int] = []
        self.over = False
        self.logprobs_known = self.versions_known = True
        self.started = 0.0
        self.failed = False

    # ---- stages -------------------------------------------------------------------------

    async def init(self) -> None:
        """Reset the env for this task (its sandbox is set up here) and tokenize the prompt."""
        if self.failed:
            return
        self.started = time.perf_counter()
        options: ResetOptions = {"task_id": self.record.task_id, "defer_grading": True,
                                 "overlap_setup": self.overlap_setup,
                                 "attempt": self.attempt, "group": self.group}
        if self.setup_timeout_s is not None:
            options["setup_timeout_s"] = self.setup_timeout_s
        try:
            async with _timed(self.record.timings, "init"):
                info: ResetInfo
                messages, info = await self.env.areset(
                    seed=self.config.seed + self.record.episode, options=options)
                self.messages = list(messages)
                self._keep_screenshot(info)
                self.task = info.get("task")
                self.record.tools = info.get("tools") or []
                if self.level == "token":
                    schemas = info["tools"] if self.config.tool_schemas else None
                    tokenizer = cast(TokenPolicy, self.policy).tokenizer
                    self.tokens = ChatTokens(tokenizer, schemas)
                    self.record.prompt_ids = self.tokens.prompt(messages)
                    self.ids = list(self.record.prompt_ids)
        except Exception as e:
            self._fail(e)

    async def run(self, gate: GenerationGate | None = None,
                  on_timing: OnTiming | None = None) -> None:
        """Play turns until the env ends the episode or a limit does (``gate`` and
        ``on_timing``: as for :meth:`turn`)."""
        if self.failed:
            return
        try:
            while not await self.turn(gate, on_timing):
                pass
        except Exception as e:
            self._fail(e)

    async def turn(self, gate: GenerationGate | None = None,
                   on_timing: OnTiming | None = None) -> bool:
        """Play one turn; True when the episode is over (the sync mode steps turn by turn).

        ``gate`` is held around the generation: the pipeline bounds episodes generating at
        once (:class:`~agentgym.rollout.scheduler.GenerationGate`; the wait is the
        ``queue`` timing). ``on_timing`` gets ``("generate" | "tool", seconds, turns
        played before this one)`` as the generation and the env step end (the pipeline's
        scheduler measures the run with it). Both belong to the run playing the episode,
        not to the episode: one prepared ahead is built before that run exists.
        """
        if self.failed:
            return True
        try:
            return await self._turn(gate, on_timing)
        except Exception as e:
            self._fail(e)
            return True

    async def grade(self) -> None:
        """Score the finished episode (tests may run in its sandbox here)."""
        try:
            if not self.failed:
                async with _timed(self.record.timings, "grade"):
                    self.record.reward, self.record.metrics = await self.env.agrade()
        except Exception as e:
            self._fail(e)
        finally:
            self._snapshot()

    def trajectory(self) -> Trajectory:
        """The record, complete once ``grade`` ran (or the episode failed)."""
        if not self.record.messages:
            self._snapshot()
        return self.record

    def _snapshot(self) -> None:
        """Complete the record with the conversation as played."""
        record = self.record
        record.messages = list(self.messages)
        record.finish_reason = record.finish_reason or ""
        record.windows = list(self.windows) if any(self.windows) or self.replies_only else []
        record.context_replies_only = self.replies_only
        if not self.logprobs_known:
            record.logprobs = []
        if not self.versions_known:
            record.versions = []

    # ---- internals ----------------------------------------------------------------------

    async def _turn(self, gate: GenerationGate | None, on_timing: OnTiming | None) -> bool:
        if self.over:
            return True
        if self.config.max_wall_s and time.perf_counter() - self.started > self.config.max_wall_s:
            await self._end("wall_time")
            return True
        timings = self.record.timings
        self.windows.append(self.context_start)
        start = time.perf_counter()
        try:
            if gate is None:
                action = await self._act()
            else:
                async with gate.slot(self.record.turns) as waited:
                    timings["queue"] = timings.get("queue", 0.0) + waited
                    start += waited
                    action = await self._act()
        finally:
            generated = time.perf_counter() - start
            timings["generate"] = timings.get("generate", 0.0) + generated
        if on_timing is not None:
            on_timing("generate", generated, self.record.turns)
        if action is None:
            await self._end("context_limit")
            return True
        start = time.perf_counter()
        info: StepInfo
        try:
            new, _, terminated, truncated, info = await self.env.astep(action)
        finally:
            stepped = time.perf_counter() - start
            timings["tool"] = timings.get("tool", 0.0) + stepped
        if on_timing is not None:
            on_timing("tool", stepped, self.record.turns)
        self.record.turns += 1
        self.record.tool_errors += int(info.get("tool_errors", 0))
        self.messages.append(info.get("assistant_message") or _as_message(action))
        self.messages += new
        self._keep_screenshot(info)
        moved = self._move_window(int(info.get("context_start", self.context_start)))
        if info.get("context_replies_only"):
            self.replies_only = moved = True  # the latest turn has left the window
        if terminated or truncated:
            self.over = True
            self.record.finish_reason = str(info.get("finish_reason")
                                            or ("submitted" if terminated else "truncated"))
            return True
        if self.tokens is not None:
            if moved:
                self._new_sample()
            else:
                self._append(self.tokens.observation(new), model=False)
            if len(self.ids) >= self.config.max_total_tokens:
                await self._end("context_limit")
                return True
        return False

    async def _end(self, reason: str) -> None:
        """End the episode as truncated by one of the loop's limits."""
        self.over = True
        self.record.finish_reason = reason
        await self.env.aend(reason)

    async def _act(self) -> Any:
        """The next assistant turn: sampled tokens (appended) or a text policy's answer."""
        if self.tokens is None:
            policy = cast(TextPolicy, self.policy)
            seen = (list(self.messages) if policy.whole_conversation
                    else visible(self.messages, self.context_start, self.replies_only))
            action = (policy.act(seen, self.task, attempt=self.attempt, group=self.group)
                      if policy.takes_attempt else policy.act(seen, self.task))
            return await action if inspect.isawaitable(action) else action
        budget = self.config.max_total_tokens - len(self.ids)
        if budget < 1:
            return None
        sampling = self.config.sampling
        turn_sampling = Sampling(min(sampling.max_tokens, budget), sampling.temperature,
                                 sampling.top_p, sampling.seed)
        generation = await cast(TokenPolicy, self.policy).generate(list(self.ids), turn_sampling)
        self._append(generation.token_ids, model=True, logprobs=generation.logprobs,
                     versions=generation.versions)
        if generation.finish_reason != "stop":
            # The template closes every assistant turn with its end-of-turn token; the model
            # did not sample it, so the environment writes it (mask 0).
            self._append([self.tokens.eos_id], model=False)
        return self.tokens.decode_turn(generation.token_ids)

    def _keep_screenshot(self, info: ResetInfo | StepInfo) -> None:
        """Record the env's screenshot (PNG bytes in ``info``) with the latest message."""
        png = info.get("screenshot")
        if isinstance(png, bytes | bytearray) and png:
            self.record.screenshots.append({"message": len(self.messages) - 1,
                                            "png": base64.b64encode(png).decode()})

    def _move_window(self, start: int) -> bool:
        """Follow the env's context window; whether it moved."""
        if start < 0 or start > len(self.messages):
            raise InvalidArgumentError(
                f"the env set info['context_start']={start}, outside the conversation's"
                f" {len(self.messages)} messages: it must index a message (see"
                " agentgym.core.context)")
        moved, self.context_start = start != self.context_start, start
        return moved

    def _new_sample(self) -> None:
        """Close the token sequence so far into ``earlier_samples`` and start the next
        sample: the window, tokenized afresh, as its prompt (module docstring)."""
        assert self.tokens is not None
        record = self.record
        prompt = len(record.prompt_ids)
        record.earlier_samples.append({
            "token_ids": list(self.ids),
            "loss_mask": [0] * prompt + record.loss_mask,
            "logprobs": ([0.0] * prompt + record.logprobs) if self.logprobs_known else None,
            "versions": [-1] * prompt + record.versions,
        })
        shown = [with_decoded_arguments(m)
                 for m in visible(self.messages, self.context_start, self.replies_only)]
        record.prompt_ids = self.tokens.prompt(shown)
        self.ids = list(record.prompt_ids)
        record.completion_ids, record.loss_mask = [], []
        record.logprobs, record.versions = [], []

    def _append(self, token_ids: list[int], model: bool, logprobs: list[float] | None = None,
                versions: list[int] | None = None) -> None:
        record = self.record
        self.ids += token_ids
        record.completion_ids += token_ids
        record.loss_mask += [int(model)] * len(token_ids)
        if model and logprobs is None:
            self.logprobs_known = False
        if model and versions is None:
            self.versions_known = False
        record.logprobs += list(logprobs) if model and logprobs else [0.0] * len(token_ids)
        record.versions += list(versions) if model and versions else [-1] * len(token_ids)

    def _fail(self, error: BaseException) -> None:
        self.failed = True
        self.record.finish_reason = "sandbox_error" if isinstance(error, SandboxError) else "error"
        self.record.error = "".join(traceback.format_exception_only(type(error), error)).strip()
        self.record.reward = 0.0


def _as_message(action: Any) -> dict[str, Any]:
    """An action as the assistant message it stands for (for envs whose step info does not
    carry ``assistant_message``)."""
    if isinstance(action, dict):
        return dict(action)
    return {"role": "assistant", "content": action if isinstance(action, str) else str(action)}


async def play_episode(env: EnvProtocol, policy: TextPolicy | TokenPolicy, task_id: str,
                       episode: int = 0, **kwargs: Any) -> Trajectory:
    """Play one whole episode (init, run, grade) and return its trajectory."""
    runner = EpisodeRunner(env, policy, task_id, episode, **kwargs)
    await runner.init()
    await runner.run()
    await runner.grade()
    return runner.trajectory()
