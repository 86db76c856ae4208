"""The agent's tools for repairing a repository: ``bash``, ``str_replace_editor``, ``search``.

:class:`RepoTools` wraps one :class:`~agentgym.core.sandbox.Sandbox` whose workspace
(``box.workdir``) holds the repository. Its three coroutines are the tools, plain methods
with typed parameters and Google-style docstrings; :meth:`RepoTools.tools` binds them as
:class:`~agentgym.core.tools.BoundTool` objects for an env's ``tools()`` (``@tool`` derives
each JSON schema from those hints and docstrings). The contract:

* A tool returns text for the agent. A problem the agent can fix (a bad path, an
  ``old_str`` that matches twice, an invalid regex) raises
  :class:`~agentgym.core.tools.ToolError` whose message says what was wrong and what to do.
  Only a dead sandbox (:class:`~agentgym.core.sandbox.SandboxError`) escapes otherwise.
* Paths are relative to the workspace, or absolute inside it. A path that leaves the
  workspace (``..``, an absolute path elsewhere, a symbolic link pointing out) is refused.
  Results name files relative to the workspace.
* Long results are cut to ``max_output_chars`` (``view`` also to ``max_view_lines``) with a
  marker saying how to see the rest.
* ``bash`` runs in the sandbox's persistent shell (``cd`` and ``export`` persist).
  ``str_replace_editor`` and ``search`` leave the shell's state alone (they run in
  subshells) and keep their scratch files under ``/tmp`` in the sandbox, never in the
  workspace, whose ``git diff`` is the agent's answer.
* ``undo_edit`` reverts, newest first and per file, the edits this instance made with
  ``str_replace_editor`` (``create`` included); changes made through ``bash`` are not
  recorded.
* ``search`` parses Python files on the host with tree-sitter (the ``swe`` extra). Files are
  listed and read through the sandbox, and parsed trees are cached by (path, content
  hash), so a repeated search fetches only the files that changed. ``grep`` runs inside the
  sandbox (``git grep`` in a git repository, so ignored files are skipped) and needs no
  tree-sitter.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import io
import posixpath
import re
import secrets
import shlex
import tarfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from agentgym.core.episode import within_turn
from agentgym.core.sandbox import Sandbox
from agentgym.core.tools import BoundTool, Tool, ToolError

if TYPE_CHECKING:
    from tree_sitter import Node, Parser, Tree

EditorCommand = Literal["view", "create", "str_replace", "insert", "undo_edit"]
SearchMode = Literal["definition", "references", "outline", "grep"]

#: Files ``search`` parses as Python.
PYTHON_SUFFIXES = (".py", ".pyi")
#: Characters of one line shown by ``view`` and by search results before it is cut.
MAX_LINE_CHARS = 2000
MAX_RESULT_LINE_CHARS = 300
MAX_OUTLINE_SIGNATURE_CHARS = 160
#: Lines of context around an edit in the snippet ``str_replace``/``insert`` show.
SNIPPET_CONTEXT = 4
MAX_SNIPPET_LINES = 60
#: Entries a directory listing shows.
MAX_LISTING_ENTRIES = 300
#: Edits ``undo_edit`` remembers per file.
UNDO_DEPTH = 20
#: Python files bigger than this are not parsed (generated tables, vendored bundles).
MAX_PARSE_BYTES = 2 * 1024 * 1024
#: Lines of ``grep`` output read back from the sandbox; the rest is reported as cut.
MAX_GREP_LINES = 1000
MAX_GREP_CONTEXT = 10

_DEFINITIONS = ("function_definition", "class_definition")
# Statements whose blocks may hold definitions that an outline should show
# (``if TYPE_CHECKING:``, ``try: ... except ImportError:``, ``with``).
_CONTAINERS = frozenset({
    "block", "if_statement", "elif_clause", "else_clause", "try_statement", "except_clause",
    "finally_clause", "with_statement", "for_statement", "while_statement",
})
_GIT = "git -c safe.directory='*'"  # the workspace may belong to another uid than the shell
_IN_GIT_REPO = f"{_GIT} rev-parse --is-inside-work-tree >/dev/null 2>&1"


@dataclass
class _Target:
    """A path the agent named, resolved in the sandbox."""

    full: str  # absolute path inside the sandbox
    rel: str  # relative to the workspace ("." for the workspace itself), shown to the agent
    kind: Literal["file", "dir", "other", "missing"]


@dataclass
class _Edit:
    """One ``str_replace_editor`` edit of a file, for ``undo_edit``."""

    before: str | None  # None: the edit created the file
    after: str


@dataclass
class _Definition:
    rel: str
    start: int
    end: int
    kind: str  # class, function, method, variable
    qualname: str
    signature: str


@dataclass
class _GrepHit:
    line: int
    is_match: bool
    text: str


_TOOL_CACHE: dict[tuple[type, str], Tool] = {}


class RepoTools:
    """The repository-repair tools over one sandbox (see the module docstring).

    Args:
        box: the sandbox; its ``workdir`` is the repository.
        command_timeout_s: time limit of one ``bash`` command and of the tools' own
            commands; None for the sandbox's default (``box.limits.timeout_s``).
        max_output_chars: characters of one tool result before it is cut with a marker.
        max_view_lines: lines one ``view`` shows before it is cut with a marker.
    """

    def __init__(self, box: Sandbox, *, command_timeout_s: float | None = None,
                 max_output_chars: int = 12_000, max_view_lines: int = 400):
        if command_timeout_s is not None and not command_timeout_s > 0:
            raise ValueError(f"command_timeout_s must be > 0 or None, got {command_timeout_s!r}")
        if max_output_chars < 2 * MAX_LINE_CHARS:
            raise ValueError(f"max_output_chars must be >= {2 * MAX_LINE_CHARS} (two long"
                             f" lines), got {max_output_chars!r}")
        if max_view_lines < 1:
            raise ValueError(f"max_view_lines must be >= 1, got {max_view_lines!r}")
        self.box = box
        self.workdir = posixpath.normpath(box.workdir)
        self.command_timeout_s = command_timeout_s
        self.max_output_chars = max_output_chars
        self.max_view_lines = max_view_lines
        self._history: dict[str, list[_Edit]] = {}
        # A scratch folder of our own in the sandbox's /tmp: never in the workspace.
        self._scratch = f"/tmp/.agentgym-repotools-{secrets.token_hex(4)}"
        self._sources: dict[str, tuple[str, bytes]] = {}  # rel -> (md5, content)
        self._trees: dict[str, tuple[str, Tree]] = {}  # rel -> (md5, parsed tree)
        self._parser: Parser | None = None

    def tools(self) -> list[BoundTool]:
        """``bash``, ``str_replace_editor`` and ``search`` bound to this instance, ready for
        an env's ``tools()``."""
        bound = []
        for name in ("bash", "str_replace_editor", "search"):
            key = (type(self), name)
            if key not in _TOOL_CACHE:  # the schema is derived once per class
                _TOOL_CACHE[key] = Tool(getattr(type(self), name))
            bound.append(BoundTool(_TOOL_CACHE[key], self))
        return bound

    # ---- bash -----------------------------------------------------------------------------

    async def bash(self, command: str) -> str:
        """Run a bash command in the repository's shell; returns its output and exit code.

        The shell persists between calls (cd and exported variables stick) and starts at
        the repository root. There is no terminal and no stdin: use non-interactive forms
        (git --no-pager, pytest -q). Each command has a time limit, and long output is cut
        in the middle.

        Args:
            command: The command to run, e.g. "python -m pytest tests/test_core.py -q".
        """
        if not command.strip():
            raise ToolError("command is empty; give a shell command such as 'ls' or 'git status'")
        timeout = self._timeout()
        result = await self.box.exec(command, timeout=timeout)
        output = result.output.rstrip("\n")
        hint = ("redirect the output to a file and read parts of it (cmd > /tmp/out.txt 2>&1;"
                " sed -n 1,80p /tmp/out.txt), or filter it with grep, head or tail")
        output = _cut_middle(output, self.max_output_chars, hint)
        if result.timed_out:
            footer = (f"[exit code {result.exit_code}: timed out after {timeout:g} s, the"
                      " command was stopped; run a narrower command (one test file, fewer"
                      " inputs)]")
        else:
            footer = f"[exit code {result.exit_code}]"
        return f"{output}\n{footer}" if output else f"(no output)\n{footer}"

    # ---- str_replace_editor ---------------------------------------------------------------

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
        target = await self._target(path)
        if command == "view":
            return await self._view(target, view_range)
        if command == "create":
            return await self._create(target, file_text)
        if command == "undo_edit":
            return await self._undo(target)
        if target.kind == "missing":
            raise await self._missing(target)
        if target.kind != "file":
            raise ToolError(f"{target.rel} is a {_kind_name(target.kind)}, not a file:"
                            f" {command} edits files")
        if command == "str_replace":
            return await self._str_replace(target, old_str, new_str)
        if command == "insert":
            return await self._insert(target, insert_line, new_str)
        raise ToolError(f"unknown command {command!r}; use one of view, create, str_replace,"
                        " insert, undo_edit")

    async def _view(self, target: _Target, view_range: list[int] | None) -> str:
        if target.kind == "missing":
            raise await self._missing(target)
        if target.kind == "dir":
            if view_range is not None:
                raise ToolError(f"view_range applies to files, and {target.rel} is a"
                                " directory: view it without view_range to list it")
            return await self._list_directory(target)
        if target.kind != "file":
            raise ToolError(f"{target.rel} is a {_kind_name(target.kind)}; view shows files"
                            " and directories")
        text = await self._read_text(target)
        lines = _split_lines(text)
        if not lines:
            return f"{target.rel} is empty."
        start, end = _check_view_range(view_range, len(lines), target.rel)
        shown: list[str] = []
        size = 0
        for number in range(start, end + 1):
            row = _numbered(number, lines[number - 1], MAX_LINE_CHARS)
            if shown and (len(shown) >= self.max_view_lines
                          or size + len(row) + 1 > self.max_output_chars):
                break
            shown.append(row)
            size += len(row) + 1
        last = start + len(shown) - 1
        whole = (start, last) == (1, len(lines))
        header = (f"{target.rel} ({_count(len(lines), 'line')}):" if whole
                  else f"{target.rel}, lines {start}-{last} of {len(lines)}:")
        body = header + "\n" + "\n".join(shown)
        if last < end:
            more = min(end, last + self.max_view_lines)
            body += (f"\n[... cut after line {last} of {len(lines)}: view again with"
                     f" view_range=[{last + 1}, {more}] to see the next lines")
            if target.rel.endswith(PYTHON_SUFFIXES):
                body += ", or list its classes and functions with search mode 'outline'"
            body += "]"
        return body

    async def _list_directory(self, target: _Target) -> str:
        # Names two levels down, directories marked with a slash; hidden entries and
        # __pycache__ are noise to the agent.
        script = (
            f"( cd {shlex.quote(self.workdir)} && LC_ALL=C find {shlex.quote(_dotted(target.rel))}"
            r" -mindepth 1 -maxdepth 2 \( -name '.*' -o -name __pycache__ \) -prune"
            r" -o -type d -printf '%p/\n' -o -printf '%p\n' | LC_ALL=C sort"
            f" | awk -v max={MAX_LISTING_ENTRIES}"
            " 'NR <= max { print } END { print \"@@total=\" NR }' )"
        )
        result = await self.box.exec(script, timeout=self._timeout())
        lines = result.output.splitlines()
        total_line = next((line for line in reversed(lines) if line.startswith("@@total=")), None)
        if result.exit_code != 0 or total_line is None:
            raise ToolError(f"could not list {target.rel}: {result.output.strip()[-500:]}")
        total = int(total_line.removeprefix("@@total="))
        entries = [_strip_dot(line) for line in lines if not line.startswith("@@total=")]
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

    async def _create(self, target: _Target, file_text: str | None) -> str:
        if file_text is None:
            raise ToolError("create needs file_text: the full content of the new file")
        if target.kind != "missing":
            raise ToolError(
                f"{target.rel} already exists ({_kind_name(target.kind)}); create never"
                " overwrites. Edit the file with str_replace or insert, or remove it with"
                f" bash (rm {shlex.quote(target.rel)}) and create it again"
            )
        await self._write(target, file_text)
        self._remember(target, _Edit(before=None, after=file_text))
        note = _syntax_warning(target.rel, None, file_text)
        return f"Created {target.rel} ({_count(_line_count(file_text), 'line')}).{note}"

    async def _str_replace(self, target: _Target, old_str: str | None,
                           new_str: str | None) -> str:
        if old_str is None:
            raise ToolError("str_replace needs old_str (the exact text to replace) and new_str"
                            " (its replacement; omit it to delete old_str)")
        if old_str == "":
            raise ToolError("old_str is empty: give the exact text to replace; to add text"
                            " without replacing any, use insert")
        text = await self._read_text(target)
        old, new = _match_line_endings(text, old_str, new_str or "")
        found = _occurrences(text, old)
        if not found:
            raise ToolError(f"No replacement was made: old_str has no occurrence in"
                            f" {target.rel}. {_no_match_hint(text, old)}")
        if len(found) > 1:
            lines = [_line_at(text, offset) for offset in found]
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
        await self._write(target, edited)
        self._remember(target, _Edit(before=text, after=edited))
        first = _line_at(text, offset)
        last = first + new.count("\n") - (1 if new.endswith("\n") else 0)
        snippet = self._snippet(edited, first, max(first, last))
        note = _syntax_warning(target.rel, text, edited)
        return (f"Edited {target.rel}. The edited region:\n{snippet}\n"
                f"Check that it is as intended; undo_edit reverts it.{note}")

    async def _insert(self, target: _Target, insert_line: int | None,
                      new_str: str | None) -> str:
        if insert_line is None:
            raise ToolError("insert needs insert_line: 0 inserts at the top of the file, N"
                            " after line N")
        if new_str is None:
            raise ToolError("insert needs new_str: the text to insert")
        text = await self._read_text(target)
        count = _line_count(text)
        if not 0 <= insert_line <= count:
            raise ToolError(f"insert_line {insert_line} is outside {target.rel}, which has"
                            f" {_count(count, 'line')}: use 0 (the top) to {count} (the end)")
        block = new_str if new_str.endswith("\n") else new_str + "\n"
        _, block = _match_line_endings(text, "", block)
        offset = _offset_after_line(text, insert_line)
        if offset == len(text) and text and not text.endswith("\n"):
            block = "\n" + block  # the last line had no newline to end it
        edited = text[:offset] + block + text[offset:]
        await self._write(target, edited)
        self._remember(target, _Edit(before=text, after=edited))
        first = insert_line + 1
        last = insert_line + max(1, _line_count(new_str))
        snippet = self._snippet(edited, first, last)
        note = _syntax_warning(target.rel, text, edited)
        return (f"Inserted {_count(last - first + 1, 'line')} after line {insert_line} of"
                f" {target.rel}."
                f" The edited region:\n{snippet}\n"
                f"Check that it is as intended; undo_edit reverts it.{note}")

    async def _undo(self, target: _Target) -> str:
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
                current = await self._read_text(target)
            except ToolError:
                current = None
        note = ("" if current == edit.after else
                " The file had changed since that edit (outside this tool): those changes"
                " were discarded too.")
        if edit.before is None:
            result = await self.box.exec(f"rm -f -- {shlex.quote(target.full)}",
                                         timeout=self._timeout())
            if result.exit_code != 0:
                edits.append(edit)
                raise ToolError(f"could not remove {target.rel}: {result.output.strip()}")
            return f"Undid the creation of {target.rel}: the file is removed.{note}"
        await self._write(target, edit.before)
        changed = _first_difference(edit.after if current is None else current, edit.before)
        snippet = self._snippet(edit.before, changed, changed)
        left = f" ({_count(len(edits), 'earlier edit')} can still be undone)" if edits else ""
        return (f"Undid the last edit of {target.rel}{left}. The restored region:\n"
                f"{snippet}{note}")

    def _snippet(self, text: str, first: int, last: int) -> str:
        """Lines ``first``-``last`` of ``text`` with some context, numbered."""
        lines = _split_lines(text)
        if not lines:
            return "(the file is now empty)"
        start = max(1, first - SNIPPET_CONTEXT)
        end = min(len(lines), last + SNIPPET_CONTEXT)
        rows = [_numbered(n, lines[n - 1], MAX_RESULT_LINE_CHARS) for n in range(start, end + 1)]
        if len(rows) > MAX_SNIPPET_LINES:
            cut = len(rows) - MAX_SNIPPET_LINES
            more = (f"[... {cut} more lines: view them with view_range="
                    f"[{start + MAX_SNIPPET_LINES}, {end}]]")
            rows = [*rows[:MAX_SNIPPET_LINES], more]
        return "\n".join(rows)

    def _remember(self, target: _Target, edit: _Edit) -> None:
        edits = self._history.setdefault(target.full, [])
        edits.append(edit)
        del edits[:-UNDO_DEPTH]

    # ---- search ---------------------------------------------------------------------------

    async def search(self, mode: SearchMode, query: str = "", path: str = ".",
                     context: int = 2, include: str | None = None) -> str:
        """Search the repository's code.

        Modes:
        * definition: where the function, class, method or module-level variable named
          query is defined, with line ranges and signatures. A dotted query such as
          "Parser.parse" narrows it to that class.
        * references: the lines where the identifier query occurs in Python code (strings
          and comments excluded), grouped by file.
        * outline: the classes, functions and methods of the Python file at path (or of
          each Python file in that directory) with their line ranges.
        * grep: lines matching the regular expression query (Python syntax) in every text
          file, with context lines around each match; ignored and binary files skipped.

        Args:
            mode: What to search for: definition, references, outline or grep.
            query: The name (definition, references) or regular expression (grep); outline
                does not use it.
            path: Search only this file or directory (default: the whole repository); for
                outline, the file or directory to outline.
            context: For grep, the lines shown before and after each match (0 to 10).
            include: For grep, only files whose name matches this glob, e.g. "*.py".
        """
        target = await self._target(path)
        if target.kind == "missing":
            raise await self._missing(target)
        if target.kind not in ("file", "dir"):
            raise ToolError(f"{target.rel} is a {_kind_name(target.kind)}; search a file or"
                            " a directory")
        query = query.strip()
        if mode == "outline":
            return await self._outline(target)
        if not query:
            raise ToolError(f"search mode {mode!r} needs a query: the "
                            + ("regular expression to find" if mode == "grep"
                               else "name to look for, e.g. 'parse' or 'Parser.parse'"))
        if mode == "grep":
            return await self._grep(target, query, context, include)
        if mode == "definition":
            return await self._definition(target, query)
        if mode == "references":
            return await self._references(target, query)
        raise ToolError(f"unknown search mode {mode!r}; use one of definition, references,"
                        " outline, grep")

    async def _definition(self, target: _Target, query: str) -> str:
        parts = query.split(".")
        if not all(part.isidentifier() for part in parts):
            raise ToolError(f"definition takes a name such as 'parse' or 'Parser.parse', got"
                            f" {query!r}; use mode 'grep' to search for other text")
        sources = await self._python_sources(target)
        found: list[_Definition] = []
        for rel, data in sources:
            if parts[-1].encode() not in data:
                continue  # most files never mention the name: no need to parse them
            found += _definitions_in(rel, data, self._tree(rel, data), parts)
        if not found:
            known = set()
            for _, data in sources:
                known.update(m.decode("utf-8", "replace") for m in _DEF_NAME.findall(data))
            close = difflib.get_close_matches(parts[-1], sorted(known), n=5, cutoff=0.6)
            hint = (f" Did you mean {', '.join(map(repr, close))}?" if close else
                    " It may be defined dynamically or imported from an installed package;"
                    " try mode 'references' or 'grep'.")
            raise ToolError(f"No definition of {query!r} in the Python files of"
                            f" {_scope_name(target)}.{hint}")
        rows = [f"{len(found)} definition{'s' if len(found) > 1 else ''} of {query!r}:"]
        for d in found:
            rows.append(f"{d.rel}:{d.start}-{d.end}  {d.kind} {d.qualname}")
            rows.append(f"    {d.signature}")
        first = found[0]
        rows.append(f"(str_replace_editor view with view_range=[{first.start}, {first.end}]"
                    " shows the code)")
        return self._cut("\n".join(rows), "give a dotted name (Class.method) or a path to"
                                             " narrow the search")

    async def _references(self, target: _Target, query: str) -> str:
        name = query.split(".")[-1]
        if not name.isidentifier():
            raise ToolError(f"references takes an identifier such as 'parse', got {query!r};"
                            " use mode 'grep' to search for other text")
        sources = await self._python_sources(target)
        by_file: list[tuple[str, list[tuple[int, str, bool]]]] = []
        total = 0
        for rel, data in sources:
            if name.encode() not in data:
                continue
            hits = _references_in(data, self._tree(rel, data), name)
            if hits:
                by_file.append((rel, hits))
                total += len(hits)
        if not by_file:
            raise ToolError(f"No references to {name!r} in the Python code of"
                            f" {_scope_name(target)} (strings and comments are not code;"
                            " use mode 'grep' to search them too)")
        lead = f"(searched for the identifier {name!r}) " if name != query else ""
        rows = [f"{lead}{_count(total, 'line')} {'references' if total == 1 else 'reference'}"
                f" {name!r}, in {_count(len(by_file), 'file')}:"]
        for rel, hits in by_file:
            rows.append(rel)
            for line, text, defines in hits:
                rows.append(f"{line:>6}: {text}" + ("    <- definition" if defines else ""))
        return self._cut("\n".join(rows), "pass path to search one directory or file")

    async def _outline(self, target: _Target) -> str:
        sources = await self._python_sources(target)
        if not sources:
            raise ToolError(f"No Python files in {_scope_name(target)} (files git ignores"
                            " are skipped; name one to outline it): outline lists the classes"
                            " and functions of Python files")
        blocks = []
        for rel, data in sources:
            entries = _outline_of(data, self._tree(rel, data))
            lines = _line_count(data.decode("utf-8", "replace"))
            rows = [f"{rel} ({_count(lines, 'line')})"]
            rows += [f"{'    ' * (depth + 1)}{header}  [lines {start}-{end}]"
                     for depth, header, start, end in entries]
            if not entries:
                rows.append("    (no classes or functions)")
            blocks.append("\n".join(rows))
        hint = ("view the rest of the file with str_replace_editor and view_range"
                if target.kind == "file" else "outline one file or a smaller directory")
        return self._cut("\n".join(blocks), hint)

    async def _grep(self, target: _Target, pattern: str, context: int,
                    include: str | None) -> str:
        try:
            re.compile(pattern)
        except re.error as e:
            raise ToolError(f"invalid regular expression {pattern!r}: {e}. Escape special"
                            r" characters to match them literally, e.g. '\(' or '\.'") from None
        if not 0 <= context <= MAX_GREP_CONTEXT:
            raise ToolError(f"context must be 0 to {MAX_GREP_CONTEXT} lines, got {context}")
        if include is not None and ("/" in include or not include.strip()):
            raise ToolError(f"include must be a file-name glob such as '*.py', got {include!r};"
                            " use path to pick a directory")
        # Perl-compatible syntax is closest to Python's; extended regexes are the fallback
        # for builds of grep without it.
        result = await self.box.exec(self._grep_script(target, pattern, context, include, "-P"),
                                     timeout=self._timeout())
        status, git, output = _grep_status(result.output)
        if status not in (0, 1, 141) and ("perl" in output.lower() or "-P" in output):
            result = await self.box.exec(
                self._grep_script(target, pattern, context, include, "-E"),
                timeout=self._timeout())
            status, git, output = _grep_status(result.output)
        if result.timed_out:
            raise ToolError("grep timed out: search a smaller path or a more specific pattern")
        if status == 1:
            where = _scope_name(target) + (f" (files named {include})" if include else "")
            return f"No matches for /{pattern}/ in {where}."
        if status not in (0, 141):
            raise ToolError(f"grep failed (status {status}): {output.strip()[-800:]}")
        lines = output.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        # Stopped by the bounds of _grep_script (the "@@git" line counts against them).
        cut = (status == 141 or len(lines) + git >= MAX_GREP_LINES
               or len(output.encode()) + 6 * git >= self._grep_bytes())
        if cut and lines:
            lines.pop()  # the last line may be a partial one
        files = _parse_git_grep(lines) if git else _parse_plain_grep(lines)
        matches = sum(hit.is_match for _, hits in files for hit in hits if hit)
        more = "at least " if cut else ""
        rows = [f"{more}{_count(matches, 'matching line')} in {_count(len(files), 'file')}"
                + (" (':' marks a match, '-' context)" if context else "") + ":"]
        if cut:  # said first: the end of a long result may be cut below
            rows.append("[more matches were not read: use a more specific pattern, a smaller"
                        " path, include, or less context]")
        for rel, hits in files:
            rows.append(rel)
            for hit in hits:
                if hit is None:
                    rows.append("    --")
                else:
                    text = _clip_line(hit.text.rstrip("\r"), MAX_RESULT_LINE_CHARS)
                    rows.append(f"{hit.line:>6}{':' if hit.is_match else '-'} {text}")
        return self._cut("\n".join(rows), "use a more specific pattern, a smaller path, or include")

    def _grep_script(self, target: _Target, pattern: str, context: int,
                     include: str | None, syntax: str) -> str:
        q = shlex.quote
        specs = [target.rel]
        if include and target.kind == "dir":
            prefix = "" if target.rel == "." else f"{target.rel}/"
            specs = [f":(glob){prefix}**/{include}"]
        git = (f"echo @@git; {_GIT} grep --no-color -n -I --untracked --heading --break"
               f" -C{context} {syntax} -e {q(pattern)} -- {' '.join(map(q, specs))}")
        # Outside git nothing is ignored; hidden folders are skipped as the listings skip
        # them. The workspace root is grep's default operand: named ".", --exclude-dir='.*'
        # would skip all of it.
        plain = (f"grep -rnIH -Z -C{context} {syntax} --exclude-dir='.*'"
                 " --exclude-dir=__pycache__"
                 + (f" --include={q(include)}" if include else "")
                 + f" -e {q(pattern)}" + ("" if target.rel == "." else f" -- {q(target.rel)}"))
        # Bounded in lines and bytes, so that the sandbox never cuts it in the middle.
        return (f"( cd {q(self.workdir)} && if {_IN_GIT_REPO}; then {git}; else {plain}; fi"
                f" 2>&1 | cut -c1-{MAX_RESULT_LINE_CHARS + 200} | head -n {MAX_GREP_LINES}"
                f" | head -c {self._grep_bytes()}; status=${{PIPESTATUS[0]}}; echo;"
                ' echo "@@status=$status" )')

    def _timeout(self) -> float:
        """A command's time limit: ``command_timeout_s``, within what is left of the turn."""
        return within_turn(self.command_timeout_s or self.box.limits.timeout_s)

    def _grep_bytes(self) -> int:
        return max(1024, min(self.box.limits.output_bytes - 512, 100_000))

    def _cut(self, text: str, hint: str) -> str:
        """``text`` cut at a line end to ``max_output_chars``, with a marker."""
        if len(text) <= self.max_output_chars:
            return text
        keep = text.rfind("\n", 0, self.max_output_chars)
        keep = keep if keep > 0 else self.max_output_chars
        dropped = text[keep:].count("\n") + 1
        return f"{text[:keep]}\n[... {dropped} more lines not shown: {hint}]"

    # ---- Python sources and trees ---------------------------------------------------------

    async def _python_sources(self, target: _Target) -> list[tuple[str, bytes]]:
        """(path, content) of the Python files at ``target`` (a file or a directory)."""
        if target.kind == "file":
            if not target.rel.endswith(PYTHON_SUFFIXES):
                raise ToolError(f"{target.rel} is not a Python file: this search mode parses"
                                " Python; use mode 'grep' for other files")
            data = await self.box.read_file(target.full)
            self._sources[target.rel] = (_digest(data), data)
            return [(target.rel, data)]
        listing = await self._list_python_files(target.rel)
        stale = [rel for rel, digest in listing.items()
                 if self._sources.get(rel, ("",))[0] != digest]
        if stale:
            await self._fetch(stale)
        return [(rel, self._sources[rel][1]) for rel in sorted(listing) if rel in self._sources]

    async def _list_python_files(self, scope: str) -> dict[str, str]:
        """{path: md5} of the Python files under directory ``scope``: those git tracks or
        would track (ignored ones skipped), or outside git every one not hidden."""
        q = shlex.quote
        if scope == ".":
            specs = " ".join(q(f"*{suffix}") for suffix in PYTHON_SUFFIXES)
        else:
            specs = " ".join(q(f"{scope}/*{suffix}") for suffix in PYTHON_SUFFIXES)
        names = " -o ".join(f"-name '*{suffix}'" for suffix in PYTHON_SUFFIXES)
        scratch = q(self._scratch)
        # Written to a file and read back: a big repository's listing may be longer than
        # the output an exec returns.
        script = (
            f"( cd {q(self.workdir)} || exit 1; mkdir -p {scratch} && rm -f {scratch}/*;"
            f" if {_IN_GIT_REPO}; then {_GIT} ls-files -z -co --exclude-standard -- {specs};"
            f" else find {q(_dotted(scope))} -path '*/.*' -prune -o -name __pycache__ -prune"
            rf" -o -type f \( {names} \) -print0; fi"
            f" | xargs -0 -r md5sum -- > {scratch}/listing 2>/dev/null; echo listed )"
        )
        result = await self.box.exec(script, timeout=self._timeout())
        if "listed" not in result.output:
            raise ToolError(f"could not list the Python files of {scope}:"
                            f" {result.output.strip()[-500:]}")
        raw = await self.box.read_file(f"{self._scratch}/listing")
        listing = {}
        for line in raw.decode("utf-8", "replace").splitlines():
            match = re.fullmatch(r"([0-9a-f]{32}) [ *](.+)", line)
            if match:  # md5sum escapes odd names with a leading backslash: skipped
                rel = posixpath.normpath(match.group(2))
                # A virtual environment made inside the workspace is not the repository.
                if "site-packages" not in rel.split("/"):
                    listing[rel] = match.group(1)
        return listing

    async def _fetch(self, paths: list[str]) -> None:
        """Read ``paths`` (relative to the workspace) into the source cache in one archive."""
        q = shlex.quote
        scratch = q(self._scratch)
        await self.box.write_file(f"{self._scratch}/wanted", "\0".join(paths))
        result = await self.box.exec(
            f"( cd {q(self.workdir)} && tar -czf {scratch}/files.tgz --null -T {scratch}/wanted"
            " 2>&1 )", timeout=self._timeout())
        if result.exit_code not in (0, 1):  # 1: a file changed while it was read
            raise ToolError(f"could not read the Python files: {result.output.strip()[-500:]}")
        data = await self.box.read_file(f"{self._scratch}/files.tgz")
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            for member in archive:
                if not member.isfile() or member.size > MAX_PARSE_BYTES:
                    continue
                handle = archive.extractfile(member)
                if handle is not None:
                    content = handle.read()
                    self._sources[posixpath.normpath(member.name)] = (_digest(content), content)

    def _tree(self, rel: str, data: bytes) -> Tree:
        """The parsed tree of ``data``, cached by (path, content hash)."""
        digest = _digest(data)
        cached = self._trees.get(rel)
        if cached is not None and cached[0] == digest:
            return cached[1]
        if self._parser is None:
            self._parser = _python_parser()
        tree = self._parser.parse(data)
        self._trees[rel] = (digest, tree)
        return tree

    # ---- paths and files ------------------------------------------------------------------

    def _absolute(self, path: str) -> str:
        """The absolute path for ``path``, refused when it leaves the workspace."""
        cleaned = path.strip()
        if not cleaned:
            raise ToolError(f"path is empty: give a path relative to the repository root"
                            f" (e.g. 'src/module.py'), or absolute under {self.workdir}")
        full = posixpath.normpath(posixpath.join(self.workdir, cleaned))
        if not _inside(full, self.workdir):
            raise ToolError(f"path {path!r} is outside the repository ({self.workdir}): give"
                            " a path relative to the repository root, or absolute inside it")
        return full

    async def _target(self, path: str) -> _Target:
        full = self._absolute(path)
        q = shlex.quote(full)
        # One round trip: what the path is, and where it really leads (symbolic links).
        script = (f"( if [ -d {q} ]; then echo dir; elif [ -f {q} ]; then echo file;"
                  f" elif [ -e {q} ] || [ -L {q} ]; then echo other; else echo missing; fi;"
                  f" realpath -m -- {q} {shlex.quote(self.workdir)} 2>/dev/null )")
        result = await self.box.exec(script, timeout=self._timeout())
        lines = result.output.splitlines()
        kind = lines[0].strip() if lines else ""
        if kind not in ("file", "dir", "other", "missing"):
            raise ToolError(f"could not inspect {path!r}: {result.output.strip()[-500:]}")
        rel = posixpath.relpath(full, self.workdir)
        if len(lines) >= 3 and not _inside(lines[1], lines[2]):
            raise ToolError(f"{rel} leads outside the repository (to {lines[1]}) through a"
                            " symbolic link; this tool only reads and edits files inside it")
        return _Target(full, rel, kind)  # type: ignore[arg-type]

    async def _missing(self, target: _Target) -> ToolError:
        """The error for a path that does not exist, suggesting close names."""
        parent = posixpath.dirname(target.full)
        hint = ""
        try:
            names = await self.box.list_dir(parent)
        except OSError:
            names = []
        close = difflib.get_close_matches(posixpath.basename(target.full), names, n=3)
        if close:
            base = posixpath.relpath(parent, self.workdir)
            shown = [posixpath.normpath(posixpath.join(base, name)) for name in close]
            hint = f" Did you mean {', '.join(map(repr, shown))}?"
        return ToolError(f"{target.rel} does not exist.{hint} View a directory (e.g. path"
                         " '.') to see what is there")

    async def _read_text(self, target: _Target) -> str:
        try:
            data = await self.box.read_file(target.full)
        except FileNotFoundError:
            raise await self._missing(target) from None
        if b"\0" in data[:8192]:
            raise ToolError(f"{target.rel} looks binary (it contains NUL bytes): inspect it"
                            " with bash (file, xxd | head)")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ToolError(f"{target.rel} is not UTF-8 text ({e}); inspect or edit it with"
                            " bash") from None

    async def _write(self, target: _Target, text: str) -> None:
        try:
            await self.box.write_file(target.full, text.encode("utf-8"))
        except OSError as e:
            raise ToolError(f"could not write {target.rel}: {e}") from None


