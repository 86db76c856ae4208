"""``vllm:MODEL``: an in-process vLLM engine as a token-level policy (GPU only).

:class:`VLLMPolicy` runs ``vllm.AsyncLLMEngine``, which batches concurrent requests on its
own (continuous batching), and sends it token ids (``TokensPrompt``), so the engine sees
exactly the tokens the rollout loop keeps. Each request asks for ``logprobs=0``: the
log-probability of the sampled token only. The engine is created with
``logprobs_mode="processed_logprobs"`` (as TRL does), so logprobs are taken after
temperature and top-p, under the distribution actually sampled from; pass
``logprobs_mode="raw_logprobs"`` for the model's unscaled ones.

vLLM is imported when a policy is built, never when this module is imported: install it
with ``pip install 'agentgym[vllm]'`` on a machine with a CUDA GPU. The engine binds to
the event loop of its first request; use the policy from that one loop.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

from agentgym.core.errors import AgentGymError, InvalidArgumentError, MissingResourceError
from agentgym.core.policies import Generation, Sampling, TokenPolicy

__all__ = ["VLLMPolicy", "vllm_policy"]


class VLLMPolicy(TokenPolicy):
    """Samples completions from an in-process vLLM engine.

    Args:
        model: a model folder or hub id vLLM can load.
        tokenizer: a tokenizer object or folder; default: the model's.
        logprobs_mode: vLLM's ``logprobs_mode`` (``processed_logprobs`` by default).
        **engine_kwargs: more ``vllm.AsyncEngineArgs`` (``gpu_memory_utilization``,
            ``max_model_len``, ``tensor_parallel_size``, ``dtype``, ...).
    """

    def __init__(
        self,
        model: str,
        tokenizer: Any = None,
        logprobs_mode: str = "processed_logprobs",
        **engine_kwargs: Any,
    ):
        try:
            import vllm
        except ImportError as e:
            raise MissingResourceError(
                f"the vllm policy needs vLLM, which is not installed ({e})",
                "Install it with pip install 'agentgym[vllm]' on a machine with a CUDA GPU"
                " (vLLM needs one); on a CPU, use --policy hf:PATH instead",
            ) from e
        args = vllm.AsyncEngineArgs(model=model, logprobs_mode=logprobs_mode, **engine_kwargs)
        self.engine = vllm.AsyncLLMEngine.from_engine_args(args)
        if tokenizer is None or isinstance(tokenizer, str):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(tokenizer or model)
        self.tokenizer = tokenizer
        self.model_name = model
        self._ids = itertools.count()

    def __repr__(self) -> str:
        return f"VLLMPolicy({self.model_name!r})"

    async def generate(self, prompt_ids: Sequence[int], sampling: Sampling) -> Generation:
        """Sample one completion of ``prompt_ids`` (the engine batches concurrent calls)."""
        from vllm import SamplingParams, TokensPrompt

        prompt = [int(t) for t in prompt_ids]
        if not prompt:
            raise InvalidArgumentError(
                "prompt_ids is empty: a completion needs at least one prompt token")
        params = SamplingParams(
            n=1,
            max_tokens=sampling.max_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            seed=sampling.seed,
            logprobs=0,
            skip_special_tokens=False,
        )
        final = None
        request_id = f"agentgym-{next(self._ids)}"
        async for output in self.engine.generate(
            TokensPrompt(prompt_token_ids=prompt), params, request_id
        ):
            final = output
        if final is None or not final.outputs:
            raise AgentGymError(f"vLLM returned no output for request {request_id}")
        completion = final.outputs[0]
        token_ids = [int(t) for t in completion.token_ids]
        logprobs = None
        if completion.logprobs is not None and len(completion.logprobs) == len(token_ids):
            logprobs = [
                float(entry[token].logprob)
                for token, entry in zip(token_ids, completion.logprobs, strict=True)
            ]
            if any(math.isnan(x) for x in logprobs):
                logprobs = None
        reason = completion.finish_reason
        finish = "length" if reason == "length" else "stop"
        return Generation(token_ids, logprobs, finish, {"vllm_finish_reason": reason})

    def close(self) -> None:
        """Shut the engine down (frees the GPU)."""
        self.engine.shutdown()


def vllm_policy(argument: str | None) -> VLLMPolicy:
    """``vllm:MODEL``: an in-process vLLM engine serving ``MODEL`` (a folder or hub id)."""
    if not argument:
        raise AgentGymError(
            "the vllm policy needs a model: --policy vllm:PATH_OR_HUB_ID (needs a CUDA GPU)"
        )
    return VLLMPolicy(argument)
