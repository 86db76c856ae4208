"""Running a bench script as its users do and reading its ``--json`` object."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench"


def run_bench(script: str, *args: str, timeout: float = 600) -> dict[str, Any]:
    """``python bench/SCRIPT ARGS --json``: it must exit 0 and print one JSON object."""
    done = subprocess.run([sys.executable, str(BENCH / script), *args, "--json"],
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)
