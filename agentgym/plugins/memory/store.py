"""An episode's memory: short notes in SQLite, found again by full-text search.

:class:`MemoryStore` keeps notes (text plus tags) in one SQLite database, normally a file in
the episode's workspace, so that a crashed episode leaves a database a person can open.
Search is SQLite's FTS5 with its BM25 ranking over the text and the tags; words are stemmed
(Porter), so "running" finds "run". A query is read as words, never as FTS5 syntax: any
text an agent writes is a valid query.

Ids only grow (a deleted note's id is never given to a new one), so an id an agent wrote
down never points at a different note later.

With an embedder (:mod:`agentgym.plugins.memory.embeddings`, optional) each note also
keeps a unit vector, and a search fuses the BM25 ranking with the cosine ranking by
reciprocal rank fusion (each list's rank ``r`` adds ``1 / (60 + r)``): keywords still find
exact names, vectors find paraphrases.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from agentgym.core.tools import ToolError

if TYPE_CHECKING:
    from agentgym.plugins.memory.embeddings import Embedder

#: Characters one note may hold: a memory is a note, not a document.
MAX_NOTE_CHARS = 2000
#: The most notes one search returns.
MAX_RESULTS = 50
#: Reciprocal rank fusion's constant: how flat the fused ranking is (60, as in the paper).
RRF_K = 60
#: Tags a note may carry, and characters per tag.
MAX_TAGS, MAX_TAG_CHARS = 10, 40

_SCHEMA = """
CREATE TABLE IF NOT EXISTS notes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    text TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '');
CREATE VIRTUAL TABLE IF NOT EXISTS notes_index USING fts5(
    text, tags, content='notes', content_rowid='id', tokenize='porter unicode61');
CREATE TRIGGER IF NOT EXISTS notes_added AFTER INSERT ON notes BEGIN
    INSERT INTO notes_index(rowid, text, tags) VALUES (new.id, new.text, new.tags);
END;
CREATE TRIGGER IF NOT EXISTS notes_removed AFTER DELETE ON notes BEGIN
    INSERT INTO notes_index(notes_index, rowid, text, tags)
        VALUES ('delete', old.id, old.text, old.tags);
END;
CREATE TABLE IF NOT EXISTS vectors (id INTEGER PRIMARY KEY, vector BLOB NOT NULL);
CREATE TRIGGER IF NOT EXISTS vectors_removed AFTER DELETE ON notes BEGIN
    DELETE FROM vectors WHERE id = old.id;
END;
CREATE TRIGGER IF NOT EXISTS notes_changed AFTER UPDATE ON notes BEGIN
    INSERT INTO notes_index(notes_index, rowid, text, tags)
        VALUES ('delete', old.id, old.text, old.tags);
    INSERT INTO notes_index(rowid, text, tags) VALUES (new.id, new.text, new.tags);
