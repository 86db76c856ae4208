"""swe-synth on the local backend: tasks synthesized from a real PyPI project (toolz), each
solved by the oracle, failed by noop, and not gamed by editing or deleting the tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the envs)
from agentgym.testing import check_env, play_turns

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0,
    reason="the local sandbox needs bubblewrap (apt-get install bubblewrap) and root")

SUBMIT = '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>'


def bash(command: str) -> str:
    return ('<tool_call>\n' + json.dumps({"name": "bash", "arguments": {"command": command}})
            + '\n</tool_call>')


def play(env, task_id, turns):
    return play_turns(env, turns, options={"task_id": task_id})


@pytest.mark.slow
def test_oracle_solves_and_noop_fails_every_task(toolz_tasks):
    env = gym.make("swe-synth", tasks=str(toolz_tasks))
    try:
        raw = env.unwrapped
        assert raw.backend == "local"
        for task in raw.tasks:
            instance = raw.instances[task.id]
            env.reset(options={"task_id": task.id})
            oracle = list(raw.task.solution)
            reward, info = play(env, task.id, oracle)
            assert reward == 1.0, info["reward_metrics"]
            metrics = info["reward_metrics"]
            assert metrics["f2p_passed"] == len(instance.FAIL_TO_PASS) > 0
            assert metrics["p2p_passed"] == len(instance.PASS_TO_PASS)
            reward, _ = play(env, task.id, [SUBMIT])
            assert reward == 0.0
            # Deleting the failing tests' files, or rewriting them to pass, cannot score.
            files = sorted({test.split("::")[0] for test in instance.FAIL_TO_PASS})
            reward, info = play(env, task.id, [bash("rm " + " ".join(files)), SUBMIT])
            assert reward == 0.0, info["reward_metrics"]
            rewrite = "; ".join(f"echo 'def test_ok(): pass' > {f}" for f in files)
            reward, info = play(env, task.id, [bash(rewrite), SUBMIT])
            assert reward == 0.0, info["reward_metrics"]
            assert set(info["reward_metrics"]["dropped_files"]) >= set(files)
    finally:
        env.close()


@pytest.mark.slow
def test_check_env_passes_for_swe_synth(toolz_tasks):
    check_env(gym.make("swe-synth", tasks=str(toolz_tasks)))


@pytest.mark.slow
def test_eval_cli_scores_the_oracle(toolz_tasks, agentgym_cli):
    done = subprocess.run([agentgym_cli, "eval", "swe-synth", "-e", f"tasks={toolz_tasks}",
                           "--policy", "oracle", "-n", "3", "--json"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["mean_reward"] == 1.0


@pytest.mark.slow
def test_validate_cli_holds_for_every_synthesized_task(toolz_tasks, agentgym_cli):
    # (the exploit probes are played on sampled tasks in test_probes.py)
    done = subprocess.run([agentgym_cli, "validate", "swe-synth", "-e", f"tasks={toolz_tasks}",
                           "--all", "--backend", "local", "--no-probes", "--json"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    # oracle, noop, and the known-wrong solution (delete the deciding tests) of each task
    assert report["ok"] and (report["tasks"], report["checked"]) == (3, 9), report


@pytest.mark.slow
def test_validate_cli_fails_with_a_table_on_a_task_file_with_one_broken_row(toolz_tasks,
                                                                          agentgym_cli,
                                                                          tmp_path):
    rows = [json.loads(line) for line in toolz_tasks.read_text().splitlines()]
    rows[1]["patch"] = rows[0]["patch"]  # another task's fix: the gold patch no longer fixes it
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join(json.dumps(row) + "\n" for row in rows))
    done = subprocess.run([agentgym_cli, "validate", "swe-synth", "-e", f"tasks={broken}",
                           "--all", "--backend", "local", "--no-probes"],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 1, done.stdout + done.stderr
    failing = [line for line in done.stdout.splitlines() if rows[1]["instance_id"] in line]
    assert failing and "oracle" in failing[0], done.stdout
    assert not any(row["instance_id"] in done.stdout for row in (rows[0], rows[2])), \
        done.stdout + done.stderr[-3000:]
    assert f"{len(rows)} tasks checked" in done.stdout and "1 failed" in done.stdout, \
        done.stdout


def test_deleting_the_deciding_tests_is_a_known_wrong_solution(toolz_tasks):
    env = gym.make("swe-synth", tasks=str(toolz_tasks))
    try:
        task = env.unwrapped.tasks[0].rendered(env.unwrapped.parser)
        (wrong,) = task.wrong_solutions()
        assert "rm -f --" in wrong[0] and "submit" in wrong[1]
        reward, info = play_turns(env, wrong, options={"task_id": task.id})
        assert reward == 0.0 and info["reward_metrics"]["dropped_files"], info
    finally:
        env.close()


def test_a_shell_function_named_git_does_not_write_the_graded_diff(toolz_tasks):
    """The agent defines ``git`` in its shell to print the gold patch for any diff and
    changes nothing: the grader takes the diff in a fresh session, so it sees none."""
    import base64

    env = gym.make("swe-synth", tasks=str(toolz_tasks))
    try:
        task = env.unwrapped.tasks[0]
        gold = base64.b64encode(env.unwrapped.instances[task.id].patch.encode()).decode()
        forge = (f"echo {gold} | base64 -d > /tmp/gold.diff;"
                 ' git() { case " $* " in *" diff "*) cat /tmp/gold.diff;;'
                 ' *) command git "$@";; esac; }; git diff --cached | head -3')
        reward, info = play(env, task.id, [bash(forge), SUBMIT])
        assert reward == 0.0, info["reward_metrics"]
    finally:
        env.close()


def test_swe_bench_instances_on_the_local_backend_are_refused_with_the_fix(tmp_path):
    row = {"instance_id": "demo__calc-1", "repo": "demo/calc", "base_commit": "0" * 40,
           "patch": "", "test_patch": "", "problem_statement": "add is wrong",
           "FAIL_TO_PASS": ["tests/test_calc.py::test_add"], "PASS_TO_PASS": []}
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError) as error:
        gym.make("swe-verified", tasks=str(tasks), backend="local")
    message = str(error.value)
    assert "instance 'demo__calc-1' names no PyPI package" in message
    assert ("the local backend does not support"
            " image='swebench/sweb.eval.x86_64.demo_1776_calc-1:latest'") in message
    assert "--backend docker" in message and "agentgym swe synth" in message


def test_an_image_given_to_swe_synth_on_the_local_backend_is_refused(toolz_tasks):
    with pytest.raises(ValueError, match="is to run in the image given to the env"
                                         r" \('agentgym/sandbox:default', at /testbed\)"):
        gym.make("swe-synth", tasks=str(toolz_tasks), image="agentgym/sandbox:default")
