"""The ``agentgym`` command line (click).

::

    agentgym list [KIND] [TEXT] [--plugin NAME] [--all] [--json]
    agentgym eval ENV_ID --policy POLICY [-e KEY=VALUE ...] [-n N] [--k K] [--json]
                  [--out FILE.jsonl] [--format agentgym|atif] [--report DIR] [--force]
    agentgym rollout ENV_ID --policy POLICY -n N --out FILE.jsonl [--format agentgym|atif]
                     [--mode pipeline] [--resume]
    agentgym export FILE.jsonl|RUN_DIR [--format atif] [--out DIR|FILE.jsonl]
    agentgym validate ENV_ID [-e KEY=VALUE ...] [-n N | --all] [--backend B] [--json]
    agentgym export-tasks ENV_ID DIR [--format harbor] [-e KEY=VALUE ...] [-n N | --task ID]
                  [--force] [--json]
    agentgym train CONFIG.yaml [--resume] [--output-dir DIR] [--seed N] [--json]
    agentgym plot RUN_DIR [RUN_DIR ...] [--out FILE.png]
    agentgym view FILE.jsonl|RUN_DIR ... [--port P]
    agentgym compare RUN_A RUN_B [--out FILE.html] [--json]
    agentgym plugin new NAME [--dir DIR]

The README's "The command line" has every command, plugins' included.

Plugins add subcommands through the ``agentgym_cli_commands`` hook. ``--json`` prints one
JSON object on stdout and nothing else; progress and diagnostics go to stderr. A command
that fails prints ``{"error": MESSAGE, "exit_code": N}`` there instead (the message also
goes to stderr, as without ``--json``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import agentgym
from agentgym import listing
from agentgym.core.conversion import from_text
from agentgym.core.env_kwargs import EnvKwargsError, check_env_kwargs
from agentgym.core.errors import AgentGymError, InvalidArgumentError, PicklableException
from agentgym.core.plugins import plugin_host
from agentgym.core.policies import ClosablePolicy, build_policy
from agentgym.interchange.harbor import FORMATS as EXPORT_FORMATS
from agentgym.interchange.harbor import export_tasks
from agentgym.rollout.pipeline import MODES

stderr = Console(stderr=True)


def parse_env_kwargs(pairs: tuple[str, ...], env_id: str | None = None) -> dict[str, Any]:
    """``-e KEY=VALUE`` pairs as keyword arguments for the env ``env_id``.

    Each KEY must be a keyword argument the env takes, and its VALUE is converted by that
    argument's type (``-e max_turns=5`` gives an int; :mod:`agentgym.core.env_kwargs`),
    before the env is built; a mistake is an :class:`InvalidOption` naming the key, the
    closest valid one and the expected type. Without ``env_id`` a VALUE is its JSON value
    when it parses as JSON, else the text."""
    texts: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            raise click.BadParameter(
                f"{pair!r} is not KEY=VALUE with KEY a Python identifier, e.g. -e max_turns=5",
                param_hint="'-e'",
            )
        texts[key] = value
    if env_id is None:
        return {key: from_text(value, Any) for key, value in texts.items()}
    try:
        return check_env_kwargs(env_id, texts, text=True)
    except EnvKwargsError as e:
        problems = [f"{key}={texts[key]}: {problem}" for key, problem in e.issues]
        raise InvalidOption("-e", "; ".join(problems)) from None


class InvalidOption(PicklableException, click.ClickException):
    """A bad option value, said in one line (``Error: Invalid value for '-e': ...``) with
    click's usage-error exit code, without the usage text that would bury it."""

    exit_code = 2

    def __init__(self, option: str, message: str):
        super().__init__(f"Invalid value for {option!r}: {message}")


class PluginCommands(click.Group):
    """The root group: built-in commands plus those plugins contribute."""

    def _plugin_commands(self) -> dict[str, click.Command]:
        return {e.id: e.item for e in plugin_host().entries("commands").values()}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._plugin_commands()))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return super().get_command(ctx, name) or self._plugin_commands().get(name)

    def invoke(self, ctx: click.Context) -> Any:
        # The command's own arguments, before click consumes them: whether it was asked
        # for --json decides where a failure is reported too.
        as_json = "--json" in ctx.args
        try:
            try:
                return super().invoke(ctx)
            except AgentGymError as e:
                raise click.ClickException(str(e)) from e
        except click.ClickException as e:
            if as_json:  # a script reading stdout gets an answer, not nothing
                click.echo(json.dumps({"error": e.format_message(), "exit_code": e.exit_code}))
            raise
        except (click.exceptions.Exit, click.Abort):
            raise
        except Exception as e:  # a bug: its traceback still goes to stderr
            if as_json:
                click.echo(json.dumps({"error": f"{type(e).__name__}: {e}", "exit_code": 1}))
            raise


@click.group(cls=PluginCommands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(agentgym.__version__, prog_name="agentgym")
def main() -> None:
    """agentgym: train LLM agents with RL on multi-turn, tool-using tasks."""


# ---- list ---------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    """A table cell, as plain text: rich would read ``agentgym[vllm]`` as markup."""
    if value is None:
        return ""
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):  # skipped
        return escape("\n".join(f"{v['kind']} {v['id']!r}: {v['reason']}" for v in value))
    if isinstance(value, list):  # the envs that offer a tool
        return escape(", ".join(map(str, value)))
    return escape(str(value))


def _summary_cell(value: Any) -> str:
    """An eval summary's value as a cell: numbers to 3 places; a dict as ``key value``
    pairs, a dict inside it (per-type scores) on a line of its own."""
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, dict):
        flat = [f"{k} {_summary_cell(v)}" for k, v in value.items() if not isinstance(v, dict)]
        nested = [f"{k}: {_summary_cell(v)}" for k, v in value.items() if isinstance(v, dict)]
        return "\n".join(filter(None, [", ".join(flat), *nested]))
    return str(value)


#: Columns whose values are names to copy: never wrapped (the others wrap).
_NAME_COLUMNS = ("id", "plugin", "module", "distribution", "version", "status", "toolset")
#: Narrower than this, a prose column is one line per row, cut, rather than a tall one.
_PROSE_MIN_WIDTH = 30


