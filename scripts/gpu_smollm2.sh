#!/usr/bin/env bash
# The SmolLM2-135M checks for a GPU machine (the lent device machine), in priority order,
# each bounded so one that hangs cannot take the others' time:
#   tests  the engine's GPU tests (CUDA graphs replay the eager tokens), the GPU trainer tests;
#   bench  bench/generation.py on SmolLM2 in bf16, 32 concurrent requests (200-token prompts
#          and 128-token budgets, then mixed lengths): ms per decode step and tokens/s of the
#          engine (CUDA graphs) and the static loop;
#   train  examples/configs/calculator-smollm2-gpu.yaml as written (SFT, then synchronous
#          GRPO): rollout tokens/s and GRPO steps per minute;
#   async  that GRPO stage again from that SFT checkpoint, GRPO_STEPS steps (default 12),
#          once per name in GRPO_MODES (default "grpo-sync grpo-async"; a name that starts
#          with grpo-async runs asynchronously, max_staleness 2), side by side: steps per
#          minute;
#   generate  transformers' generate with a static cache (it compiles for minutes: only when
#          STEPS names it);
#   profile  scripts/gpu_engine_profile.py: ms per decode step with and without the engine's
#          overlap, side by side, and a step's parts (only when STEPS names it);
#   compile  the same with Engine(compile=True), bounded by COMPILE_S (default 400 s: the
#          compilation may take minutes; only when STEPS names it);
#   recipes  the GPU training recipes of README "Results" (only when STEPS names it), each
#          bounded by RECIPE_S (default 540 s): RECIPES, default
#          "terminal-nl2bash-smollm2-gpu web-smollm2-gpu" (examples/configs/NAME.yaml, with
#          MODEL as the model): base, SFT and GRPO pass rates and wall time.
# MODEL is the SmolLM2 folder (scripts/gpu_check.py --from-gguf ... --convert-only makes
# it); RESULTS the folder logs and JSON go to; STEPS the checks to run (default: all four).
# Prints a table at the end (scripts/gpu_table.py).
#   MODEL=models/smollm2-135m-instruct RESULTS=/tmp/out bash scripts/gpu_smollm2.sh
#
# On the lent device machine (no index, 64 MiB per call): scripts/gpu_pack.sh packs, here,
#   the wheels, bubblewrap and the SmolLM2 GGUF in two parts, and its header gives the two
#   calls (tests with the first part; the rest at once, while the machine is warm).
#   Device time on 2026-11-30, the start included: 78 s for call 1 and 237 s for call 2
#   (bench, the config, a sync and an async GRPO run); each further 12-step GRPO run about
#   50 s. The recipes are sized for under 8 minutes each, so a 15-minute lease fits the
#   tests, the bench and one recipe (RECIPES=terminal-nl2bash-smollm2-gpu; the web recipe
#   needs Chromium and playwright there: scripts/gpu_pack_web.sh packs them in four more
#   parts, and AGENTGYM_CHROMIUM names the Chromium they unpack).
#
# Still to measure on a GPU (2026-11-30), most wanted first: the web recipe (README
# "Results"; Chromium from scripts/gpu_pack_web.sh), STEPS=compile (is a compiled decode
# step faster, and how long does compiling take), and STEPS=async with the engine's overlap
# (async GRPO's decode steps took 17-18 ms beside the trainer before it).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
export MODEL=${MODEL:-models/smollm2-135m-instruct}
RESULTS=${RESULTS:-/tmp/gpu-smollm2}
STEPS=${STEPS:-tests bench train async}
mkdir -p "$RESULTS"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
say() { echo "== $(date +%T) $*"; }
has() { [[ " $STEPS " == *" $1 "* ]]; }
# train NAME CONFIG SECONDS: agentgym train CONFIG into /tmp/run-NAME, bounded; its summary
# and log as RESULTS/train_NAME.json and .err, its metrics as RESULTS/metrics_NAME.jsonl.
train() {
  rm -rf "/tmp/run-$1"
  timeout "$3" "$PY" -m agentgym train "$2" --output-dir "/tmp/run-$1" --json \
    > "$RESULTS/train_$1.json" 2> "$RESULTS/train_$1.err"
  tail -n 4 "$RESULTS/train_$1.err"
  cp "/tmp/run-$1/metrics.jsonl" "$RESULTS/metrics_$1.jsonl" 2>/dev/null
}

