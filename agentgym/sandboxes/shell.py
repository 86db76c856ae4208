"""The session-shell protocol both sandbox backends speak, without any I/O.

A backend runs ``bash --noprofile --norc`` with a writable stdin and a readable stdout
(stderr merged into it), however it reaches them: the local backend through the pipes of
its launcher process, the docker backend through a socket attached by the engine. This
module builds what the backend writes and parses what it reads; the backend moves the bytes
and stops processes, each its own way.

1. **Start.** Write :func:`start_script` and read up to its reply: the shell then has the
   functions and traps of :data:`PRELUDE`, its stderr on its stdout, a copy of its stdout on
   file descriptor 19, and the working directory.
2. **Commands.** Write :func:`command_script` (after :func:`refusal` said the command can
   be sent) and feed what is read to a :class:`SentinelReader`: it moves the output into a
   :class:`~agentgym.core.sandbox.BoundedOutput` and returns the :class:`Reply` (exit
   status, ``$PWD``) once the script's sentinel has arrived.
3. **Timeouts.** Send the shell SIGURG, then kill the command's processes (in this order:
   the trap must be pending when the foreground process dies), read on up to the reply,
   then write :func:`settle_script` and read its reply. A shell that sends no reply after
   that ignores SIGURG or was replaced by the command (``exec``): end it.

Properties the scripts give:

* A command runs as ``{ eval $'...'\\n} </dev/null >&19 2>&1 19>&-``: stdin is /dev/null
  (a command never reads the protocol), stdout and stderr are fresh copies of fd 19, and
  fd 19 itself is closed inside. Bash restores its own descriptors after the group, so
  ``exec >/dev/null`` or ``exec >&-`` lasts one command, and no command can redirect or
  silence the sentinel that follows it.
* The sentinel, printed by ``__ag_done STATUS NONCE`` to fd 19, is
  ``\\x1eAGENTGYM NONCE STATUS PWD\\0``. Each script has a fresh nonce, so a reply that
  comes late (a cancelled command's) or that a command printed itself is never taken for
  another script's.
* On SIGURG, ``__ag_abort`` abandons the rest of the command: with ``extdebug``, a DEBUG
  trap returning non-zero skips each next command, and ``break`` leaves loops, until
  ``__ag_done`` reports back (``sleep 100; rm -rf x`` never reaches ``rm`` once the sleep
  is killed). SIGURG is ignored by default, so a command that resets the trap cannot make
  the signal kill the shell. A signal that lands just after the reply would skip the next
  command instead: the settle script, written after every abort, disarms it.
* Each command script starts with an empty line, which resets bash 5.2's parser after a
  syntax error inside ``eval`` (it could otherwise not read the next ``{``).
* A command with a NUL byte cannot be sent (bash would cut it there): :func:`refusal`
  gives the result that says so.
* A supervisor that restarts the shell when it ends (the local backend's launcher) reports
  it with :func:`ended_report`, under a nonce of its own: the reader returns that as a
  reply with ``ended`` set.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import NamedTuple

from agentgym.core.sandbox import BoundedOutput, ExecResult

#: What every sentinel starts with (the nonce, status and ``$PWD`` follow, then a NUL).
SENTINEL = b"\x1eAGENTGYM "
#: The file descriptor sentinels are written to; commands run with it closed.
SENTINEL_FD = 19
#: Bytes a sentinel may span: a prefix followed by no NUL within this is plain output.
MAX_SENTINEL = 64 * 1024

#: Exit status of a command that cannot be sent (as bash reports a usage error).
REFUSED_EXIT_CODE = 2

# __ag_abort and __ag_done: see the module docstring. __ag_done's reset lets the reply and
# every later command run again; it takes its status as an argument, since the reset would
# change $?.
PRELUDE = r"""
__ag_abort() {
  __ag_aborting=1
  set -T
  shopt -s extdebug
  trap '[[ $BASH_COMMAND == __ag_done* || ${FUNCNAME[0]} == __ag_done ]] ||
    ! break 1000 2>/dev/null' DEBUG
}
trap __ag_abort URG
__ag_done() {
  local status=$1
  if [[ $__ag_aborting ]]; then
    trap - DEBUG; set +T; shopt -u extdebug; __ag_aborting=
  fi
  printf '\036AGENTGYM %s %d %s\0' "$2" "$status" "$PWD" >&19
}
"""


class Script(NamedTuple):
    """Bytes to write to the shell, and the nonce its reply will carry."""

    data: bytes
    nonce: str


@dataclass(frozen=True)
class Reply:
    """What a sentinel reported.

    Attributes:
        code: the script's exit status (the shell's own, when ``ended``).
        pwd: the shell's working directory after the script ("" when ``ended``).
        ended: the shell itself ended, as its supervisor reported (:func:`ended_report`).
    """

    code: int
    pwd: str = ""
    ended: bool = False


def quote(text: str) -> bytes:
    """``text`` as one bash word in ANSI-C quotes (``$'...'``) that bash reads back byte
    for byte, whatever it holds but NUL (every byte outside printable ASCII is escaped)."""
    data = text.encode("utf-8", errors="surrogateescape")
    return b"$'" + _UNUSUAL.sub(_escape, data) + b"'"


# Bytes outside printable ASCII, the backslash and the quote (a regex: fast on long text).
_UNUSUAL = re.compile(rb"[^\x20-\x26\x28-\x5b\x5d-\x7e]")


def _escape(match: re.Match[bytes]) -> bytes:
    return b"\\%03o" % match[0][0]


def new_nonce() -> str:
    return secrets.token_hex(8)


def _done(status: str, nonce: str) -> bytes:
    return f"__ag_done {status} {nonce}\n".encode()


def start_script(cwd: str, fallback: str = "/", extra: str = "") -> Script:
    """Set up a fresh shell in ``cwd`` (``fallback`` if that is gone, then ``/``).

    ``extra`` is more bash (functions of the backend's own) defined after the prelude. The
    reply's ``code`` is the shell's pid, as the shell sees it, and ``pwd`` where it is.
    """
    nonce = new_nonce()
    data = (f"exec 2>&1 {SENTINEL_FD}>&1; ".encode()
            + b"cd -- " + quote(cwd) + b" 2>/dev/null || cd -- " + quote(fallback)
            + b" 2>/dev/null || cd /\n" + PRELUDE.encode() + extra.encode()
            + _done("$$", nonce))
    return Script(data, nonce)


def refusal(command: str) -> ExecResult | None:
    """The result for a command that cannot be sent to a shell, or None if it can."""
    if "\0" in command:
        return ExecResult(REFUSED_EXIT_CODE, "bash: the command contains a NUL byte, which a"
                                             " shell cannot receive: remove it.")
    return None


def command_script(command: str) -> Script:
    """Run an agent's ``command`` with ``eval`` in the shell itself (so ``cd`` and
    ``export`` persist), then report. :func:`refusal` must have accepted it."""
    if "\0" in command:
        raise ValueError("a command with a NUL byte cannot be sent: check refusal() first")
    nonce = new_nonce()
    data = (b"\n{ eval " + quote(command)
            + f"\n}} </dev/null >&{SENTINEL_FD} 2>&1 {SENTINEL_FD}>&-; ".encode()
            + _done("$?", nonce))
    return Script(data, nonce)


def control_script(line: str) -> Script:
    """Run ``line``, trusted bash of the backend's own (a prelude function), then report."""
    nonce = new_nonce()
    return Script(line.encode() + b"\n" + _done("$?", nonce), nonce)


