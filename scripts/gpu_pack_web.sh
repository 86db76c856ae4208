#!/usr/bin/env bash
# Packs, here, what the web recipe (examples/configs/web-smollm2-gpu.yaml) needs on the lent
# GPU machine beside what scripts/gpu_pack.sh packs: Debian's Chromium with the shared
# libraries it loads (glibc's left out: the machine has its own, newer one), the NSS modules
# it opens at run time and one font, as an xz-compressed tarball split into parts of at most
# 60 MB, then the playwright wheel: in .web1/, .web2/, ... (listed in .git/info/exclude), the
# wheel and the checksums in the last, each for a call of its own (a call carries at most
# 64 MiB). On the device:
#   calls before the last, carry [".webN"]:   mkdir -p /tmp/web && cp .webN/* /tmp/web/
#   the last, carry its .webN and what the run needs (gpu_pack.sh's header):
#     cp .webN/* /tmp/web/ && (cd /tmp/web && sha256sum -c web.sha256)
#     && cat /tmp/web/web.tar.xz.* | python3 -c "$UNPACK"   (UNPACK below: no xz needed)
#     && python3 -m pip install -q --no-index --no-deps --find-links /tmp/web --target /tmp/site
#        playwright greenlet
#     && export AGENTGYM_CHROMIUM=/tmp/web/chromium/run
# `run` sets LD_LIBRARY_PATH and FONTCONFIG_FILE to what the tarball holds and starts
# Chromium. Checked here in a bare Debian container (scripts/gpu_pack_web.sh --check IMAGE:
# the agentgym/terminal image has none of Chromium's libraries): a page opens through
# playwright.
#   bash scripts/gpu_pack_web.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PIP=${PIP:-.venv/bin/pip}
SOURCE=${CHROMIUM_DIR:-/usr/lib/chromium}
# glibc's own libraries: the machine's are used (copies of an older glibc would not load).
GLIBC='^(libc|libm|libpthread|libdl|librt|libresolv|libutil|libanl|libnsl|ld-linux-x86-64)\.so'
# Unpacks the tarball read from stdin into /tmp/web with Python alone.
UNPACK='import sys, tarfile; extra = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}; tarfile.open(fileobj=sys.stdin.buffer, mode="r|xz").extractall("/tmp/web", **extra)'

if [ "${1:-}" = "--check" ]; then
  image=${2:?"--check IMAGE: a Docker image without Chromium (e.g. agentgym/terminal:TAG)"}
  parts=$(ls -d .web*/ | tr '\n' ' ')
  # shellcheck disable=SC2086
  docker run --rm --network none -v "$PWD:/repo:ro" "$image" sh -c "
    set -e; mkdir -p /tmp/web; for d in $parts; do cp /repo/\$d/* /tmp/web/; done
    cd /tmp/web && sha256sum -c web.sha256 && cat web.tar.xz.* | python3 -c '$UNPACK'
    python3 -m pip install -q --no-index --no-deps --find-links /tmp/web --target /tmp/site \
      playwright greenlet
    PYTHONPATH=/tmp/site python3 -c '
from playwright.sync_api import sync_playwright
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=\"/tmp/web/chromium/run\", args=[
        \"--headless\", \"--no-sandbox\", \"--disable-gpu\", \"--disable-quic\"])
    page = browser.new_page()
    page.set_content(\"<button id=b onclick=\\\"this.textContent=1+1\\\">press</button>\")
    page.click(\"#b\")
    print(\"chromium\", browser.version, \"clicked:\", page.text_content(\"#b\"))
'"
  exit
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out="$work/chromium"
mkdir -p "$out/lib/nss" "$out/fonts"
cp -a "$SOURCE"/. "$out/"
rm -rf "$out/locales" && mkdir "$out/locales" && cp "$SOURCE/locales/en-US.pak" "$out/locales/"
# Every library the binaries and the libraries Chromium opens load, glibc's left out.
for binary in "$out/chromium" "$out/chrome_crashpad_handler" "$out"/*.so \
              /usr/lib/x86_64-linux-gnu/nss/*.so; do
  ldd "$binary" 2>/dev/null | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r library; do
  name=$(basename "$library")
  [[ $name =~ $GLIBC ]] || cp -L "$library" "$out/lib/"
done
cp -L /usr/lib/x86_64-linux-gnu/nss/*.so "$out/lib/nss/"
cp -L /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf "$out/fonts/"
cat > "$out/fonts.conf" <<'EOF'
<?xml version="1.0"?>
<fontconfig><dir prefix="relative">fonts</dir><cachedir>/tmp/agentgym-fontconfig</cachedir></fontconfig>
EOF
cat > "$out/run" <<'EOF'
#!/bin/sh
# Chromium with the libraries and the font beside it (scripts/gpu_pack_web.sh).
here=$(dirname "$(readlink -f "$0")")
export LD_LIBRARY_PATH="$here/lib:$here/lib/nss:$here${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FONTCONFIG_FILE="$here/fonts.conf"
exec "$here/chromium" "$@"
EOF
chmod +x "$out/run"

# playwright and greenlet (what it needs), at this checkout's versions; greenlet for the
# device's Python (3.12) and the check's image (3.11).
version() { "$PIP" show "$1" | sed -n 's/^Version: //p'; }
"$PIP" download -q --no-deps --only-binary=:all: --platform manylinux1_x86_64 \
  --platform manylinux_2_17_x86_64 -d "$work" "playwright==$(version playwright)"
for python in 3.12 3.11; do
  "$PIP" download -q --no-deps --only-binary=:all: --python-version "$python" \
    --implementation cp --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$work" "greenlet==$(version greenlet)"
done

rm -rf .web*/
for ignored in /.web1/ /.web2/ /.web3/ /.web4/ /.web5/; do
  grep -qxF "$ignored" .git/info/exclude 2>/dev/null || echo "$ignored" >> .git/info/exclude
done
(cd "$work" && tar -c chromium | xz -T0 -6 > web.tar.xz && split -b 60000000 -a 1 -d \
  web.tar.xz web.tar.xz. && rm web.tar.xz && sha256sum web.tar.xz.* ./*.whl > web.sha256)
n=1
for part in "$work"/web.tar.xz.*; do
  mkdir -p ".web$n" && mv "$part" ".web$n/"
  n=$((n + 1))
done
mkdir -p ".web$n" && mv "$work"/*.whl "$work/web.sha256" ".web$n/"
du -sh .web*/
