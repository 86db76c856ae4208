"""The ``terminal`` tool: an interactive terminal (a pty) in the sandbox, as a person has one.

``terminal`` types text into a bash shell that runs on a pseudo-terminal and answers with
what the terminal printed since. Unlike ``bash`` (:mod:`agentgym.toolkits.bash`), whose
commands read nothing and end before it answers, the terminal is a real tty: interactive
programs work (``python3``, ``sqlite3``, ``less``, ``git`` with its pager), keys such as
Ctrl-C (interrupt) and Ctrl-D (end of input) reach them, and a command may go on running
after the call returns. The shell keeps its working directory, variables and background
jobs across calls: it is one session for the whole episode.

How it works inside the sandbox (any backend: it needs only bash, coreutils and
util-linux's ``script``, which every Debian-based image has): ``script`` holds the pty and
runs ``bash -i`` on it; its input is a FIFO kept open by a holder process, and everything
the pty prints is appended to a log file. Each call, one sandbox ``exec``, writes the keys
into the FIFO and polls the log until one of

* **done**: the shell printed its next prompt (its ``PROMPT_COMMAND`` records the exit
  status), so the command finished;
* **waiting**: the foreground program sleeps reading its input and has printed nothing
  for ``idle_s``: a REPL at its prompt, a pager, ``cat`` waiting for a line. Its
  ``/proc/PID/wchan`` says it sleeps in a tty read, or in a poll or select after output
  that ends without a newline (a prompt). A poll after a complete line may be a wait on a
  socket instead, so it counts only after ten times ``idle_s``;
* **running**: the time given ran out with the command still going; it keeps running
  (press C-c to stop it, or call again with no input to wait for more).

The answer is the new output with terminal control sequences removed (colours, cursor
moves, bracketed-paste marks; ``\\r`` overwrites applied), cut in the middle past
``max_output_chars``, and a footer saying which of the three it was. The session starts
at the first call; if the shell ends (``exit``), the next call starts a new one and says so.
The session's files live in ``/tmp/.agentgym-terminal`` of the sandbox.
"""

from __future__ import annotations

import base64
import re
import shlex

from agentgym.core.errors import InvalidArgumentError
from agentgym.core.sandbox import Sandbox
from agentgym.core.tools import ToolError, Toolset, tool
from agentgym.toolkits.text import cut_middle
from agentgym.toolkits.workspace import Workspace

#: Where the session keeps its FIFO, log and bookkeeping inside the sandbox.
STATE_DIR = "/tmp/.agentgym-terminal"

#: Named keys the ``key`` argument accepts, and the bytes they send.
KEYS = {
    "C-c": "\x03", "C-d": "\x04", "C-z": "\x1a", "C-\\": "\x1c", "C-l": "\x0c",
    "C-u": "\x15", "C-a": "\x01", "C-e": "\x05", "C-r": "\x12", "Enter": "\r",
    "Tab": "\t", "Escape": "\x1b", "Backspace": "\x7f", "Up": "\x1b[A", "Down": "\x1b[B",
    "Right": "\x1b[C", "Left": "\x1b[D", "PageUp": "\x1b[5~", "PageDown": "\x1b[6~",
    "Home": "\x1b[H", "End": "\x1b[F", "Space": " ", "q": "q",
}

# Starts the session: `env --default-signal` undoes the SIGINT/SIGQUIT ignoring that a
# background job of a non-interactive shell inherits (Ctrl-C would not interrupt otherwise).
# The prompt hook appends "$?" per prompt: a new line means the last command finished.
_START = r"""
d={dir}
cd {workdir} 2>/dev/null
mkdir -p "$d" && rm -f "$d/in" && mkfifo "$d/in" && : > "$d/out" && : > "$d/prompts"
rm -f "$d/pid"
(setsid sleep infinity > "$d/in" 2>/dev/null &)
inner="stty cols {cols} rows {rows} 2>/dev/null; echo \$\$ > $d/pid; export TERM=xterm"
inner="$inner PS1='\w\\$ ' PROMPT_COMMAND='echo \$? >> $d/prompts'"
inner="$inner; exec bash --noprofile --norc -i"
(setsid env --default-signal script -qfec "$inner" "$d/out" < "$d/in" > /dev/null 2>&1 &)
for _ in $(seq 500); do [ -s "$d/prompts" ] && break; sleep 0.01; done
"""