# ---- text helpers ------------------------------------------------------------------------


def _split_lines(text: str) -> list[str]:
    """The lines of ``text`` without their ends; only ``\\n`` ends a line (form feeds and
    other characters ``str.splitlines`` splits on are part of Python files' lines)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _line_at(text: str, offset: int) -> int:
    """The 1-based line number of character ``offset``."""
    return text.count("\n", 0, offset) + 1


def _offset_after_line(text: str, line: int) -> int:
    """The offset where line ``line + 1`` starts (0 for ``line`` 0; the end past the
    last line)."""
    offset = 0
    for _ in range(line):
        found = text.find("\n", offset)
        if found == -1:
            return len(text)
        offset = found + 1
    return offset


def _numbered(number: int, line: str, limit: int) -> str:
    return f"{number:6}\t{_clip_line(line, limit)}"


def _clip_line(line: str, limit: int) -> str:
    if len(line) <= limit:
        return line
    return f"{line[:limit]}... [{len(line) - limit} more characters]"


def _cut_middle(text: str, limit: int, hint: str) -> str:
    """``text`` kept to about ``limit`` characters: its head and tail (the end of a log is
    often what matters), with a marker between them."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit // 2], text[-(limit - limit // 2):]
    dropped = len(text) - len(head) - len(tail)
    return f"{head}\n[... {dropped} characters of output cut: {hint} ...]\n{tail}"


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
    stripped = [line.strip() for line in _split_lines(text)]
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
    for number, (left, right) in enumerate(zip(_split_lines(a), _split_lines(b), strict=False), 1):
        if left != right:
            return number
    return min(_line_count(a), _line_count(b)) + 1


