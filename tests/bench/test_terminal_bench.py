"""bench/terminal.py runs and prints one JSON object with its documented keys (its numbers
are not checked here: tests do not time things)."""

from __future__ import annotations

import pytest

from tests.bench.helpers import run_bench
from tests.conftest import backend_missing


@pytest.mark.skipif(backend_missing("local") is not None,
                    reason=f"bench needs the local sandbox: {backend_missing('local')}")
def test_terminal_bench_json() -> None:
    result = run_bench("terminal.py", "--episodes", "3")
    for key in ("reset_ms_p50", "step_ms_p50", "grade_ms_p50"):
        assert result[key] > 0, (key, result)
    assert result["episodes"] == 3
