"""The policy contract, at its two levels, and how a policy is named and built.

A policy writes the agent's turns. There are two levels; the rollout loop drives either.

**Text level** (:class:`TextPolicy`): ``act(messages, task) -> turn``, where ``messages``
is the conversation so far (OpenAI chat format) and ``turn`` is the next assistant turn:
its text, or an assistant message (``{"role": "assistant", "content": ..., "tool_calls":
...}``). ``act`` may be a plain method or a coroutine; the loop awaits an awaitable. It
serves evaluation, demonstrations and chat APIs that return no tokens. A text policy also
declares two capabilities as class attributes (subclass :class:`TextPolicy` to get both
defaults, False): ``whole_conversation`` (it is shown every message, not only the
context window the env keeps) and ``takes_attempt`` (``act`` is also given ``attempt=``
and ``group=``, which attempt of its task the episode is and its group).

**Token level** (:class:`TokenPolicy`): a ``tokenizer`` (a Hugging Face tokenizer with
the model's chat template) and ``async generate(prompt_ids, sampling) ->
Generation(token_ids, logprobs, finish_reason)``. It serves training, which needs the
exact tokens a model sampled: the loop never re-tokenizes model text, it sends the whole
sequence so far as ``prompt_ids``, appends what comes back, and tokenizes only the new
observation messages. Concurrent ``generate`` calls are allowed (batching backends
serve them together). How to sample is a :class:`Sampling`; what comes back, a
:class:`Generation`.

**Which level.** The loop asks :func:`policy_level`, which checks the two protocols with
``isinstance`` (token level first: a policy with both plays with tokens). Capabilities are
declared, never guessed from a method's signature; an object that keeps neither contract
fails with :class:`PolicyContractError`, which names the members it lacks. A policy of
either level that holds resources (a connection pool, an engine) has ``close()``
(:class:`ClosablePolicy`), which the code that built it calls.

**Names.** A policy is named ``ID`` or ``ID:ARG`` (``--policy`` on the command line, the
``policy`` fields of a training config). ``ID`` is looked up among the policies the
plugins register (``agentgym_policies``, ``agentgym list policies``) and built by
``factory(ARG)``, with ``None`` when there is no argument: :func:`build_policy`. The id
ends at the first colon, so the argument may hold colons (``openai:http://host:8000/v1``).

Built in, from the ``core`` plugin (text level):

* ``oracle``: replays the task's reference solution, one turn per step, through the same
  ``step`` path a model's turns take. For an env whose tasks have solutions it scores 1.0:
  that validates the tasks and the grader.
* ``noop``: answers every turn with text that calls no tool and submits nothing; it
  scores 0.0 wherever the grader is sound.
* ``wrong`` (``wrong:K``): replays the task's first (K-th, from 1) known-wrong solution
  (``task.metadata["wrong_solutions"]``, see :mod:`agentgym.core.task`) as ``oracle``
  replays the reference: it scores below 1.0 wherever the grader is sound. Validation
  plays it; mixed with ``oracle`` in SFT demonstrations it gives a warm-up whose policy
  sometimes takes the wrong path, which reinforcement learning can then learn away.
* ``scripted:FILE.json``: replays a fixed list of turns from a JSON file
  (:class:`ScriptedPolicy`, also in :mod:`agentgym.testing`).

and from the ``policies`` plugin (token level, in the rollout package): ``hf:PATH`` (a
transformers model, CPU or GPU), ``openai:URL`` (an OpenAI-compatible server, vLLM's
included), ``vllm:MODEL`` (an in-process vLLM engine, GPU only).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from agentgym.core.errors import AgentGymError, InvalidArgumentError
from agentgym.core.plugins import plugin_host
from agentgym.core.settings import check_settings
from agentgym.core.task import Task

if TYPE_CHECKING:
    from agentgym.core.registry import Spec

Message = dict[str, Any]
Turn = str | Message


# ---- text level ------------------------------------------------------------------------------


@runtime_checkable
class TextPolicy(Protocol):
    """Writes the next assistant turn from the conversation so far.

    ``messages`` is what the agent sees: when the env bounds the context
    (:mod:`agentgym.core.context`), only that window. Subclass this class to inherit the
    capability defaults below, or declare both attributes on a class of your own.
    """

    #: True for a policy that replays turns by their number rather than reading them
    #: (``oracle``, ``wrong``, ``scripted``): it is always given every message.
    whole_conversation: bool = False
    #: True for a policy whose ``act`` also takes the keywords ``attempt`` and ``group``
    #: (which attempt of its task the episode is, and its group: pass@k, a GRPO group).
    takes_attempt: bool = False

    def act(self, messages: list[Message], task: Task) -> Any:
        """Return the next turn (text or an assistant message), or an awaitable of it.
        With :attr:`takes_attempt`, called as ``act(messages, task, attempt=, group=)``."""
        ...


# ---- token level -----------------------------------------------------------------------------


@dataclass
class Sampling:
    """How to sample one completion.

    Args:
        max_tokens: tokens to sample at most; the completion then ends with
            ``finish_reason="length"``.
        temperature: 0 for greedy decoding.
        top_p: nucleus sampling mass.
        seed: per-request seed where the backend supports one (None: random).
    """

    max_tokens: int = field(default=256, metadata={"min": 1})
    temperature: float = field(default=1.0, metadata={"min": 0})
    top_p: float = field(default=1.0, metadata={"gt": 0, "max": 1})
    seed: int | None = None

    def __post_init__(self) -> None:
        check_settings(self)  # the bounds above (agentgym.core.settings)


@dataclass
class Generation:
    """One sampled completion.

    Attributes:
        token_ids: the sampled tokens, the end-of-turn token included when one was sampled.
        logprobs: the log-probability of each sampled token under the sampling policy
            (same length as ``token_ids``), or None when the backend cannot say.
        finish_reason: ``"stop"`` (an end-of-turn token was sampled) or ``"length"``.
        metrics: backend-specific numbers about this request (free-form).
        versions: the version of the weights that sampled each token (same length as
            ``token_ids``; a backend whose weights change while it decodes, such as the
            engine during asynchronous training, counts their updates), or None when the
            backend does not track them.
    """

    token_ids: list[int]
    logprobs: list[float] | None
    finish_reason: str
    metrics: dict[str, Any] = field(default_factory=dict)
    versions: list[int] | None = None


@runtime_checkable
class TokenPolicy(Protocol):
    """Samples completions of token sequences. A class may subclass this to say that it
    keeps the contract; it needs nothing more than the two members below."""

    #: A Hugging Face tokenizer with the chat template the model was trained with.
    tokenizer: Any

    async def generate(self, prompt_ids: list[int], sampling: Sampling) -> Generation:
        """Sample one completion of ``prompt_ids``. Concurrent calls are allowed and are
        where batching backends win."""
        ...


@runtime_checkable
class ClosablePolicy(Protocol):
    """A policy of either level that holds resources (a connection pool, an engine): the
    code that built it calls ``close()`` when done with it."""

    def close(self) -> None:
        """Release what the policy holds."""
        ...


# ---- which level -----------------------------------------------------------------------------


class PolicyContractError(AgentGymError, TypeError):
    """An object played as a policy keeps neither the text nor the token contract."""


_MEMBERS = {"text": ("act", "whole_conversation", "takes_attempt"),
            "token": ("tokenizer", "generate")}


def policy_level(policy: object) -> Literal["token", "text"]:
    """Which contract ``policy`` keeps: ``"token"`` (:class:`TokenPolicy`, checked first)
    or ``"text"`` (:class:`TextPolicy`).

    Raises:
        PolicyContractError: it keeps neither; the message names what it lacks.
    """
    if isinstance(policy, TokenPolicy):
        return "token"
    if isinstance(policy, TextPolicy):
        return "text"
    # Only to word the error: which members each contract would still need.
    present = set(dir(policy))
    lacks = {level: [m for m in members if m not in present]
             for level, members in _MEMBERS.items()}
    raise PolicyContractError(
        f"{type(policy).__name__} is not a policy: as a text policy it lacks"
        f" {', '.join(lacks['text'])}; as a token policy, {', '.join(lacks['token'])}."
        " Subclass agentgym.core.policies.TextPolicy (it declares whole_conversation and"
        " takes_attempt, both False) and define act(messages, task), or give a token"
        " policy a tokenizer and async generate(prompt_ids, sampling)")


# ---- names -----------------------------------------------------------------------------------


def lookup_policy(name: str) -> tuple[Spec, str | None]:
    """The registered :class:`~agentgym.core.contributions.Spec` of policy ``name`` (``ID`` or
    ``ID:ARG``) and its argument (None without one), without building it.

    Raises:
        UnknownIdError: no loaded plugin registers ``ID`` (the message lists the closest
            ids and names ``agentgym list policies``).
    """
    policy_id, colon, argument = name.partition(":")
    spec = plugin_host().get("policies", policy_id)
    return spec, (argument if colon and argument else None)


def build_policy(name: str) -> TextPolicy | TokenPolicy:
    """Build policy ``name``: ``ID`` or ``ID:ARG`` (``oracle``, ``wrong:2``,
    ``hf:PATH``; the names are described in :mod:`agentgym.core.policies`), a
    :class:`TextPolicy` or a :class:`TokenPolicy` as the id's plugin makes it.

    Raises:
        UnknownIdError: no loaded plugin registers ``ID``.
        PolicyContractError: the id's factory cannot be called with one argument.
    """
    spec, argument = lookup_policy(name)
    factory = spec.load()
    try:  # the factory's own TypeErrors stay its own; a wrong signature is the author's
        inspect.signature(factory).bind(argument)
    except TypeError as error:
        raise PolicyContractError(
            f"policy {spec.id!r}: its factory {getattr(factory, '__qualname__', factory)!r}"
            f" cannot be called with one argument ({error}): a policy factory takes the"
            " text after ':' in the policy's name, or None without one (def"
            " factory(arg=None), or __init__(self, arg=None) for a class)") from None
    except ValueError:  # no signature to read (a builtin): let the call say what it says
        pass
    return factory(argument)


# ---- built-in text policies ------------------------------------------------------------------


def _turn_index(messages: list[Message]) -> int:
    return sum(1 for m in messages if m["role"] == "assistant")


class OraclePolicy(TextPolicy):
    """Replays ``task.solution``; the env renders it in its own tool-call format."""

    whole_conversation = True  # it counts turns (see TextPolicy)

    def act(self, messages: list[Message], task: Task) -> Turn:
        if not task.solution:
            raise AgentGymError(
                f"task {task.id!r} has no reference solution, so the oracle policy cannot play"
                " it; use tasks that carry a 'solution' or another policy"
            )
        index = _turn_index(messages)
        if index >= len(task.solution):
            return "The reference solution has no more turns."
        return task.solution[index]


class NoopPolicy(TextPolicy):
    """Calls no tool and submits nothing: the floor every grader must score 0."""

    def act(self, messages: list[Message], task: Task) -> Turn:
        return "I will not do anything."


class WrongSolutionPolicy(TextPolicy):
    """Replays the task's known-wrong solution ``index`` (from 0) as the oracle replays the
    reference solution."""

    whole_conversation = True  # it counts turns (see TextPolicy)

    def __init__(self, index: int = 0):
        if index < 0:
            raise InvalidArgumentError(f"the known-wrong solution index must be >= 0, got {index}")
        self.index = index

    def act(self, messages: list[Message], task: Task) -> Turn:
        wrong = task.wrong_solutions()
        if self.index >= len(wrong):
            raise AgentGymError(
                f"task {task.id!r} has {len(wrong)} known-wrong solution(s), so the wrong policy"
                f" cannot play #{self.index + 1}; use tasks that carry"
                " metadata['wrong_solutions'] (see agentgym.core.task) or another policy")
        return OraclePolicy().act(messages, replace(task, solution=wrong[self.index]))

    @classmethod
    def from_argument(cls, argument: str | None) -> WrongSolutionPolicy:
        """``wrong`` (the first known-wrong solution) or ``wrong:K`` (the K-th, from 1)."""
        if not argument:
            return cls()
        try:
            number = int(argument)
        except ValueError:
            number = 0
        if number < 1:
            raise AgentGymError(f"wrong:{argument}: K must be a whole number >= 1 (wrong:1 is"
                                " the first known-wrong solution)")
        return cls(number - 1)


class ScriptedPolicy(TextPolicy):
    """Plays fixed turns in order, or a function of the conversation.

    Args:
        turns: the turns to play, or ``f(messages, task) -> turn``.
        repeat_last: after the last turn, keep playing it (otherwise fall back to noop).
    """

    whole_conversation = True  # it counts turns (see TextPolicy)

    def __init__(
        self,
        turns: Sequence[Turn] | Callable[[list[Message], Task], Turn],
        repeat_last: bool = False,
    ):
        self.turns, self.repeat_last = turns, repeat_last

    def act(self, messages: list[Message], task: Task) -> Turn:
        if callable(self.turns):
            return self.turns(messages, task)
        index = _turn_index(messages)
        if index < len(self.turns):
            return self.turns[index]
        if self.repeat_last and self.turns:
            return self.turns[-1]
        return NoopPolicy().act(messages, task)

    @classmethod
    def from_file(cls, path: str | None) -> ScriptedPolicy:
        """``scripted:FILE.json``: a JSON list of turns (strings or assistant messages)."""
        if not path:
            raise AgentGymError("the scripted policy needs a file: --policy scripted:turns.json")
        try:
            turns = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise AgentGymError(f"cannot read scripted turns from {path!r}: {e}") from e
        if not isinstance(turns, list):
            kind = type(turns).__name__
            raise AgentGymError(f"{path!r} must hold a JSON list of turns, got a {kind}")
        return cls(turns)
