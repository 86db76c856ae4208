#!/usr/bin/env bash
# Plausible mistake: __main__.py calls main() but drops its return value, so errors exit 0.
set -euo pipefail
mkdir -p /app/wordstat
cd /app/wordstat
cat > core.py <<'PY'
import collections
import re

WORD = re.compile(r"[a-z']+")


def words(text):
    return WORD.findall(text.lower())


def count_words(text):
    return len(words(text))


def top_words(text, n=3):
    counts = collections.Counter(words(text))
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
PY
cat > cli.py <<'PY'
"""Word statistics for a text file: total words and the most frequent ones."""
import argparse
import sys

from .core import count_words, top_words


def main(argv=None):
    parser = argparse.ArgumentParser(prog="wordstat", description=__doc__)
    parser.add_argument("path")
    parser.add_argument("--top", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        with open(args.path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        print(f"wordstat: cannot read {args.path}: {error.strerror}", file=sys.stderr)
        return 1
    print(f"words: {count_words(text)}")
    for word, count in top_words(text, args.top):
        print(f"{word}: {count}")
    return 0
PY
printf '__version__ = "1.2.0"\nfrom .core import count_words, top_words\n' > __init__.py
printf 'from .cli import main\n\nmain()\n' > __main__.py
