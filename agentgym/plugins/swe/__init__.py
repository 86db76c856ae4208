"""The ``swe`` plugin: software-engineering repair tasks in sandboxed repositories.

Contributes the envs ``swe-verified``, ``swe-lite``, ``swe-gym`` and ``swe-synth`` (see
:mod:`agentgym.plugins.swe.env`), ``swe-synth``'s default task source ``swe-synth-default``
(:mod:`agentgym.plugins.swe.default_tasks`), the ``agentgym swe`` commands (``swe synth``: tasks
from PyPI projects) and the statement writers ``template`` and ``policy`` that
``swe synth --statement`` uses (:mod:`agentgym.plugins.swe.statements`), through the hook
``agentgym_statement_writers`` it adds for every plugin (:mod:`agentgym.plugins.swe.hookspecs`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentgym.core.hookspecs import hookimpl
from agentgym.core.registry import EnvRegistration, Spec

if TYPE_CHECKING:
    from agentgym.core.plugins import PluginManager

_ENVS = {
    "swe-verified": "SWE-bench Verified: 500 human-validated GitHub issues (docker images).",
    "swe-lite": "SWE-bench Lite: 300 self-contained GitHub issues (docker images).",
    "swe-gym": "SWE-Gym: 2.4k training issues from 11 Python repositories (docker images).",
    "swe-synth": "Bugs injected into PyPI projects, validated by their tests (offline, local).",
}


@hookimpl
def agentgym_envs() -> list[EnvRegistration]:
    return [EnvRegistration(env_id, "agentgym.plugins.swe.env:SWEEnv",
                    f"Make failing tests pass in a real repository. {about}",
                    kwargs={"env_id": env_id})
            for env_id, about in _ENVS.items()]


@hookimpl
def agentgym_addhooks(pluginmanager: PluginManager) -> None:
    from agentgym.plugins.swe import hookspecs

    pluginmanager.add_hookspecs(hookspecs)
    pluginmanager.add_kind("statement_writers", "agentgym_statement_writers")


@hookimpl
def agentgym_statement_writers() -> list[Spec]:
    return [
        Spec("template", "agentgym.plugins.swe.statements:template_writer",
             "The failing tests and the errors they report (template:no-test-ids leaves the"
             " ids out); deterministic."),
        Spec("policy", "agentgym.plugins.swe.statements:policy_writer",
             "policy:POLICY asks a policy (openai:URL, hf:PATH, ...) for a bug report,"
             " checked for leaks; the template when every attempt leaks."),
    ]


@hookimpl
def agentgym_task_sources() -> list[Spec]:
    from agentgym.plugins.swe.default_tasks import DESCRIPTION, SOURCE_ID

    return [Spec(SOURCE_ID, "agentgym.plugins.swe.default_tasks:default_task_source",
                 DESCRIPTION)]


@hookimpl
def agentgym_exploit_probes() -> list:
    from agentgym.plugins.swe.probes import probes

    return probes()


@hookimpl
def agentgym_cli_commands() -> list:
    from agentgym.plugins.swe.cli import swe_group

    return [swe_group]
