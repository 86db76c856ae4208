"""The ``openenv`` plugin: an OpenEnv environment server played as an agentgym env.

``agentgym.make("openenv", url="http://127.0.0.1:8001")`` plays an OpenEnv server (one
that ``agentgym openenv serve ENV_ID`` started, or any other OpenEnv environment's), here
or, with ``allow_remote=True``, on another machine, through OpenEnv's own client; see
:class:`agentgym.interchange.openenv.OpenEnvEnv`.
Needs the ``openenv`` extra (``pip install -e '.[openenv]'`` from agentgym's source).
"""

from __future__ import annotations

from agentgym.core.hookspecs import hookimpl
from agentgym.core.registry import EnvRegistration


@hookimpl
def agentgym_envs() -> list[EnvRegistration]:
    return [
        EnvRegistration(
            "openenv", "agentgym.interchange.openenv:OpenEnvEnv",
            "An OpenEnv server (`agentgym openenv serve ENV_ID`, or any OpenEnv env's),"
            " played through OpenEnv's client; url= names it (needs agentgym[openenv])."),
    ]
