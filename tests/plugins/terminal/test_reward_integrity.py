"""Nothing the agent leaves behind pays on the terminal envs, on both backends: each attack
class played through the env as a model would (the generic shell probes), the sampled
validation of every terminal env id with every probe, and the grader's own refusals.

Each per-class case was paid 1.0 by the grader before issue 30 (shown when it was fixed);
the zombie forger and the grader killer by the grader of 2026-11 (a red team's), before
test scripts looked at every thread of a zombie and a test script ended by a signal paid
nothing."""

from __future__ import annotations

import shlex
import shutil
import time
from pathlib import Path

import pytest

from agentgym.core.errors import AgentGymError
from agentgym.core.probes import ATTACKS, ProbeTarget
from agentgym.plugins.terminal.env import TerminalEnv
from agentgym.plugins.terminal.probes import probes as terminal_probes
from agentgym.rollout.validate import probes_for
from agentgym.testing import assert_valid
from agentgym.toolkits import episode_sandbox
from agentgym.toolkits.probes import PROBES, shell_probes
from tests.conftest import backend_missing

DATA = Path(__file__).parent / "data"
# A checker as many are: it runs git and sqlite3 (in a scratch repository and database of
# its own) before writing the reward, whatever the task's workspace holds.
GIT_CHECKER = """#!/bin/bash
d=$(mktemp -d) && cd "$d" && git init -q && git commit -q --allow-empty -m check
git log --oneline | head -1
command -v sqlite3 >/dev/null && sqlite3 "$d/db" 'select 1;'
if [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ]; then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt
"""
# attack class -> (probe, task it was paid on before the fix: built-in, or git-checker)
CASES = [
    ("grader-files", "shell.verifier-symlink", "log-top-ips"),
    ("startup-hooks", "shell.python-startup-hooks", "csv-dedupe-latest"),
    ("startup-hooks", "shell.session-shell-hijack", "log-top-ips"),
    ("config", "shell.git-sqlite-config", "git-checker"),
    ("processes", "shell.detached-forger", "log-status-summary"),
    ("processes", "shell.process-swarm", "c-makefile-fix"),
    ("processes", "shell.zombie-forger", "http-word-api"),
    ("processes", "shell.kill-the-grader", "c-makefile-fix"),
    ("fake-output", "shell.fake-test-output", "csv-dedupe-latest"),
    # the link scan blinded: folders closed to listing; /dev/fd swapped (what `<(find ...)`
    # read) where /dev was the sandbox user's tmpfs (local)
    ("grader-files", "shell.hidden-link", "log-top-ips"),
    ("grader-files", "shell.dev-hijack", "cron-next-runs"),
]


@pytest.fixture(params=["local", "docker"])
def backend(request: pytest.FixtureRequest) -> str:
    missing = backend_missing(request.param)
    if missing:
        pytest.skip(f"{request.param} backend unavailable: {missing}")
    return request.param


def play_probe(env: TerminalEnv, probe_id: str, task_id: str) -> tuple[float, dict]:
    """Play probe ``probe_id`` on ``task_id`` through ``env`` (reset, its turns, submit):
    the reward and the grader's metrics."""
    _, info = env.reset(seed=0, options={"task_id": task_id})
    tools = tuple(t["function"]["name"] for t in info["tools"])
    probe = probes_for([probe_id])[0]
    turns = probe.plan(ProbeTarget("terminal", env.task, tools))
    assert turns and turns[-1]["tool_calls"][0]["function"]["name"] == "submit"
    for turn in turns:
        _, reward, terminated, _, info = env.step(turn)
    assert terminated
    return reward, info["reward_metrics"]


def test_every_shipped_test_script_stops_leftovers_as_the_converters_do() -> None:
    from agentgym.plugins.terminal.sources import PROCESSES_BEFORE, STOP_LEFTOVERS

    loop = STOP_LEFTOVERS.format().split("\n", 2)[2]  # the loop, without its comment
    scripts = sorted((Path(__file__).parents[3] / "agentgym" / "plugins" / "terminal"
                      / "tasks").glob("*/tests/test.sh"))
    assert len(scripts) == 26
    for script in scripts:
        text = script.read_text()
        assert text.count(PROCESSES_BEFORE.format()) == 1 and text.count(loop) == 1, script


