"""Generation for transformers models: the continuous-batching :class:`Engine` (the
``hf:`` policy) and what it shares with the static-batch loop
(:class:`~agentgym.rollout.policies.hf.HFPolicy`): model loading and sampling."""

from agentgym.rollout.engine.engine import Engine, EngineError, hf_engine

__all__ = ["Engine", "EngineError", "hf_engine"]