class _KindChoice(click.Choice):
    """The kinds ``agentgym list`` takes (:func:`agentgym.listing.kinds`), read when used:
    plugins add kinds of their own."""

    def __init__(self) -> None:  # no fixed choices to store
        self.case_sensitive = True

    @property
    def choices(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(listing.kinds())


@main.command("list")
@click.argument("kind", required=False, type=_KindChoice())
@click.argument("text", required=False)
@click.option("--plugin", metavar="NAME",
              help="Only what the plugin NAME provides (`agentgym list plugins`).")
@click.option("--all", "show_all", is_flag=True,
              help="One row per id: do not sum up a family of many ids (miniwob-*) in one.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object on stdout (every row; TEXT and --plugin apply).")
def list_command(kind: str | None, text: str | None, plugin: str | None, show_all: bool,
                 as_json: bool) -> None:
    """List what the loaded plugins provide: KIND (every kind when omitted); with TEXT,
    only the rows holding it (case-insensitive: anywhere in a name such as the id, plugin
    or module, or at the start of a word of the description), e.g. `agentgym list envs
    swe`.

    A family of more than 12 ids with one prefix (MiniWoB's 130 task families) is one
    row, `miniwob-*`, unless TEXT, --plugin or --all is given; `agentgym list envs
    miniwob-` lists its ids. Tools are listed by toolset, with the envs that offer them.
    """
    if plugin is not None:
        try:
            listing.check_plugin(plugin)
        except AgentGymError as e:
            raise InvalidOption("--plugin", str(e)) from None
    data = {k: listing.select(k, listing.rows(k), text, plugin)
            for k in ([kind] if kind else listing.kinds())}
    if as_json:
        click.echo(json.dumps(data))
        return
    console = Console()
    narrowed = text is not None or plugin is not None
    for k, found in data.items():
        if not found:
            why = " match" if narrowed else " loaded"
            console.print(f"[bold]{k}[/]: none{why}\n", highlight=False)
            continue
        if not (narrowed or show_all):
            found = listing.summarise(k, found)
        if k == "tools":
            _print_tools(console, found)
        else:
            console.print(_list_table(k, found, console.width))
        console.print()


def _list_table(kind: str, found: list[dict[str, Any]], width: int) -> Table:
    """The rows of ``kind`` as a table that fits ``width`` characters: names whole on one
    line; the other columns wrapped, or cut to one line (with an ellipsis) when too
    narrow to read wrapped; columns empty in every row left out. Names that are too
    wide together (long module and distribution names at 80 characters) wrap, the first
    column's excepted, rather than push the last column off the screen."""
    columns = [c for c in found[0] if any(row.get(c) not in (None, "", []) for row in found)]
    longest = {c: max(len(c), *(len(_cell(row.get(c))) for row in found))
               for c in columns if c in _NAME_COLUMNS}
    left = width - sum(n + 3 for n in longest.values())  # 3: a column's padding and rule
    cut = left < _PROSE_MIN_WIDTH
    names_fit = left >= (_PROSE_MIN_WIDTH if len(longest) < len(columns) else 0)
    table = Table(title=kind, title_justify="left", show_edge=False)
    for column in columns:
        if column in _NAME_COLUMNS and (names_fit or column == columns[0]):
            # its width held, or rich would cut the names first
            table.add_column(column, no_wrap=True, min_width=longest[column])
        elif column in _NAME_COLUMNS:  # names too wide together: this one wraps whole
            table.add_column(column, overflow="fold")
        else:
            table.add_column(column, ratio=1, no_wrap=cut, overflow="ellipsis" if cut else "fold",
                             max_width=max(left - 3, 8) if cut else None)
    for row in found:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    return table


def _print_tools(console: Console, found: list[dict[str, Any]]) -> None:
    """Tools by toolset: a line naming the toolset and the envs that offer it, then its
    tools (too many columns for one table at 80 characters)."""
    console.print("[bold]tools[/] (by toolset)", highlight=False)
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in found:
        groups.setdefault(row["toolset"], []).append(row)
    for toolset, tools in groups.items():
        envs = ", ".join(dict.fromkeys(e for row in tools for e in row["envs"]))
        plugins = ", ".join(dict.fromkeys(row["plugin"] for row in tools))
        where = (f"offered by {envs}" if envs else
                 f"from {plugins}, for any env to use (agentgym_tools)")
        console.print(f"\n[bold]{escape(toolset)}[/]: {escape(where)}", highlight=False)
        table = Table(show_header=False, box=None, padding=(0, 1, 0, 2))
        table.add_column("tool", no_wrap=True)
        table.add_column("description", ratio=1)
        for row in tools:
            table.add_row(escape(row["id"]), escape(row["description"]))
        console.print(table)


# ---- eval and rollout ---------------------------------------------------------------


env_kwargs_option = click.option(
    "-e", "--env-kwarg", "env_kwargs", multiple=True, metavar="KEY=VALUE",
    help="Keyword argument for the env, as in make(ENV_ID, KEY=VALUE).")


#: How the built-in policies are written on the command line, in the order help shows them.
POLICY_FORMS = {"oracle": "oracle", "noop": "noop", "wrong": "wrong[:K]",
                "scripted": "scripted:FILE.json", "hf": "hf:PATH",
                "hf-static": "hf-static:PATH", "openai": "openai:URL", "vllm": "vllm:MODEL"}


class PolicyOption(click.Option):
    """``--policy``, whose help names every policy of the loaded plugins (read when the
    help is shown: plugins add policies)."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        ids = plugin_host().entries("policies")
        forms = [form for name, form in POLICY_FORMS.items() if name in ids]
        forms += sorted(name for name in ids if name not in POLICY_FORMS)
        self.help = (f"The policy that plays: {', '.join(forms)} (`agentgym list policies`"
                     " says what each does).")
        return super().get_help_record(ctx)


def rollout_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options ``eval`` and ``rollout`` share."""
    options = [
        click.argument("env_id"),
        click.option("--policy", "-p", required=True, cls=PolicyOption),
        env_kwargs_option,
        click.option("-n", "episodes", default=10, show_default=True,
                     type=click.IntRange(min=1),
                     help="Tasks to run, from the env's tasks in order (cycling)."),
        click.option("--k", "attempts", default=1, show_default=True,
                     type=click.IntRange(min=1), help="Attempts per task (pass@k)."),
        click.option("--mode", type=click.Choice(MODES), default="pipeline",
                     show_default=True, help="How episodes are scheduled."),
        click.option("--concurrency", default=8, show_default=True,
                     type=click.IntRange(min=1), help="Episodes generating at once."),
        click.option("--max-tokens", default=256, show_default=True,
                     type=click.IntRange(min=1), help="Tokens per model turn."),
        click.option("--max-total-tokens", default=8192, show_default=True,
                     type=click.IntRange(min=1), help="Prompt plus completion per episode."),
        click.option("--temperature", default=1.0, show_default=True,
                     type=click.FloatRange(min=0.0), help="Sampling temperature (0: greedy)."),
        click.option("--seed", default=0, show_default=True, help="Base seed of episodes."),
        click.option("--tool-schemas/--no-tool-schemas", default=True, show_default=True,
                     help="Render the env's tool schemas into token-level prompts; off for a"
                          " model trained without them (rollout.tool_schemas: false)."),
        click.option("--ray-address", default=None,
                     help="Run envs as Ray actors on this cluster ('local' starts one)."),
        click.option("--harness", default=None, metavar="ID",
                     help="Play each episode with this agent program in the task's sandbox"
                          " (`agentgym list harnesses`), the --policy (token-level) behind"
                          " it; its calls are recorded token for token."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _run(env_id: str, policy: str, env_kwargs: tuple[str, ...], episodes: int,
         attempts: int, mode: str, concurrency: int, max_tokens: int, max_total_tokens: int,
         temperature: float, seed: int, tool_schemas: bool, ray_address: str | None,
         harness: str | None, quiet: bool,
         on_done: Callable[[Any], None] | None = None,
         skip: set[tuple[str, int]] | None = None) -> list[Any]:
    from agentgym.core.policies import Sampling
    from agentgym.rollout.evaluate import plan_jobs, rollout
    from agentgym.rollout.loop import RolloutConfig
    from agentgym.rollout.pipeline import PipelineConfig

    kwargs = parse_env_kwargs(env_kwargs, env_id)
    if harness is not None:
        from agentgym.core.registry import get

        try:
            get("harnesses", harness)
        except KeyError as e:
            raise click.BadParameter(str(e).strip("'\""), param_hint="'--harness'") from None
    agent = build_policy(policy)
    make_env = None
    if ray_address:
        from agentgym.rollout.ray_executor import remote_env_factory

        try:
            make_env = remote_env_factory(env_id, kwargs, address=ray_address)
        except ConnectionError as e:
            raise click.BadParameter(str(e), param_hint="'--ray-address'") from None
    total = episodes * attempts - len(skip or ())
    rewards: list[float] = []

    def done(trajectory: Any) -> None:
        rewards.append(trajectory.reward)
        if on_done:
            on_done(trajectory)
        progress.advance(f"mean reward {sum(rewards) / len(rewards):.3f}")

    plan_jobs(["x"], episodes, attempts)  # validates n and k before anything starts
    with EpisodeProgress(f"{env_id} / {policy}", total, quiet=quiet,
                         figure="mean reward 0.000") as progress:
        return asyncio.run(rollout(
            env_id, agent, episodes, k=attempts, env_kwargs=kwargs, policy_name=policy,
            pipeline=PipelineConfig(mode=mode, concurrency=concurrency),
            config=RolloutConfig(Sampling(max_tokens=max_tokens, temperature=temperature),
                                 max_total_tokens=max_total_tokens, seed=seed,
                                 tool_schemas=tool_schemas),
            skip=skip, make_env=make_env, on_done=done, on_stage=progress.stages,
            harness=harness))


class EpisodeProgress:
    """The progress bar of the commands that run episodes (eval, rollout, validate), on
    stderr: episodes done of those planned, how many are in each pipeline stage (init, run,
    grade), a figure over the finished ones (eval: the mean reward; validate: the failed
    checks) and the time elapsed. Hidden when ``quiet`` (``--json``) or when stderr is not
    a terminal.

    Hand :meth:`stages` to the pipeline's ``on_stage``; call :meth:`advance` as each
    episode finishes and :meth:`plan` when more episodes are planned."""

    def __init__(self, title: str, total: int = 0, *, quiet: bool, figure: str = ""):
        columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[stages]}"), TextColumn("{task.fields[figure]}"),
                   TimeElapsedColumn()]
        self.progress = Progress(*columns, console=stderr, transient=quiet,
                                 disable=quiet or not stderr.is_terminal)
        self.total = max(total, 0)
        self.bar = self.progress.add_task(escape(title), total=self.total, stages="",
                                          figure=figure)

    def __enter__(self) -> EpisodeProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def plan(self, episodes: int) -> None:
        """``episodes`` more are planned."""
        self.total += episodes
        self.progress.update(self.bar, total=self.total)

    def advance(self, figure: str) -> None:
        """One more episode finished; ``figure`` is the new figure over those finished."""
        self.progress.update(self.bar, advance=1, figure=figure)

    def stages(self, counts: Any) -> None:
        """Show the pipeline's episodes per stage, its live envs and idle share."""
        text = " ".join(f"{s} {counts[s]}" for s in ("init", "run", "grade") if counts[s])
        stats = getattr(counts, "stats", None)
        if counts["live"]:
            text += f" | live {counts['live']}"
        if stats is not None and stats.sandbox_s:
            text += f" idle {stats.idle_share:.0%}"
        self.progress.update(self.bar, stages=text)


#: What ``--format`` of eval and rollout takes: agentgym's own JSONL records, or ATIF
#: documents (:mod:`agentgym.interchange.atif`).
OUT_FORMATS = ("agentgym", "atif")

format_option = click.option(
    "--format", "out_format", type=click.Choice(OUT_FORMATS), default="agentgym",
    show_default=True,
    help="What --out holds: agentgym's JSONL records, or ATIF documents (a folder of .json"
         " files, one per episode, or with a .jsonl name one document per line; needs the"
         " atif extra).")


def _writer(out: Path, resume: bool | None = None, force: bool = False,
            out_format: str = "agentgym") -> Any:
    """The writer of ``--out`` in ``--format``
    (:class:`~agentgym.rollout.trajectory.TrajectoryWriter` or
    :class:`~agentgym.interchange.atif.AtifWriter`); a path that already holds trajectories
    is a usage error unless ``force`` (they are then replaced). ``resume`` None: the
    command has no ``--resume``."""
    from agentgym.rollout.trajectory import TrajectoryWriter

    if out_format == "agentgym" and out.is_dir():
        raise InvalidOption("--out", f"{str(out)!r} is a folder: agentgym records go to a"
                            " JSONL file; name one, or pass --format atif for a folder of"
                            " ATIF documents")
    try:
        if out_format == "atif":
            from agentgym.interchange.atif import AtifWriter

            return AtifWriter(out, resume=bool(resume), overwrite=force)
        if force:
            out.unlink(missing_ok=True)
        return TrajectoryWriter(out, resume=bool(resume))
    except FileExistsError as e:
        message = str(e) if resume is not None else (
            f"{str(out)!r} already holds trajectories; choose another --out, remove it, or"
            " pass --force to overwrite it")
        raise click.BadParameter(message, param_hint="'--out'") from None
    except InvalidArgumentError as e:  # a path ATIF cannot go to
        raise InvalidOption("--out", str(e)) from None


def _check_report_dir(report_dir: Path, force: bool) -> None:
    """Refuse a ``--report`` folder that already holds a report before any episode runs
    (the report is written after all of them)."""
    from agentgym.viewer.report import check_report_folder

    try:
        check_report_folder(report_dir, overwrite=force)
    except FileExistsError as e:
        raise InvalidOption("--report", str(e)) from None


def _save_episodes(trajectories: list[Any], env_id: str) -> Path:
    """Write ``trajectories`` to a new JSONL file (in the working directory, else the
    temporary one) when they have nowhere else to go; its path."""
    import os
    import tempfile
    import time

    from agentgym.rollout.trajectory import TrajectoryWriter

    name = f"agentgym-eval-{env_id.replace('/', '_')}-{time.strftime('%Y%m%d-%H%M%S')}-"
    for folder in (Path.cwd(), Path(tempfile.gettempdir())):
        try:
            handle, path = tempfile.mkstemp(prefix=name, suffix=".jsonl", dir=folder)
        except OSError:
            continue
        os.close(handle)
        with TrajectoryWriter(path) as writer:
            for trajectory in trajectories:
                writer.write(trajectory)
        return Path(path)
    raise OSError("neither the working directory nor the temporary one is writable")


@main.command("eval")
@rollout_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@click.option("--out", type=click.Path(path_type=Path),
              help="Also write each episode's trajectory to this JSONL file (or, with"
                   " --format atif, this folder).")
@format_option
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also write an HTML report (results per env and task, plots) with the"
                   " summary and trajectories to this folder (`agentgym compare` reads it).")