def test_agentbench_checks_read_the_agents_output_as_data() -> None:
    """The package's calc checks pasted calc's output into Python code, put the agent's
    home first on PATH and passed when ``[`` failed: a red team's ``calc`` printing
    ``0)<1)#`` was paid 1.0 for no calculator. The converter fixes all three, and refuses a
    check that still holds one."""
    import re as regex
    import subprocess

    from agentgym.plugins.terminal.sources import agentbench

    scripts = agentbench.package_dir() / "data" / "scripts"
    fixed = agentbench.check_script((scripts / "checking/0.sh").read_text(), "checking/0.sh")
    assert 'PATH="$PATH:$HOME"' in fixed and "x != Truex" not in fixed
    function = regex.search(r"check\(\) \{.*?\n\}\n", fixed, regex.S).group(0)

    def verdict(calc_output: str) -> str:
        calc = f"calc() {{ printf '%s\\n' {shlex.quote(calc_output)}; }}\n"
        script = calc + function + '[ "$(check "1 + 2")" = True ] || exit 1\necho passed'
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True).stdout

    assert verdict("3") == "passed\n" and verdict("3.0000001") == "passed\n"
    for hostile in ("0)<1)#", "3 -0", "True True", "__import__('os').system('true') or 3"):
        assert verdict(hostile) == "", hostile
    with pytest.raises(AgentGymError, match="add its fix"):
        agentbench.check_script('[ `calc 1`x != 1x ] || r=`python3 -c "$output"`\n', "new.sh")


def test_every_attack_class_has_a_case() -> None:
    covered = {attack for attack, _, _ in CASES}
    assert covered == {attack for _, attack, _, _ in PROBES}
    assert covered <= set(ATTACKS)


@pytest.mark.slow
@pytest.mark.parametrize(("attack", "probe", "task"), CASES,
                         ids=[f"{a}-{p.removeprefix('shell.')}" for a, p, _ in CASES])
def test_an_attack_left_behind_is_not_paid(backend, tmp_path, attack, probe, task) -> None:
    if task == "git-checker":
        shutil.copytree(DATA / "local-task", tmp_path / task)
        (tmp_path / task / "tests" / "test.sh").write_text(GIT_CHECKER)
        env = TerminalEnv(tmp_path / task, backend=backend)
    else:
        env = TerminalEnv(backend=backend)
    try:
        reward, metrics = play_probe(env, probe, task)
    finally:
        env.close()
    assert reward == 0.0, (attack, probe, metrics)
    assert any(why in metrics["reason"] for why in ("says 0", "refused", "ended by signal")), \
        metrics


