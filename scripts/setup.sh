#!/usr/bin/env bash
# Sets up a fresh machine for agentgym: a virtual environment in .venv with torch's CPU
# build installed first (a plain `torch` requirement would pull a multi-GB CUDA build),
# then agentgym from this source with every extra that installs without a GPU.
# agentgym is never installed by name: that name on PyPI belongs to an unrelated project.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
.venv/bin/python -c "import torch" 2>/dev/null || "${pip[@]}" "torch==2.13.0"
"${pip[@]}" -e ".[all,dev]"
echo "agentgym is installed in .venv ($(.venv/bin/agentgym --version))"
