"""The workspace model that file tools share: an agent's paths, files and commands inside
one sandbox's workspace.

A :class:`Workspace` wraps a :class:`~agentgym.core.sandbox.Sandbox`; its root is the
sandbox's ``workdir``. Every toolset that touches files builds one and goes through it, so
that they all answer the agent alike:

* **Paths** (:meth:`Workspace.target`) are relative to the root, or absolute inside it.
  A path that leaves the workspace (``..``, an absolute path elsewhere, a symbolic link
  leading out) is refused with a :class:`~agentgym.core.tools.ToolError`. Results name
  files relative to the root (:attr:`Target.rel`).
* **A missing path** (:meth:`Workspace.missing`) is an error that suggests the closest
  names in its folder ("does not exist. Did you mean ...?").
* **Text** is read and written as UTF-8 through the sandbox
  (:meth:`~Workspace.read_text`, :meth:`~Workspace.write_text`); a binary or non-UTF-8
  file is an error that says how to inspect it instead.
* **Commands** the tools run get :meth:`Workspace.timeout`: ``command_timeout_s`` (or the
  sandbox's default), shortened to what is left of the turn's time budget
  (:func:`~agentgym.core.episode.within_turn`).
* **Long results** are cut to ``max_output_chars`` at a line end, with a marker that says
  how to narrow them (:meth:`Workspace.cut`).

The agent-facing messages speak of "the repository": the tools were written for
repository repair, and their descriptions (which models have seen) say so.
"""

from __future__ import annotations

import difflib
import posixpath
import shlex
from dataclasses import dataclass
from typing import Literal

from agentgym.core.episode import within_turn
from agentgym.core.errors import InvalidArgumentError
from agentgym.core.sandbox import Sandbox
from agentgym.core.tools import ToolError
from agentgym.toolkits.text import MAX_LINE_CHARS, cut_lines

#: What a path is: a regular file, a directory, something else (a device, a socket, a
#: dangling link), or nothing.
PathKind = Literal["file", "dir", "other", "missing"]
_KIND_NAMES = {"dir": "directory", "other": "special file", "file": "file"}


@dataclass
class Target:
    """A path the agent named, resolved in the sandbox."""

    full: str  #: absolute path inside the sandbox
    rel: str  #: relative to the workspace ("." for the workspace itself), shown to the agent
    kind: PathKind

    @property
    def kind_name(self) -> str:
        """The kind in words, for messages: ``directory``, ``special file``, ``file``."""
        return _KIND_NAMES.get(self.kind, self.kind)


