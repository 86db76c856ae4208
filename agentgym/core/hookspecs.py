"""Every hook a plugin can implement: one per kind of thing a plugin contributes.

A plugin is a module (or object) with functions decorated ``@agentgym.hookimpl`` whose
names match the specs below, published through the entry-point group ``agentgym``::

    [project.entry-points.agentgym]
    myplugin = "myplugin.plugin"

All hooks are collected (none is first-result): agentgym calls each plugin's
implementation and records which plugin contributed which id. When two installed plugins
contribute the same id, the one loaded first keeps it and the other's copy is skipped with
a :class:`~agentgym.core.plugins.PluginLoadWarning` naming both (its other contributions
load); :func:`~agentgym.core.plugins.register_plugin` refuses such a clash with
:class:`~agentgym.core.errors.DuplicateIdError`.
Implementations should import heavy dependencies lazily (inside factories), so that
``import agentgym`` stays fast. ``docs/hooks.md`` documents each hook; a test keeps the two
in step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import click

    from agentgym.core.contributions import EnvRegistration, Spec
    from agentgym.core.probes import ExploitProbe
    from agentgym.core.sandbox import SandboxBackend
    from agentgym.core.tools import Tool

PROJECT = "agentgym"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def agentgym_envs() -> list[EnvRegistration]:
    """Environments this plugin provides.

    Returns:
        A list of :class:`~agentgym.core.contributions.EnvRegistration`. Each becomes available as
        ``agentgym.make(spec.id)`` and ``gymnasium.make(spec.id)``. ``entry_point`` may be
        a ``"module:Class"`` string so the env's module is imported only when made.
    """


@hookspec
def agentgym_tools() -> list[Tool]:
    """Reusable tools this plugin provides, for envs of any plugin to use.

    Returns:
        A list of :class:`~agentgym.core.tools.Tool` (functions decorated with ``@tool``),
        listed by ``agentgym list tools`` and looked up with
        ``agentgym.core.registry.get("tools", name)``.
    """


@hookspec
def agentgym_rewards() -> list[Spec]:
    """Reward functions this plugin provides.

    Returns:
        A list of :class:`~agentgym.core.contributions.Spec` whose ``factory(**kwargs)`` returns
        a :class:`~agentgym.core.reward.Reward`.
    """


@hookspec
def agentgym_task_sources() -> list[Spec]:
    """Task sources this plugin provides (files, datasets, generators).

    Returns:
        A list of :class:`~agentgym.core.contributions.Spec` whose ``factory(**kwargs)`` returns
        a :class:`~agentgym.core.task.TaskSource`.
    """


@hookspec
def agentgym_sandboxes() -> list[SandboxBackend]:
    """Sandbox backends this plugin provides (where agents' commands run).

    Returns:
        A list of :class:`~agentgym.core.sandbox.SandboxBackend` objects, one per backend,
        registered under ``backend.name``: it says which
        :class:`~agentgym.core.sandbox.SandboxSpec` fields it supports and opens a
        :class:`~agentgym.core.sandbox.Sandbox` for a spec. Keep their construction cheap
        (import heavy libraries in ``start``): listing backends builds them.
        ``open_sandbox(name, ...)`` and ``sandbox_backend(name)`` find them.
    """


@hookspec
def agentgym_policies() -> list[Spec]:
    """Policies (text-level agents or token-level models) this plugin provides.

    Returns:
        A list of :class:`~agentgym.core.contributions.Spec`. A policy named on the command line
        as ``ID`` or ``ID:ARG`` is built by ``factory(ARG)`` (``ARG`` is ``None`` when
        absent), e.g. ``scripted:turns.json``.
    """


@hookspec
def agentgym_tool_call_parsers() -> list[Spec]:
    """Tool-call formats this plugin can read from model text and write back.

    Returns:
        A list of :class:`~agentgym.core.contributions.Spec` whose ``factory()`` returns a
        :class:`~agentgym.core.parsers.ToolCallParser`; envs accept ``parser=ID``.
    """


@hookspec
def agentgym_statement_writers() -> list[Spec]:
    """Problem-statement writers for synthesized tasks (``agentgym swe synth --statement``).

    Returns:
        A list of :class:`~agentgym.core.contributions.Spec`. A writer named ``ID`` or
        ``ID:ARG`` is built by ``factory(ARG)`` (``ARG`` is ``None`` when absent) and returns
        an object with a ``name`` (recorded in each row's ``statement_writer``) and ``async
        write(evidence, rejected) -> str``; docs/hooks.md and the swe plugin's ``statements``
        module say what evidence it gets and the leak checks its text must pass.
    """


@hookspec
def agentgym_exploit_probes() -> list[ExploitProbe]:
    """Exploit probes: scripted hostile solutions that try to be paid without doing the
    task (:mod:`agentgym.core.probes`).

    Returns:
        A list of :class:`~agentgym.core.probes.ExploitProbe`. ``agentgym validate`` plays
        each on every task it applies to (its ``factory(target)`` returns None where it
        does not), after the oracle, noop and known-wrong checks; a probe whose reward
        reaches the task's pass threshold fails the task. A probe applies to any env it can
        attack, not only the plugin's own: shell probes test every env with a shell tool.
    """


@hookspec
def agentgym_cli_commands() -> list[click.Command]:
    """Subcommands this plugin adds to the ``agentgym`` command line.

    Returns:
        A list of ``click.Command`` (or ``click.Group``); each is added under its own name,
        e.g. a group ``swe`` with a command ``synth`` gives ``agentgym swe synth``.
    """