@click.option("--force", is_flag=True,
              help="Overwrite the --out file and the --report folder if they hold a run.")
def eval_command(as_json: bool, out: Path | None, out_format: str, report_dir: Path | None,
                 force: bool, **options: Any) -> None:
    """Evaluate a policy on ENV_ID: mean reward, pass@1, pass@k, turns, stage times."""
    from agentgym.rollout.evaluate import EvalReport

    # Both destinations are checked before any episode runs: an hour of episodes must not
    # end in a refusal to write them.
    if report_dir:
        _check_report_dir(report_dir, force)
    writer = _writer(out, force=force, out_format=out_format) if out else None
    try:
        trajectories = _run(quiet=as_json, on_done=writer.write if writer else None, **options)
    finally:
        if writer:
            writer.close()
    trajectories.sort(key=lambda t: t.episode)
    report = EvalReport(options["env_id"], options["policy"], trajectories,
                        k=options["attempts"])
    summary = report.summary()
    report_failed = False
    if report_dir:
        from agentgym.viewer.report import write_report

        try:
            written = write_report(report_dir, options["env_id"], options["policy"],
                                   trajectories, k=options["attempts"], overwrite=force)
            stderr.print(f"wrote {written}", highlight=False)
        except Exception as e:  # whatever broke the report, the episodes are kept
            report_failed = True
            kept = out or _save_episodes(trajectories, options["env_id"])
            stderr.print(f"[red]error:[/] could not write the report to {escape(str(report_dir))}"
                         f" ({escape(type(e).__name__)}: {escape(str(e))}); the"
                         f" {len(trajectories)} episodes are in {escape(str(kept))}: `agentgym"
                         f" view {escape(str(kept))}` shows them, `agentgym compare` reads"
                         " them", highlight=False, soft_wrap=True)  # paths stay whole
    if as_json:
        click.echo(json.dumps(summary))
    else:
        _print_summary(summary, options, trajectories)
    if trajectories and all(t.error for t in trajectories):
        # No episode ran to its end: the figures above measure nothing, and a script that
        # checks the exit status must see it (the first reason names the fix).
        stderr.print(f"[red]error:[/] every one of the {len(trajectories)} episodes failed;"
                     f" the first: {escape(str(trajectories[0].error))}", highlight=False,
                     soft_wrap=True)
        sys.exit(1)
    if report_failed:
        sys.exit(1)


