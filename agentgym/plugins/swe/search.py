"""The ``search`` tool of the SWE env: Python definitions, references and outlines, and grep.

:class:`SearchTools` is a :class:`~agentgym.core.tools.Toolset` over the sandbox that
holds the repository, built on the shared workspace model
(:class:`~agentgym.toolkits.workspace.Workspace`: paths stay inside the workspace, missing
paths suggest close names, long results are cut with a marker that says how to narrow
them). Its modes:

* ``definition``, ``references`` and ``outline`` parse Python files on the host with
  tree-sitter (the ``swe`` extra). Files are listed and read through the sandbox, and
  parsed trees are cached by (path, content hash), so a repeated search fetches only the
  files that changed. In a git repository, files git ignores are skipped.
* ``grep`` runs inside the sandbox (``git grep`` in a git repository, so ignored files are
  skipped) and needs no tree-sitter; its output is bounded in lines and bytes before the
  sandbox would cut it.

Search leaves the shell's state alone (its commands run in subshells) and keeps its
scratch files under ``/tmp`` in the sandbox, never in the workspace, whose ``git diff`` is
the agent's answer.

:class:`RepoEditorTools` is the shared ``str_replace_editor`` whose cut view of a Python
file also points to the ``outline`` mode: the editor the SWE env offers beside search.
"""

from __future__ import annotations

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

from agentgym.core.sandbox import Sandbox
from agentgym.core.tools import ToolError, Toolset, tool
from agentgym.toolkits.editor import EditorTools
from agentgym.toolkits.text import (
    MAX_RESULT_LINE_CHARS,
    clip_line,
    counted,
    line_count,
    split_lines,
)
from agentgym.toolkits.workspace import Target, Workspace, find_operand, strip_dot_slash

if TYPE_CHECKING:
    from tree_sitter import Node, Parser, Tree

SearchMode = Literal["definition", "references", "outline", "grep"]

#: Files ``search`` parses as Python.
PYTHON_SUFFIXES = (".py", ".pyi")
MAX_OUTLINE_SIGNATURE_CHARS = 160
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


