"""Capture: an agent program's model calls, recorded token for token, made into samples.

An agent program (a harness: mini-swe-agent, an agents-SDK agent, a team's own CLI) talks
to an OpenAI-compatible endpoint. Served by ``agentgym serve`` with a :class:`CaptureStore`
(:func:`~agentgym.rollout.serve.openai_app`), each episode gets its own base URL,
``/episodes/KEY/v1``; every call made there is a :class:`CapturedCall`: the prompt's token
ids (the request's messages rendered with the model's chat template, as the policy was
given them), the completion's sampled token ids, their log-probabilities and the policy
versions that sampled them. Nothing is re-tokenised after the fact.

After the episode, :func:`build_samples` makes the calls into training samples by the
**prefix rule**: a call whose prompt starts with the previous call's prompt and completion,
token for token, continues the same sample; the tokens in between (the tool results, the
next user turn, an end-of-turn the template adds after a completion cut at its budget) go
in with loss mask 0, the completion with mask 1. Otherwise a new sample starts at this
call's prompt. The two ways the rule breaks are told apart and counted:

* **rewritten**: the previous call's prompt is not a prefix of this one: the harness
  changed its history (summarised it, dropped old turns, started a sub-agent). A new
  sample is what should happen.
* **mismatch**: the previous prompt is kept, but the previous completion does not come
  back as the tokens sampled (the harness re-serialised the assistant turn: tool-call JSON
  with other spacing, a reasoning block dropped, text that re-tokenises differently). The
  re-rendered tokens were never sampled, so no mask may cover them: the new sample starts
  here, and the mismatch is counted so that a harness that always re-serialises shows up
  (every call a sample of its own) instead of training on tokens nobody sampled.

So a sample's mask-1 tokens are always exactly tokens the policy sampled, with the
log-probabilities it sampled them with.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field
from typing import Any

from agentgym.core.errors import AgentGymError, InvalidArgumentError

__all__ = ["CaptureStore", "CapturedCall", "Sample", "Samples", "UnknownEpisodeKeyError",
           "build_samples"]


class UnknownEpisodeKeyError(AgentGymError, KeyError):
    """A call under an episode key that was never opened, or whose episode has ended."""

    def __str__(self) -> str:  # KeyError's own quotes its argument
        return str(self.args[0]) if self.args else ""


@dataclass
class CapturedCall:
    """One model call of an episode, as the policy saw and sampled it.

    Attributes:
        prompt_ids: the prompt's token ids (the request rendered by the server).
        completion_ids: the sampled token ids (with the stop token when one ended it).
        logprobs: each sampled token's log-probability, or None when the policy cannot
            say (its samples then have none).
        versions: each sampled token's policy version, when the policy reports them.
        finish_reason: ``stop`` or ``length``.
        messages: the request's messages (a chat call; None for a text completion), to
            show the episode as a conversation; the tokens are what counts.
        text: the completion as the server answered it.
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] | None
    versions: list[int] | None = None
    finish_reason: str = "stop"
    messages: list[dict[str, Any]] | None = None
    text: str | None = None


@dataclass
class Sample:
    """One training sequence: ``token_ids`` with ``loss_mask`` 1 on the tokens the policy
    sampled (their ``logprobs`` and ``versions``; 0.0 and -1 elsewhere). ``logprobs`` is
    None when a call's policy could not say them."""

    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    calls: int = 0

    @property
    def prompt_length(self) -> int:
        """Tokens before the first sampled one."""
        return self.loss_mask.index(1) if 1 in self.loss_mask else len(self.loss_mask)

    def _extend(self, ids: list[int], sampled: CapturedCall | None) -> None:
        self.token_ids.extend(ids)
        if sampled is None:
            self.loss_mask.extend([0] * len(ids))
            if self.logprobs is not None:
                self.logprobs.extend([0.0] * len(ids))
            self.versions.extend([-1] * len(ids))
        else:
            self.loss_mask.extend([1] * len(ids))
            if sampled.logprobs is None:
                self.logprobs = None
            elif self.logprobs is not None:
                self.logprobs.extend(sampled.logprobs)
            self.versions.extend(sampled.versions if sampled.versions is not None
                                 else [0] * len(ids))


@dataclass
class Samples:
    """What :func:`build_samples` made of an episode's calls, and how often the prefix rule
    broke (module docstring)."""

    samples: list[Sample]
    rewritten: int = 0
    mismatches: int = 0

    @property
    def metrics(self) -> dict[str, int]:
        return {"capture/calls": sum(s.calls for s in self.samples),
                "capture/samples": len(self.samples),
                "capture/rewritten": self.rewritten, "capture/mismatches": self.mismatches}


def build_samples(calls: list[CapturedCall]) -> Samples:
    """The calls of one episode, in order, as samples by the prefix rule."""
    result = Samples([])
    sample: Sample | None = None
    previous: CapturedCall | None = None
    for call in calls:
        if call.logprobs is not None and len(call.logprobs) != len(call.completion_ids):
            raise InvalidArgumentError(f"a captured call has {len(call.completion_ids)} completion"
                             f" tokens but {len(call.logprobs)} log-probabilities")
        if sample is not None and previous is not None:
            kept = previous.prompt_ids + previous.completion_ids
            if call.prompt_ids[:len(kept)] == kept:
                sample._extend(call.prompt_ids[len(kept):], None)
                sample._extend(call.completion_ids, call)
                sample.calls += 1
                previous = call
                continue
            if call.prompt_ids[:len(previous.prompt_ids)] == previous.prompt_ids:
                result.mismatches += 1
            else:
                result.rewritten += 1
        sample = Sample()
        sample._extend(call.prompt_ids, None)
        sample._extend(call.completion_ids, call)
        sample.calls = 1
        result.samples.append(sample)
        previous = call
    return result


class CaptureStore:
    """The episodes whose calls are being captured, one key each.

    :meth:`open` gives an episode its key (its base URL is ``/episodes/KEY/v1``); the
    server :meth:`record`\\ s each call made under it; :meth:`close` ends the episode and
    returns its calls, after which the key is refused. Thread-safe: the server records on
    its own thread while episodes open and close on theirs.
    """

    def __init__(self) -> None:
        self._calls: dict[str, list[CapturedCall]] = {}
        self._lock = threading.Lock()

    def open(self) -> str:
        """A new episode's key (unguessable, so one episode cannot write into another)."""
        key = secrets.token_urlsafe(16)
        with self._lock:
            self._calls[key] = []
        return key

    def check(self, key: str) -> None:
        """Raise :class:`UnknownEpisodeKeyError` unless ``key`` is an open episode's."""
        with self._lock:
            if key not in self._calls:
                raise UnknownEpisodeKeyError(
                    f"episode key {key!r} is unknown or its episode has ended: use the base"
                    " URL the env gave this episode")

    def record(self, key: str, call: CapturedCall) -> None:
        """Add ``call`` to episode ``key``'s calls."""
        with self._lock:
            calls = self._calls.get(key)
            if calls is None:
                raise UnknownEpisodeKeyError(
                    f"episode key {key!r} is unknown or its episode has ended")
            calls.append(call)

    def close(self, key: str) -> list[CapturedCall]:
        """End episode ``key``: its calls, in the order they were answered."""
        with self._lock:
            calls = self._calls.pop(key, None)
        if calls is None:
            raise UnknownEpisodeKeyError(f"episode key {key!r} is unknown or already closed")
        return calls

    def __len__(self) -> int:
        with self._lock:
            return len(self._calls)
