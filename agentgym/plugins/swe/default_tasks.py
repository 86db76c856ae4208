"""``swe-synth-default``: the task set ``swe-synth`` plays when given no tasks, a task source
registered by the ``swe`` plugin (``agentgym list task_sources`` says what it costs).

:data:`TASKS_PER_PROJECT` bugs injected into each of :data:`PROJECTS` by ``agentgym swe
synth`` (:mod:`agentgym.plugins.swe.synth`), each validated by the grader of the backend it
is built for. The first use downloads the sdists, builds their test envs and validates every
task (about :data:`SYNTH_MINUTES` minutes on 2 cores), saying so on stderr before it starts
and as each project is done; the file is then cached (keyed by the synthesis format and the
grader's version), so later uses read it at once. ``-e tasks=FILE.jsonl`` skips it.

The heavy modules (synthesis, validation, the env) are imported when the source is built,
not when the plugin loads.
"""

from __future__ import annotations

import hashlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agentgym.core.task import TaskSource

#: The id it is registered under.
SOURCE_ID = "swe-synth-default"
#: The projects of the default task set, and the tasks synthesized from each.
PROJECTS = ("toolz==1.2.0", "inflection==0.5.1", "cachetools==8.0.0")
TASKS_PER_PROJECT = 5
#: About how long synthesizing it takes on 2 cores (said before it runs).
SYNTH_MINUTES = 4
#: What ``agentgym list task_sources`` says of it.
DESCRIPTION = (f"swe-synth's default tasks: {TASKS_PER_PROJECT} bugs injected into each of"
               f" {', '.join(PROJECTS)}. Synthesized and validated on first use (downloads"
               f" sdists, builds test envs: about {SYNTH_MINUTES} minutes on 2 cores), then"
               " cached; backend=NAME: validated in that sandbox backend (default local).")


def default_task_source(backend: str = "local") -> TaskSource:
    """The default task set as SWE tasks for ``backend`` (:func:`default_synth_tasks`)."""
    from agentgym.plugins.swe.env import task_source
    from agentgym.plugins.swe.instance import load_instances

    return task_source(load_instances(default_synth_tasks(backend)))


def default_synth_tasks(backend: str = "local") -> Path:
    """The default ``swe-synth`` task file for ``backend`` (whose grader validates them):
    synthesized on first use from :data:`PROJECTS` (downloads their sdists and
    builds their test envs, a few minutes), then cached until synthesis or grading
    changes."""
    from agentgym.plugins.swe import repo
    from agentgym.plugins.swe.synth import FORMAT, synthesize, write_jsonl
    from agentgym.plugins.swe.validation import GRADER_VERSION

    version = hashlib.sha256(f"{FORMAT} {GRADER_VERSION}".encode()).hexdigest()[:8]
    path = repo.cache_dir() / "tasks" / (
        f"swe-synth-default-{TASKS_PER_PROJECT}x{len(PROJECTS)}"
        f"-{backend}-{version}.jsonl")
    if path.is_file():
        return path
    count = len(PROJECTS)
    # Minutes of silence read as a hang: say what is built, for how long, and that it is
    # done once.
    _say(f"swe-synth: building its default tasks on first use: {count} x"
         f" {TASKS_PER_PROJECT} tasks from {', '.join(PROJECTS)}"
         " (downloads their sdists, builds their test envs and validates every task:"
         f" a few minutes, about {SYNTH_MINUTES} on 2 cores). Cached in {path.parent}, so"
         " later runs start at once; -e tasks=FILE.jsonl skips it.")
    rows = []
    # On a thread of its own: envs are often made inside a running event loop. No
    # progress bar of its own: the caller's (eval's) may be on screen.
    with ThreadPoolExecutor(1) as thread:
        for index, spec in enumerate(PROJECTS, 1):
            package, version = repo.split_spec(spec)
            started = time.monotonic()
            _say(f"swe-synth: [{index}/{count}] {spec}: synthesizing"
                 f" {TASKS_PER_PROJECT} tasks")
            made = thread.submit(synthesize, package, version,
                                 TASKS_PER_PROJECT, progress=False,
                                 backend=backend).result()
            _say(f"swe-synth: [{index}/{count}] {spec}: {len(made)} tasks in"
                 f" {time.monotonic() - started:.0f} s")
            rows += made
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{os.getpid()}")
    write_jsonl(rows, staging)
    staging.replace(path)  # whole or not at all
    _say(f"swe-synth: wrote {len(rows)} tasks to {path}")
    return path


def _say(message: str) -> None:
    """A line on stderr, above any progress bar on screen (rich prints through it)."""
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[dim]{escape(message)}[/]")