if has tests; then
  say "GPU tests"
  timeout "${TESTS_S:-150}" "$PY" -m pytest -o addopts="-ra --import-mode=importlib" -q -p no:cacheprovider \
    tests/rollout/test_engine_graphs.py tests/rollout/test_engine.py tests/trainers/test_gpu.py \
    tests/rollout/test_engine_architectures.py::test_cuda_graphs_replay_the_eager_tokens_on_other_architectures \
    2>&1 | tail -n 25 | tee "$RESULTS/tests.log"
fi

if has bench; then
  say "generation bench, SmolLM2 in bf16, 32 concurrent: fixed lengths, then uniform"
  timeout "${BENCH_S:-150}" "$PY" bench/generation.py --model "$MODEL" --dtype bfloat16 \
    --concurrency 32 --requests 2 --max-prompt 200 --max-new 128 --lengths "${BENCH_LENGTHS:-fixed,uniform}" \
    --multi-turn 0 --warmup --paths "${BENCH_PATHS:-loop,engine}" --json \
    > "$RESULTS/generation.json" 2> "$RESULTS/generation.err"
  tail -n 3 "$RESULTS/generation.err"
fi

if has generate; then  # compiles for minutes: not in the default STEPS
  say "transformers generate, static cache"
  timeout "${GENERATE_S:-300}" "$PY" bench/generation.py --model "$MODEL" --dtype bfloat16 \
    --concurrency 32 --requests 2 --max-prompt 200 --max-new 128 --lengths fixed \
    --multi-turn 0 --warmup --paths generate --json \
    > "$RESULTS/generation_generate.json" 2> "$RESULTS/generation_generate.err"
  tail -n 3 "$RESULTS/generation_generate.err"
fi

# Outputs go to files under RESULTS (a command killed at its bound loses what a pipe held).
if has profile; then
  say "a decode step, with and without overlap"
  timeout "${PROFILE_S:-90}" "$PY" scripts/gpu_engine_profile.py --model "$MODEL" \
    --dtype bfloat16 --repeats 30 > "$RESULTS/profile.txt" 2>&1
  grep "served\|parts\|first round" "$RESULTS/profile.txt"
fi

if has compile; then
  say "a decode step with Engine(compile=True)"
  timeout "${COMPILE_S:-400}" "$PY" scripts/gpu_engine_profile.py --model "$MODEL" \
    --dtype bfloat16 --overlap on --compile --repeats 30 > "$RESULTS/compile.txt" 2>&1
  grep "served\|parts\|first round" "$RESULTS/compile.txt"
fi

if has train; then
  say "calculator-smollm2-gpu.yaml, synchronous GRPO"
  train sync examples/configs/calculator-smollm2-gpu.yaml "${TRAIN_S:-200}"
  cp /tmp/run-sync/eval.json "$RESULTS/eval_sync.json" 2>/dev/null
fi

if has async && [ -d /tmp/run-sync/00-sft/final ]; then
  for mode in ${GRPO_MODES:-grpo-sync grpo-async}; do
    say "the GRPO stage from that SFT checkpoint, ${GRPO_STEPS:-12} steps: $mode"
    MODE=$mode "$PY" -c '
import os, yaml
config = yaml.safe_load(open("examples/configs/calculator-smollm2-gpu.yaml"))
config["model"] = "/tmp/run-sync/00-sft/final"
grpo = config["stages"][-1]
grpo["grpo"]["args"]["max_steps"] = int(os.environ.get("GRPO_STEPS", "12"))
if os.environ["MODE"].startswith("grpo-async"):
    grpo["grpo"].setdefault("options", {})["async"] = {"max_staleness": 2}
config["stages"] = [grpo]
yaml.safe_dump(config, open("/tmp/" + os.environ["MODE"] + ".yaml", "w"))'
    train "$mode" "/tmp/$mode.yaml" "${ASYNC_S:-150}"
  done
fi

if has recipes; then
  for recipe in ${RECIPES:-terminal-nl2bash-smollm2-gpu web-smollm2-gpu}; do
    say "examples/configs/$recipe.yaml"
    RECIPE=$recipe "$PY" -c '
import os, yaml
config = yaml.safe_load(open("examples/configs/" + os.environ["RECIPE"] + ".yaml"))
config["model"] = os.environ["MODEL"]
yaml.safe_dump(config, open("/tmp/" + os.environ["RECIPE"] + ".yaml", "w"))'
    train "recipe-$recipe" "/tmp/$recipe.yaml" "${RECIPE_S:-540}"
  done
fi

say "errors and graph fallbacks said in the runs' logs"
grep -h "ended with an error\|CUDA graph" "$RESULTS"/*.err 2>/dev/null | cut -c1-400 | head -n 6

say "table"
"$PY" scripts/gpu_table.py "$RESULTS"
