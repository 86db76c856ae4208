"""bench/terminal.py runs and prints one JSON object with its documented keys (its numbers
are not checked here: tests do not time things)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import backend_missing

BENCH = Path(__file__).resolve().parents[2] / "bench" / "terminal.py"


@pytest.mark.skipif(backend_missing("local") is not None,
                    reason=f"bench needs the local sandbox: {backend_missing('local')}")
def test_terminal_bench_json() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--episodes", "3", "--json"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    for key in ("reset_ms_p50", "step_ms_p50", "grade_ms_p50"):
        assert result[key] > 0, (key, result)
    assert result["episodes"] == 3
