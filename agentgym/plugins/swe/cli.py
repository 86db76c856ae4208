"""``agentgym swe ...``: make repair tasks from PyPI projects.

::

    agentgym swe synth PACKAGE==VERSION -n N --out tasks.jsonl [--seed S] [--jobs J]
                       [--backend local|docker] [--difficulty easy|medium|hard]
                       [--statement template|policy:POLICY] [--no-test-ids]

``synth`` writes ``N`` validated tasks (SWE-bench instance rows, one JSON object a line) made
by injecting bugs into the project, checking them against its own tests, and grading each
with the real grader in ``--backend`` (gold patch 1.0, no change 0.0); see
:mod:`agentgym.plugins.swe.synth`. ``--difficulty`` sets how many mutations a task holds
(easy 1, medium 2, hard 3); ``--statement`` who writes the problem statements
(:mod:`agentgym.plugins.swe.statements`). Its last line on stderr counts what was written
and what was rejected: ``N tasks written; M candidates rejected by the grader (k: gold
patch < 1.0, j: no change > 0.0), ...``. Results are cached: the same command again is
immediate (statements by a policy are written again).
"""

from __future__ import annotations

import time
from pathlib import Path

import click


@click.group("swe")
def swe_group() -> None:
    """Software-engineering tasks: synthesize repair tasks from PyPI projects."""


@swe_group.command("synth")
@click.argument("spec", metavar="PACKAGE==VERSION")
@click.option("-n", "count", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many tasks.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Where to write the tasks (JSON lines).")
@click.option("--seed", default=0, show_default=True, help="Picks which mutants come first.")
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(min=1),
              help="Mutants validated at once (the tasks do not depend on it).")
@click.option("--runner", default="auto", show_default=True,
              type=click.Choice(["auto", "sandbox", "subprocess"]),
              help="Where mutants' tests run: the local sandbox, or a bare subprocess.")
@click.option("--backend", default="local", show_default=True,
              help="The sandbox backend the tasks will be graded in; the grader validates"
                   " each task there (`agentgym list sandboxes`).")
@click.option("--max-fail-to-pass", default=10, show_default=True, type=click.IntRange(min=1),
              help="Reject mutants that fail more tests than this.")
@click.option("--difficulty", default="easy", show_default=True,
              type=click.Choice(["easy", "medium", "hard"]),
              help="Mutations per task: easy 1 (a point change), medium 2 (two functions),"
                   " hard 3 (three functions, one change spanning lines where the project"
                   " has such mutants left).")
@click.option("--statement", default="template", show_default=True,
              help="Who writes the problem statements: template, or policy:POLICY (e.g."
                   " policy:openai:http://127.0.0.1:8000/v1, policy:hf:PATH); see"
                   " `agentgym list statement_writers`.")
@click.option("--no-test-ids", is_flag=True,
              help="Leave the failing tests' ids out of template statements.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def synth_command(spec: str, count: int, out: Path, seed: int, jobs: int, runner: str,
                  backend: str, max_fail_to_pass: int, difficulty: str, statement: str,
                  no_test_ids: bool, quiet: bool) -> None:
    """Write N bug-fix tasks for PACKAGE==VERSION (e.g. toolz==1.2.0) to --out."""
    from agentgym.core.errors import AgentGymError
    from agentgym.plugins.swe.repo import split_spec
    from agentgym.plugins.swe.synth import synthesize_report, write_jsonl

    started = time.monotonic()
    try:
        package, version = split_spec(spec)
        report = synthesize_report(package, version, count, seed, progress=not quiet,
                                   runner=runner, backend=backend, jobs=jobs,
                                   max_fail_to_pass=max_fail_to_pass,
                                   difficulty=difficulty, statement=statement,
                                   test_ids=not no_test_ids)
    except AgentGymError as error:
        raise click.ClickException(str(error)) from error
    tasks = report.tasks
    write_jsonl(tasks, out)
    click.echo(f"wrote {len(tasks)} tasks for {package}=={version} to {out}"
               f" in {time.monotonic() - started:.1f} s", err=True)
    click.echo(report.summary(), err=True)
    if len(tasks) < count:
        raise click.ClickException(f"asked for {count} tasks, but only {len(tasks)} mutants"
                                   " were caught by the project's tests and accepted by the"
                                   " grader; try another project")
