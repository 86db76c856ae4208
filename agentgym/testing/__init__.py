"""What users need to test their own envs and setups: ``check_env`` and scripted policies."""

from agentgym.core.policies import NoopPolicy, OraclePolicy, ScriptedPolicy
from agentgym.testing.check import EnvCheckError, check_env

__all__ = ["EnvCheckError", "NoopPolicy", "OraclePolicy", "ScriptedPolicy", "check_env"]
