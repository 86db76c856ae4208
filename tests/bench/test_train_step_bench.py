"""bench/train_step.py runs end to end with tiny settings and prints its one JSON object.

The bench's numbers are not checked here (tests do not time things): only that both GRPO
runs ran, that ``--json`` leaves exactly one JSON object on stdout, and that it holds the
documented keys with sensible values.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "train_step.py"


def local_sandbox_missing() -> str | None:
    """Why the local sandbox backend cannot run here, or None when it can."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    if os.geteuid() != 0:
        return "the local sandbox needs root"
    return None


@pytest.mark.slow
@pytest.mark.skipif(local_sandbox_missing() is not None,
                    reason=f"bench env needs the local sandbox: {local_sandbox_missing()}")
def test_train_step_bench_json(tmp_path: Path) -> None:
    command = [sys.executable, str(BENCH), "--episodes", "4", "--steps", "2",
               "--remote-latency", "0.2", "--sft-steps", "10", "--json"]
    # Its own tiny-model folder: no race with other runs building the shared one.
    env = {**os.environ, "AGENTGYM_BENCH_MODEL": str(tmp_path)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout)  # fails on anything but exactly one JSON document
    assert isinstance(result, dict)
    assert result["episodes"] == 4
    for key in ("agentgym_step_s", "trl_environment_factory_step_s", "speedup"):
        assert result[key] > 0, key
    assert result["speedup"] == pytest.approx(
        result["trl_environment_factory_step_s"] / result["agentgym_step_s"])
    for run in ("agentgym", "trl_environment_factory"):
        assert len(result["step_times_s"][run]) == 2
        # every episode of both steps was graded, and each played at least one turn
        assert result["episodes_graded"][run] == 2 * 4
        assert result["turns_per_episode"][run] >= 1
        assert 0 <= result["mean_reward"][run] <= 1
    assert result["constants"]["remote_latency_s"] == 0.2
