#!/usr/bin/env bash
# GPU checks, for a machine with a CUDA GPU (the lent device machine): the GPU-only tests
# (they skip on CPU), the engine's and the static loop's tests (on a GPU machine they decode
# there), the generation bench, and a few GRPO steps of scripts/gpu_check.py, on the tiny
# model, or on MODEL_DIR when set (a local model folder: no hub is reachable there).
# One process (addopts without -n): the device machine runs the tests serially.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
"$PY" -m pytest -o addopts="-ra --import-mode=importlib" tests/trainers/test_gpu.py tests/rollout/test_hf_policy.py \
  tests/rollout/test_engine.py tests/rollout/test_engine_graphs.py tests/rollout/test_engine_architectures.py -q
MODEL_DIR=${MODEL_DIR:-}
if [ -z "$MODEL_DIR" ]; then
  MODEL_DIR=$(mktemp -d)/tiny
  "$PY" -c "from agentgym.testing import build_tiny_model as b; b('$MODEL_DIR')"
fi
"$PY" bench/generation.py --model "$MODEL_DIR" --concurrency 1,8,32,64
"$PY" scripts/gpu_check.py --model "$MODEL_DIR" --steps 4 --episodes 16
