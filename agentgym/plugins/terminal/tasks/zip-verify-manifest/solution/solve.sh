#!/usr/bin/env bash
# Reference: unzip, then compare the manifest with the files that are really there.
set -euo pipefail
cd /app
unzip -q -o delivery.zip -d /app
python3 - <<'PY'
import hashlib, os
root = "/app/bundle"
listed = {}
for line in open(os.path.join(root, "MANIFEST.sha256"), encoding="utf-8"):
    line = line.rstrip("\n")
    if line:
        digest, path = line.split("  ", 1)
        listed[path] = digest
present = set()
for dirpath, _, names in os.walk(root):
    for name in names:
        present.add(os.path.relpath(os.path.join(dirpath, name), root))
present.discard("MANIFEST.sha256")
report = []
for path, digest in listed.items():
    full = os.path.join(root, path)
    if path not in present:
        report.append((path, "MISSING"))
    elif hashlib.sha256(open(full, "rb").read()).hexdigest() != digest:
        report.append((path, "MISMATCH"))
report += [(path, "UNLISTED") for path in present - set(listed)]
with open("/app/verify_report.txt", "w") as out:
    for path, status in sorted(report):
        out.write(f"{status} {path}\n")
PY
cat /app/verify_report.txt
