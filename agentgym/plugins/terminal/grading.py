"""Grading a terminal task: its tests, copied in only now, run in the episode's sandbox.

:func:`grade_task` runs after the agent finished, in the same sandbox (a task may check a
service the agent left running):

1. ``/tests`` and ``/logs/verifier`` are emptied, whatever the agent put there, and the
   task's test files are copied into ``/tests``. Before this the agent could not read them
   (they were never in the sandbox), and an edit it made to a copy of its own is gone.
2. The task's test command runs in the workspace, as the sandbox user, with the sandbox's
   environment as it was when the episode started (variables the agent exported in its
   shells do not reach it), within the task's test timeout.
3. The reward: Harbor tasks report it in ``/logs/verifier/reward.txt`` (a number, or
   ``reward.json`` with a ``reward`` field); Terminal-Bench tasks print pytest's ``-rA``
   summary, whose PASSED/FAILED lines are counted. ``binary`` gives 1.0 only for a full
   score (a reward of 1, or every test passed); ``fraction`` gives the score itself.

The metrics carry the tests' exit code, the counts, why the reward is what it is, and the
tail of the test output.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import tarfile
from collections.abc import Mapping
from pathlib import Path

from agentgym.core.reward import RewardResult
from agentgym.core.sandbox import Sandbox
from agentgym.plugins.terminal.formats import LOGS_DIR, REWARD_FILE, TESTS_DIR, TerminalTask

#: Characters of the test output kept in the metrics.
LOG_TAIL_CHARS = 3000
_ARCHIVE = "/tmp/.agentgym-tests.tar"
# pytest -rA's short summary: "PASSED tests/test_x.py::test_y", "FAILED ... - reason"
_RESULT = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s+(\S+)", re.MULTILINE)
_PASSING = {"PASSED", "XFAIL"}


def tests_archive(task: TerminalTask) -> bytes:
    """The task's test files as a tar, laid out as they go into ``/tests``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, host in task.tests:
            if host.is_dir():
                for path in sorted(host.rglob("*")):
                    tar.add(path, arcname=str(Path(name) / path.relative_to(host)),
                            recursive=False)
            else:
                tar.add(host, arcname=name or host.name, recursive=False)
    return buffer.getvalue()


def clean_command(command: str, env: Mapping[str, str] | None, workdir: str) -> str:
    """``command`` run by a fresh bash in ``workdir`` with exactly ``env`` (None: the
    session's own environment)."""
    inner = f"cd {shlex.quote(workdir)} && {command}"
    if env is None:
        return f"bash --noprofile --norc -c {shlex.quote(inner)}"
    pairs = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(env.items()))
    return f"env -i {pairs} bash --noprofile --norc -c {shlex.quote(inner)}"


async def grade_task(box: Sandbox, task: TerminalTask, *, env: Mapping[str, str] | None,
                     timeout: float | None = None) -> RewardResult:
    """Run ``task``'s tests in ``box`` and score them (see the module docstring).
    ``env``: the sandbox's environment at the episode's start."""
    timeout = timeout or task.test_timeout_s
    prepare = (f"chmod -R u+rwX {TESTS_DIR} {LOGS_DIR} 2>/dev/null;"
               f" find {TESTS_DIR} {LOGS_DIR}/verifier -mindepth 1 -delete 2>/dev/null;"
               f" mkdir -p {LOGS_DIR}/verifier {LOGS_DIR}/agent")
    await box.exec(prepare, timeout=60)
    await box.write_file(_ARCHIVE, tests_archive(task))
    unpacked = await box.exec(f"tar -xf {_ARCHIVE} -C {TESTS_DIR} && rm -f {_ARCHIVE}",
                              timeout=60)
    if not unpacked.ok:
        return RewardResult(0.0, {"reason": "the tests could not be copied in",
                                  "log_tail": unpacked.output[-LOG_TAIL_CHARS:]})
    result = await box.exec(clean_command(task.test_command, env, task.workdir),
                            timeout=timeout)
    metrics = {"exit_code": result.exit_code, "timed_out": result.timed_out,
               "test_command": task.test_command,
               "log_tail": result.output[-LOG_TAIL_CHARS:]}
    if result.timed_out:
        return RewardResult(0.0, {**metrics, "reason": f"the tests timed out after"
                                                       f" {timeout:g} s"})
    if task.format == "harbor":
        score, reason = await _reward_file(box)
    else:
        score, reason, passed, total = _pytest_score(result.output)
        metrics.update(tests_passed=passed, tests_total=total)
    if score is None:
        return RewardResult(0.0, {**metrics, "reason": reason})
    score = min(1.0, max(0.0, score))
    reward = score if task.reward == "fraction" else float(score >= 1.0)
    return RewardResult(reward, {**metrics, "score": score, "reason": reason})


async def _reward_file(box: Sandbox) -> tuple[float | None, str]:
    """Harbor's reward: ``reward.txt``'s number, else ``reward.json``'s ``reward``."""
    try:
        text = (await box.read_file(REWARD_FILE)).decode(errors="replace").strip()
    except FileNotFoundError:
        text = None
    if text is not None:
        try:
            return float(text.split()[0]), f"{REWARD_FILE} says {text[:40]}"
        except (ValueError, IndexError):
            return None, f"{REWARD_FILE} holds {text[:80]!r}, not a number"
    json_file = REWARD_FILE.replace(".txt", ".json")
    try:
        data = json.loads(await box.read_file(json_file))
        return float(data["reward"]), f"{json_file} says {data['reward']}"
    except FileNotFoundError:
        return None, f"the tests wrote no {REWARD_FILE}"
    except (ValueError, KeyError, TypeError):
        return None, f"{json_file} has no numeric 'reward'"


def _pytest_score(output: str) -> tuple[float | None, str, int, int]:
    """Terminal-Bench's reward: the share of tests pytest's ``-rA`` summary lists as
    passed."""
    results: dict[str, str] = {}
    for outcome, test in _RESULT.findall(output):
        results[test] = outcome
    total = len(results)
    passed = sum(outcome in _PASSING for outcome in results.values())
    if not total:
        return None, "the test output lists no test results (pytest -rA)", 0, 0
    return passed / total, f"{passed}/{total} tests passed", passed, total