class SearchTools(Toolset):
    """The ``search`` tool over the sandbox holding the repository (see the module
    docstring).

    Args:
        sandbox: the sandbox; its ``workdir`` is the repository.
        command_timeout_s: time limit of search's commands (listing, reading, grep); None
            for the sandbox's default (``sandbox.limits.timeout_s``).
        max_output_chars: characters of one result before it is cut with a marker.
    """

    def __init__(self, sandbox: Sandbox, *, command_timeout_s: float | None = None,
                 max_output_chars: int = 12_000):
        self.workspace = Workspace(sandbox, command_timeout_s=command_timeout_s,
                                   max_output_chars=max_output_chars)
        # A scratch folder of our own in the sandbox's /tmp: never in the workspace.
        self._scratch = f"/tmp/.agentgym-search-{secrets.token_hex(4)}"
        self._sources: dict[str, tuple[str, bytes]] = {}  # rel -> (md5, content)
        self._trees: dict[str, tuple[str, Tree]] = {}  # rel -> (md5, parsed tree)
        self._parser: Parser | None = None

    @tool
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
        target = await self.workspace.target(path)
        if target.kind == "missing":
            raise await self.workspace.missing(target)
        if target.kind not in ("file", "dir"):
            raise ToolError(f"{target.rel} is a {target.kind_name}; search a file or"
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

    async def _definition(self, target: Target, query: str) -> str:
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
        return self.workspace.cut("\n".join(rows), "give a dotted name (Class.method) or a"
                                  " path to narrow the search")

    async def _references(self, target: Target, query: str) -> str:
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
        rows = [f"{lead}{counted(total, 'line')} {'references' if total == 1 else 'reference'}"
                f" {name!r}, in {counted(len(by_file), 'file')}:"]
        for rel, hits in by_file:
            rows.append(rel)
            for line, text, defines in hits:
                rows.append(f"{line:>6}: {text}" + ("    <- definition" if defines else ""))
        return self.workspace.cut("\n".join(rows), "pass path to search one directory or file")

    async def _outline(self, target: Target) -> str:
        sources = await self._python_sources(target)
        if not sources:
            raise ToolError(f"No Python files in {_scope_name(target)} (files git ignores"
                            " are skipped; name one to outline it): outline lists the classes"
                            " and functions of Python files")
        blocks = []
        for rel, data in sources:
            entries = _outline_of(data, self._tree(rel, data))
            lines = line_count(data.decode("utf-8", "replace"))
            rows = [f"{rel} ({counted(lines, 'line')})"]
            rows += [f"{'    ' * (depth + 1)}{header}  [lines {start}-{end}]"
                     for depth, header, start, end in entries]
            if not entries:
                rows.append("    (no classes or functions)")
            blocks.append("\n".join(rows))
        hint = ("view the rest of the file with str_replace_editor and view_range"
                if target.kind == "file" else "outline one file or a smaller directory")
        return self.workspace.cut("\n".join(blocks), hint)

    async def _grep(self, target: Target, pattern: str, context: int,
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
        box = self.workspace.sandbox
        result = await box.exec(self._grep_script(target, pattern, context, include, "-P"),
                                timeout=self.workspace.timeout())
        status, git, output = _grep_status(result.output)
        if status not in (0, 1, 141) and ("perl" in output.lower() or "-P" in output):
            result = await box.exec(
                self._grep_script(target, pattern, context, include, "-E"),
                timeout=self.workspace.timeout())
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
        rows = [f"{more}{counted(matches, 'matching line')} in {counted(len(files), 'file')}"
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
                    text = clip_line(hit.text.rstrip("\r"), MAX_RESULT_LINE_CHARS)
                    rows.append(f"{hit.line:>6}{':' if hit.is_match else '-'} {text}")
        return self.workspace.cut("\n".join(rows),
                                  "use a more specific pattern, a smaller path, or include")

    def _grep_script(self, target: Target, pattern: str, context: int,
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
        return (f"( cd {q(self.workspace.root)} && if {_IN_GIT_REPO}; then {git}; else {plain}; fi"
                f" 2>&1 | cut -c1-{MAX_RESULT_LINE_CHARS + 200} | head -n {MAX_GREP_LINES}"
                f" | head -c {self._grep_bytes()}; status=${{PIPESTATUS[0]}}; echo;"
                ' echo "@@status=$status" )')

    def _grep_bytes(self) -> int:
        return max(1024, min(self.workspace.sandbox.limits.output_bytes - 512, 100_000))

    # ---- Python sources and trees ---------------------------------------------------------

    async def _python_sources(self, target: Target) -> list[tuple[str, bytes]]:
        """(path, content) of the Python files at ``target`` (a file or a directory)."""
        if target.kind == "file":
            if not target.rel.endswith(PYTHON_SUFFIXES):
                raise ToolError(f"{target.rel} is not a Python file: this search mode parses"
                                " Python; use mode 'grep' for other files")
            data = await self.workspace.sandbox.read_file(target.full)
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
            f"( cd {q(self.workspace.root)} || exit 1; mkdir -p {scratch} && rm -f {scratch}/*;"
            f" if {_IN_GIT_REPO}; then {_GIT} ls-files -z -co --exclude-standard -- {specs};"
            f" else find {q(find_operand(scope))} -path '*/.*' -prune -o -name __pycache__ -prune"
            rf" -o -type f \( {names} \) -print0; fi"
            f" | xargs -0 -r md5sum -- > {scratch}/listing 2>/dev/null; echo listed )"
        )
        result = await self.workspace.sandbox.exec(script, timeout=self.workspace.timeout())
        if "listed" not in result.output:
            raise ToolError(f"could not list the Python files of {scope}:"
                            f" {result.output.strip()[-500:]}")
        raw = await self.workspace.sandbox.read_file(f"{self._scratch}/listing")
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
        await self.workspace.sandbox.write_file(f"{self._scratch}/wanted", "\0".join(paths))
        result = await self.workspace.sandbox.exec(
            f"( cd {q(self.workspace.root)} && tar -czf {scratch}/files.tgz --null"
            f" -T {scratch}/wanted 2>&1 )", timeout=self.workspace.timeout())
        if result.exit_code not in (0, 1):  # 1: a file changed while it was read
            raise ToolError(f"could not read the Python files: {result.output.strip()[-500:]}")
        data = await self.workspace.sandbox.read_file(f"{self._scratch}/files.tgz")
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


class RepoEditorTools(EditorTools):
    """The shared ``str_replace_editor`` (same schema, same commands) whose cut view of a
    Python file also suggests ``search``'s outline mode: the editor beside
    :class:`SearchTools`."""

    def view_cut_hint(self, target: Target) -> str:
        if target.rel.endswith(PYTHON_SUFFIXES):
            return ", or list its classes and functions with search mode 'outline'"
        return ""


def _scope_name(target: Target) -> str:
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
            name = strip_dot_slash(name)
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
    return clip_line(" ".join([*decorators, header]), limit)


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
            line = split_lines(data.decode("utf-8", "replace"))[start - 1]
            end = definition.end_point[0] + 1
            signature = clip_line(line.strip(), MAX_RESULT_LINE_CHARS)
        else:
            _, start, end = _span(definition)
            signature = _signature(definition, data)
        found.append(_Definition(rel, start, end, kind, qualname, signature))
    return found


def _references_in(data: bytes, tree: Tree, name: str) -> list[tuple[int, str, bool]]:
    """(line, its text, whether it defines the name) for each line using ``name``."""
    lines = split_lines(data.decode("utf-8", "replace"))
    by_line: dict[int, bool] = {}
    for node in _identifier_nodes(data, tree, name):
        owner = _definition_owner(node)
        defines = owner is not None
        row = node.start_point[0] + 1
        by_line[row] = by_line.get(row, False) or defines
    return [(row, clip_line(lines[row - 1].strip(), MAX_RESULT_LINE_CHARS), defines)
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


__all__ = ["PYTHON_SUFFIXES", "RepoEditorTools", "SearchTools"]