def _inside(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root.rstrip("/") + "/")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _strip_dot(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def _dotted(rel: str) -> str:
    """``rel`` as a find operand: never read as an option, even when it starts with "-"."""
    return rel if rel == "." else f"./{rel}"


def _kind_name(kind: str) -> str:
    return {"dir": "directory", "other": "special file", "file": "file"}.get(kind, kind)


def _scope_name(target: _Target) -> str:
    return "the repository" if target.rel == "." else target.rel


def _digest(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


# ---- grep output ---------------------------------------------------------------------------


def _grep_status(output: str) -> tuple[int, bool, str]:
    """(grep's exit status, whether git grep ran, its output) from the script's output."""
    lines = output.rstrip("\n").split("\n")
    status = -1
    if lines and lines[-1].startswith("@@status="):
        status = int(lines.pop()[len("@@status="):] or -1)
    while lines and lines[-1] == "":  # the newline that ends a cut last line
        lines.pop()
    git = bool(lines) and lines[0] == "@@git"
    if git:
        lines = lines[1:]
    return status, git, "\n".join(lines) + ("\n" if lines else "")


def _parse_git_grep(lines: list[str]) -> list[tuple[str, list[_GrepHit | None]]]:
    """``git grep -n --heading --break`` output: a file name, its numbered lines (``N:`` a
    match, ``N-`` context, ``--`` between groups), an empty line before the next file."""
    files: list[tuple[str, list[_GrepHit | None]]] = []
    expect_name = True
    for line in lines:
        if expect_name:
            files.append((line, []))
            expect_name = False
        elif line == "":
            expect_name = True
        elif line == "--":
            files[-1][1].append(None)
        else:
            match = re.match(r"(\d+)([:=-])(.*)", line, re.S)
            if match:
                number, sep, text = match.groups()
                files[-1][1].append(_GrepHit(int(number), sep == ":", text))
    return [(name, hits) for name, hits in files if hits]


def _parse_plain_grep(lines: list[str]) -> list[tuple[str, list[_GrepHit | None]]]:
    """``grep -rn -Z`` output: ``NAME\\0N:text`` (a match), ``NAME\\0N-text`` (context),
    ``--`` between groups."""
    files: dict[str, list[_GrepHit | None]] = {}
    last = None
    for line in lines:
        if line == "--":
            if last is not None:
                files[last].append(None)
            continue
        name, nul, rest = line.partition("\0")
        match = re.match(r"(\d+)([:-])(.*)", rest, re.S) if nul else None
        if match:
            name = _strip_dot(name)
            number, sep, text = match.groups()
            if name != last and last is not None and files[last] and files[last][-1] is None:
                files[last].pop()  # a group separator between two files
            files.setdefault(name, []).append(_GrepHit(int(number), sep == ":", text))
            last = name
    return [(name, hits[:-1] if hits and hits[-1] is None else hits)
            for name, hits in files.items()]


# ---- Python syntax trees -------------------------------------------------------------------

#: ``def NAME`` / ``class NAME`` anywhere, for "did you mean" suggestions without parsing.
_DEF_NAME = re.compile(rb"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", re.M)


def _python_parser() -> Parser:
    try:
        import tree_sitter
        import tree_sitter_python
    except ImportError as e:
        raise ToolError(
            f"search modes definition, references and outline need tree-sitter ({e}):"
            " install it with pip install 'agentgym[swe]'. Mode 'grep' works without it"
        ) from None
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))


