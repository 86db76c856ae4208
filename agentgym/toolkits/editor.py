"""The ``str_replace_editor`` tool: view, create and edit files, and undo those edits.

Paths go through the shared :class:`~agentgym.toolkits.workspace.Workspace` (relative to
the workspace or absolute inside it; never out of it). The commands:

* ``view`` shows a file with line numbers (``view_range`` picks lines; at most
  ``max_view_lines`` lines and ``max_output_chars`` characters, cut with a marker that
  says how to see the next ones), or lists a directory two levels deep, hidden entries and
  ``__pycache__`` skipped.
* ``create`` writes a new file; it never overwrites one.
* ``str_replace`` replaces text that occurs exactly once; when it occurs nowhere, the
  error says why it may not match (line numbers copied from ``view``, indentation,
  trailing spaces). ``insert`` adds lines after a given line. Both answer with the edited
  region, numbered, and keep the file's Windows line ends if it has them.
* An edit that makes a Python file stop parsing (it parsed before) adds a warning.
* ``undo_edit`` reverts, newest first and per file, the edits this instance made
  (``create`` included), up to :data:`UNDO_DEPTH` per file; changes made through ``bash``
  are not recorded.

The editor leaves the shell's state alone: its commands run in subshells.
"""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass
from typing import Literal

from agentgym.core.errors import InvalidArgumentError
from agentgym.core.sandbox import Sandbox
from agentgym.core.tools import ToolError, Toolset, tool
from agentgym.toolkits.text import (
    MAX_LINE_CHARS,
    MAX_RESULT_LINE_CHARS,
    counted,
    line_at,
    line_count,
    numbered,
    offset_after_line,
    split_lines,
)
from agentgym.toolkits.workspace import Target, Workspace, find_operand, strip_dot_slash

EditorCommand = Literal["view", "create", "str_replace", "insert", "undo_edit"]

#: Lines of context around an edit in the snippet ``str_replace``/``insert`` show.
SNIPPET_CONTEXT = 4
MAX_SNIPPET_LINES = 60
#: Entries a directory listing shows.
MAX_LISTING_ENTRIES = 300
#: Edits ``undo_edit`` remembers per file.
UNDO_DEPTH = 20


@dataclass
class _Edit:
    """One ``str_replace_editor`` edit of a file, for ``undo_edit``."""

    before: str | None  # None: the edit created the file
    after: str