END;
"""
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Note:
    """One stored memory. ``score`` is its BM25 relevance in a search (higher is better),
    0.0 elsewhere."""

    id: int
    text: str
    tags: tuple[str, ...] = field(default=())
    score: float = 0.0

    def render(self) -> str:
        """The note as the memory tools show it: ``[id] text (tags: ...)``."""
        tags = f" (tags: {', '.join(self.tags)})" if self.tags else ""
        return f"[{self.id}] {self.text}{tags}"


class MemoryStore:
    """Notes in the SQLite database at ``path`` (created if missing; ``":memory:"`` for
    one that lives only in this process). One episode uses it at a time (it is not
    meant for concurrent writers)."""

    def __init__(self, path: str | Path = ":memory:", embedder: Embedder | None = None):
        self.path = str(path)
        self.embedder = embedder
        # One episode uses it at a time, but its setup and its tools may run on different
        # threads of the caller's (the pipeline's loop, an env's own loop thread).
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.executescript(_SCHEMA)
        self._matrix: tuple[np.ndarray, np.ndarray] | None = None  # (ids, vectors) cache

    # ---- writing ----------------------------------------------------------------------

    def write(self, text: str, tags: Iterable[str] = ()) -> Note:
        """Store a new note; returns it with its id."""
        text, tags = _check_text(text), _check_tags(tags)
        cursor = self._db.execute("INSERT INTO notes (text, tags) VALUES (?, ?)",
                                  (text, " ".join(tags)))
        note = Note(int(cursor.lastrowid), text, tags)
        self._embed([note.id], [text])
        return note

    def write_many(self, notes: Iterable[tuple[str, Sequence[str]]]) -> None:
        """Store many ``(text, tags)`` notes in one transaction (for loading and benches)."""
        rows = [(_check_text(text), " ".join(_check_tags(tags))) for text, tags in notes]
        with self._transaction():
            first = self._db.execute("SELECT coalesce(max(id), 0) FROM notes").fetchone()[0]
            self._db.executemany("INSERT INTO notes (text, tags) VALUES (?, ?)", rows)
            ids = [row[0] for row in self._db.execute(
                "SELECT id FROM notes WHERE id > ? ORDER BY id", (first,))]
            self._embed(ids, [text for text, _ in rows])

    def update(self, note_id: int, text: str, tags: Iterable[str] | None = None) -> Note:
        """Replace a note's text (and its tags, when given)."""
        old = self.read(note_id)
        text = _check_text(text)
        new_tags = old.tags if tags is None else _check_tags(tags)
        self._db.execute("UPDATE notes SET text = ?, tags = ? WHERE id = ?",
                         (text, " ".join(new_tags), old.id))
        self._embed([old.id], [text])
        return Note(old.id, text, new_tags)

    def delete(self, note_id: int) -> Note:
        """Remove a note; returns what it held."""
        old = self.read(note_id)
        self._db.execute("DELETE FROM notes WHERE id = ?", (old.id,))
        self._matrix = None
        return old

    # ---- reading ----------------------------------------------------------------------

    def read(self, note_id: int) -> Note:
        """The note with ``note_id``; a :class:`ToolError` naming the known ids if none."""
        note_id = _check_id(note_id)
        row = None
        if -2 ** 63 <= note_id < 2 ** 63:  # SQLite's integers are 64-bit: no note has others
            row = self._db.execute("SELECT id, text, tags FROM notes WHERE id = ?",
                                   (note_id,)).fetchone()
        if row is None:
            # The error does not repeat the id: an env whose window hides the agent's own
            # messages must not hand its text back (agentgym.core.context, "Replies only").
            raise ToolError(f"no memory with that id; {self._ids_hint()}")
        return _note(row)

    def search(self, query: str, k: int = 5) -> list[Note]:
        """The ``k`` notes that match ``query``'s words best (BM25), best first. A note
        matches when it holds any of the words; those holding more, and rarer, rank higher."""
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_RESULTS:
            raise ToolError(f"k must be a whole number from 1 to {MAX_RESULTS}")
        words = _WORD.findall(str(query).lower())
        if not words:
            raise ToolError("the query has no words to search for")
        match = " OR ".join(f'"{word}"' for word in dict.fromkeys(words))
        depth = k if self.embedder is None else max(4 * k, 20)
        # bm25() is lower for better matches (it is negative): ascending order, then ids
        # so that ties always come back in the same order.
        rows = self._db.execute(
            "SELECT n.id, n.text, n.tags, bm25(notes_index) AS rank FROM notes_index"
            " JOIN notes n ON n.id = notes_index.rowid WHERE notes_index MATCH ?"
            " ORDER BY rank, n.id LIMIT ?", (match, depth)).fetchall()
        if self.embedder is None:
            return [_note(row[:3], -row[3]) for row in rows]
        fused: dict[int, float] = {}
        for ranking in ([row[0] for row in rows], self._nearest(str(query), depth)):
            for rank, note_id in enumerate(ranking):
                fused[note_id] = fused.get(note_id, 0.0) + 1.0 / (RRF_K + rank + 1)
        best = sorted(fused, key=lambda i: (-fused[i], i))[:k]
        return [Note(n.id, n.text, n.tags, fused[n.id]) for n in map(self.read, best)]

    def all(self) -> list[Note]:
        """Every note, oldest first."""
        return [_note(row) for row in
                self._db.execute("SELECT id, text, tags FROM notes ORDER BY id")]

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM notes").fetchone()[0])

    def close(self) -> None:
        """Close the database (the file stays where it is). Idempotent."""
        self._db.close()

    # ---- internals --------------------------------------------------------------------

    def _embed(self, ids: list[int], texts: list[str]) -> None:
        if self.embedder is None or not ids:
            return
        vectors = self.embedder.encode(texts)
        self._db.executemany("INSERT OR REPLACE INTO vectors (id, vector) VALUES (?, ?)",
                             [(i, v.tobytes()) for i, v in zip(ids, vectors, strict=True)])
        self._matrix = None

    def _nearest(self, query: str, count: int) -> list[int]:
        """Ids of the ``count`` notes whose vectors are closest to the query's."""
        assert self.embedder is not None
        if self._matrix is None:
            rows = self._db.execute("SELECT id, vector FROM vectors ORDER BY id").fetchall()
            ids = np.array([row[0] for row in rows], dtype=np.int64)
            vectors = np.stack([np.frombuffer(row[1], dtype=np.float32) for row in rows]) \
                if rows else np.zeros((0, 1), dtype=np.float32)
            self._matrix = (ids, vectors)
        ids, vectors = self._matrix
        if not len(ids):
            return []
        scores = vectors @ self.embedder.encode([query])[0]
        best = np.argsort(-scores, kind="stable")[:count]
        return [int(ids[i]) for i in best]

    def _ids_hint(self) -> str:
        ids = [row[0] for row in self._db.execute("SELECT id FROM notes ORDER BY id DESC"
                                                  " LIMIT 20")]
        if not ids:
            return "the memory is empty"
        return f"the latest ids are {', '.join(map(str, reversed(ids)))}"

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")


def _note(row: Sequence, score: float = 0.0) -> Note:
    return Note(int(row[0]), row[1], tuple(row[2].split()) if row[2] else (), score)


def _check_text(text: str) -> str:
    text = str(text).strip()
    if not text:
        raise ToolError("the text is empty: write what you want to remember")
    if len(text) > MAX_NOTE_CHARS:
        raise ToolError(f"the text is {len(text)} characters long; a memory holds at most"
                        f" {MAX_NOTE_CHARS}: split it or keep only what matters")
    return text


def _check_tags(tags: Iterable[str] | str) -> tuple[str, ...]:
    if isinstance(tags, str):
        tags = tags.replace(",", " ").split()
    cleaned = tuple(dict.fromkeys(str(t).strip().lower().replace(" ", "-") for t in tags
                                  if str(t).strip()))
    if len(cleaned) > MAX_TAGS:
        raise ToolError(f"{len(cleaned)} tags: a memory takes at most {MAX_TAGS}")
    long = [t for t in cleaned if len(t) > MAX_TAG_CHARS]
    if long:
        raise ToolError(f"a tag is longer than {MAX_TAG_CHARS} characters")
    return cleaned


def _check_id(note_id: int | str) -> int:
    try:
        value = int(str(note_id).strip().strip("[]#"))
    except ValueError:
        raise ToolError("that id is not a memory id: use the number in brackets"
                        " that memory_write or memory_search showed") from None
    return value
