"""What users need to test their own envs and setups: ``check_env``, ``assert_valid``
(the ``agentgym validate`` checks), ``play_turns``, scripted policies (text-level, and
``ScriptedTokens`` for what sits behind a model server) and ``build_tiny_model`` (from
:mod:`agentgym.rollout.tiny_model`)."""

from agentgym.core.policies import NoopPolicy, OraclePolicy, ScriptedPolicy
from agentgym.testing.check import EnvCheckError, check_env
from agentgym.testing.play import play_turns
from agentgym.testing.scripted_tokens import ScriptedTokens
from agentgym.testing.valid import TaskValidityError, assert_valid

__all__ = ["EnvCheckError", "NoopPolicy", "OraclePolicy", "ScriptedPolicy", "ScriptedTokens",
           "TaskValidityError", "assert_valid", "build_tiny_model", "check_env", "play_turns"]


def __getattr__(name: str):
    # Lazy: building a model imports torch and transformers, which checking an env does not need.
    if name == "build_tiny_model":
        from agentgym.rollout.tiny_model import build_tiny_model

        return build_tiny_model
    raise AttributeError(f"module 'agentgym.testing' has no attribute {name!r}")
