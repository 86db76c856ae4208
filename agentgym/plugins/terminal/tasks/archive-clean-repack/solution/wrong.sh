#!/usr/bin/env bash
# Plausible mistake: moves the files with a `*` glob, which skips hidden files and folders.
set -euo pipefail
cd /app
work=$(mktemp -d)
tar -xzf incoming/project-1.2.tar.gz -C "$work"
find "$work/project-1.2" -depth -type d -name __pycache__ -exec rm -rf {} +
find "$work/project-1.2" -type f \( -name '*.tmp' -o -name .DS_Store \) -delete
mkdir -p "$work/project"
mv "$work"/project-1.2/* "$work/project/"
mkdir -p out
tar -C "$work" -czf out/project.tar.gz project
