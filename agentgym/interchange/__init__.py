"""Converters between agentgym and the field's interchange formats and protocols.

Each module is one standard, imported only when used (each needs its own extra):
:mod:`~agentgym.interchange.mcp_server` serves an env as an MCP server.
"""
