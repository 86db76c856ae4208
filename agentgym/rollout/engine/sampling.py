"""Picking the next token of each row of a batch, on the device the logits are on.

Shared by the engine and the static-batch loop (:mod:`agentgym.rollout.policies.hf`), so
both sample, and report log-probabilities, the same way: temperature, then top-p; a greedy
row (temperature 0) takes the argmax and reports the log-softmax of the unscaled logits;
a row with a seed draws from its own ``torch.Generator``. A row whose logits are
unusable (a NaN or a +inf among them, or every one -inf: a model whose weights or inputs
went bad) is said so, and sampled from a stand-in, never passed on: drawing from NaN
probabilities is a device-side assert on a GPU, which ends the whole process.
"""

from __future__ import annotations

from typing import Any

from agentgym.core.policies import Sampling


def sample_tokens(logits: Any, temperature: Any, top_p: Any, samplings: list[Sampling],
                  generators: list[Any]) -> tuple[Any, Any, Any]:
    """One token per row of ``logits`` (``[rows, vocab]``, float32), its log-probability
    under the distribution it was drawn from, and whether the row's logits were usable
    (``[rows]`` bool; the token and log-probability of an unusable row mean nothing).
    ``temperature`` and ``top_p`` are per-row tensors; ``samplings`` and ``generators``
    (None: torch's global generator) per row."""
    import torch

    # A row's max is NaN when any logit is, +inf or -inf when those make it unusable: one
    # reduction, where three checks would each read the whole row.
    usable = logits.amax(dim=-1).isfinite()
    logits = torch.where(usable[:, None], logits, torch.zeros_like(logits))
    greedy = temperature == 0
    scaled = logits / torch.where(greedy, torch.ones_like(temperature), temperature)[:, None]
    if any(s.top_p < 1 and s.temperature > 0 for s in samplings):
        nucleus = (top_p < 1) & ~greedy
        ordered, order = scaled.sort(dim=-1, descending=True)
        probs = ordered.softmax(dim=-1)
        # drop a token when the tokens ranked above it already hold top_p of the mass
        drop = (probs.cumsum(dim=-1) - probs) >= top_p[:, None]
        drop &= nucleus[:, None]
        scaled = scaled.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), -torch.inf)
    logp = scaled.log_softmax(dim=-1)
    picked = logits.argmax(dim=-1)
    sampled = [i for i, s in enumerate(samplings) if s.temperature > 0]
    if sampled:
        probs = logp.exp()
        shared = [i for i in sampled if generators[i] is None]
        if shared:
            picked[shared] = torch.multinomial(probs[shared], 1).squeeze(-1)
        for i in sampled:
            if generators[i] is not None:
                picked[i] = torch.multinomial(probs[i], 1, generator=generators[i])[0]
    return picked, logp.gather(-1, picked[:, None]).squeeze(-1), usable
