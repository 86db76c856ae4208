"""Converters between agentgym and the field's interchange formats and protocols (one module
each, importing its format's package lazily): :mod:`agentgym.interchange.openenv` serves any
env as an OpenEnv environment server and plays such a server as an env."""
