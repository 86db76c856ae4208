"""bench/swe_difficulty.py runs end to end with tiny settings and prints one JSON object a
line with the documented keys (its numbers are not checked: tests do not time things)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "swe_difficulty.py"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None or os.geteuid() != 0,
                    reason="synthesis runs mutants in the local sandbox: bubblewrap and root")
def test_swe_difficulty_bench_json() -> None:
    from agentgym.plugins.swe.repo import prepare

    prepare("toolz", "1.2.0")  # the sdist and its test env, shared with the swe-synth tests
    done = subprocess.run([sys.executable, str(BENCH), "--package", "toolz==1.2.0", "--tasks",
                           "1", "--difficulty", "easy", "medium", "--json"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [row["difficulty"] for row in rows] == ["easy", "medium"]
    for row, mutations in zip(rows, (1, 2), strict=True):
        assert row["tasks"] == 1 and row["mutations"] == mutations
        assert row["fail_to_pass"] >= 1 and 0 <= row["non_crashing"] <= 1
        assert row["validated"] == 1.0 and row["graded"] >= 1
    assert rows[1]["screened"] >= 2 and rows[1]["non_crashing"] == 1.0
