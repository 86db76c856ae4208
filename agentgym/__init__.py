"""agentgym: a plugin-based gym for training LLM agents on multi-turn, tool-using tasks.

Importing the package loads every plugin found through the entry-point group
``agentgym`` and registers their environments with Gymnasium, so that after
``import agentgym`` both ``agentgym.make("calculator")`` and
``gymnasium.make("calculator")`` work (``gymnasium.make("agentgym:calculator")`` works
without the import).
"""

from agentgym.core.hookspecs import hookimpl
from agentgym.core.registry import make, register_plugin, register_with_gymnasium

__version__ = "0.1.0"
__all__ = ["__version__", "hookimpl", "make", "register_plugin"]

# A plugin that fails to import, or contributes an id another plugin took, is skipped with
# a PluginLoadWarning; `agentgym list plugins` shows it.
register_with_gymnasium()
