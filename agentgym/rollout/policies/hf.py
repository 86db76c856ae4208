"""``hf:PATH``: a transformers causal LM as a :class:`~agentgym.core.policies.TokenPolicy`.

Many episodes call :meth:`HFPolicy.generate` at once; their requests are batched (see
:mod:`agentgym.rollout.policies.batching`): each batch is left-padded and decoded with a KV
cache in a worker thread, so the event loop keeps serving sandboxes and tools meanwhile.

What each request gets back (:class:`~agentgym.core.policies.Generation`):

* ``token_ids``: the sampled tokens, up to and including the first stop token
  (``finish_reason="stop"``), else exactly ``sampling.max_tokens`` tokens
  (``"length"``). Padding never appears. The stop tokens are the tokenizer's eos token
  and the model's ``generation_config.eos_token_id`` (``<|im_end|>`` for ChatML models).
* ``logprobs``: one per token, computed from the same logits the token was sampled from
  (no second forward pass): the log-softmax of ``logits / temperature`` after top-p
  filtering, i.e. the log-probability under the distribution actually sampled from (what
  vLLM calls ``processed_logprobs``, the mode TRL uses). With ``top_p=1`` it equals what a
  trainer computes as ``log_softmax(logits / temperature)``. Greedy requests
  (``temperature=0``) report the log-softmax of the unscaled logits.

Seeds: a request with ``sampling.seed`` samples from its own ``torch.Generator`` seeded
with it, so its draws do not depend on the other requests in its batch. Its tokens repeat
exactly when it is run again in a batch of the same shape (same prompt lengths); in a batch
of another shape, padding changes the float rounding of the logits slightly, which can
(rarely) change a draw. Requests without a seed draw from torch's global generator.

Weights: pass a loaded ``PreTrainedModel`` (a trainer's model) and rollouts use its current
weights, since the policy holds the same object; or call :meth:`HFPolicy.update_weights`.
Batches run in eval mode (no dropout); a shared model's train mode is restored after each.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable
from typing import Any

from agentgym.core.errors import AgentGymError, InvalidArgumentError
from agentgym.core.policies import Generation, Sampling
from agentgym.rollout.models import load_causal_lm, load_tokenizer, model_folder, source_folder
from agentgym.rollout.policies.batching import BatchedPolicy

__all__ = ["HFPolicy", "hf_policy"]

class HFPolicy(BatchedPolicy):
    """Samples completions from a transformers causal LM, batching concurrent requests.

    Args:
        model_or_path: a folder saved with ``save_pretrained`` (or the id of a hub model
            already in the local hub cache), or a loaded ``PreTrainedModel``, which is
            shared, not copied.
        tokenizer: the tokenizer (object or path); default: loaded from the model folder.
        device: where to run; default: the device a given model is on, else ``cuda`` when
            available, else ``cpu``. A given model is moved only when this is set.
        dtype: weights' dtype when loading from a path (``torch.bfloat16``, ``"float32"``,
            ...); default: the dtype in the model's config.
        max_batch_size: the most requests decoded together.
        batch_wait_ms: how long the batcher waits for more requests once one arrives.
        stop_token_ids: tokens that end a completion; default: the tokenizer's eos token
            and the model's ``generation_config.eos_token_id``.

    Attributes:
        batches_run: batches decoded so far (a forward pass per token serves a whole batch).
        requests_served: completions returned so far.
    """

    def __init__(
        self,
        model_or_path: Any,
        tokenizer: Any = None,
        device: Any = None,
        dtype: Any = None,
        max_batch_size: int = 32,
        batch_wait_ms: float = 2.0,
        stop_token_ids: Iterable[int] | None = None,
    ):
        import torch

        super().__init__(max_batch_size, batch_wait_ms)
        if isinstance(model_or_path, (str, os.PathLike)):
            folder = model_folder(model_or_path)
            self.model = load_causal_lm(folder, dtype)
            tokenizer = tokenizer if tokenizer is not None else folder
            target = device or ("cuda" if torch.cuda.is_available() else "cpu")
            self.model.to(target).eval()
        else:
            if not hasattr(model_or_path, "generation_config") or not callable(model_or_path):
                raise TypeError(
                    "HFPolicy needs a transformers causal LM (PreTrainedModel) or the path of"
                    f" one, got {type(model_or_path).__name__}"
                )
            self.model = model_or_path
            if device is not None:
                self.model.to(device)
            if tokenizer is None:
                tokenizer = source_folder(self.model)
        if isinstance(tokenizer, (str, os.PathLike)):
            tokenizer = load_tokenizer(tokenizer)
        self.tokenizer = tokenizer
        self.device = next(self.model.parameters()).device
        self.vocab_size = int(self.model.get_input_embeddings().weight.shape[0])
        self.stop_token_ids = frozenset(
            stop_token_ids if stop_token_ids is not None else _default_stops(self)
        )
        if not self.stop_token_ids:
            raise InvalidArgumentError(
                "HFPolicy found no stop token: set the tokenizer's eos_token or pass"
                " stop_token_ids=[...]"
            )
        pad = tokenizer.pad_token_id
        self.pad_token_id = int(pad if pad is not None else min(self.stop_token_ids))

    def __repr__(self) -> str:
        name = getattr(self.model.config, "name_or_path", "") or type(self.model).__name__
        return f"HFPolicy({name!r}, device={str(self.device)!r})"

    def _check_prompt(self, prompt: list[int]) -> None:
        low, high = min(prompt), max(prompt)
        if low < 0 or high >= self.vocab_size:
            bad = low if low < 0 else high
            raise InvalidArgumentError(
                f"prompt token id {bad} is outside the model's vocabulary"
                f" (0..{self.vocab_size - 1}); tokenize with this policy's tokenizer"
            )

    def update_weights(self, state_dict_or_model: Any) -> None:
        """Load new weights (a state dict, or a model whose state dict to copy) between
        batches; a batch in flight finishes with the old ones."""
        state = state_dict_or_model
        if state is self.model:
            return
        if hasattr(state, "state_dict") and callable(state.state_dict):
            state = state.state_dict()
        with self._run_lock:
            self.model.load_state_dict(state, strict=True)

    def _decode_batch(self, requests: list[tuple[list[int], Sampling]]) -> list[Generation]:
        import torch

        with torch.inference_mode():
            # Eval mode for sampling: dropout off, and gradient checkpointing (train mode
            # only) would turn the KV cache off. A trainer's model gets its mode back.
            training = self.model.training
            self.model.eval()
            try:
                return _decode(self, requests)
            finally:
                self.model.train(training)


def hf_policy(argument: str | None) -> HFPolicy:
    """``hf:PATH``: the transformers model saved in folder ``PATH``."""
    if not argument:
        raise AgentGymError(
            "the hf policy needs a model folder: --policy hf:PATH (a folder saved with"
            " save_pretrained, e.g. one built by agentgym.testing.build_tiny_model)"
        )
    return HFPolicy(argument)


def _default_stops(policy: HFPolicy) -> set[int]:
    stops: set[int] = set()
    if policy.tokenizer.eos_token_id is not None:
        stops.add(int(policy.tokenizer.eos_token_id))
    configured = getattr(policy.model.generation_config, "eos_token_id", None)
    if isinstance(configured, int):
        stops.add(configured)
    elif configured:
        stops.update(int(t) for t in configured)
    return stops


# ---- decoding --------------------------------------------------------------------------------


def _decode(policy: HFPolicy, requests: list[tuple[list[int], Sampling]]) -> list[Generation]:
    """Decode one left-padded batch with a KV cache, token by token, dropping rows from the
    batch as they finish."""
    import torch
    from transformers import DynamicCache

    model, device = policy.model, policy.device
    size = len(requests)
    width = max(len(p) for p, _ in requests)
    ids = torch.full((size, width), policy.pad_token_id, dtype=torch.long)
    mask = torch.zeros((size, width), dtype=torch.long)
    for row, (prompt, _) in enumerate(requests):
        ids[row, width - len(prompt) :] = torch.tensor(prompt)
        mask[row, width - len(prompt) :] = 1
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)

    samplings = [s for _, s in requests]
    temperature = torch.tensor([s.temperature for s in samplings], device=device)
    top_p = torch.tensor([s.top_p for s in samplings], device=device)
    generators = [
        None if s.seed is None else torch.Generator(device=device).manual_seed(s.seed)
        for s in samplings
    ]
    tokens: list[list[int]] = [[] for _ in requests]
    logprobs: list[list[float]] = [[] for _ in requests]
    finish: list[str] = ["length"] * size
    done = [False] * size
    rows = list(range(size))  # the request behind each row of the batch

    cache = DynamicCache(config=model.config)
    # transformers 5.24 renamed past_key_values to cache (the old name goes in 5.40)
    takes_cache = "cache" in inspect.signature(model.forward).parameters
    cache_arg = {"cache" if takes_cache else "past_key_values": cache}
    can_drop = True
    logits = model(
        input_ids=ids,
        attention_mask=mask,
        position_ids=positions,
        use_cache=True,
        logits_to_keep=1,
        **cache_arg,
    ).logits[:, -1, :]
    if cache.get_seq_length() != width:
        raise RuntimeError(
            f"{type(model).__name__} did not fill the KV cache HFPolicy passed it"
            f" ({cache.get_seq_length()} of {width} positions); HFPolicy needs a causal LM"
            " that accepts a KV cache (past_key_values or cache)"
        )
    while True:
        picked, picked_logprobs = _sample(
            logits.float(),
            temperature,
            top_p,
            [samplings[r] for r in rows],
            [generators[r] for r in rows],
        )
        keep = []
        for index, (row, token, logprob) in enumerate(
            zip(rows, picked.tolist(), picked_logprobs.tolist(), strict=True)
        ):
            if done[row]:
                continue
            tokens[row].append(token)
            logprobs[row].append(logprob)
            if token in policy.stop_token_ids:
                finish[row], done[row] = "stop", True
            elif len(tokens[row]) >= samplings[row].max_tokens:
                done[row] = True
            else:
                keep.append(index)
        if not keep:
            break
        next_ids = picked
        if len(keep) < len(rows) and can_drop:
            select = torch.tensor(keep, device=device)
            try:
                cache.batch_select_indices(select)
            except (NotImplementedError, AttributeError):
                can_drop = False  # finished rows then ride along, their tokens ignored
            else:
                rows = [rows[i] for i in keep]
                temperature, top_p = temperature[select], top_p[select]
                mask, positions, next_ids = mask[select], positions[select], picked[select]
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
        positions = positions[:, -1:] + 1
        logits = model(
            input_ids=next_ids[:, None],
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            **cache_arg,
        ).logits[:, -1, :]
    return [
        Generation(tokens[r], logprobs[r], finish[r], metrics={"batch_size": size})
        for r in range(size)
    ]


def _sample(
    logits: Any,
    temperature: Any,
    top_p: Any,
    samplings: list[Sampling],
    generators: list[Any],
) -> tuple[Any, Any]:
    """Pick one token per row; return the tokens and their log-probabilities under the
    distribution they were drawn from (temperature, then top-p)."""
    import torch

    greedy = temperature == 0
    scaled = logits / torch.where(greedy, torch.ones_like(temperature), temperature)[:, None]
    nucleus = (top_p < 1) & ~greedy
    if any(s.top_p < 1 and s.temperature > 0 for s in samplings):
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
    return picked, logp.gather(-1, picked[:, None]).squeeze(-1)