class EditorTools(Toolset):
    """The ``str_replace_editor`` tool over one sandbox (see the module docstring).

    Args:
        sandbox: the sandbox; its ``workdir`` is the workspace the paths are in.
        command_timeout_s: time limit of the editor's own commands (listing, inspecting a
            path); None for the sandbox's default (``sandbox.limits.timeout_s``).
        max_output_chars: characters of one result before it is cut with a marker.
        max_view_lines: lines one ``view`` shows before it is cut with a marker.
    """

    def __init__(self, sandbox: Sandbox, *, command_timeout_s: float | None = None,
                 max_output_chars: int = 12_000, max_view_lines: int = 400):
        self.workspace = Workspace(sandbox, command_timeout_s=command_timeout_s,
                                   max_output_chars=max_output_chars)
        if max_view_lines < 1:
            raise InvalidArgumentError(f"max_view_lines must be >= 1, got {max_view_lines!r}")
        self.max_view_lines = max_view_lines
        self._history: dict[str, list[_Edit]] = {}

    def view_cut_hint(self, target: Target) -> str:
        """Added to the marker of a cut ``view`` of ``target``, after "view again with
        view_range=...": another way to see the file, for envs that offer one (",
        or ..."). Default: none."""
        return ""

    @tool
    async def str_replace_editor(
        self,
        command: EditorCommand,
        path: str,
        file_text: str | None = None,
        view_range: list[int] | None = None,
        old_str: str | None = None,
        new_str: str | None = None,
        insert_line: int | None = None,
    ) -> str:
        """View, create and edit files in the repository.

        Commands:
        * view: show a file with line numbers (view_range selects lines), or list a
          directory two levels deep (hidden files skipped).
        * create: write a new file containing file_text; it never overwrites a file.
        * str_replace: replace old_str with new_str. old_str must match exactly one place
          in the file, whitespace and indentation included: add surrounding lines to make
          it unique. Line numbers from view are not part of the file.
        * insert: insert new_str after line insert_line (0 inserts at the top).
        * undo_edit: revert the last edit this tool made to the file.
        Paths are relative to the repository root, or absolute inside it.

        Args:
            command: The command to run: view, create, str_replace, insert or undo_edit.
            path: The file or directory, e.g. "src/package/module.py".
            file_text: For create, the content of the new file.
            view_range: For view of a file, [start, end]: the lines to show, counted from 1,
                end included; -1 as end means the end of the file.
            old_str: For str_replace, the exact text to replace.
            new_str: For str_replace, the replacement (omit it to delete old_str); for
                insert, the text to insert.
            insert_line: For insert, the line after which new_str goes (0 for the top).
        """
        target = await self.workspace.target(path)
        if command == "view":
            return await self._view(target, view_range)
        if command == "create":
            return await self._create(target, file_text)
        if command == "undo_edit":
            return await self._undo(target)
        if target.kind == "missing":
            raise await self.workspace.missing(target)
        if target.kind != "file":
            raise ToolError(f"{target.rel} is a {target.kind_name}, not a file:"
                            f" {command} edits files")
        if command == "str_replace":
            return await self._str_replace(target, old_str, new_str)
        if command == "insert":
            return await self._insert(target, insert_line, new_str)
        raise ToolError(f"unknown command {command!r}; use one of view, create, str_replace,"
                        " insert, undo_edit")

    async def _view(self, target: Target, view_range: list[int] | None) -> str:
        if target.kind == "missing":
            raise await self.workspace.missing(target)
        if target.kind == "dir":
            if view_range is not None:
                raise ToolError(f"view_range applies to files, and {target.rel} is a"
                                " directory: view it without view_range to list it")
            return await self._list_directory(target)
        if target.kind != "file":
            raise ToolError(f"{target.rel} is a {target.kind_name}; view shows files"
                            " and directories")
        text = await self.workspace.read_text(target)
        lines = split_lines(text)
        if not lines:
            return f"{target.rel} is empty."
        start, end = _check_view_range(view_range, len(lines), target.rel)
        shown: list[str] = []
        size = 0
        for number in range(start, end + 1):
            row = numbered(number, lines[number - 1], MAX_LINE_CHARS)
            if shown and (len(shown) >= self.max_view_lines
                          or size + len(row) + 1 > self.workspace.max_output_chars):
                break
            shown.append(row)
            size += len(row) + 1
        last = start + len(shown) - 1
        whole = (start, last) == (1, len(lines))
        header = (f"{target.rel} ({counted(len(lines), 'line')}):" if whole
                  else f"{target.rel}, lines {start}-{last} of {len(lines)}:")
        body = header + "\n" + "\n".join(shown)
        if last < end:
            more = min(end, last + self.max_view_lines)
            body += (f"\n[... cut after line {last} of {len(lines)}: view again with"
                     f" view_range=[{last + 1}, {more}] to see the next lines"
                     f"{self.view_cut_hint(target)}]")
        return body

    async def _list_directory(self, target: Target) -> str:
        # Names two levels down, directories marked with a slash; hidden entries and
        # __pycache__ are noise to the agent.
        script = (
            f"( cd {shlex.quote(self.workspace.root)} && LC_ALL=C find"
            f" {shlex.quote(find_operand(target.rel))}"
            r" -mindepth 1 -maxdepth 2 \( -name '.*' -o -name __pycache__ \) -prune"
            r" -o -type d -printf '%p/\n' -o -printf '%p\n' | LC_ALL=C sort"
            f" | awk -v max={MAX_LISTING_ENTRIES}"
            " 'NR <= max { print } END { print \"@@total=\" NR }' )"
        )
        result = await self.workspace.sandbox.exec(script, timeout=self.workspace.timeout())
        lines = result.output.splitlines()
        total_line = next((line for line in reversed(lines) if line.startswith("@@total=")), None)
        if result.exit_code != 0 or total_line is None:
            raise ToolError(f"could not list {target.rel}: {result.output.strip()[-500:]}")
        total = int(total_line.removeprefix("@@total="))
        entries = [strip_dot_slash(line) for line in lines if not line.startswith("@@total=")]
        where = "the repository root" if target.rel == "." else f"{target.rel}/"
        if not entries:
            return (f"Nothing to list in {where} (hidden files are not listed; bash `ls -a`"
                    " shows them).")
        body = (f"Files and directories in {where}, two levels deep (hidden ones and"
                " __pycache__ skipped):\n" + "\n".join(entries))
        if total > len(entries):
            body += (f"\n[... {total - len(entries)} more entries not shown: view a"
                     " subdirectory to see them]")
        return body

    async def _create(self, target: Target, file_text: str | None) -> str:
        if file_text is None:
            raise ToolError("create needs file_text: the full content of the new file")
        if target.kind != "missing":
            raise ToolError(
                f"{target.rel} already exists ({target.kind_name}); create never"
                " overwrites. Edit the file with str_replace or insert, or remove it with"
                f" bash (rm {shlex.quote(target.rel)}) and create it again"
            )
        await self.workspace.write_text(target, file_text)
        self._remember(target, _Edit(before=None, after=file_text))
        note = _syntax_warning(target.rel, None, file_text)
        return f"Created {target.rel} ({counted(line_count(file_text), 'line')}).{note}"

    async def _str_replace(self, target: Target, old_str: str | None,
                           new_str: str | None) -> str:
        if old_str is None:
            raise ToolError("str_replace needs old_str (the exact text to replace) and new_str"
                            " (its replacement; omit it to delete old_str)")
        if old_str == "":
            raise ToolError("old_str is empty: give the exact text to replace; to add text"
                            " without replacing any, use insert")
        text = await self.workspace.read_text(target)
        old, new = _match_line_endings(text, old_str, new_str or "")
        found = _occurrences(text, old)
        if not found:
            raise ToolError(f"No replacement was made: old_str has no occurrence in"
                            f" {target.rel}. {_no_match_hint(text, old)}")
        if len(found) > 1:
            lines = [line_at(text, offset) for offset in found]
            shown = ", ".join(map(str, lines[:20])) + (", ..." if len(lines) > 20 else "")
            raise ToolError(
                f"No replacement was made: old_str has {len(found)} occurrences in"
                f" {target.rel}, at lines {shown}. Include more surrounding lines in old_str"
                " so that it matches exactly once"
            )
        if old == new:
            raise ToolError("old_str and new_str are identical: the edit would change nothing")
        offset = found[0]
        edited = text[:offset] + new + text[offset + len(old):]
        await self.workspace.write_text(target, edited)
        self._remember(target, _Edit(before=text, after=edited))
        first = line_at(text, offset)
        last = first + new.count("\n") - (1 if new.endswith("\n") else 0)
        snippet = _snippet(edited, first, max(first, last))
        note = _syntax_warning(target.rel, text, edited)
        return (f"Edited {target.rel}. The edited region:\n{snippet}\n"
                f"Check that it is as intended; undo_edit reverts it.{note}")

    async def _insert(self, target: Target, insert_line: int | None,
                      new_str: str | None) -> str:
        if insert_line is None:
            raise ToolError("insert needs insert_line: 0 inserts at the top of the file, N"
                            " after line N")
        if new_str is None:
            raise ToolError("insert needs new_str: the text to insert")
        text = await self.workspace.read_text(target)
        count = line_count(text)
        if not 0 <= insert_line <= count:
            raise ToolError(f"insert_line {insert_line} is outside {target.rel}, which has"
                            f" {counted(count, 'line')}: use 0 (the top) to {count} (the end)")
        block = new_str if new_str.endswith("\n") else new_str + "\n"
        _, block = _match_line_endings(text, "", block)
        offset = offset_after_line(text, insert_line)
        if offset == len(text) and text and not text.endswith("\n"):
            block = "\n" + block  # the last line had no newline to end it
        edited = text[:offset] + block + text[offset:]
        await self.workspace.write_text(target, edited)
        self._remember(target, _Edit(before=text, after=edited))
        first = insert_line + 1
        last = insert_line + max(1, line_count(new_str))
        snippet = _snippet(edited, first, last)
        note = _syntax_warning(target.rel, text, edited)
        return (f"Inserted {counted(last - first + 1, 'line')} after line {insert_line} of"
                f" {target.rel}."
                f" The edited region:\n{snippet}\n"
                f"Check that it is as intended; undo_edit reverts it.{note}")

    async def _undo(self, target: Target) -> str:
        edits = self._history.get(target.full)
        if not edits:
            raise ToolError(
                f"No edit of {target.rel} to undo: undo_edit reverts edits made with"
                " str_replace_editor (create, str_replace, insert), not changes made through"
                " bash (git checkout -- FILE restores a file to its committed state)"
            )
        edit = edits.pop()
        current = None
        if target.kind == "file":
            try:
                current = await self.workspace.read_text(target)
            except ToolError:
                current = None
        note = ("" if current == edit.after else
                " The file had changed since that edit (outside this tool): those changes"
                " were discarded too.")
        if edit.before is None:
            result = await self.workspace.sandbox.exec(f"rm -f -- {shlex.quote(target.full)}",
                                                       timeout=self.workspace.timeout())
            if result.exit_code != 0:
                edits.append(edit)
                raise ToolError(f"could not remove {target.rel}: {result.output.strip()}")
            return f"Undid the creation of {target.rel}: the file is removed.{note}"
        await self.workspace.write_text(target, edit.before)
        changed = _first_difference(edit.after if current is None else current, edit.before)
        snippet = _snippet(edit.before, changed, changed)
        left = f" ({counted(len(edits), 'earlier edit')} can still be undone)" if edits else ""
        return (f"Undid the last edit of {target.rel}{left}. The restored region:\n"
                f"{snippet}{note}")

    def _remember(self, target: Target, edit: _Edit) -> None:
        edits = self._history.setdefault(target.full, [])
        edits.append(edit)
        del edits[:-UNDO_DEPTH]


