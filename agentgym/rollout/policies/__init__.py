"""The ``policies`` plugin: the token-level policy backends (``hf``, ``openai``, ``vllm``).

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
        Spec("hf", "agentgym.rollout.policies.hf:hf_policy",
             "hf:PATH samples from a transformers model folder (CPU or GPU), batching"
             " concurrent episodes."),
        Spec("openai", "agentgym.rollout.policies.openai:openai_policy",
             "openai:URL samples token ids from an OpenAI-compatible server (vLLM's too)."),
        Spec("vllm", "agentgym.rollout.policies.vllm:vllm_policy",
             "vllm:MODEL runs an in-process vLLM engine (needs a GPU and agentgym[vllm])."),
    ]
