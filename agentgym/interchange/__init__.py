"""Converters between agentgym and the field's interchange formats: tasks written as Harbor
task folders (:mod:`agentgym.interchange.harbor`), and the formats other modules here
add. Each module stands alone: it builds on :mod:`agentgym.core` and imports no sibling.
"""