def _print_summary(summary: dict[str, Any], options: dict[str, Any],
                   trajectories: list[Any]) -> None:
    """eval's summary as a table on stdout, and the first failed episodes on stderr."""
    table = Table(title=f"eval {options['env_id']} --policy {options['policy']}",
                  title_justify="left", show_header=False)
    for key, value in summary.items():
        table.add_row(key, _summary_cell(value))
    Console().print(table)
    for trajectory in [t for t in trajectories if t.error][:3]:
        stderr.print(f"[red]episode {trajectory.episode} ({trajectory.task_id}) failed:[/]"
                     f" {trajectory.error}")


@main.command("rollout")
@rollout_options
@click.option("--out", required=True, type=click.Path(path_type=Path),
              help="The JSONL file of trajectories (one line per episode), or with --format"
                   " atif a folder of ATIF documents (or a .jsonl of them).")
@format_option
@click.option("--resume", is_flag=True,
              help="Continue an interrupted run: skip the episodes --out already holds.")
def rollout_command(out: Path, out_format: str, resume: bool, **options: Any) -> None:
    """Collect trajectories of a policy on ENV_ID into a JSONL file (or ATIF documents)."""
    with _writer(out, resume=resume, out_format=out_format) as writer:
        skipped = len(writer.done)
        trajectories = _run(quiet=False, on_done=writer.write, skip=set(writer.done), **options)
    rewards = [t.reward for t in trajectories]
    mean = sum(rewards) / len(rewards) if rewards else 0.0
    click.echo(f"wrote {len(trajectories)} trajectories to {out}"
               + (f" (skipped {skipped} already there)" if skipped else "")
               + f"; mean reward {mean:.3f}", err=True)