def settle_script() -> Script:
    """Disarm an abort whose SIGURG reached the shell after its command had reported, so
    that it cannot skip the next command. Write it after every abort; its reply is 0."""
    nonce = new_nonce()
    return Script(_done("0", nonce), nonce)


def ended_report(nonce: str, status: str = '"$code"') -> str:
    """A POSIX ``sh`` line for a supervisor to print, once the shell it runs has ended with
    exit status ``status`` (a shell expression), to the stream the shell wrote to."""
    return f"printf '\\036AGENTGYM %s %d\\0' {nonce} {status}"


def timeout_note(timeout: float) -> str:
    return f"[timed out after {timeout:g} s: the command was killed]"


def overflow_note(hard_cap: int) -> str:
    return f"[the output passed {hard_cap} bytes: the command was stopped]"


def with_notes(text: str, notes: list[str]) -> str:
    """``text`` followed by ``notes``, each on a line of its own."""
    if not notes:
        return text
    return text + ("" if not text or text.endswith("\n") else "\n") + "\n".join(notes)


class SentinelReader:
    """Splits what a shell prints into output and replies.

    Feed it every byte read from the shell. Output goes to the given
    :class:`~agentgym.core.sandbox.BoundedOutput` (or is dropped, given None) as soon as it
    cannot be the start of a sentinel; the few bytes that could be wait for the next read,
    so a sentinel split across reads is found. Bytes after a reply stay buffered for the
    next call (``feed(b"", ...)`` looks at them).

    Args:
        ended_nonce: the nonce under which a supervisor reports that the shell ended
            (:func:`ended_report`), if one does.
    """

    def __init__(self, ended_nonce: str | None = None):
        self._buffer = bytearray()
        self._ended = ended_nonce

    def feed(self, data: bytes, out: BoundedOutput | None, nonce: str) -> Reply | None:
        """Take ``data``; return the reply to the script with ``nonce`` (or the shell's end)
        once it is complete, else None. Replies to other scripts are dropped."""
        buffer = self._buffer
        if data:
            if not buffer and SENTINEL[0] not in data:  # the common case: plain output
                if out is not None:
                    out.add(data)
                return None
            buffer += data
        while buffer:
            start = buffer.find(SENTINEL)
            if start < 0:
                self._emit(self._safe_end(), out)
                return None
            end = buffer.find(b"\0", start + len(SENTINEL))
            if end < 0:
                if len(buffer) - start > MAX_SENTINEL:  # not a sentinel after all
                    self._emit(start + 1, out)
                    continue
                self._emit(start, out)
                return None
            reply = self._parse(bytes(buffer[start + len(SENTINEL):end]), nonce)
            if reply is False:  # malformed: it was output
                self._emit(start + 1, out)
                continue
            self._emit(start, out)
            del buffer[:end + 1 - start]
            if reply is not None:
                return reply
        return None

    def drain(self, out: BoundedOutput | None) -> None:
        """Move every byte held back to ``out`` (the stream has ended)."""
        self._emit(len(self._buffer), out)

    def _parse(self, body: bytes, nonce: str) -> Reply | bool | None:
        """The reply in a sentinel's ``body``; None for another script's; False if the
        body is not a sentinel's."""
        if SENTINEL in body:  # a printed prefix, then the real sentinel
            return False
        fields = body.split(b" ", 2)
        try:
            code = int(fields[1])
            sender = fields[0].decode("ascii")
        except (IndexError, ValueError, UnicodeDecodeError):
            return False
        if self._ended is not None and sender == self._ended and len(fields) == 2:
            return Reply(code, ended=True)
        if sender != nonce or len(fields) != 3:
            return None
        return Reply(code, fields[2].decode("utf-8", errors="surrogateescape"))

    def _safe_end(self) -> int:
        """How many leading bytes of the buffer cannot begin a sentinel."""
        buffer, size = self._buffer, len(self._buffer)
        start = buffer.rfind(SENTINEL[:1], max(0, size - len(SENTINEL) + 1))
        if start >= 0 and SENTINEL.startswith(buffer[start:]):
            return start
        return size

    def _emit(self, count: int, out: BoundedOutput | None) -> None:
        if count <= 0:
            return
        if out is not None:
            out.add(bytes(self._buffer[:count]))
        del self._buffer[:count]


__all__ = [
    "MAX_SENTINEL", "PRELUDE", "REFUSED_EXIT_CODE", "SENTINEL", "SENTINEL_FD", "Reply", "Script",
    "SentinelReader", "command_script", "control_script", "ended_report", "new_nonce",
    "overflow_note", "quote", "refusal", "settle_script", "start_script", "timeout_note",
    "with_notes",
]
