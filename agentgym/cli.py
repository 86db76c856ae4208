"""The ``agentgym`` command line (click).

::

    agentgym list [envs|tools|rewards|plugins|sandboxes|policies|parsers] [--json]
    agentgym eval ENV_ID --policy POLICY [-e KEY=VALUE ...] [-n N] [--json] [--out FILE.jsonl]
    agentgym plugin new NAME [--dir DIR]

Plugins add subcommands through the ``agentgym_cli_commands`` hook. ``--json`` prints one
JSON object on stdout and nothing else; progress and diagnostics go to stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import agentgym
from agentgym.core.errors import AgentGymError
from agentgym.core.plugins import plugin_host

LIST_KINDS = [
    "envs",
    "tools",
    "rewards",
    "plugins",
    "sandboxes",
    "policies",
    "parsers",
    "task_sources",
]
stderr = Console(stderr=True)


def parse_env_kwargs(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``-e KEY=VALUE`` pairs as keyword arguments; values are JSON when they parse as JSON
    (``-e max_turns=5`` gives an int), text otherwise."""
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            raise click.BadParameter(
                f"{pair!r} is not KEY=VALUE with KEY a Python identifier, e.g. -e max_turns=5",
                param_hint="-e/--env-kwarg",
            )
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
    return kwargs


class PluginCommands(click.Group):
    """The root group: built-in commands plus those plugins contribute."""

    def _plugin_commands(self) -> dict[str, click.Command]:
        try:
            return {e.id: e.item for e in plugin_host().entries("commands").values()}
        except AgentGymError:
            return {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._plugin_commands()))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return super().get_command(ctx, name) or self._plugin_commands().get(name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except AgentGymError as e:
            raise click.ClickException(str(e)) from e


@click.group(cls=PluginCommands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(agentgym.__version__, prog_name="agentgym")
def main() -> None:
    """agentgym: train LLM agents with RL on multi-turn, tool-using tasks."""


# ---- list ---------------------------------------------------------------------------------


def _rows(kind: str) -> list[dict[str, Any]]:
    host = plugin_host()
    if kind == "plugins":
        return [
            {
                "id": i.name,
                "module": i.module,
                "distribution": i.distribution,
                "version": i.version,
                "status": i.status,
                "error": i.error,
            }
            for i in host.plugin_infos()
        ]
    return [
        {"id": e.id, "plugin": e.plugin, "description": e.description}
        for e in sorted(host.entries(kind).values(), key=lambda e: e.id)
    ]


@main.command("list")
@click.argument("kind", required=False, type=click.Choice(LIST_KINDS))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def list_command(kind: str | None, as_json: bool) -> None:
    """List what the loaded plugins provide (every kind when KIND is omitted)."""
    kinds = [kind] if kind else LIST_KINDS
    data = {k: _rows(k) for k in kinds}
    if as_json:
        click.echo(json.dumps(data))
        return
    console = Console()
    for k, rows in data.items():
        if not rows:
            console.print(f"[bold]{k}[/]: none loaded\n")
            continue
        table = Table(title=k, title_justify="left", show_edge=False)
        columns = list(rows[0])
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*(str(row[c]) if row[c] is not None else "" for c in columns))
        console.print(table)
        console.print()


# ---- eval ---------------------------------------------------------------------------------


def _build_policy(name: str) -> Any:
    policy_id, _, argument = name.partition(":")
    return plugin_host().get("policies", policy_id).build(argument or None)


@main.command("eval")
@click.argument("env_id")
@click.option(
    "--policy",
    "-p",
    required=True,
    help="A policy id from `agentgym list policies`, e.g. oracle, noop, scripted:F.",
)
@click.option(
    "-e",
    "--env-kwarg",
    "env_kwargs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Keyword argument for the env, as in make(ENV_ID, KEY=VALUE). Repeatable.",
)
@click.option(
    "-n",
    "episodes",
    default=10,
    show_default=True,
    type=click.IntRange(min=1),
    help="Episodes to run, over the env's tasks in order (cycling).",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the first episode.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write one JSON line per episode (with its messages) to this file.",
)
def eval_command(
    env_id: str,
    policy: str,
    env_kwargs: tuple[str, ...],
    episodes: int,
    seed: int,
    as_json: bool,
    out: Path | None,
) -> None:
    """Evaluate POLICY on ENV_ID and report mean reward and pass rate."""
    from agentgym.core.evaluation import evaluate

    kwargs = parse_env_kwargs(env_kwargs)
    agent = _build_policy(policy)
    env = agentgym.make(env_id, **kwargs)
    sink = out.open("w", encoding="utf-8") if out else None
    try:
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("mean reward {task.fields[mean]:.3f}"),
            TimeElapsedColumn(),
            console=stderr,
            disable=not stderr.is_terminal,
            transient=as_json,
        ) as progress:
            bar = progress.add_task(f"{env_id} / {policy}", total=episodes, mean=0.0)
            total = 0.0

            def on_episode(result: Any) -> None:
                nonlocal total
                total += result.reward
                if sink:
                    from dataclasses import asdict

                    sink.write(
                        json.dumps({"env": env_id, "policy": policy, **asdict(result)}, default=str)
                        + "\n"
                    )
                    sink.flush()
                progress.update(bar, advance=1, mean=total / (result.index + 1))

            report = env.unwrapped.run_coroutine(
                evaluate(
                    env.unwrapped,
                    agent,
                    episodes,
                    env_id=env_id,
                    policy_name=policy,
                    seed=seed,
                    on_episode=on_episode,
                )
            )
    finally:
        env.close()
        if sink:
            sink.close()
    summary = report.summary()
    if as_json:
        click.echo(json.dumps(summary))
        return
    table = Table(title=f"eval {env_id} --policy {policy}", title_justify="left", show_header=False)
    for key, value in summary.items():
        table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    Console().print(table)
    failed = [r for r in report.results if r.error]
    for result in failed[:3]:
        stderr.print(f"[red]episode {result.index} ({result.task_id}) failed:[/] {result.error}")


# ---- plugin -------------------------------------------------------------------------------


@main.group("plugin")
def plugin_group() -> None:
    """Write and inspect plugins."""


@plugin_group.command("new")
@click.argument("name")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Where to create the package folder.",
)
def plugin_new(name: str, directory: Path) -> None:
    """Write a complete third-party plugin package whose env is registered as NAME."""
    from agentgym.scaffold import new_plugin

    path = new_plugin(name, directory)
    click.echo(f"Created {path}")
    click.echo("Next: install agentgym from its source, then")
    click.echo(f"  pip install -e {path} && pytest {path}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
