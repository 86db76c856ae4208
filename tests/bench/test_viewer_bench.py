"""bench/viewer.py runs and prints one JSON object with its documented keys (its numbers
are not checked here: tests do not time things)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugins.web.conftest import chromium_missing

BENCH = Path(__file__).resolve().parents[2] / "bench" / "viewer.py"


@pytest.mark.skipif(bool(chromium_missing()), reason=f"bench needs {chromium_missing()}")
def test_viewer_bench_json() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--episodes", "300", "--json"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    for key in ("index_s_100k", "first_view_ms", "episode_open_ms"):
        assert result[key] > 0, (key, result)
    assert result["episodes"] == 300