def _identifier_nodes(data: bytes, tree: Tree, name: str) -> list[Node]:
    """The ``identifier`` nodes spelling ``name``: text matches of the name, kept when the
    tree says they are code (not strings, comments or a longer name)."""
    pattern = re.compile(rb"(?<![\w\x80-\xff])" + re.escape(name.encode()) + rb"(?![\w\x80-\xff])")
    nodes = []
    for match in pattern.finditer(data):
        node = tree.root_node.descendant_for_byte_range(match.start(), match.end())
        if (node is not None and node.type == "identifier"
                and node.start_byte == match.start() and node.end_byte == match.end()):
            nodes.append(node)
    return nodes


def _definition_owner(node: Node) -> tuple[Node, str] | None:
    """For an identifier, the definition it names and its kind, or None."""
    parent = node.parent
    if parent is None:
        return None
    name_node = parent.child_by_field_name("name")
    if parent.type in _DEFINITIONS and name_node is not None and name_node.id == node.id:
        if parent.type == "class_definition":
            return parent, "class"
        enclosing = _enclosing_definition(parent)
        return parent, ("method" if enclosing is not None
                        and enclosing.type == "class_definition" else "function")
    left = parent.child_by_field_name("left") if parent.type == "assignment" else None
    if left is not None and left.id == node.id and parent.parent is not None \
            and parent.parent.type == "expression_statement":
        enclosing = _enclosing_definition(parent)
        if enclosing is None or enclosing.type == "class_definition":
            return parent.parent, "variable"  # module or class level, not a local
    return None


