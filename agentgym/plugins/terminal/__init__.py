"""The ``terminal`` plugin: jobs done in a shell, graded by each task's own tests.

Contributes the envs ``terminal`` (agentgym's own tasks), ``terminal-agentbench-os``
(AgentBench-OS, from ``inspect-evals``) and ``terminal-nl2bash`` (NL2Bash filesystem tasks,
from ``icalfa``); any of them reads a user's folder of Harbor or Terminal-Bench tasks with
``tasks=DIR``. See :mod:`agentgym.plugins.terminal.env`.
"""

from __future__ import annotations

from agentgym.core.hookspecs import hookimpl
from agentgym.core.registry import EnvRegistration

_ENVS = {
    "terminal": "agentgym's own tasks: git repair, logs, sqlite, archives, builds, services"
                " (offline, local).",
    "terminal-agentbench-os": "AgentBench-OS: shell questions and operations (inspect-evals'"
                              " data, offline, local).",
    "terminal-nl2bash": "NL2Bash filesystem tasks from InterCode (icalfa's data, offline,"
                        " local).",
}


@hookimpl
def agentgym_envs() -> list[EnvRegistration]:
    return [EnvRegistration(env_id, "agentgym.plugins.terminal.env:TerminalEnv",
                            f"Do a job in a terminal; its tests grade it. {about}",
                            kwargs={"env_id": env_id})
            for env_id, about in _ENVS.items()]


@hookimpl
def agentgym_exploit_probes() -> list:
    from agentgym.plugins.terminal.probes import probes

    return probes()
