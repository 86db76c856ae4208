"""The memory tools: write, search, read, update and delete notes in the episode's
:class:`~agentgym.plugins.memory.store.MemoryStore`.

Any env can offer them: list :class:`MemoryTools` in its ``toolsets`` and bind it to the
episode's store in ``setup_episode`` (``self.bind_toolsets(store)``; the episode keeps the
store: ``await self.episode.keep("memory", store, release)``). Every tool answers
with text; a bad id, an empty text or an oversized note is an error message to the agent.
No answer repeats what the agent wrote (a query, a new text): the memory envs show the
agent its replies alone, and an echo would carry text past its context
(:mod:`agentgym.core.context`). Search and read show notes, which are the memory.
"""

from __future__ import annotations

from agentgym.core.tools import Toolset, tool
from agentgym.plugins.memory.store import MemoryStore


class MemoryTools(Toolset):
    """Memory tools on one episode's store."""

    def __init__(self, store: MemoryStore):
        self.store = store

    @tool
    def memory_write(self, text: str, tags: list[str] | None = None) -> str:
        """Save a note to your long-term memory. Notes stay after the conversation has
        left your context; write each fact you may need later as a short, self-contained
        sentence (who, what, when).

        Args:
            text: The note, e.g. "2023/05/20: user's sister Ann moved to Denver".
            tags: Optional keywords to find it by, e.g. ["family", "moves"].
        """
        note = self.store.write(text, tags or ())
        return f"Saved as memory {note.id}."

    @tool
    def memory_search(self, query: str, k: int = 5) -> str:
        """Search your memory by keywords; the best matches come first.

        Args:
            query: Words to look for, e.g. "Ann moved city".
            k: How many notes to return (1 to 50).
        """
        found = self.store.search(query, k)
        if not found:
            return "No memory matches that query."
        return "\n".join(note.render() for note in found)

    @tool
    def memory_read(self, id: int) -> str:
        """Read one note by its id.

        Args:
            id: The note's id (the number in brackets).
        """
        return self.store.read(id).render()

    @tool
    def memory_update(self, id: int, text: str) -> str:
        """Replace a note's text, e.g. when a fact has changed.

        Args:
            id: The note's id.
            text: The new text.
        """
        note = self.store.update(id, text)
        return f"Memory {note.id} is updated."

    @tool
    def memory_delete(self, id: int) -> str:
        """Delete a note.

        Args:
            id: The note's id.
        """
        note = self.store.delete(id)
        return f"Deleted memory {note.id}."