def _enclosing_definition(node: Node) -> Node | None:
    current = node.parent
    while current is not None and current.type not in _DEFINITIONS:
        current = current.parent
    return current


def _qualname(definition: Node, name: str) -> str:
    parts = [name]
    current = _enclosing_definition(definition)
    while current is not None:
        owner = current.child_by_field_name("name")
        parts.append(owner.text.decode("utf-8", "replace") if owner and owner.text else "?")
        current = _enclosing_definition(current)
    return ".".join(reversed(parts))


def _span(node: Node) -> tuple[Node, int, int]:
    """The node a definition's line range covers (decorators included), and that range."""
    outer = node.parent if node.parent is not None and \
        node.parent.type == "decorated_definition" else node
    end_row = outer.end_point[0] + (1 if outer.end_point[1] > 0 else 0)
    return outer, outer.start_point[0] + 1, max(outer.start_point[0] + 1, end_row)


def _signature(definition: Node, data: bytes, limit: int = MAX_RESULT_LINE_CHARS) -> str:
    """``def name(params) -> type`` / ``class Name(bases)``, on one line, with decorators."""
    body = definition.child_by_field_name("body")
    end = body.start_byte if body is not None else definition.end_byte
    # The header ends at the colon before the body: a comment may sit between them.
    colons = [child for child in definition.children
              if child.type == ":" and child.end_byte <= end]
    if colons:
        end = colons[-1].start_byte
    header = data[definition.start_byte:end].decode("utf-8", "replace").strip()
    header = re.sub(r"\s+", " ", header)
    header = re.sub(r"\( ", "(", re.sub(r",? \)", ")", header))  # from parameters on many lines
    outer, _, _ = _span(definition)
    decorators = [child.text.decode("utf-8", "replace") for child in outer.children
                  if child.type == "decorator" and child.text] if outer is not definition else []
    return _clip_line(" ".join([*decorators, header]), limit)