def _snippet(text: str, first: int, last: int) -> str:
    """Lines ``first``-``last`` of ``text`` with some context, numbered."""
    lines = split_lines(text)
    if not lines:
        return "(the file is now empty)"
    start = max(1, first - SNIPPET_CONTEXT)
    end = min(len(lines), last + SNIPPET_CONTEXT)
    rows = [numbered(n, lines[n - 1], MAX_RESULT_LINE_CHARS) for n in range(start, end + 1)]
    if len(rows) > MAX_SNIPPET_LINES:
        cut = len(rows) - MAX_SNIPPET_LINES
        more = (f"[... {cut} more lines: view them with view_range="
                f"[{start + MAX_SNIPPET_LINES}, {end}]]")
        rows = [*rows[:MAX_SNIPPET_LINES], more]
    return "\n".join(rows)


def _check_view_range(view_range: list[int] | None, count: int, rel: str) -> tuple[int, int]:
    if view_range is None:
        return 1, count
    if len(view_range) != 2:
        raise ToolError(f"view_range must be two line numbers [start, end] (end -1 for the"
                        f" end of the file), got {view_range}")
    start, end = view_range
    if not 1 <= start <= count:
        raise ToolError(f"view_range start {start} is outside {rel}, which has {count}"
                        f" lines: use 1 to {count}")
    if end == -1 or end > count:
        end = count
    if end < start:
        raise ToolError(f"view_range end {end} is before its start {start}: use an end >="
                        f" {start}, or -1 for the end of the file")
    return start, end