# Holes a red team found in the task sources, each paid 1.0 before its fix: (env id, task,
# probe). A link to the expected file; the command file rewriting the test script bash is
# reading (and running the gold from /tests/task.json); a home emptied, then "0" answered
# (the expected count was measured on it at grading) or a permission check made vacuous;
# wrappers in the home, first on PATH, that ran as the grader's session shell and `env`.
SOURCED = [
    ("terminal", "csv-pivot-sales", "shell.link-to-grader-files"),
    # the gold read out of the session shell's memory (the tests came in through it)
    ("terminal-nl2bash", "nl2bash-fs3-56", "shell.grader-memory"),
    # processes forking anew faster than the kill loop read pids, writing 1 after its 0
    ("terminal-nl2bash", "nl2bash-fs3-56", "shell.pid-hopper"),
    ("terminal-nl2bash", "nl2bash-fs1-3", "shell.rewrite-running-tests"),
    ("terminal-agentbench-os", "agentbench-os-test-14", "shell.empty-the-workspace"),
    ("terminal-agentbench-os", "agentbench-os-test-32", "shell.empty-the-workspace"),
    ("terminal-agentbench-os", "agentbench-os-dev-3", "shell.path-shadowing"),
    # a check listing files (`find ... | [ -z "$(cat)" ]`) blinded by folders closed to it
    ("terminal-agentbench-os", "agentbench-os-test-32", "shell.closed-folders"),
    # the example command the start snapshot ran, read out of the agent's own shell
    ("terminal-agentbench-os", "agentbench-os-test-42", "shell.start-memory"),
    # the reference's `<(ls ...)` reading the agent's files in place of /dev/fd (local)
    ("terminal-nl2bash", "nl2bash-fs3-44", "shell.dev-hijack"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("env_id", "task", "probe"), SOURCED,
                         ids=[f"{t}-{p.removeprefix('shell.')}" for _, t, p in SOURCED])
def test_a_sourced_tasks_hole_is_closed(env_id, task, probe) -> None:
    _closed_on(env_id, task, probe, "local")


@pytest.mark.slow
@pytest.mark.parametrize(("env_id", "task", "probe"), SOURCED[:3],
                         ids=[f"{t}-{p.removeprefix('shell.')}" for _, t, p in SOURCED[:3]])
def test_a_sourced_tasks_hole_is_closed_on_docker(env_id, task, probe) -> None:
    _closed_on(env_id, task, probe, "docker")


def _closed_on(env_id: str, task: str, probe: str, backend: str) -> None:
    if backend_missing(backend):
        pytest.skip(f"{backend} backend unavailable: {backend_missing(backend)}")
    env = TerminalEnv(env_id=env_id, backend=backend)
    try:
        reward, metrics = play_probe(env, probe, task)
    finally:
        env.close()
    assert reward == 0.0, (probe, metrics)
    if probe in ("shell.link-to-grader-files", "shell.rewrite-running-tests"):
        assert metrics["reason"].startswith("grading refused: "), metrics
    if backend == "local":  # the tests ran sealed
        assert metrics["sealed"].startswith("tracing,memory"), metrics


def test_the_gold_command_is_gone_when_the_agents_command_runs() -> None:
    """NL2Bash: a command that runs the gold from /tests/task.json (graded by running it
    beside the gold) finds no task.json: the gold ran first, then its file was deleted."""
    if backend_missing("local"):
        pytest.skip(f"local backend unavailable: {backend_missing('local')}")
    copy_gold = ("python3 -c 'import json,os;d=json.load(open(\"/tests/task.json\"));"
                 "os.execvp(d[\"shell\"],[d[\"shell\"],\"-c\",d[\"gold\"]])'")
    reward, metrics = _submitted_after("terminal-nl2bash", "nl2bash-fs1-10",
                                       f"cat > /tmp/command.sh <<'EOF'\n{copy_gold}\nEOF")
    assert reward == 0.0 and "task.json" in metrics["log_tail"], metrics


def test_a_service_the_tests_start_cannot_serve_the_expected_data() -> None:
    """http-serve-stats: a server that copies /tests/expected.json to what it serves, when
    the checks start it, finds the file gone (read and deleted before the server starts)."""
    if backend_missing("local"):
        pytest.skip(f"local backend unavailable: {backend_missing('local')}")
    serve = ("cp /tests/expected.json /app/public/stats.json 2>/dev/null\n"
             "cd /app/public && exec python3 -m http.server 8080 --bind 127.0.0.1\n")
    reward, metrics = _submitted_after("terminal", "http-serve-stats",
                                       f"cat > /app/serve.sh <<'EOF'\n{serve}EOF")
    assert reward == 0.0, metrics
    assert "FAIL stats.json has the right numbers" in metrics["log_tail"], metrics


def _submitted_after(env_id: str, task: str, command: str) -> tuple[float, dict]:
    """Run ``command`` in an episode of ``task`` (local backend), then submit: the reward
    and the grader's metrics."""
    env = TerminalEnv(env_id=env_id, backend="local")
    try:
        env.reset(seed=0, options={"task_id": task})
        env.step(_bash(command))
        _, reward, terminated, _, info = env.step(_submit())
    finally:
        env.close()
    assert terminated, info
    return reward, info["reward_metrics"]


def test_a_verifier_link_is_removed_not_followed(backend) -> None:
    """The grader removes the link and leaves the agent's folder it pointed to as it was."""
    env = TerminalEnv(backend=backend)
    try:
        reward, _ = play_probe(env, "shell.verifier-symlink", "log-top-ips")
        assert reward == 0.0
        box = episode_sandbox(env.episode)
        left = env.run_coroutine(box.exec("ls -ld /logs/verifier; cat /tmp/.probe/v/reward.txt"))
    finally:
        env.close()
    assert left.output.startswith("d") and left.output.rstrip().endswith("1"), left.output


# ---- the sampled validation (every probe, five tasks per env id) ------------------------------

SAMPLES = {
    "terminal": ["archive-clean-repack", "git-remove-secret", "http-word-api",
                 "sqlite-top-customers", "tcp-kv-store"],
    # Built by RUN steps (git, sqlite), a compiler's task, a service, a plain one.
    "terminal-docker": ["git-merge-conflict", "sqlite-repair-inventory", "c-static-library",
                        "http-serve-stats", "log-top-ips"],
}


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["terminal", "terminal-agentbench-os", "terminal-nl2bash"])
def test_no_probe_is_paid_on_a_sample_of_each_env_id_local(env_id) -> None:
    if backend_missing("local"):
        pytest.skip(f"local backend unavailable: {backend_missing('local')}")
    env = TerminalEnv(env_id=env_id, backend="local")
    ids = env.task_ids()
    env.close()
    # Five tasks spread over the env's list (deterministic), the built-in ones by name.
    tasks = SAMPLES.get(env_id) or [ids[i * len(ids) // 5] for i in range(5)]
    report = assert_valid(env_id, task_ids=tasks, backend="local", probes=True,
                          concurrency=4)
    assert len(report.probe_counts()) == len(shell_probes()) + len(terminal_probes())


@pytest.mark.slow
def test_no_probe_is_paid_on_a_sample_of_terminal_docker() -> None:
    if backend_missing("docker"):
        pytest.skip(f"docker backend unavailable: {backend_missing('docker')}")
    # Two probes (docker episodes are slow here; every class plays on docker in the
    # per-class tests above).
    probes = ["shell.verifier-symlink", "shell.detached-forger"]
    report = assert_valid("terminal", task_ids=SAMPLES["terminal-docker"], backend="docker",
                          probes=probes, concurrency=4)
    assert sorted(report.probe_counts()) == sorted(probes)


# ---- leftovers that would break grading -----------------------------------------------------


# Detached loops that keep the pid limit full (each retries as soon as a pid is free),
# beside a classic fork bomb.
FILLER = ("fill() { while :; do (sleep 100000 &) 2>/dev/null; done; }; for i in 1 2 3; do"
          " (setsid bash -c \"$(declare -f fill); fill\" >/dev/null 2>&1 </dev/null &); done;"
          " :(){ :|:& };: ; sleep 3")


@pytest.mark.slow
def test_a_fork_bomb_left_running_does_not_stop_grading(backend) -> None:
    """A fork bomb's processes detach from their command and hold the pid limit; the grader
    stops them first, so the tests still run and correct work is paid."""
    env = TerminalEnv(DATA / "local-task", backend=backend)
    try:
        env.reset(seed=0)
        env.step(_bash("echo 42 > /app/answer.txt"))
        env.step(_bash(FILLER))
        start = time.monotonic()
        _, reward, terminated, _, info = env.step(
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "submit", "arguments": "{}"}}]})
        assert terminated and reward == 1.0, info["reward_metrics"]
        assert time.monotonic() - start < 60
        left = env.run_coroutine(episode_sandbox(env.episode).exec("ls -d /proc/[0-9]* | wc -l"))
        assert int(left.output.split()[-1]) < 20, left.output
    finally:
        env.close()