# ---- validate -----------------------------------------------------------------------------


@main.command("validate")
@click.argument("env_id")
@env_kwargs_option
@click.option("-n", "tasks", type=click.IntRange(min=1), default=None,
              help="Check the first N of the env's tasks, in order [default: 10].")
@click.option("--all", "all_tasks", is_flag=True, help="Check every task of the env.")
@click.option("--task", "task_ids", multiple=True, metavar="ID",
              help="Check only this task (repeatable; ids as `agentgym eval` shows them).")
@click.option("--backend", default=None,
              help="The sandbox backend to run and grade in (`agentgym list sandboxes`),"
                   " passed as the env's backend argument; only for envs that take one.")
@click.option("--require-solutions", is_flag=True,
              help="A task without a reference solution fails (default: its oracle check"
                   " is skipped and listed).")
@click.option("--probes/--no-probes", default=True, show_default=True,
              help="Play every exploit probe that applies to each task (`agentgym list"
                   " probes`); a probe paid the pass threshold fails the task.")
@click.option("--probe", "probe_ids", multiple=True, metavar="ID",
              help="Play only this exploit probe (repeatable).")
@click.option("--repeat", default=1, show_default=True, type=click.IntRange(min=1),
              help="Play each task's oracle K times: each run must score 1.0 (a grader"
                   " that does not is flaky).")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(min=1),
              help="Episodes playing at once.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def validate_command(env_id: str, env_kwargs: tuple[str, ...], tasks: int | None,
                     all_tasks: bool, task_ids: tuple[str, ...], backend: str | None,
                     require_solutions: bool,
                     probes: bool, probe_ids: tuple[str, ...], repeat: int,
                     concurrency: int, as_json: bool) -> None:
    """Check that ENV_ID's grader scores each task's reference solution 1.0 (oracle),
    doing nothing 0.0 (noop), each known-wrong solution below 1.0, and that no exploit
    probe (a scripted hostile solution: tampering with the grader's files, startup hooks,
    leftover processes, stuffed answers) is paid for work not done.

    Known-wrong solutions are a task's metadata["wrong_solutions"] (docs/plugins.md);
    probes come from the plugins (docs/reward-integrity.md). Prints the checks that failed,
    the probes played and a summary; exits 0 when every check holds, 1 when one fails or
    the env cannot be made, 2 on a bad option value.
    """
    from agentgym.core.errors import UnknownIdError
    from agentgym.rollout.validate import DEFAULT_TASKS, avalidate, env_kwargs_with_backend

    if sum((tasks is not None, all_tasks, bool(task_ids))) > 1:
        raise click.UsageError("give one of -n N, --all and --task ID")
    if probe_ids and not probes:
        raise click.UsageError("give --probe ID or --no-probes, not both")
    selection: bool | list[str] = list(probe_ids) if probe_ids else probes
    if probe_ids:
        from agentgym.core.errors import UnknownIdError
        from agentgym.rollout.validate import probes_for

        try:
            probes_for(selection)
        except UnknownIdError as e:
            raise InvalidOption("--probe", str(e)) from None
    kwargs = parse_env_kwargs(env_kwargs, env_id)
    try:
        kwargs = env_kwargs_with_backend(env_id, kwargs, backend)
    except (InvalidArgumentError, UnknownIdError) as e:
        raise InvalidOption("--backend", str(e)) from None
    failed = 0

    def checked(result: Any) -> None:
        nonlocal failed
        failed += not result.passed
        progress.advance(f"{failed} failed")

    with EpisodeProgress(f"validate {env_id}", quiet=as_json, figure="0 failed") as progress:
        report = asyncio.run(avalidate(
            env_id, kwargs, list(task_ids) or None,
            n=None if all_tasks else tasks or DEFAULT_TASKS,
            require_solutions=require_solutions, probes=selection, repeat=repeat,
            concurrency=concurrency, on_result=checked, on_stage=progress.stages,
            on_planned=progress.plan))
    if as_json:
        click.echo(json.dumps(report.to_dict()))
    else:
        console = Console()
        if report.failed or report.unsolved:
            table = Table(title=f"validate {env_id}", title_justify="left",
                          caption="oracle must score 1.0, noop 0.0, a wrong solution and a"
                                  " probe below the pass threshold (1.0); reason: the crash,"
                                  " or the grader's metrics", caption_justify="left")
            for column in ("task", "check", "reward", "finish", "reason"):
                table.add_column(column, overflow="fold")
            for result in [*report.failed, *report.unsolved]:
                reward = "" if result.reward is None else f"{result.reward:g}"
                status = "" if result.passed else "[red]"
                table.add_row(escape(result.task_id), status + escape(result.check), reward,
                              escape(result.finish_reason), escape(result.reason))
            console.print(table)
        counts = report.probe_counts()
        if counts:
            table = Table(title="exploit probes", title_justify="left")
            for column in ("probe", "attack", "played", "paid", "not applicable"):
                table.add_column(column, overflow="fold")
            for probe_id, row in counts.items():
                paid = f"[red]{row['paid']}" if row["paid"] else "0"
                table.add_row(escape(probe_id), escape(row["attack"]), str(row["played"]),
                              paid, str(row["not_applicable"] or ""))
            console.print(table)
        click.echo(report.summary())
    sys.exit(0 if report.ok else 1)


# ---- export-tasks -------------------------------------------------------------------------


@main.command("export-tasks")
@click.argument("env_id")
@click.argument("dest", metavar="DIR", type=click.Path(path_type=Path))
@click.option("--format", "format_", type=click.Choice(EXPORT_FORMATS), default="harbor",
              show_default=True,
              help="What to write: harbor, a Harbor task folder per task (instruction.md,"
                   " task.toml, environment/, tests/, solution/).")
