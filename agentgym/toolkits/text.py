"""Text helpers of the file tools: lines (split, counted, located), numbered and clipped
lines for display, and long text cut with a marker that says how to see the rest.

Only ``\\n`` ends a line, and a ``\\r`` before it belongs to the line end (files with
Windows line ends read like any other); form feeds and the other characters
``str.splitlines`` splits on are part of a line, as they are in Python source.
"""

from __future__ import annotations

#: Characters of one line a file view shows before it is clipped.
MAX_LINE_CHARS = 2000
#: Characters of one line in a result that quotes lines (an edit's snippet, search hits).
MAX_RESULT_LINE_CHARS = 300


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` without their ends (see the module docstring)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def line_count(text: str) -> int:
    """Lines in ``text``; a last line without a newline counts."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def line_at(text: str, offset: int) -> int:
    """The 1-based line number of character ``offset``."""
    return text.count("\n", 0, offset) + 1


def offset_after_line(text: str, line: int) -> int:
    """The offset where line ``line + 1`` starts (0 for ``line`` 0; the end past the
    last line)."""
    offset = 0
    for _ in range(line):
        found = text.find("\n", offset)
        if found == -1:
            return len(text)
        offset = found + 1
    return offset


def counted(number: int, noun: str) -> str:
    """``3 lines``, ``1 line``: ``number`` and ``noun``, plural unless the number is 1."""
    return f"{number} {noun}" + ("" if number == 1 else "s")


def numbered(number: int, line: str, limit: int) -> str:
    """``line`` as a view shows it: its number right-aligned, a tab, the clipped text."""
    return f"{number:6}\t{clip_line(line, limit)}"


def clip_line(line: str, limit: int) -> str:
    """``line`` cut to ``limit`` characters, with a marker counting the rest."""
    if len(line) <= limit:
        return line
    return f"{line[:limit]}... [{len(line) - limit} more characters]"


def cut_lines(text: str, limit: int, hint: str) -> str:
    """``text`` cut at a line end to ``limit`` characters, with a marker counting the lines
    left out and saying how to narrow the result (``hint``)."""
    if len(text) <= limit:
        return text
    keep = text.rfind("\n", 0, limit)
    keep = keep if keep > 0 else limit
    dropped = text[keep:].count("\n") + 1
    return f"{text[:keep]}\n[... {dropped} more lines not shown: {hint}]"


def cut_middle(text: str, limit: int, hint: str) -> str:
    """``text`` kept to about ``limit`` characters: its head and tail (the end of a log is
    often what matters), with a marker between them saying what to do instead (``hint``)."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit // 2], text[-(limit - limit // 2):]
    dropped = len(text) - len(head) - len(tail)
    return f"{head}\n[... {dropped} characters of output cut: {hint} ...]\n{tail}"
