"""Converters between agentgym and the field's interchange formats.

Each format has a module of its own here (:mod:`agentgym.interchange.atif`: trajectories
as ATIF documents, and back); the modules do not import each other, and each imports its
format's optional package only when it is used.
"""
