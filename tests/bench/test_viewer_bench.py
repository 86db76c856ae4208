"""bench/viewer.py runs and prints one JSON object with its documented keys (its numbers
are not checked here: tests do not time things)."""

from __future__ import annotations

import pytest

from tests.bench.helpers import run_bench
from tests.plugins.web.conftest import chromium_missing


@pytest.mark.skipif(bool(chromium_missing()), reason=f"bench needs {chromium_missing()}")
def test_viewer_bench_json() -> None:
    result = run_bench("viewer.py", "--episodes", "300")
    for key in ("index_s_100k", "first_view_ms", "episode_open_ms"):
        assert result[key] > 0, (key, result)
    assert result["episodes"] == 300
