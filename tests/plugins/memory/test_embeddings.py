"""Optional embedding search: a tiny sentence-transformers model built here (no hub),
vectors kept with the notes, and rankings fused with BM25."""

from __future__ import annotations

import importlib.util
import sqlite3

import pytest

from agentgym.core.errors import MissingFileError
from agentgym.testing import assert_valid

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None,
    reason="embedding search needs sentence-transformers (pip install"
           " 'agentgym[embeddings]'); scripts/setup.sh installs it")

WORDS = ["rachel", "moved", "to", "chicago", "the", "suburbs", "my", "dog", "is", "called",
         "biscuit", "car", "red", "lisbon", "porto"]


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    from agentgym.plugins.memory.embeddings import build_tiny_embedder

    return str(build_tiny_embedder(tmp_path_factory.mktemp("embedder"), WORDS))


def test_vectors_follow_the_notes_and_searches_fuse_both_rankings(model_folder, tmp_path):
    from agentgym.plugins.memory.embeddings import load_embedder
    from agentgym.plugins.memory.store import MemoryStore

    store = MemoryStore(tmp_path / "m.db", load_embedder(model_folder))
    store.write("rachel moved to chicago")
    store.write("my dog is called biscuit")
    store.write_many([("the car is red", ()), ("rachel moved to the suburbs", ())])
    vectors = lambda: dict(sqlite3.connect(tmp_path / "m.db").execute(  # noqa: E731
        "SELECT id, vector FROM vectors").fetchall())
    assert sorted(vectors()) == [1, 2, 3, 4]
    found = store.search("rachel moved to chicago", k=2)
    assert found[0].id == 1 and len(found) == 2  # keywords and an identical vector agree
    assert [n.id for n in store.search("lisbon", k=4)] != []  # vectors answer what words miss
    before = vectors()[2]
    store.update(2, "my dog is called porto")
    assert vectors()[2] != before
    store.delete(3)
    assert sorted(vectors()) == [1, 2, 4]
    assert 3 not in [n.id for n in store.search("car red", k=4)]
    store.close()


def test_the_env_takes_a_model_folder_and_its_tasks_stay_valid(model_folder):
    report = assert_valid("memory-sessions", n=3, embedding_model=model_folder)
    assert len(report.task_ids) == 3


def test_a_folder_that_is_not_a_model_is_named(tmp_path):
    from agentgym.plugins.memory.embeddings import Embedder

    with pytest.raises(MissingFileError, match="not a sentence-transformers model folder"):
        Embedder(tmp_path)
