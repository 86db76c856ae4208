"""The ``mcp`` plugin: envs whose tools are real MCP servers from PyPI (``mcp-server-git``,
``mcp-server-time``), each started in the episode's sandbox. See
:mod:`agentgym.plugins.mcp.env`; the MCP toolset itself is :mod:`agentgym.toolkits.mcp`.
Needs the ``mcp`` extra (``pip install -e '.[mcp]'``); the servers are installed on first
use into read-only environments mounted into the sandboxes.
"""

from __future__ import annotations

from agentgym.core.hookspecs import hookimpl
from agentgym.core.registry import EnvRegistration


@hookimpl
def agentgym_envs() -> list[EnvRegistration]:
    return [
        EnvRegistration(
            "mcp-git", "agentgym.plugins.mcp.env:GitEnv",
            "Put a git repository in the asked state with mcp-server-git's tools (run in"
            " the episode's sandbox); graded by the repository."),
        EnvRegistration(
            "mcp-time", "agentgym.plugins.mcp.env:TimeEnv",
            "Convert clock times between cities with mcp-server-time's tools (run in the"
            " episode's sandbox); graded by the submitted HH:MM."),
    ]
