"""The memory store: notes in SQLite, found by FTS5 with BM25, ids that never come back."""

from __future__ import annotations

import pytest

from agentgym.core.tools import ToolError
from agentgym.plugins.memory.store import MAX_NOTE_CHARS, MAX_RESULTS, MemoryStore
from agentgym.plugins.memory.tools import MemoryTools


@pytest.fixture
def store(tmp_path):
    memory = MemoryStore(tmp_path / "memory.db")
    yield memory
    memory.close()


def test_search_ranks_by_bm25_and_stems(store):
    store.write("2023/01/03: my cousin Priya moved to Lisbon", ["family"])
    store.write("2023/02/11: the user went running by the river")
    store.write("2023/03/09: my cousin Priya has just moved from Lisbon to Porto", ["family"])
    store.write("groceries: eggs, milk")
    found = store.search("where did Priya move", k=5)
    assert [n.id for n in found] == [3, 1] or [n.id for n in found] == [1, 3]
    assert all("Priya" in n.text for n in found) and found[0].score >= found[1].score > 0
    assert [n.id for n in store.search("runs")] == [2]  # Porter stemming: runs ~ running
    assert [n.id for n in store.search("FAMILY")] in ([1, 3], [3, 1])  # tags are searched
    assert store.search("nothing like this") == []
    assert len(store.search("priya lisbon porto eggs river", k=2)) == 2


def test_any_text_is_a_query_never_fts_syntax(store):
    store.write('the "quoted" AND NOT thing (with) * stars: near')
    for query in ['"thing', 'AND', 'NOT thing', '(with', 'stars*', 'near:', "o'clock",
                  'a-b c^d {x}']:
        store.search(query)  # never an FTS5 syntax error
    assert [n.id for n in store.search('NOT "quoted"')] == [1]
    with pytest.raises(ToolError, match="no words"):
        store.search("?!")
    with pytest.raises(ToolError, match=f"1 to {MAX_RESULTS}"):
        store.search("thing", k=0)


def test_update_delete_and_ids_that_never_come_back(store, tmp_path):
    first, second = store.write("alpha"), store.write("beta")
    assert store.update(first.id, "alpha two").text == "alpha two"
    assert store.search("two")[0].id == first.id and store.search("alpha two")[0].id == 1
    assert store.delete(second.id).text == "beta"
    assert store.search("beta") == []
    third = store.write("gamma")
    assert third.id == 3  # not 2: an id an agent wrote down never means another note
    with pytest.raises(ToolError, match=r"no memory with that id; the latest ids are 1, 3"):
        store.read(2)
    with pytest.raises(ToolError, match="not a memory id"):
        store.read("two")
    assert store.read("[3]").text == "gamma"
    for huge in (2 ** 63, -(2 ** 63) - 1, 10 ** 40, "99999999999999999999"):  # past SQLite's
        with pytest.raises(ToolError, match="no memory with that id; the latest") as error:
            (store.read, store.delete, lambda i: store.update(i, "x"))[int(huge) % 3](huge)
        assert str(int(huge)) not in str(error.value)  # no echo: a window could carry it
    store.close()
    reopened = MemoryStore(tmp_path / "memory.db")  # a file a person can open afterwards
    assert [n.text for n in reopened.all()] == ["alpha two", "gamma"]
    reopened.close()


def test_bad_notes_are_refused_with_the_reason(store):
    with pytest.raises(ToolError, match="empty"):
        store.write("   ")
    with pytest.raises(ToolError, match=f"at most {MAX_NOTE_CHARS}"):
        store.write("x" * (MAX_NOTE_CHARS + 1))
    with pytest.raises(ToolError, match="at most 10"):
        store.write("ok", [f"t{i}" for i in range(11)])
    assert store.write("ok", "Family, Big Moves").tags == ("family", "big", "moves")
    assert len(store) == 1


def test_the_tools_answer_in_text(store):
    tools = {t.name: t for t in MemoryTools(store).tools()}
    assert set(tools) == {"memory_write", "memory_search", "memory_read", "memory_update",
                          "memory_delete"}
    call = lambda name, **kw: tools[name].call(kw)  # noqa: E731
    import asyncio

    run = asyncio.run
    assert run(call("memory_write", text="Ann moved to Denver", tags=["family"])) == \
        "Saved as memory 1."
    assert run(call("memory_search", query="Denver")) == "[1] Ann moved to Denver (tags: family)"
    # No answer repeats what the agent wrote (a query, a new text): an echo would carry it.
    assert run(call("memory_search", query="Paris")) == "No memory matches that query."
    assert run(call("memory_update", id=1, text="Ann moved to Oslo")) == "Memory 1 is updated."
    assert run(call("memory_read", id=1)) == "[1] Ann moved to Oslo (tags: family)"
    assert run(call("memory_delete", id=1)) == "Deleted memory 1."
