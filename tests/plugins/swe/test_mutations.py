"""Bug injection: libcst mutation sites of every kind, applying one or several, the
candidate order, and the giveaway check."""

from __future__ import annotations

import random

import pytest

from agentgym.plugins.swe.mutations import (
    ALL_KINDS,
    BLOCK_KINDS,
    MUTATION_KINDS,
    apply_mutation,
    apply_mutations,
    candidate_order,
    giveaway,
    mutation_sites,
)

SOURCE = '''\
"""A module."""
LIMIT = 10


def clamp(values: list[int], low: int = 0) -> list[int]:
    """Docstrings are never dropped."""
    out = []
    for value in values:
        # keep the small ones
        if value < LIMIT and value >= low:
            out.append(value)
    total = sum(out) + 1
    return sorted(out, key=abs) if total else out


class Box:
    def ready(self, flag=True):
        return not flag or self.check(3, 2)
'''


def sites_by_change(source: str = SOURCE) -> dict[str, object]:
    sites = {f"{s.kind}: {s.change}": s for s in mutation_sites(source, "mod.py")}
    assert len(sites) == len(mutation_sites(source, "mod.py")), "two sites read the same"
    return sites


def mutated_line(site) -> tuple[str, str]:
    before, after = SOURCE.splitlines(), apply_mutation(SOURCE, site).splitlines()
    removed = [line for line in before if line not in after]
    added = [line for line in after if line not in before]
    return "|".join(removed).strip(), "|".join(added).strip()


def test_every_kind_of_mutation_is_offered_inside_functions_only() -> None:
    sites = mutation_sites(SOURCE, "mod.py")
    assert {s.kind for s in sites} == set(MUTATION_KINDS)
    assert {s.function for s in sites} == {"clamp", "Box.ready"}
    changes = sites_by_change()
    # The module-level constant and the annotations are left alone.
    assert "constant: 10 -> 11" not in changes
    assert not any("int" in change for change in changes)
    assert not any("Docstrings" in change for change in changes)


@pytest.mark.parametrize("change, removed, added", [
    ("comparison: < -> >=", "if value < LIMIT and value >= low:",
     "if value >= LIMIT and value >= low:"),
    ("comparison: < -> <=", "if value < LIMIT and value >= low:",
     "if value <= LIMIT and value >= low:"),
    ("operator: and -> or", "if value < LIMIT and value >= low:",
     "if value < LIMIT or value >= low:"),
    ("operator: + -> -", "total = sum(out) + 1", "total = sum(out) - 1"),
    ("constant: 1 -> 0", "total = sum(out) + 1", "total = sum(out) + 0"),
    ("constant: True -> False", "def ready(self, flag=True):", "def ready(self, flag=False):"),
    ("condition: if c -> if not c", "if value < LIMIT and value >= low:",
     "if not (value < LIMIT and value >= low):"),
    ("condition: x if c else y -> x if not c else y",
     "return sorted(out, key=abs) if total else out",
     "return sorted(out, key=abs) if not total else out"),
    ("statement: drop 'out.append(value)'", "out.append(value)", "pass"),
    ("arguments: f(3, 2) swapped", "return not flag or self.check(3, 2)",
     "return not flag or self.check(2, 3)"),
])
def test_each_mutation_changes_one_line_as_described(change: str, removed: str,
                                                     added: str) -> None:
    site = sites_by_change()[change]
    assert mutated_line(site) == (removed, added)
    compile(apply_mutation(SOURCE, site), "mod.py", "exec")


def test_dropping_a_statement_keeps_the_comment_above_it() -> None:
    site = sites_by_change()["statement: drop 'total = sum(out) + 1'"]
    mutated = apply_mutation(SOURCE, site)
    assert "total = sum(out) + 1" not in mutated
    assert "# keep the small ones" in mutated and '"""Docstrings' in mutated


def test_the_candidate_order_depends_only_on_the_seed() -> None:
    sites = mutation_sites(SOURCE, "mod.py")
    first = candidate_order(sites, random.Random("pkg==1#0"))
    assert first == candidate_order(sites, random.Random("pkg==1#0"))
    assert first != candidate_order(sites, random.Random("pkg==1#1"))
    assert sorted(first, key=lambda s: s.index) == sorted(sites, key=lambda s: s.index)
    # Kinds take turns, so that the first tasks are not all of one kind.
    assert len({s.kind for s in first[:len(MUTATION_KINDS)]}) == len(MUTATION_KINDS)


def test_a_site_that_moved_is_refused() -> None:
    site = mutation_sites(SOURCE, "mod.py")[0]
    with pytest.raises(ValueError, match=r"not in mod\.py"):
        apply_mutation("def f():\n    return 0\n", site)


# ---- block kinds (medium and hard) ---------------------------------------------------------

BLOCKS = '''\
def pick(items, flag):
    total = 0
    if not items:
        return None
    for i in range(len(items)):
        if items[i] is None:
            continue
        total = total + items[i]
        if total > 100:
            break
    scaled = total * 2
    scaled = scaled + 1
    if flag:
        result = scaled
    else:
        result = total
    return result
'''


def block_sites() -> dict[str, object]:
    return {f"{s.kind}: {s.change}": s for s in mutation_sites(BLOCKS, "m.py", ALL_KINDS)}