@env_kwargs_option
@click.option("-n", "tasks", type=click.IntRange(min=1), default=None,
              help="Export the first N of the env's tasks, in order [default: all].")
@click.option("--task", "task_ids", multiple=True, metavar="ID",
              help="Export only this task (repeatable; ids as `agentgym eval` shows them).")
@click.option("--force", is_flag=True, help="Replace task folders already in DIR.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def export_tasks_command(env_id: str, dest: Path, format_: str, env_kwargs: tuple[str, ...],
                         tasks: int | None, task_ids: tuple[str, ...], force: bool,
                         as_json: bool) -> None:
    """Write ENV_ID's tasks into DIR (made if missing), one folder per task, in a format
    other harnesses run: with --format harbor, Harbor task folders, which the terminal
    envs read back (`agentgym validate terminal -e tasks=DIR --all` checks them).

    Only tasks with a reference solution are written. An env family whose tasks cannot be
    expressed in the format (a browser's pages, a grader that needs a fresh sandbox) is
    refused with the reason, and nothing is written; a single task that cannot be is listed
    with its reason and the others are written. Exits 0 when every selected task was
    written, 1 when one was not, 2 on a usage error. See docs/interchange.md.
    """
    from agentgym.core.errors import UnknownIdError

    if tasks is not None and task_ids:
        raise InvalidOption("--task", "give -n N (the first N tasks) or --task ID, not both")
    kwargs = parse_env_kwargs(env_kwargs, env_id)
    try:
        report = export_tasks(env_id, dest, kwargs, n=tasks, task_ids=list(task_ids) or None,
                              force=force)
    except UnknownIdError as e:
        if e.kind != "task":
            raise
        raise InvalidOption("--task", str(e)) from None
    except InvalidArgumentError as e:
        raise InvalidOption("DIR", str(e)) from None
    if as_json:
        click.echo(json.dumps(report.to_dict()))
    else:
        console = Console()
        if report.refused:
            table = Table(title=f"not written ({format_})", title_justify="left")
            for column in ("task", "why"):
                table.add_column(column, overflow="fold")
            for task_id, reason in report.refused:
                table.add_row(escape(task_id), escape(reason))
            console.print(table)
        click.echo(report.summary())
        if report.written:
            click.echo(f"Check them: agentgym validate terminal -e tasks={dest} --all")
    sys.exit(0 if report.ok else 1)


# ---- train --------------------------------------------------------------------------------


@main.command("train")
@click.argument("config_file", metavar="CONFIG.yaml",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--resume", is_flag=True,
              help="Continue the run in the output directory: skip finished stages, resume"
                   " the interrupted one from its last checkpoint.")
@click.option("--output-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write the run here instead of the config's output_dir.")
@click.option("--seed", type=int,
              help="The run's seed instead of the config's `seed`: episodes, the order of"
                   " the demonstrations, batches, sampling. The model stays the config's"
                   " (a tiny model's weights keep its own `model.tiny.seed`).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the run's summary as one JSON object on stdout.")
def train_command(config_file: Path, resume: bool, output_dir: Path | None,
                  seed: int | None, as_json: bool) -> None:
    """Train a model with the stages of CONFIG.yaml (sft, rft, grpo), evaluating on held-out
    tasks before the first stage and after every stage. See docs/training.md for the config's
    fields."""

    from agentgym.trainers.config import ConfigError, load_config
    from agentgym.trainers.rundir import RunExistsError, check_output_dir, output_dir_of

    # With --json, stdout carries the summary alone: progress and the trainers' prints go
    # to stderr.
    console = stderr if as_json else Console()
    quiet = contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext()
    try:
        # A reused folder is refused before the config's checks and the trainers import
        # TRL and torch (seconds).
        early = output_dir or output_dir_of(config_file)
        if early is not None:
            check_output_dir(early, resume)
        config = load_config(config_file, output_dir=output_dir, seed=seed)
        from agentgym.trainers.run import train

        with quiet, _training_warnings():
            summary = train(config, resume=resume, console=console)
    except (ConfigError, RunExistsError) as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    if as_json:
        click.echo(json.dumps(summary))
        return
    console.print(f"final model: {summary['final_model']}", highlight=False)
    console.print(f"metrics: {summary['metrics']}; reward curve: {summary['reward_curve']}",
                  highlight=False)


@contextlib.contextmanager
def _training_warnings() -> Iterator[None]:
    """Warnings of agentgym's loggers (learning health, dynamic sampling) on stderr as
    ``warning: ...`` lines, written through tqdm so that they never break a progress bar."""
    import logging

    from tqdm.contrib.logging import logging_redirect_tqdm

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    package = logging.getLogger("agentgym")
    package.addHandler(handler)
    try:
        with logging_redirect_tqdm([package]):
            yield
    finally:
        package.removeHandler(handler)


@main.command("plot")
@click.argument("run_dirs", metavar="RUN_DIR...", nargs=-1, required=True,
                type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="The PNG to write [default: RUN_DIR/reward_curve.png for one run,"
                   " reward_curves.png in the current directory for several].")
def plot_command(run_dirs: tuple[Path, ...], out: Path | None) -> None:
    """Draw the reward curves of training runs (`agentgym train` output folders) from their
    metrics.jsonl and eval.json: one panel column per stage on its own steps, and the
    held-out pass rate by stage. Several runs are overlaid, one colour each."""
    from agentgym.core.errors import MissingFileError
    from agentgym.trainers.plots import plot_runs

    try:
        path = plot_runs(run_dirs, out)
    except (MissingFileError, InvalidArgumentError) as e:
        raise InvalidOption("RUN_DIR", str(e)) from None
    click.echo(f"wrote {path}")


