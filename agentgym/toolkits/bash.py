"""The ``bash`` tool: commands in the sandbox's persistent shell.

``bash`` runs the agent's command in the sandbox's session shell, so ``cd`` and
``export`` persist between calls, and answers with its output and exit code. Each command
has a time limit (``command_timeout_s``, within the turn's budget: see
:meth:`~agentgym.toolkits.workspace.Workspace.timeout`); a command stopped by it is
reported as such. Output longer than ``max_output_chars`` keeps its head and tail, with a
marker between them saying how to read all of it.
"""

from __future__ import annotations

from agentgym.core.sandbox import Sandbox
from agentgym.core.tools import ToolError, Toolset, tool
from agentgym.toolkits.text import cut_middle
from agentgym.toolkits.workspace import Workspace

_LONG_OUTPUT_HINT = ("redirect the output to a file and read parts of it (cmd > /tmp/out.txt"
                     " 2>&1; sed -n 1,80p /tmp/out.txt), or filter it with grep, head or tail")


class BashTools(Toolset):
    """The ``bash`` tool over one sandbox (see the module docstring).

    Args:
        sandbox: the sandbox; its shell starts in the workspace (``sandbox.workdir``).
        command_timeout_s: time limit of one command; None for the sandbox's default
            (``sandbox.limits.timeout_s``).
        max_output_chars: characters of one command's output before it is cut with a marker.
    """

    def __init__(self, sandbox: Sandbox, *, command_timeout_s: float | None = None,
                 max_output_chars: int = 12_000):
        self.workspace = Workspace(sandbox, command_timeout_s=command_timeout_s,
                                   max_output_chars=max_output_chars)

    @tool
    async def bash(self, command: str) -> str:
        """Run a bash command in the repository's shell; returns its output and exit code.

        The shell persists between calls (cd and exported variables stick) and starts at
        the repository root. There is no terminal and no stdin: use non-interactive forms
        (git --no-pager, pytest -q). Each command has a time limit, and long output is cut
        in the middle.

        Args:
            command: The command to run, e.g. "python -m pytest -x -q tests/test_core.py".
        """
        if not command.strip():
            raise ToolError("command is empty; give a shell command such as 'ls' or 'git status'")
        timeout = self.workspace.timeout()
        result = await self.workspace.sandbox.exec(command, timeout=timeout)
        output = result.output.rstrip("\n")
        output = cut_middle(output, self.workspace.max_output_chars, _LONG_OUTPUT_HINT)
        if result.timed_out:
            footer = (f"[exit code {result.exit_code}: timed out after {timeout:g} s, the"
                      " command was stopped; run a narrower command (one test file, fewer"
                      " inputs)]")
        else:
            footer = f"[exit code {result.exit_code}]"
        return f"{output}\n{footer}" if output else f"(no output)\n{footer}"
