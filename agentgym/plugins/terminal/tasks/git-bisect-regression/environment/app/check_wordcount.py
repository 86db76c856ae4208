"""Regression check: exits 0 when word_count is right, 1 when it is wrong.

Usage (from the repository):  python3 /app/check_wordcount.py
"""
import sys

sys.path.insert(0, ".")
sys.dont_write_bytecode = True
from textstats import word_count  # noqa: E402

CASES = {"one two three": 3, "  padded   words  ": 2, "line one\nline two\n": 4, "": 0}
bad = {text: word_count(text) for text, want in CASES.items() if word_count(text) != want}
if bad:
    print(f"wrong counts: {bad}")
    sys.exit(1)
print("word_count ok")
