"""Every registered env passes check_env, or says exactly what it is missing."""

import pytest

import agentgym
from agentgym.core import MissingResourceError
from agentgym.core.plugins import plugin_host
from agentgym.testing import check_env


@pytest.mark.parametrize("env_id", sorted(plugin_host().entries("envs")))
def test_registered_env(env_id):
    try:
        env = agentgym.make(env_id)
        env.reset(seed=0)
    except MissingResourceError as e:
        # Data or images that cannot be reached offline: the error must say what and how.
        assert e.what and e.fix, f"{env_id}: {e}"
        return
    check_env(env)