# One call: send the keys, then poll (see the module docstring). The first line printed is
# "STATUS EXIT FOREGROUND", then the new output.
_CALL = r"""
d={dir}; keys={keys}; limit={timeout_us}; idle={idle_us}; started=0
alive() {{ [ -s "$d/pid" ] && kill -0 "$(cat "$d/pid")" 2>/dev/null; }}
if ! alive; then
  command -v script >/dev/null || {{ echo "noscript 0 0 -"; exit 0; }}
  [ -e "$d/pid" ] && started=restarted || started=started
  {start}
fi
pid=$(cat "$d/pid" 2>/dev/null)
size0=$(stat -c %s "$d/out"); n0=$(wc -l < "$d/prompts")
[ -n "$keys" ] && printf %s "$keys" | base64 -d > "$d/in"
t0=${{EPOCHREALTIME/./}}; last=$size0; quiet=$t0; status=running; polls=0
while :; do
  now=${{EPOCHREALTIME/./}}
  if [ "$(wc -l < "$d/prompts")" -gt "$n0" ]; then status=done; break; fi
  alive || {{ status=ended; break; }}
  size=$(stat -c %s "$d/out")
  if [ "$size" != "$last" ]; then last=$size; quiet=$now; fi
  if [ $((now - quiet)) -ge "$idle" ]; then
    fg=$(cut -d' ' -f8 2>/dev/null < /proc/$pid/stat)
    # A prompt ends without a newline; a program polling a socket usually printed one.
    [ "$(tail -c 1 "$d/out" | tr '\n' N)" = N ] && patience=$((idle * 10)) || patience=$idle
    case "$(cat 2>/dev/null /proc/$fg/wchan)" in
      *tty*|*wait_woken*) status=waiting; break ;;
      *poll*|*select*|*pipe_read*)
        [ $((now - quiet)) -ge "$patience" ] && {{ status=waiting; break; }} ;;
      0|'') [ $((now - quiet)) -ge $((patience * 4)) ] && {{ status=waiting; break; }} ;;
    esac
  fi
  [ $((now - t0)) -ge "$limit" ] && break
  # Quick answers stay quick; a long command is polled less often (each poll forks).
  polls=$((polls + 1))
  if [ $polls -lt 50 ]; then sleep 0.02; elif [ $polls -lt 100 ]; then sleep 0.05
  else sleep 0.2; fi
done
# The prompt hook runs before `script` has copied the command's output from the tty into
# the log (it lags under load): wait, a while at most, for the next prompt to land there.
if [ $status = done ]; then
  for _ in $(seq 150); do
    case "$(tail -c 2 "$d/out")" in '$ '|'# ') break ;; esac; sleep 0.02
  done
fi
fg=$(cut -d' ' -f8 2>/dev/null < /proc/$pid/stat)
echo "$status $started $(tail -n 1 "$d/prompts") $(cat 2>/dev/null /proc/$fg/comm || echo -)"
tail -c +$((size0 + 1)) "$d/out"
"""

_CONTROL = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC (window titles)
                      r"|\x1b\[[0-?]*[ -/]*[@-~]"  # CSI (colours, cursor, modes)
                      r"|\x1b[@-Z\\-_]|\x1b.?")  # two-byte escapes
_LONG_OUTPUT_HINT = ("redirect long output to a file and read parts of it (cmd > /tmp/out.txt"
                     " 2>&1; sed -n 1,80p /tmp/out.txt), or filter it with grep, head or tail")


def screen_text(raw: str) -> str:
    """Terminal output as plain text: escape sequences removed, ``\\r\\n`` as ``\\n``, a
    line's text after a bare ``\\r`` overwriting its start, backspaces applied."""
    text = _CONTROL.sub("", raw).replace("\r\n", "\n")
    lines = []
    for line in text.split("\n"):
        if "\r" in line:
            overwritten = ""
            for part in line.split("\r"):
                overwritten = part + overwritten[len(part):]
            line = overwritten
        shown: list[str] = []
        for char in line:
            if char == "\b":
                if shown:
                    shown.pop()
            elif (char == "\t" or char >= " ") and char != "\x7f":
                shown.append(char)
        lines.append("".join(shown))
    return "\n".join(lines)


