"""Every registered env passes check_env, or says exactly what it is missing.

The MiniWoB++ family ids (``miniwob-<family>``, 130 of them) are one class that differs
only in the page it opens; ``check_env`` runs on ``miniwob``, which draws its tasks from
every family, and tests/plugins/web/test_miniwob_families.py opens every family's page.
(A full check_env of each family costs about 20 fresh browser contexts, several minutes in
all: ``python scripts/check_all_envs.py`` runs it for every id.)
"""

import pytest

import agentgym
from agentgym.core import MissingResourceError
from agentgym.core.plugins import plugin_host
from agentgym.testing import check_env

#: Envs whose default tasks are built on first use (minutes; cached after).
BUILT_ON_FIRST_USE = {"swe-synth"}
#: Plugins whose check_env opens many browser pages (10-20 s an env), or starts MCP
#: servers for every episode (about a minute an env).
SLOW_TO_CHECK = {"web", "mcp"}


def checked_ids() -> list:
    """Every env id but the MiniWoB families; the web plugin's play pages in Chromium."""
    envs = plugin_host().entries("envs")
    return [pytest.param(i, marks=[
                *([pytest.mark.browser] if envs[i].plugin == "web" else []),
                *([pytest.mark.slow] if i in BUILT_ON_FIRST_USE
                  or envs[i].plugin in SLOW_TO_CHECK else [])])
            for i in sorted(envs) if not i.startswith("miniwob-")]


@pytest.mark.parametrize("env_id", checked_ids())
def test_registered_env(env_id):
    try:
        env = agentgym.make(env_id)
        env.reset(seed=0)
    except MissingResourceError as e:
        # Data or images that cannot be reached offline: the error must say what and how.
        assert e.what and e.fix, f"{env_id}: {e}"
        return
    check_env(env)
