"""Every hook a plugin can implement: one per kind of thing a plugin contributes.

A plugin is a module (or object) with functions decorated ``@agentgym.hookimpl`` whose
names match the specs below, published through the entry-point group ``agentgym``::

    [project.entry-points.agentgym]
    myplugin = "myplugin.plugin"

All hooks but :func:`agentgym_addhooks` are collected (none is first-result): each takes
no arguments and returns a list, and agentgym calls each plugin's implementation and
records which plugin contributed which id. When two installed plugins
contribute the same id, the one loaded first keeps it and the other's copy is skipped with
a :class:`~agentgym.core.plugins.PluginLoadWarning` naming both (its other contributions
load); :func:`~agentgym.core.plugins.register_plugin` refuses such a clash with
:class:`~agentgym.core.errors.DuplicateIdError`.
A plugin adds hooks of its own through :func:`agentgym_addhooks`, so that core carries no
plugin's concept (the ``swe`` plugin's statement writers are such a hook).
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
    from agentgym.core.harness import Harness
    from agentgym.core.probes import ExploitProbe
    from agentgym.core.sandbox import SandboxBackend
    from agentgym.core.tools import Tool

PROJECT = "agentgym"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def agentgym_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    """Add this plugin's own hooks (as pytest's ``pytest_addhooks``). Called once, as soon
    as the plugin is registered and before any contribution is collected.

    Args:
        pluginmanager: agentgym's :class:`~agentgym.core.plugins.PluginManager` (a
            ``pluggy.PluginManager``). ``pluginmanager.add_hookspecs(module)`` adds the
            specs in ``module`` (functions marked ``@agentgym.core.hookspecs.hookspec``);
            ``pluginmanager.add_kind(name, hook)`` makes a zero-argument hook that returns
            a list a kind of contribution: listed by ``agentgym list NAME``, looked up
            with ``agentgym.core.get(NAME, id)``, duplicate ids handled as for core's.

    Returns:
        Nothing. A plugin whose ``agentgym_addhooks`` raises is skipped with a
        :class:`~agentgym.core.plugins.PluginLoadWarning`.
    """


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
def agentgym_harnesses() -> list[Harness]:
    """Agent harnesses this plugin provides: unmodified agent programs that play an env's
    tasks inside the task's sandbox, their model calls recorded token for token
    (:mod:`agentgym.core.harness`).

    Returns:
        A list of :class:`~agentgym.core.harness.Harness`, registered under ``harness.id``:
        how to install the program (pip requirements), its command line, its time limit.
        ``agentgym eval ENV --harness ID`` and ``env.harness: ID`` in a training config
        play an env with one.
    """


@hookspec
def agentgym_cli_commands() -> list[click.Command]:
    """Subcommands this plugin adds to the ``agentgym`` command line.

    Returns:
        A list of ``click.Command`` (or ``click.Group``); each is added under its own name,
        e.g. a group ``swe`` with a command ``synth`` gives ``agentgym swe synth``.
    """
