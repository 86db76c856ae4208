"""The ``policies`` plugin: the token-level policy backends (``hf``, ``hf-static``,
``openai``, ``vllm``).

Registered through the entry point ``policies`` like any third-party plugin. Each backend
is named by a ``"module:attribute"`` string, so listing policies imports no model library:
torch, transformers or vLLM load when a policy is built. The contract they implement,
:class:`~agentgym.core.policies.TokenPolicy`, is in :mod:`agentgym.core.policies`.
"""

from __future__ import annotations

from agentgym.core.hookspecs import hookimpl
from agentgym.core.registry import Spec


@hookimpl
def agentgym_policies() -> list[Spec]:
    return [
        Spec("hf", "agentgym.rollout.engine.engine:hf_engine",
             "hf:PATH samples from a transformers model folder (CPU or GPU) with"
             " continuous batching (in static batches, with a warning, for a model whose"
             " attention the engine cannot drive)."),
        Spec("hf-static", "agentgym.rollout.policies.hf:hf_policy",
             "hf-static:PATH: the same model in static batches (the loop before the"
             " engine; for models whose attention the engine cannot drive)."),
        Spec("openai", "agentgym.rollout.policies.openai:openai_policy",
             "openai:URL samples token ids from an OpenAI-compatible server (vLLM's too)."),
        Spec("vllm", "agentgym.rollout.policies.vllm:vllm_policy",
             "vllm:MODEL runs an in-process vLLM engine (needs a GPU and agentgym[vllm])."),
    ]
