#!/usr/bin/env bash
# Reference: apply the rules in order with find.
set -euo pipefail
cd /app/site
find . -type d -exec chmod 0755 {} +
find . -type f -exec chmod 0644 {} +
find ./bin -maxdepth 1 -type f -exec chmod 0755 {} +
find . -type f -name '*.sh' -exec chmod 0755 {} +
find ./private -type d -exec chmod 0700 {} +
find ./private -type f -exec chmod 0600 {} +
find . -printf '%m %p\n' | sort -k2