@main.command("compare")
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("compare.html"), show_default=True, help="The HTML page to write.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def compare_command(run_a: str, run_b: str, out: Path, as_json: bool) -> None:
    """Put two eval runs side by side: each run's results, and per task both ran whether
    A only, B only, both or neither solved it. A run is a folder written by `agentgym eval
    --report`, a trajectories JSONL file (`--out`), or a training run folder (`agentgym
    train` output): RUN_DIR is the evaluation after its last stage, RUN_DIR:STAGE after
    that stage (base, 00-sft, 01-grpo, ... or a kind: RUN_DIR:base RUN_DIR:grpo). Warns
    when the runs share no task."""
    from agentgym.viewer.report import compare_runs, load_run, shared_line, write_compare

    try:
        comparison = compare_runs(load_run(run_a), load_run(run_b))
    except (FileNotFoundError, ValueError) as bad:
        raise InvalidOption("RUN_A/RUN_B", str(bad)) from None
    path = write_compare(out, comparison)
    if comparison["warning"]:
        click.echo(f"warning: {comparison['warning']}", err=True)
    if as_json:
        click.echo(json.dumps(comparison))
        return
    counts = comparison["counts"]
    table = Table(title="compare", title_justify="left")
    for column in ("run", "name", "n", "mean_reward", "pass_rate", "mean_turns"):
        table.add_column(column)
    for label in ("a", "b"):
        side = comparison[label]
        table.add_row(label.upper(), side["name"], *(_summary_cell(side[k]) for k in
                                                     ("n", "mean_reward", "pass_rate",
                                                      "mean_turns")))
    Console().print(table)
    click.echo(f"{shared_line(comparison)}: solved by A only {counts['a_only']}, by B only"
               f" {counts['b_only']}, by both {counts['both']}, by neither"
               f" {counts['neither']}; wrote {path}")


@main.command("export")
@click.argument("source", metavar="FILE.jsonl|RUN_DIR",
                type=click.Path(exists=True, path_type=Path))
@click.option("--format", "out_format", type=click.Choice(["atif"]), default="atif",
              show_default=True, help="The interchange format to write.")
@click.option("--out", type=click.Path(path_type=Path),
              help="A folder (one ATIF .json document per episode) or a .jsonl file (one per"
                   " line); default: beside SOURCE, named as it is with .atif.")
def export_command(source: Path, out_format: str, out: Path | None) -> None:
    """Convert agentgym trajectories (a file `eval --out` or `rollout --out` wrote, or a run
    folder's *.jsonl files, as `agentgym view` finds them) to ATIF, the trajectory format
    Harbor, TRL, verl, SkyRL, rLLM and NeMo Gym read. `agentgym view` reads the result."""
    from agentgym.interchange.atif import default_export_path, export_atif
    from agentgym.viewer.index import trajectory_files

    out = out or default_export_path(source)
    count = export_atif(trajectory_files(source), out, root=source if source.is_dir() else None)
    click.echo(f"wrote {count} {out_format.upper()} trajectories to {out}", err=True)


