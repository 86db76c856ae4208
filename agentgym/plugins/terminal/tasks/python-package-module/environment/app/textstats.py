#!/usr/bin/env python3
"""Word statistics for a text file: total words and the most frequent ones."""
import argparse
import collections
import re
import sys

__version__ = "1.2.0"
WORD = re.compile(r"[a-z']+")


def words(text):
    return WORD.findall(text.lower())


def count_words(text):
    return len(words(text))


def top_words(text, n=3):
    counts = collections.Counter(words(text))
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


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


if __name__ == "__main__":
    sys.exit(main())
