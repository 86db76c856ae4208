"""Holes a red team found in the terminal graders, closed: a link through /proc/<a future
pid>/root into /tests, a checked folder moved away with a link left in its place, and the
agent's module ending an inline `python -` check early with exit status 0, or with what
it read of the check from its caller's frame."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgym.core.probes import ProbeTarget, call_turn
from agentgym.plugins.terminal.env import TerminalEnv
from agentgym.rollout.validate import probes_for
from tests.conftest import backend_missing

TASKS = Path(__file__).parents[3] / "agentgym" / "plugins" / "terminal" / "tasks"


@pytest.fixture(autouse=True)
def _local() -> None:
    missing = backend_missing("local")
    if missing:
        pytest.skip(f"local backend unavailable: {missing}")


def _play(env_id: str, task: str, commands=(), probe: str | None = None):
    env = TerminalEnv(env_id=env_id, backend="local")
    try:
        _, info = env.reset(seed=0, options={"task_id": task})
        turns = [call_turn("bash", command=c) for c in commands]
        if probe:
            tools = tuple(t["function"]["name"] for t in info["tools"])
            turns += probes_for([probe])[0].plan(ProbeTarget(env_id, env.task, tools))
        else:
            turns.append(call_turn("submit"))
        for turn in turns:
            _, reward, terminated, _, info = env.step(turn)
            if terminated:
                break
    finally:
        env.close()
    assert terminated, info
    return reward, info["reward_metrics"]


@pytest.mark.parametrize("target", ["/proc/$(( $(sh -c 'echo $$') + 43 ))/root/tests/expected.txt",
                                    "/dev/stdin", "../../proc/1/cwd/x"])
def test_a_link_through_proc_or_dev_fd_is_refused(target) -> None:
    reward, metrics = _play("terminal", "log-top-ips",
                            [f"ln -sfn {target} /app/top_ips.txt"])
    assert reward == 0.0
    assert "is a link through" in metrics["reason"], metrics


def test_the_proc_pid_root_probe_is_not_paid() -> None:
    reward, metrics = _play("terminal", "csv-dedupe-latest",
                            probe="terminal.proc-pid-root-link")
    assert reward == 0.0 and "grading refused" in metrics["reason"], metrics


def test_an_honest_link_into_the_workspace_still_grades() -> None:
    solve = (TASKS / "log-top-ips" / "solution" / "solve.sh").read_text()
    reward, metrics = _play("terminal", "log-top-ips", [
        solve, "mv /app/top_ips.txt /app/.real.txt && ln -s .real.txt /app/top_ips.txt"
               " && ln -sfn /dev/null ~/.bash_history"])
    assert reward == 1.0, metrics


def test_a_checked_folder_moved_and_linked_is_not_paid() -> None:
    reward, metrics = _play("terminal-agentbench-os", "agentbench-os-test-32",
                            probe="terminal.move-and-link")
    assert reward == 0.0, metrics
    assert "reached through a link" in metrics["log_tail"], metrics


def test_a_module_ending_the_inline_api_check_early_is_not_paid() -> None:
    solve = (TASKS / "python-package-module" / "solution" / "solve.sh").read_text()
    early = ("sed -i '1i import os as _o, sys as _s\\nif _s.argv[0] in (\"-c\", \"-\"):"
             " _o._exit(0)' /app/wordstat/__init__.py && head -3 /app/wordstat/__init__.py")
    reward, metrics = _play("terminal", "python-package-module", [solve, early])
    assert reward == 0.0, metrics
    assert "FAIL the package imports and exposes the API" in metrics["log_tail"], metrics


# Prepended to the agent's module: when a probe (`python3 -` or `-c`) imports it, print
# every string constant of the importing code that looks like the probe's word for "ran to
# the end" (the checks once printed a word made for the run, a constant in reach of the
# module's code through its caller's frame) and end the process with status 0.
FRAME_FORGER = r"""import os as _o, sys as _s
if _s.argv[0] in ('-', '-c'):
    _f, _said = _s._getframe(0), []
    while _f is not None:
        _said += [c for c in _f.f_code.co_consts if isinstance(c, str) and 'probe' in c
                  and ('-done-' in c or ' ok ' in c)]
        _f = _f.f_back
    _s.stdout.write(''.join(c if c.endswith(chr(10)) else c + chr(10) for c in _said))
    _s.stdout.flush(); _o._exit(0)
"""


def _prepend(path: str) -> str:
    """A shell command that puts FRAME_FORGER at the top of ``path``."""
    return (f"cat > /tmp/forger.py <<'PY'\n{FRAME_FORGER}PY\n"
            f"cat /tmp/forger.py {path} > /tmp/joined.py && cat /tmp/joined.py > {path}")


def test_a_module_forging_the_api_check_from_its_callers_frame_is_not_paid() -> None:
    solve = (TASKS / "python-package-module" / "solution" / "solve.sh").read_text()
    reward, metrics = _play("terminal", "python-package-module",
                            [solve, _prepend("/app/wordstat/__init__.py")])
    assert reward == 0.0, metrics
    assert "FAIL the package imports and exposes the API" in metrics["log_tail"], metrics


def test_an_app_forging_the_merge_check_from_its_callers_frame_is_not_paid() -> None:
    solve = (TASKS / "git-merge-conflict" / "solution" / "solve.sh").read_text()
    forge = ("cd /app/repo && " + _prepend("app.py")
             + " && git add app.py && git commit -q --amend --no-edit && git log -1 --format=%P")
    reward, metrics = _play("terminal", "git-merge-conflict", [solve, forge])
    assert reward == 0.0, metrics
    assert "FAIL app.py keeps load_settings, bind_address and health" in metrics["log_tail"], \
        metrics


def test_the_honest_solutions_of_the_in_process_checks_are_paid() -> None:
    for task in ("python-package-module", "git-merge-conflict"):
        solve = (TASKS / task / "solution" / "solve.sh").read_text()
        reward, metrics = _play("terminal", task, [solve])
        assert reward == 1.0, (task, metrics)
