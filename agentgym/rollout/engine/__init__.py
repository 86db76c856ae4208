"""Generation for transformers models: the continuous-batching :class:`Engine` (the
``hf:`` policy) and what it shares with the static-batch loop
(:class:`~agentgym.rollout.policies.hf.HFPolicy`): model loading and sampling."""

from agentgym.rollout.engine.engine import (
    Engine,
    EngineError,
    UnsupportedModelError,
    hf_engine,
    transformers_policy,
)

__all__ = ["Engine", "EngineError", "UnsupportedModelError", "hf_engine", "transformers_policy"]
