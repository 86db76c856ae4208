"""Converters between agentgym and the field's interchange formats and protocols.

One standard a module; the modules do not import each other, and each imports its
standard's optional package (its extra) only when it is used:

* :mod:`~agentgym.interchange.atif`: trajectories as ATIF documents, and back;
* :mod:`~agentgym.interchange.harbor`: an env's tasks written as Harbor task folders;
* :mod:`~agentgym.interchange.mcp_server`: an env served as an MCP server;
* :mod:`~agentgym.interchange.openenv`: an env served as an OpenEnv environment server,
  and such a server played as an env.
"""