def _definitions_in(rel: str, data: bytes, tree: Tree, parts: list[str]) -> list[_Definition]:
    """The definitions named by ``parts``: a name, qualified or not by its classes and its
    module's dotted path (``Square.area``, ``geometry.shapes.Square.area``)."""
    wanted = ".".join(parts)
    module = posixpath.splitext(rel)[0].replace("/", ".").removesuffix(".__init__")
    found = []
    for node in _identifier_nodes(data, tree, parts[-1]):
        owner = _definition_owner(node)
        if owner is None:
            continue
        definition, kind = owner
        qualname = _qualname(definition, parts[-1])
        if len(parts) > 1 and not any(name == wanted or name.endswith("." + wanted)
                                      for name in (qualname, f"{module}.{qualname}")):
            continue
        if kind == "variable":
            start = definition.start_point[0] + 1
            line = _split_lines(data.decode("utf-8", "replace"))[start - 1]
            end = definition.end_point[0] + 1
            signature = _clip_line(line.strip(), MAX_RESULT_LINE_CHARS)
        else:
            _, start, end = _span(definition)
            signature = _signature(definition, data)
        found.append(_Definition(rel, start, end, kind, qualname, signature))
    return found


def _references_in(data: bytes, tree: Tree, name: str) -> list[tuple[int, str, bool]]:
    """(line, its text, whether it defines the name) for each line using ``name``."""
    lines = _split_lines(data.decode("utf-8", "replace"))
    by_line: dict[int, bool] = {}
    for node in _identifier_nodes(data, tree, name):
        owner = _definition_owner(node)
        defines = owner is not None
        row = node.start_point[0] + 1
        by_line[row] = by_line.get(row, False) or defines
    return [(row, _clip_line(lines[row - 1].strip(), MAX_RESULT_LINE_CHARS), defines)
            for row, defines in sorted(by_line.items()) if row <= len(lines)]


def _outline_of(data: bytes, tree: Tree) -> list[tuple[int, str, int, int]]:
    """(depth, signature, first line, last line) of the classes, functions and methods;
    functions nested in functions are implementation details and left out."""
    entries: list[tuple[int, str, int, int]] = []

    def visit(node: Node, depth: int) -> None:
        for child in node.named_children:
            definition = child
            if child.type == "decorated_definition":
                definition = child.child_by_field_name("definition") or child
            if definition.type in _DEFINITIONS:
                _, start, end = _span(definition)
                signature = _signature(definition, data, MAX_OUTLINE_SIGNATURE_CHARS)
                entries.append((depth, signature, start, end))
                body = definition.child_by_field_name("body")
                if definition.type == "class_definition" and body is not None:
                    visit(body, depth + 1)
            elif child.type in _CONTAINERS:
                visit(child, depth)

    visit(tree.root_node, 0)
    return entries


__all__ = ["PYTHON_SUFFIXES", "RepoTools"]
