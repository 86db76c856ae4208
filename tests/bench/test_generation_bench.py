"""bench/generation.py runs with tiny settings and prints one JSON object: every path did
the same work (greedy: the same tokens), and the multi-turn row played its episodes
without an error. Its numbers are not checked here (tests do not time things)."""

from __future__ import annotations

import shutil

import pytest

from tests.bench.helpers import run_bench

pytest.importorskip("transformers", reason="the bench needs the train extra")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None,
                    reason="the multi-turn row needs the local sandbox (bubblewrap)")
def test_generation_bench_json() -> None:
    result = run_bench("generation.py", "--concurrency", "1,4", "--requests", "2",
                       "--max-prompt", "64", "--max-new", "16", "--multi-turn", "4",
                       "--multi-turn-concurrency", "2")
    for lengths in ("uniform", "log-uniform"):
        for concurrency in (1, 4):
            row = f"{lengths}_c{concurrency}"
            tokens = {path: result[f"{path}_{row}_tokens"]
                      for path in ("loop", "engine", "generate")}
            assert tokens["loop"] == tokens["engine"] > 0, (row, tokens)
            assert tokens["generate"] >= tokens["loop"], (row, tokens)  # budgets, no stops
            for path in tokens:
                assert result[f"{path}_{row}_tokens_per_s"] > 0
                assert result[f"{path}_{row}_ms_per_step"] > 0
    assert result["loop_multi_turn_errors"] == result["engine_multi_turn_errors"] == 0
    assert result["loop_multi_turn_tokens"] == result["engine_multi_turn_tokens"] > 0
    assert result["engine_multi_turn_turns_per_episode"] > 1