class Workspace:
    """Paths, text files and command limits in one sandbox's workspace (see the module
    docstring).

    Args:
        sandbox: the sandbox; its ``workdir`` is the workspace.
        command_timeout_s: time limit of one command a tool runs; None for the sandbox's
            default (``sandbox.limits.timeout_s``).
        max_output_chars: characters of one tool result before it is cut with a marker.
    """

    def __init__(self, sandbox: Sandbox, *, command_timeout_s: float | None = None,
                 max_output_chars: int = 12_000):
        if command_timeout_s is not None and not command_timeout_s > 0:
            raise InvalidArgumentError(
                f"command_timeout_s must be > 0 or None, got {command_timeout_s!r}")
        if max_output_chars < 2 * MAX_LINE_CHARS:
            raise InvalidArgumentError(
                f"max_output_chars must be >= {2 * MAX_LINE_CHARS} (two long"
                f" lines), got {max_output_chars!r}")
        self.sandbox = sandbox
        #: The workspace directory inside the sandbox, normalized.
        self.root = posixpath.normpath(sandbox.workdir)
        self.command_timeout_s = command_timeout_s
        self.max_output_chars = max_output_chars

    def timeout(self) -> float:
        """A command's time limit: ``command_timeout_s``, within what is left of the turn."""
        return within_turn(self.command_timeout_s or self.sandbox.limits.timeout_s)

    def cut(self, text: str, hint: str) -> str:
        """``text`` cut at a line end to ``max_output_chars``, with a marker ending in
        ``hint`` (how to narrow the result)."""
        return cut_lines(text, self.max_output_chars, hint)

    def absolute(self, path: str) -> str:
        """The absolute path for ``path``, refused when it leaves the workspace."""
        cleaned = path.strip()
        if not cleaned:
            raise ToolError(f"path is empty: give a path relative to the repository root"
                            f" (e.g. 'src/module.py'), or absolute under {self.root}")
        full = posixpath.normpath(posixpath.join(self.root, cleaned))
        if not inside(full, self.root):
            raise ToolError(f"path {path!r} is outside the repository ({self.root}): give"
                            " a path relative to the repository root, or absolute inside it")
        return full

    async def target(self, path: str) -> Target:
        """What ``path`` is, resolved in the sandbox; refused when it leaves the workspace,
        through ``..`` or through a symbolic link."""
        full = self.absolute(path)
        q = shlex.quote(full)
        # One round trip: what the path is, and where it really leads (symbolic links).
        script = (f"( if [ -d {q} ]; then echo dir; elif [ -f {q} ]; then echo file;"
                  f" elif [ -e {q} ] || [ -L {q} ]; then echo other; else echo missing; fi;"
                  f" realpath -m -- {q} {shlex.quote(self.root)} 2>/dev/null )")
        result = await self.sandbox.exec(script, timeout=self.timeout())
        lines = result.output.splitlines()
        kind = lines[0].strip() if lines else ""
        if kind not in ("file", "dir", "other", "missing"):
            raise ToolError(f"could not inspect {path!r}: {result.output.strip()[-500:]}")
        rel = posixpath.relpath(full, self.root)
        if len(lines) >= 3 and not inside(lines[1], lines[2]):
            raise ToolError(f"{rel} leads outside the repository (to {lines[1]}) through a"
                            " symbolic link; this tool only reads and edits files inside it")
        return Target(full, rel, kind)  # type: ignore[arg-type]

    async def missing(self, target: Target) -> ToolError:
        """The error for a path that does not exist, suggesting close names (raise it)."""
        parent = posixpath.dirname(target.full)
        hint = ""
        try:
            names = await self.sandbox.list_dir(parent)
        except OSError:
            names = []
        close = difflib.get_close_matches(posixpath.basename(target.full), names, n=3)
        if close:
            base = posixpath.relpath(parent, self.root)
            shown = [posixpath.normpath(posixpath.join(base, name)) for name in close]
            hint = f" Did you mean {', '.join(map(repr, shown))}?"
        return ToolError(f"{target.rel} does not exist.{hint} View a directory (e.g. path"
                         " '.') to see what is there")

    async def read_text(self, target: Target) -> str:
        """The file's text; an error for a missing, binary or non-UTF-8 file."""
        try:
            data = await self.sandbox.read_file(target.full)
        except FileNotFoundError:
            raise await self.missing(target) from None
        if b"\0" in data[:8192]:
            raise ToolError(f"{target.rel} looks binary (it contains NUL bytes): inspect it"
                            " with bash (file, xxd | head)")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ToolError(f"{target.rel} is not UTF-8 text ({e}); inspect or edit it with"
                            " bash") from None

    async def write_text(self, target: Target, text: str) -> None:
        """Write ``text`` (UTF-8) to the file, creating its folders."""
        try:
            await self.sandbox.write_file(target.full, text.encode("utf-8"))
        except OSError as e:
            raise ToolError(f"could not write {target.rel}: {e}") from None


def inside(path: str, root: str) -> bool:
    """Whether absolute ``path`` is ``root`` or under it."""
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root.rstrip("/") + "/")


def find_operand(rel: str) -> str:
    """``rel`` as a ``find`` operand: never read as an option, even when it starts with
    "-"."""
    return rel if rel == "." else f"./{rel}"


def strip_dot_slash(path: str) -> str:
    """``path`` without the leading ``./`` that ``find`` and ``grep`` print."""
    return path[2:] if path.startswith("./") else path
