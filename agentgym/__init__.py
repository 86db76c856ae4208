"""agentgym: a plugin-based gym for training LLM agents on multi-turn, tool-using tasks.

Importing the package loads every plugin found through the entry-point group
``agentgym`` and registers their environments with Gymnasium, so that after
``import agentgym`` both ``agentgym.make("calculator")`` and
``gymnasium.make("calculator")`` work (``gymnasium.make("agentgym:calculator")`` works
without the import).
"""

import warnings

from agentgym.core.errors import AgentGymError
from agentgym.core.hookspecs import hookimpl
from agentgym.core.plugins import register_plugin
from agentgym.core.registry import make, register_with_gymnasium

__version__ = "0.1.0"
__all__ = ["__version__", "hookimpl", "make", "register_plugin"]

try:
    register_with_gymnasium()
except AgentGymError as error:
    # A broken plugin set (two plugins, one id) must not make `import agentgym` fail:
    # `agentgym list plugins` is how users find out. make() raises the same error.
    warnings.warn(str(error), stacklevel=2)
