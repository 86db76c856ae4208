"""The token-level policy contract: token ids in, sampled token ids and logprobs out.

Training needs the exact tokens a model sampled, so the rollout loop never re-tokenizes
model text: it sends the whole sequence so far as ``prompt_ids`` and appends what comes
back. A :class:`TokenPolicy` is anything with a ``tokenizer`` and an async ``generate``:

* ``hf:PATH``: a transformers model on CPU or GPU; concurrent requests from many episodes
  are batched into one forward pass.
* ``openai:URL``: an OpenAI-compatible server (vLLM's included) over HTTP, with token ids
  and logprobs where the server returns them.
* ``vllm:MODEL``: an in-process vLLM engine (GPU only, imported lazily).

Policies are registered through the ``agentgym_policies`` hook like the text-level ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


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

    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"Sampling.max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"Sampling.temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"Sampling.top_p must be in (0, 1], got {self.top_p}")


@dataclass
class Generation:
    """One sampled completion.

    Attributes:
        token_ids: the sampled tokens, the end-of-turn token included when one was sampled.
        logprobs: the log-probability of each sampled token under the sampling policy
            (same length as ``token_ids``), or None when the backend cannot say.
        finish_reason: ``"stop"`` (an end-of-turn token was sampled) or ``"length"``.
    """

    token_ids: list[int]
    logprobs: list[float] | None
    finish_reason: str
    metrics: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class TokenPolicy(Protocol):
    """Samples completions of token sequences."""

    #: A Hugging Face tokenizer with the chat template the model was trained with.
    tokenizer: Any

    async def generate(self, prompt_ids: list[int], sampling: Sampling) -> Generation:
        """Sample one completion of ``prompt_ids``. Concurrent calls are allowed and are
        where batching backends win."""
        ...
