#!/usr/bin/env bash
# Plausible mistake: trusts `sha256sum -c` output for "FAILED" lines only, which misses
# the missing files ("FAILED open or read") and never looks for unlisted ones.
set -euo pipefail
cd /app
unzip -q -o delivery.zip -d /app
cd /app/bundle
sha256sum -c MANIFEST.sha256 2>/dev/null | grep ': FAILED$' | sed -e 's/: FAILED$//' -e 's/^/MISMATCH /' \
  | LC_ALL=C sort -k2 > /app/verify_report.txt || true