@main.command("view")
@click.argument("targets", metavar="FILE.jsonl|RUN_DIR...", nargs=-1, required=True,
                type=click.Path(exists=True, path_type=Path))
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="The port on 127.0.0.1 (0: any free one).")
@click.option("--tokenizer", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A local tokenizer (model) folder: the loss mask shows tokens as text.")
def view_command(targets: tuple[Path, ...], port: int, tokenizer: Path | None) -> None:
    """Browse trajectories in a local web page (127.0.0.1 only): the episodes, sorted and
    filtered by reward, finish reason, env and text; each one as a conversation with its
    tool calls, and its loss mask. Files still being written show new episodes as they
    come. Training run folders (`agentgym train` output) also get their curves, several
    runs overlaid. ATIF documents (`agentgym export`, `--format atif`, Harbor's
    trajectory.json) open as the episodes they hold. Stop with Ctrl-C."""
    from agentgym.core.serving import LocalServer, ServerStartError
    from agentgym.viewer.server import open_index, training_runs, viewer_app

    try:
        index = open_index(list(targets))
    except FileNotFoundError as missing:
        raise InvalidOption("FILE.jsonl|RUN_DIR", f"{missing} does not exist") from None
    runs = training_runs(list(targets))
    if not index.files and not runs:
        raise InvalidOption("FILE.jsonl|RUN_DIR", "no trajectory files (*.jsonl) or ATIF"
                            f" documents (*.json) in {', '.join(map(str, targets))}")
    decoder = None
    if tokenizer:
        from transformers import AutoTokenizer

        decoder = AutoTokenizer.from_pretrained(tokenizer, local_files_only=True)
    try:
        server = LocalServer(viewer_app(index, runs, decoder), port=port, name="agentgym-view")
    except ServerStartError as busy:
        raise InvalidOption("--port", str(busy)) from None
    click.echo(f"{len(index.rows)} episodes from {len(index.files)} file(s);"
               f" open {server.url}/ (Ctrl-C stops)")
    with contextlib.suppress(KeyboardInterrupt):
        server.serve()


def server_options(default_port: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--host``, ``--port`` and ``--allow-remote`` for a command that serves an env or a
    model: 127.0.0.1 by default, another host only with ``--allow-remote``
    (:func:`agentgym.core.serving.check_host`)."""

    def decorate(serve: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(serve)
        def checked(*args: Any, **options: Any) -> Any:
            _check_host_option(options["host"], options["allow_remote"])  # before any work
            return serve(*args, **options)

        # A name of its own: rebinding ``command`` would make ``checked`` call itself.
        decorated = click.option(
            "--allow-remote", is_flag=True,
            help="Let --host be an address other machines reach (anyone who reaches it"
                 " can use what is served).")(checked)
        decorated = click.option(
            "--port", type=click.IntRange(0, 65535), default=default_port, show_default=True,
            help="The port (0: any free one).")(decorated)
        return click.option(
            "--host", default="127.0.0.1", show_default=True,
            help="The address to listen on; not a loopback one only with"
                 " --allow-remote.")(decorated)

    return decorate


def _check_host_option(host: str, allow_remote: bool) -> None:
    from agentgym.core.serving import check_host

    try:
        check_host(host, allow_remote)
    except InvalidArgumentError as refused:
        raise InvalidOption("--host", str(refused)) from None


def open_server(app: Any, name: str, host: str, port: int, allow_remote: bool,
                lifespan: bool = False) -> Any:
    """A :class:`~agentgym.core.serving.LocalServer` for a serve command, its errors as
    the options' errors (``lifespan``: run the app's startup and shutdown)."""
    from agentgym.core.serving import LocalServer, ServerStartError

    _check_host_option(host, allow_remote)
    try:
        return LocalServer(app, port=port, name=name, host=host, allow_remote=allow_remote,
                           lifespan=lifespan)
    except ServerStartError as busy:
        raise InvalidOption("--port", str(busy)) from None


@main.command("serve")
@click.argument("policy")
@server_options(default_port=8000)
@click.option("--name", default=None,
              help="The model id /v1/models reports (default: the model folder, or the text"
                   " after POLICY's colon).")
@click.option("--tool-parser", default="hermes", show_default=True,
              help="How the model writes tool calls in chat completions: hermes (Qwen,"
                   " SmolLM), llama3-json, mistral, xml (Qwen3-Coder), or any parser id of"
                   " `agentgym list parsers`.")
def serve_command(policy: str, host: str, port: int, allow_remote: bool, name: str | None,
                  tool_parser: str) -> None:
    """Serve a token-level POLICY (hf:PATH, vllm:MODEL, openai:URL) as an
    OpenAI-compatible API on 127.0.0.1 (--host): /v1/models, /v1/completions and
    /v1/chat/completions (tools, log-probs, and vLLM's return_token_ids). Stop with
    Ctrl-C."""
    from agentgym.core.policies import policy_level
    from agentgym.core.registry import build
    from agentgym.rollout.serve import openai_app

    parser = build("parsers", tool_parser)  # before the model loads: a typo fails at once
    built = build_policy(policy)
    if policy_level(built) != "token":
        raise InvalidOption("POLICY", f"{policy!r} is a text-level policy; serve samples"
                            " tokens: give hf:PATH, vllm:MODEL or openai:URL")
    if name is None:
        argument = policy.split(":", 1)[1] if ":" in policy else policy
        name = str(Path(argument).resolve()) if Path(argument).is_dir() else argument
    server = open_server(openai_app(built, name, parser), "agentgym-serve", host, port,
                         allow_remote)
    click.echo(f"serving {policy} as {name!r} at {server.url}/v1 (Ctrl-C stops)")
    try:
        with contextlib.suppress(KeyboardInterrupt):
            server.serve()
    finally:
        if isinstance(built, ClosablePolicy):
            built.close()


# ---- mcp ----------------------------------------------------------------------------------


@main.group("mcp")
def mcp_group() -> None:
    """Serve envs over MCP (needs the mcp extra)."""


@mcp_group.command("serve")
@click.argument("env_id")
@env_kwargs_option
@click.option("--transport", type=click.Choice(["http", "stdio"]), default="http",
              show_default=True,
              help="Streamable HTTP at /mcp (several clients), or stdin/stdout (one client"
                   " that starts this command, as desktop apps do).")
@server_options(default_port=8766)
@click.option("--max-episodes", default=16, show_default=True, type=click.IntRange(min=1),
              help="Episodes running at once (each holds its env's sandbox or browser).")
@click.option("--idle-timeout", "idle_timeout_s", default=900.0, show_default=True,
              type=click.FloatRange(min=0, min_open=True),
              help="Seconds without a call before an episode is ended and released.")
def mcp_serve(env_id: str, env_kwargs: tuple[str, ...], transport: str, host: str, port: int,
              allow_remote: bool, max_episodes: int, idle_timeout_s: float) -> None:
    """Serve ENV_ID as an MCP server: a start_task tool (reset: the instruction and an
    episode id), the env's own tools bound to that episode (submit included), and
    get_reward. Any MCP client plays its tasks. Stop with Ctrl-C."""
    from agentgym.interchange.mcp_server import EnvMCPServer

    try:
        served = EnvMCPServer(env_id, parse_env_kwargs(env_kwargs, env_id),
                              max_episodes=max_episodes, idle_timeout_s=idle_timeout_s)
    except AgentGymError as error:
        raise InvalidOption("ENV_ID", str(error)) from None
    if transport == "stdio":
        click.echo(f"serving {env_id} over MCP on stdio", err=True)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(served.serve_stdio())
        return
    server = open_server(served.http_app(host), "agentgym-mcp", host, port, allow_remote,
                         lifespan=True)
    click.echo(f"serving {env_id} over MCP at {server.url}/mcp (Ctrl-C stops)")

# ---- openenv ------------------------------------------------------------------------------


@main.group("openenv")
def openenv_group() -> None:
    """OpenEnv (Meta's environment servers): serve any env as one. To play a running one
    as an env: agentgym eval openenv -e url=http://127.0.0.1:PORT ...; see
    docs/interchange.md."""


@openenv_group.command("serve")
@click.argument("env_id")
@env_kwargs_option
@server_options(default_port=8001)
@click.option("--max-sessions", type=click.IntRange(min=1), default=8, show_default=True,
              help="WebSocket sessions at once, each with an env of its own; one more is"
                   " refused.")
@click.option("--reveal-solutions", is_flag=True,
              help="Show tasks with their solutions and metadata (expected answers), so that"
                   " validate and the oracle policy can play through the server; never when"
                   " a policy being trained connects.")
def openenv_serve(env_id: str, env_kwargs: tuple[str, ...], host: str, port: int,
                  allow_remote: bool, max_sessions: int, reveal_solutions: bool) -> None:
    """Serve ENV_ID as an OpenEnv environment server on 127.0.0.1 (--host): one episode
    per WebSocket session at /ws, for OpenEnv's clients (EnvClient, GenericEnvClient), TRL
    and torchforge; /health, /metadata, /schema, and the task list at /agentgym/tasks.
    Port 8001 by default, beside `agentgym serve`'s 8000. Stop with Ctrl-C."""
    from agentgym.interchange.openenv import openenv_app

    kwargs = parse_env_kwargs(env_kwargs, env_id)
    app = openenv_app(env_id, kwargs, max_sessions=max_sessions,
                      reveal_solutions=reveal_solutions)
    server = open_server(app, "agentgym-openenv", host, port, allow_remote)
    click.echo(f"serving {env_id} over OpenEnv at {server.url} (sessions at /ws, up to"
               f" {max_sessions} at once; Ctrl-C stops)", nl=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve()


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
    click.echo("Without a package index: pip install hatchling editables (local wheels),"
               f" then pip install --no-build-isolation -e {path}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
