#!/usr/bin/env bash
# Reference: extract, delete the junk, rename the folder, repack (dotfiles included).
set -euo pipefail
cd /app
work=$(mktemp -d)
tar -xpzf incoming/project-1.2.tar.gz -C "$work"
find "$work/project-1.2" -depth \( -type d -name __pycache__ -exec rm -rf {} + \) -o \
  \( -type f \( -name '*.tmp' -o -name .DS_Store \) -delete \)
mv "$work/project-1.2" "$work/project"
mkdir -p out
tar -C "$work" -czf out/project.tar.gz project
tar -tzvf out/project.tar.gz
rm -rf "$work"
