"""Picking the next token of each row of a batch, on the device the logits are on.

Shared by the engine and the static-batch loop (:mod:`agentgym.rollout.policies.hf`), so
both sample, and report log-probabilities, the same way: temperature, then top-p; a greedy
row (temperature 0) takes the argmax and reports the log-softmax of the unscaled logits;
a sampled row draws its token by inverse CDF (one uniform number a row, from the row's own
``torch.Generator`` when it has a seed). A row whose logits are
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
    # On a CPU the check is free to read, and a pass over every logit is not (it was a
    # fifth of this function); on a GPU reading it would wait for the forward pass.
    if logits.device.type != "cpu" or not bool(usable.all()):
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
    sampled = [i for i, s in enumerate(samplings) if s.temperature > 0]
    # argmax for the greedy rows; a batch that samples every row draws them all below
    picked = (logits.argmax(dim=-1) if len(sampled) < len(samplings)
              else torch.zeros(len(samplings), dtype=torch.long, device=logits.device))
    if sampled:
        # Inverse-CDF sampling: one uniform draw a row, where torch.multinomial draws one
        # per token (on a CPU that was 600 us of a 30-row step's 800). A token of zero
        # probability (cut by top-p) adds nothing to the running sum, so it is never found.
        every = len(sampled) == len(samplings)
        rows = slice(None) if every else torch.tensor(sampled, device=logits.device)
        cdf = (logp if every else logp[rows]).exp().cumsum(dim=-1)
        # One draw for the rows without a seed (indexing by a host list would copy it to
        # the device and wait), then one per seeded row from its own generator.
        uniform = torch.rand((len(sampled), 1), device=logits.device)
        for k, i in enumerate(sampled):
            if generators[i] is not None:
                uniform[k] = torch.rand(1, generator=generators[i], device=logits.device)
        found = torch.searchsorted(cdf, uniform * cdf[:, -1:], right=True).squeeze(-1)
        picked[rows] = found.clamp(max=cdf.shape[-1] - 1)
    return picked, logp.gather(-1, picked[:, None]).squeeze(-1), usable
