"""bench/grpo_scoring.py runs and prints one JSON object with its documented keys (its
numbers are not checked here: tests do not time things)."""

from __future__ import annotations

import pytest

from tests.bench.helpers import run_bench

pytest.importorskip("trl")


def test_grpo_scoring_bench_json() -> None:
    result = run_bench("grpo_scoring.py", "--rows", "4", "--prompt", "40", "--completion", "8",
                       "--repeats", "1")
    assert set(result) == {"fused_head_s", "plain_one_width_s", "plain_grouped_s",
                           "plain_vs_fused", "grouped_vs_one_width", "grouped_vs_fused"}
    assert min(result["fused_head_s"], result["plain_one_width_s"],
               result["plain_grouped_s"]) > 0
    assert result["plain_vs_fused"] == pytest.approx(
        result["fused_head_s"] / result["plain_one_width_s"])
    assert result["grouped_vs_one_width"] == pytest.approx(
        result["plain_one_width_s"] / result["plain_grouped_s"])
