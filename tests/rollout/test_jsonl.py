"""JSONL files that survive interruption: whole lines in, whole lines out."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgym.rollout.jsonl import JsonlAppender, complete_lines


def test_lines_are_appended_whole_and_read_back(tmp_path: Path):
    path = tmp_path / "deep" / "log.jsonl"
    with JsonlAppender(path) as out:
        out.append('{"a": 1}')
        assert path.read_text() == '{"a": 1}\n'  # on disk at once, nothing buffered
        out.append('{"b": 2}')
    assert complete_lines(path) == ['{"a": 1}', '{"b": 2}']
    with pytest.raises(ValueError, match="newline"):
        JsonlAppender(path).append('{"a":\n1}')


def test_a_line_cut_by_a_crash_is_dropped_on_open(tmp_path: Path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"a": 1}\n{"b": ')
    assert complete_lines(path) == ['{"a": 1}']
    with JsonlAppender(path) as out:
        out.append('{"c": 3}')
    assert path.read_text() == '{"a": 1}\n{"c": 3}\n'


def test_rewrite_replaces_the_content_and_appending_goes_on(tmp_path: Path):
    path = tmp_path / "log.jsonl"
    with JsonlAppender(path) as out:
        for i in range(3):
            out.append(f'{{"i": {i}}}')
        out.rewrite(['{"i": 0}'])
        out.append('{"i": 9}')
    assert complete_lines(path) == ['{"i": 0}', '{"i": 9}']
    assert not (tmp_path / "log.jsonl.tmp").exists()
