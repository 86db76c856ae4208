"""Print the table of scripts/gpu_smollm2.sh's results folder (what it measured on a GPU).

    python scripts/gpu_table.py RESULTS_DIR

Rows: ms per decode step and tokens/s of each generation path at 32 concurrent requests;
for each training run (the config as written; its GRPO stage again from its SFT model,
synchronous and asynchronous), the held-out pass rate by stage, the GRPO stage's steps per
minute, its rollout tokens/s (median over steps) and what the engine did (decode steps'
rows, busy share); then one row per training recipe run (base, SFT and GRPO pass rates,
wall time). A file that
is missing (its check did not finish) is said so, not skipped silently.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text().strip().splitlines()[-1])
    except (OSError, IndexError, json.JSONDecodeError) as e:
        return {"missing": f"{path.name}: {type(e).__name__}"}


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def generation(results: Path) -> None:
    bench = _json(results / "generation.json")
    bench.update({k: v for k, v in _json(results / "generation_generate.json").items()
                  if k != "missing"})
    if "missing" in bench:
        print(f"generation: {bench['missing']}")
        return
    for lengths in ("fixed", "uniform"):
        row = f"{lengths}_c32"
        if not any(key.endswith(f"{row}_ms_per_step") for key in bench):
            continue
        print(f"{'generation, 32 concurrent, ' + lengths:<40}{'ms/step':>10}{'tokens/s':>12}")
        for path in ("loop", "engine", "generate"):
            ms = bench.get(f"{path}_{row}_ms_per_step")
            if ms is not None:
                tps = bench[f"{path}_{row}_tokens_per_s"]
                print(f"  {path:<38}{ms:>10.1f}{tps:>12.0f}")
        captured = bench.get(f"engine_{row}_graphs_captured")
        if captured is not None:
            print(f"  engine graphs captured: {captured:.0f}, warm-up round"
                  f" {bench.get(f'engine_{row}_warmup_s', 0):.1f} s")


def training(results: Path, name: str) -> None:
    summary = _json(results / f"train_{name}.json")
    records = [r for r in _records(results / f"metrics_{name}.jsonl") if r.get("kind") == "grpo"]
    if "missing" in summary and not records:
        print(f"{name}: {summary['missing']}")
        return
    stages = summary.get("stages") or []
    evals: dict[str, Any] = {}
    if summary.get("eval") and Path(summary["eval"]).exists():
        evals = {e["stage"]: e["pass_rate"]
                 for e in json.loads(Path(summary["eval"]).read_text())["stages"]}
    grpo = [s for s in stages if s.get("kind") == "grpo"]
    steps = [r for r in records if "rollout/tokens_per_s" in r]
    tokens = [r["rollout/tokens_per_s"] for r in steps[1:] or steps]
    seconds = grpo[0].get("seconds") if grpo else None
    print(f"{name}: held-out pass rate {evals or '(no eval)'}")
    if steps:
        print(f"  GRPO steps {len(steps)}, {seconds or 0:.0f} s"
              f" ({60 * len(steps) / seconds:.1f} steps/min)" if seconds else
              f"  GRPO steps {len(steps)} (stage unfinished)")
        stepping = sum(r.get("time/step_s", 0.0) for r in steps)
        if stepping:  # the steps alone: no model loading, saving or evaluation
            print(f"  the steps' own time {stepping:.1f} s"
                  f" ({60 * len(steps) / stepping:.1f} steps/min)")
        print(f"  rollout tokens/s median {statistics.median(tokens):.0f}"
              f" (min {min(tokens):.0f}, max {max(tokens):.0f})")
        for key in ("engine/rows_per_decode", "engine/busy_fraction", "time/rollout_s",
                    "time/step_s", "async/staleness_mean", "async/is_ratio_mean",
                    "env/pass_rate"):
            values = [r[key] for r in steps if key in r]
            if values:
                print(f"  {key}: {[round(v, 3) for v in values]}")


def recipes(results: Path) -> None:
    """One row per recipe run (``train_recipe-NAME.json``): held-out pass rate of the base
    model, after SFT and after GRPO, and the run's wall time (README "Results")."""
    runs = sorted(results.glob("train_recipe-*.json"))
    if not runs:
        return
    print(f"{'recipe':<34}{'base':>7}{'SFT':>7}{'GRPO':>7}{'wall':>9}")
    for path in runs:
        name = path.stem.removeprefix("train_recipe-")
        summary = _json(path)
        if "missing" in summary:
            error = path.with_suffix(".err")
            said = error.read_text().strip().splitlines()[-1:] if error.exists() else []
            print(f"{name:<34} did not finish: {said[0][:200] if said else summary['missing']}")
            continue
        evals = [e["pass_rate"]
                 for e in json.loads(Path(summary["eval"]).read_text())["stages"]]
        rates = "".join(f"{rate:>7.2f}" for rate in evals)
        minutes, seconds = divmod(round(summary["seconds"]), 60)
        print(f"{name:<34}{rates}{f'{minutes}m{seconds:02d}s':>9}")


def main() -> None:
    results = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/gpu-smollm2")
    generation(results)
    grpo_runs = sorted(p.name.removeprefix("train_").removesuffix(".json")
                       for p in results.glob("train_grpo-*.json"))
    for name in ("sync", *(grpo_runs or ["grpo-sync", "grpo-async"])):
        training(results, name)
    recipes(results)


if __name__ == "__main__":
    main()
