#!/usr/bin/env bash
# Reference: split the script into core/cli, add __init__ and __main__ (passing the status on).
set -euo pipefail
mkdir -p /app/wordstat
cd /app/wordstat
cat > core.py <<'PY'
"""Word counting."""
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

from . import __version__
from .core import count_words, top_words


def main(argv=None):
    parser = argparse.ArgumentParser(prog="wordstat", description=__doc__)
    parser.add_argument("path", help="text file to analyse")
    parser.add_argument("--top", type=int, default=3, help="how many frequent words to show")
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
cat > __init__.py <<'PY'
"""wordstat: word statistics for text files."""
__version__ = "1.2.0"

from .core import count_words, top_words  # noqa: E402

__all__ = ["count_words", "top_words", "__version__"]
PY
cat > __main__.py <<'PY'
import sys

from .cli import main

sys.exit(main())
PY
cd /tmp && PYTHONPATH=/app python3 -m wordstat /app/sample.txt
