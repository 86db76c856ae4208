#!/usr/bin/env bash
# Plausible mistake: the private rule runs before the *.sh rule, so a script in private/
# ends up world-readable and executable.
set -euo pipefail
cd /app/site
find . -type d -exec chmod 0755 {} +
find . -type f -exec chmod 0644 {} +
find ./private -type d -exec chmod 0700 {} +
find ./private -type f -exec chmod 0600 {} +
find ./bin -maxdepth 1 -type f -exec chmod 0755 {} +
find . -type f -name '*.sh' -exec chmod 0755 {} +