class TerminalTools(Toolset):
    """The ``terminal`` tool over one sandbox (see the module docstring).

    Args:
        sandbox: the sandbox; the shell starts in its workspace (``sandbox.workdir``).
        command_timeout_s: the most one call waits for output (the default of its
            ``timeout`` argument and its cap); None for the sandbox's default
            (``sandbox.limits.timeout_s``). Always within the turn's time budget.
        max_output_chars: characters of one answer before it is cut in the middle.
        idle_s: seconds without output after which a program reading its input counts as
            waiting for the agent.
        cols, rows: the terminal's size.
    """

    def __init__(self, sandbox: Sandbox, *, command_timeout_s: float | None = None,
                 max_output_chars: int = 12_000, idle_s: float = 0.5, cols: int = 160,
                 rows: int = 40):
        if not idle_s > 0:
            raise InvalidArgumentError(f"idle_s must be > 0 seconds, got {idle_s!r}")
        if cols < 20 or rows < 5:
            raise InvalidArgumentError(
                f"the terminal must be at least 20x5, got cols={cols!r}"
                f" rows={rows!r}")
        self.workspace = Workspace(sandbox, command_timeout_s=command_timeout_s,
                                   max_output_chars=max_output_chars)
        self.idle_s, self.cols, self.rows = idle_s, cols, rows

    def start_script(self) -> str:
        """The shell snippet that starts a session (also run by the first call)."""
        return _START.format(dir=STATE_DIR, cols=self.cols, rows=self.rows,
                             workdir=shlex.quote(self.workspace.sandbox.workdir))

    @tool
    async def terminal(self, input: str = "", key: str = "",
                       timeout: float | None = None) -> str:
        """Type into an interactive terminal (bash on a tty) and read what it prints.

        The session persists across calls: the working directory, variables, background
        jobs and running programs stay. Interactive programs work (python3, sqlite3, less,
        git's pager): type their input the same way, and press q, C-c or C-d to leave
        them. The call returns when the command finishes, when the program in the
        foreground waits for input, or after `timeout` seconds with the command still
        running (call again with no input to wait for more, or press C-c to stop it).

        Args:
            input: Text to type, followed by Enter, e.g. "ls -la" or "print(2 + 2)" in a
                Python prompt. With `key`, Enter is not pressed after it.
            key: A key to press after the input: "C-c" (interrupt), "C-d" (end of input),
                "C-z", "Enter", "Tab", "Escape", "Up", "Down", "Left", "Right",
                "Backspace", "PageUp", "PageDown", "Space" or "q".
            timeout: Seconds to wait at most for the command to finish (default and cap:
                the env's command time limit).
        """
        if key and key not in KEYS:
            raise ToolError(f"unknown key {key!r}; use one of {', '.join(KEYS)} (or type"
                            " text with input)")
        if "\0" in input:
            raise ToolError("input contains a NUL byte, which a terminal cannot type")
        limit = self.workspace.timeout()
        if timeout is not None:
            if not timeout > 0:
                raise ToolError(f"timeout must be > 0 seconds, got {timeout!r}")
            limit = min(limit, float(timeout))
        keys = input + (KEYS[key] if key else ("\r" if input else ""))
        script = _CALL.format(
            dir=STATE_DIR, keys=shlex.quote(base64.b64encode(keys.encode()).decode()),
            timeout_us=int(limit * 1e6), idle_us=int(self.idle_s * 1e6),
            start=self.start_script())
        # The poll stops at `limit`; the exec's own limit only guards against a stuck one.
        result = await self.workspace.sandbox.exec(script, timeout=limit + 30)
        head, _, raw = result.output.partition("\n")
        fields = head.split()
        if result.timed_out or len(fields) < 3:
            raise ToolError(f"the terminal did not answer ({result.output[-300:]!r});"
                            " use the bash tool, or call terminal again")
        status, started = fields[0], fields[1]
        if status == "noscript":
            raise ToolError("this sandbox has no `script` program (util-linux), which the"
                            " terminal runs on; use the bash tool, or add util-linux (Debian:"
                            " bsdutils) to the image")
        exit_code = fields[2] if len(fields) > 3 else ""
        program = fields[-1]
        text = cut_middle(screen_text(raw).rstrip("\n"), self.workspace.max_output_chars,
                          _LONG_OUTPUT_HINT)
        notes = []
        if started == "restarted":
            notes.append("[the shell had ended; a new terminal session started]")
        notes.append({
            "done": f"[command finished, exit code {exit_code}]",
            "waiting": f"[{program} is waiting for input]",
            "running": (f"[{program} is still running after {limit:g} s: press C-c to stop"
                        " it, or call terminal with no input to wait for more]"),
            "ended": "[the shell exited; the next call starts a new terminal session]",
        }.get(status, f"[{status}]"))
        return "\n".join(part for part in (text, *notes) if part)