def _occurrences(text: str, needle: str, limit: int = 1000) -> list[int]:
    """Offsets of ``needle`` in ``text``, overlapping ones included (each is ambiguous)."""
    found: list[int] = []
    offset = text.find(needle)
    while offset != -1 and len(found) < limit:
        found.append(offset)
        offset = text.find(needle, offset + 1)
    return found


def _match_line_endings(text: str, old: str, new: str) -> tuple[str, str]:
    """``old`` and ``new`` with Windows line ends when the file uses them (the agent types
    ``\\n``)."""
    if "\r\n" in text and "\r\n" not in old + new:
        return old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
    return old, new


def _no_match_hint(text: str, old: str) -> str:
    """Why ``old`` may not match ``text``, and what to do."""
    old_lines = old.strip("\n").split("\n")
    if all(re.match(r"\s*\d+\t", line) for line in old_lines):
        return ("old_str seems to contain the line numbers view shows: they are not in the"
                " file, copy only the text after the tab")
    wanted = [line.strip() for line in old_lines]
    stripped = [line.strip() for line in split_lines(text)]
    span = len(wanted)
    for index in range(len(stripped) - span + 1):
        if stripped[index:index + span] == wanted:
            indent = "tabs" if "\n\t" in text else "spaces"
            return (f"It does match lines {index + 1}-{index + span} if whitespace at the"
                    f" ends of lines is ignored: check the indentation (the file indents with"
                    f" {indent}) and trailing spaces; view_range=[{index + 1}, {index + span}]"
                    " shows the exact text")
    first = next((line for line in wanted if line), "")
    starts = [n for n, line in enumerate(stripped, 1) if first and first in line]
    if starts:
        where = ", ".join(map(str, starts[:10]))
        return (f"Its first line appears at line(s) {where}, but the text after it differs:"
                " view those lines and copy them exactly")
    return ("View the file (or search it with grep) and copy the current text exactly; it"
            " may have changed since you last viewed it")


def _syntax_warning(rel: str, before: str | None, after: str) -> str:
    """A warning when an edit breaks a Python file that compiled before it."""
    if not rel.endswith(".py"):
        return ""
    try:
        if before is not None:
            compile(before, rel, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError):
        return ""  # broken already (or newer syntax than ours): nothing to say
    try:
        compile(after, rel, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as e:
        return (f"\nWarning: {rel} no longer parses as Python: {e.msg} at line {e.lineno}."
                " Fix it, or revert with undo_edit.")
    except ValueError:
        return ""
    return ""


def _first_difference(a: str, b: str) -> int:
    """The first line (1-based) where ``a`` and ``b`` differ."""
    for number, (left, right) in enumerate(zip(split_lines(a), split_lines(b), strict=False), 1):
        if left != right:
            return number
    return min(line_count(a), line_count(b)) + 1
