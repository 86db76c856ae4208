"""``hf-static:PATH``: a transformers causal LM as a
:class:`~agentgym.core.policies.TokenPolicy`, decoded in static batches.

This is the loop that came before the continuous-batching engine
(:class:`~agentgym.rollout.engine.Engine`, the ``hf:`` policy): the engine's outputs are
checked against it, the generation bench compares the two, and it serves models whose
attention the engine cannot drive.

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
from collections.abc import Iterable
from typing import Any

from agentgym.core.errors import AgentGymError
from agentgym.core.policies import Generation, Sampling
from agentgym.rollout.engine.model import LocalModel
from agentgym.rollout.engine.sampling import sample_tokens
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
        super().__init__(max_batch_size, batch_wait_ms)
        self.local = LocalModel.load(model_or_path, tokenizer, device, dtype, stop_token_ids,
                                     who="HFPolicy")
        self.model, self.tokenizer, self.device = (self.local.model, self.local.tokenizer,
                                                   self.local.device)
        self.vocab_size, self.stop_token_ids, self.pad_token_id = (
            self.local.vocab_size, self.local.stop_token_ids, self.local.pad_token_id)

    def __repr__(self) -> str:
        return f"HFPolicy({self.local.name!r}, device={str(self.device)!r})"

    def _check_prompt(self, prompt: list[int]) -> None:
        self.local.check_prompt(prompt)

    def update_weights(self, state_dict_or_model: Any) -> None:
        """Load new weights (a state dict, or a model whose state dict to copy) between
        batches; a batch in flight finishes with the old ones."""
        with self._run_lock:
            self.local.load_weights(state_dict_or_model)

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
    """``hf-static:PATH``: the transformers model saved in folder ``PATH``, in static
    batches (``hf:PATH`` is the continuous-batching engine)."""
    if not argument:
        raise AgentGymError(
            "the hf-static policy needs a model folder: --policy hf-static:PATH (a folder"
            " saved with save_pretrained, e.g. one built by agentgym.testing.build_tiny_model)"
        )
    return HFPolicy(argument)


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
    # Per layer, where transformers has it (5.25 does); 5.25 also gives such a cache a
    # length, so the ValueError below no longer flags it.
    recurrent = getattr(cache, "is_linear", None)
    if recurrent and all(recurrent):
        raise _recurrent_model(model, "every layer is a recurrent (linear attention) layer")
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
    try:
        filled = cache.get_seq_length()
    except ValueError as e:  # older transformers: a cache of recurrent layers only
        raise _recurrent_model(model, str(e)) from e
    if filled != width:
        raise RuntimeError(
            f"{type(model).__name__} did not fill the KV cache HFPolicy passed it"
            f" ({filled} of {width} positions); HFPolicy needs a causal LM"
            " that accepts a KV cache (past_key_values or cache)"
        )
    while True:
        picked, picked_logprobs, usable = sample_tokens(
            logits.float(),
            temperature,
            top_p,
            [samplings[r] for r in rows],
            [generators[r] for r in rows],
        )
        if not bool(usable.all()):
            raise AgentGymError(
                "the model's logits were not usable (NaN, +inf, or all -inf) for"
                f" {int((~usable).sum())} of the batch's {len(rows)} requests: its weights or"
                " these prompts went bad (a NaN gradient step, an overflow in a low precision)")
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


def _recurrent_model(model: Any, why: str) -> AgentGymError:
    """A model whose state would carry a batch's left padding: Mamba-style layers only, with
    no attention cache (the loop checks this before it decodes, whatever transformers says
    about the cache's length)."""
    return AgentGymError(
        f"{type(model).__name__} keeps a recurrent state ({why}); HFPolicy left-pads the"
        " prompts of a batch, and padding would run through that state: sample from this"
        " model with vLLM (the vllm: or openai: policies)")
