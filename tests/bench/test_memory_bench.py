"""bench/memory.py runs and prints one JSON object with its documented keys (its numbers
are not checked here: tests do not time things)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "memory.py"


def test_memory_bench_json() -> None:
    command = [sys.executable, str(BENCH), "--episodes", "3", "--sessions", "20",
               "--items", "500", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    for key in ("reset_ms_p50", "step_ms_p50", "search_ms_p50_10k"):
        assert result[key] > 0, (key, result)
    assert result["items"] == 500