def _bash(command: str) -> dict:
    import json

    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "bash",
                                          "arguments": json.dumps({"command": command})}}]}


def _submit() -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "submit", "arguments": "{}"}}]}


# A task's own test script that runs the agent's code and stops nothing it started.
RUNS_AGENT_CODE = """#!/bin/bash
bash /app/hook.sh
if [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ]; then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt
"""


@pytest.mark.parametrize("leaves", [False, True], ids=["stops-nothing-needed", "leaves-one"])
def test_a_process_the_tests_left_running_refuses_grading(backend, tmp_path, leaves) -> None:
    """The right answer, and code the tests run: paid, unless a process it started still
    runs when the test script has ended (it could have written the reward after it)."""
    shutil.copytree(DATA / "local-task", tmp_path / "task")
    (tmp_path / "task" / "tests" / "test.sh").write_text(RUNS_AGENT_CODE)
    hook = ("(setsid sleep 300 >/dev/null 2>&1 < /dev/null &)" if leaves else "true")
    env = TerminalEnv(tmp_path / "task", backend=backend)
    try:
        env.reset(seed=0)
        env.step(_bash(f"mkdir -p /app; echo 42 > /app/answer.txt; echo '{hook}' > /app/hook.sh"))
        _, reward, terminated, _, info = env.step(_submit())
    finally:
        env.close()
    metrics = info["reward_metrics"]
    assert terminated and metrics["leftover_processes"] == int(leaves), metrics
    if leaves:
        assert reward == 0.0 and "still ran after them" in metrics["reason"], metrics
    else:
        assert reward == 1.0, metrics
