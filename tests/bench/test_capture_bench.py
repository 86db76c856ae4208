"""bench/capture.py runs with few calls and prints one JSON object: every way has its
percentiles, and the captured episodes kept their history, so each is one sample without
a mismatch. Its timings are not checked here (tests do not time things)."""

from __future__ import annotations

import pytest

from tests.bench.helpers import run_bench

pytest.importorskip("openai", reason="the bench drives the openai client")
pytest.importorskip("transformers", reason="the bench's tokenizer needs the train extra")


def test_capture_bench_json() -> None:
    result = run_bench("capture.py", "--calls", "12", "--turns", "4")
    for way in ("direct", "served", "captured"):
        assert 0 < result[f"{way}_p50_ms"] <= result[f"{way}_p95_ms"]
    assert result["calls"] == 12
    assert result["samples_per_episode"] == 1.0 and result["mismatches"] == 0