@pytest.mark.parametrize("change, old, new", [
    ("branches: swap the if and else bodies",
     "if flag:\n        result = scaled\n    else:\n        result = total",
     "if flag:\n        result = total\n    else:\n        result = scaled"),
    ("block: drop 'if not items:' block", "    if not items:\n        return None\n", ""),
    ("block: drop 'if total > 100:' block", "        if total > 100:\n            break\n", ""),
    ("reorder: swap 'scaled = total * 2' and 'scaled = scaled + 1'",
     "    scaled = total * 2\n    scaled = scaled + 1\n",
     "    scaled = scaled + 1\n    scaled = total * 2\n"),
    ("loop: range(..len(items)) one short", "range(len(items))", "range(len(items) - 1)"),
    ("loop: continue -> break", "            continue\n", "            break\n"),
    ("loop: break -> continue", "            break\n", "            continue\n"),
])
def test_each_block_mutation_changes_the_code_as_described(change: str, old: str,
                                                            new: str) -> None:
    site = block_sites()[change]
    assert BLOCKS.count(old) == 1
    assert apply_mutation(BLOCKS, site, ALL_KINDS) == BLOCKS.replace(old, new)


def test_independent_statements_are_not_offered_for_reordering() -> None:
    changes = block_sites()
    # `total = 0` and the `if` share nothing; `scaled = total * 2` reads what the loop wrote
    # but the loop is no simple statement: only the two `scaled` lines are a pair.
    assert [c for c in changes if c.startswith("reorder")] == [
        "reorder: swap 'scaled = total * 2' and 'scaled = scaled + 1'"]


def test_easy_sites_are_the_same_whatever_kinds_are_added() -> None:
    point = mutation_sites(BLOCKS, "m.py")
    every = mutation_sites(BLOCKS, "m.py", ALL_KINDS)
    assert {s.kind for s in point} <= set(MUTATION_KINDS)
    assert {s.kind for s in every} - set(MUTATION_KINDS) == set(BLOCK_KINDS)
    # The block kinds are offered beside the point kinds, never instead of them.
    assert [(s.kind, s.function, s.change) for s in every if s.kind in MUTATION_KINDS] == [
        (s.kind, s.function, s.change) for s in point]


def test_several_sites_of_a_file_are_applied_in_one_walk() -> None:
    sites = block_sites()
    chosen = [sites["loop: range(..len(items)) one short"],
              sites["branches: swap the if and else bodies"]]
    expected = BLOCKS.replace("range(len(items))", "range(len(items) - 1)").replace(
        "result = scaled\n    else:\n        result = total",
        "result = total\n    else:\n        result = scaled")
    assert apply_mutations(BLOCKS, chosen, ALL_KINDS) == expected
    # Listed with other kinds, a site is at another index: refused, not misapplied.
    with pytest.raises(ValueError, match=r"not in m\.py"):
        apply_mutations(BLOCKS, chosen[:1], MUTATION_KINDS)
    with pytest.raises(ValueError, match="one block"):
        apply_mutations(BLOCKS, [sites["reorder: swap 'scaled = total * 2' and"
                                       " 'scaled = scaled + 1'"],
                                 sites["block: drop 'if not items:' block"]], ALL_KINDS)


# ---- giveaways -----------------------------------------------------------------------------


@pytest.mark.parametrize("construct, before, after", [
    ("negated negative comparison", "    if a not in b:\n        return 1\n",
     "    if not (a not in b):\n        return 1\n"),
    ("negated negative comparison", "    return a is not b\n", "    return not (a is not b)\n"),
    ("double not", "    return not a\n", "    return not not a\n"),
    ("arithmetic that does nothing", "    return a + 1\n", "    return a + 0\n"),
    ("arithmetic that does nothing", "    return a * 2\n", "    return a * 1\n"),
    ("arithmetic that does nothing", "    a -= 1\n    return a\n", "    a -= 0\n    return a\n"),
    ("a slice from 0", "    return a[1:]\n", "    return a[0:]\n"),
    ("a constant condition", "    if a:\n        return 1\n", "    if True:\n        return 1\n"),
    ("a constant condition", "    while a:\n        a.pop()\n",
     "    while not False:\n        a.pop()\n"),
    ("a body reduced to pass", "    return a\n", "    pass\n"),
    ("a whitespace-only change", "    return a <= b\n", "    return a < = b\n"),
    ("an operator split by a space", "    return a < b\n", "    return a < = b\n"),
])
def test_each_giveaway_construct_is_rejected(construct: str, before: str, after: str) -> None:
    header = "def f(a, b):\n"
    assert giveaway(header + before, header + after) == construct


def test_a_plain_mutation_or_a_construct_already_there_is_no_giveaway() -> None:
    header = "def f(a, b):\n    c = a + 0\n    if not (a not in b):\n        pass\n"
    assert giveaway(header + "    return a < b\n", header + "    return a >= b\n") is None
    assert giveaway("def f(a):\n    return a[1:]\n", "def f(a):\n    return a[2:]\n") is None


def test_the_mutator_s_own_giveaways_are_caught() -> None:
    sites = sites_by_change()
    assert giveaway(SOURCE, apply_mutation(SOURCE, sites["statement: drop 'out.append(value)'"]
                                           )) == "a body reduced to pass"
    negated = "def f(a, b):\n    if a not in b:\n        return 1\n    return 0\n"
    [condition] = [s for s in mutation_sites(negated, "n.py") if s.kind == "condition"]
    assert giveaway(negated, apply_mutation(negated, condition)) == "negated negative comparison"
