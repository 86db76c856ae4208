"""Answer checks that listing every candidate cannot pass: the rules one by one and every
shipped answer task's kinds. (The stuffing probes, paid 1.0 on the must-include checks
these replace, are played on sampled tasks of both sites in test_load.py.)"""

from __future__ import annotations

import json

import pytest

from agentgym.core import InvalidArgumentError
from agentgym.plugins.web.answers import AnswerSpec, Candidates, check_answer, other_candidates
from agentgym.plugins.web.probes import SprayPolicy, candidates
from agentgym.plugins.web.sites_env import TASKS_DIR, read_task_file, server_of
from agentgym.plugins.web.webarena import _string_match

ROWS = {row["id"]: row for site in ("shop", "forum")
        for row in read_task_file(TASKS_DIR / f"{site}.json")}
ANSWERED = sorted(i for i, row in ROWS.items() if row["grade"]["answer"])
PRODUCTS = Candidates({"product": ("Bamboo Monitor Riser", "Bamboo Salad Servers",
                                   "Dark Roast Coffee Beans 1 lb", "Holiday Gift Basket")})


def check(spec: dict, answer: str, known: Candidates = PRODUCTS) -> tuple[bool, str]:
    return check_answer(spec, answer, known)


def test_the_answer_alone_passes_in_a_sentence() -> None:
    product = {"must_include": ["Bamboo Monitor Riser"], "kinds": ["product"]}
    assert check(product, "The Bamboo Monitor Riser.")[0]
    assert check(product, "bamboo monitor riser")[0]
    coffee = {"must_include": ["Dark Roast Coffee Beans"], "kinds": ["product"]}
    assert check(coffee, "Dark Roast Coffee Beans 1 lb")[0]  # names it more fully
    price = {"must_include": ["34.99"], "kinds": ["number"]}
    assert check(price, "It costs $34.99.")[0]
    date = {"must_include": ["2022-04-02"], "kinds": ["number"]}
    assert check(date, "They joined on 2022-04-02")[0]


def test_naming_another_candidate_fails() -> None:
    product = {"must_include": ["Bamboo Monitor Riser"], "kinds": ["product"]}
    ok, why = check(product, "Bamboo Monitor Riser or Bamboo Salad Servers")
    assert not ok and "bamboo salad servers" in why
    price = {"must_include": ["4"], "kinds": ["number"]}
    assert not check(price, "4 or 5")[0]
    assert not check(price, "14, 24, 34")[0]  # "4" is a whole word, not part of 14
    excluded = {"must_include": ["Wolf Hall"], "must_exclude": ["Dune"]}
    assert not check(excluded, "Wolf Hall, Dune")[0]
    assert check(excluded, "Wolf Hall")[0]


def test_numbers_joined_without_spaces_are_each_a_candidate() -> None:
    """"49.98,56.97,73.75" once read as one number containing the expected "56.97"; a
    thousands group has exactly three digits, and a number that contains the expected one
    is another number."""
    total = {"must_include": ["56.97"], "kinds": ["number"]}
    ok, why = check(total, "49.98,56.97,73.75,43.40")
    assert not ok and "49.98" in why and "73.75" in why
    assert check(total, "56.97")[0]
    count = {"must_include": ["200"], "kinds": ["number"]}
    assert not check(count, "100,200,300")[0]
    assert not check(count, "1,200")[0]
    assert check(count, "200 subscribers")[0]
    forum = {"must_include": ["programming", "4"], "kinds": ["number"]}
    assert not check(forum, "programming 0,1,2,3,4,5,6,7,8,9,10,11,12")[0]
    assert check(forum, "programming, with 4")[0]
    size = {"must_include": ["1,024"], "kinds": ["number"]}
    assert check(size, "1,024 bytes")[0]  # a thousands separator, one number


def test_a_list_longer_than_an_answer_fails() -> None:
    spec = {"must_include": ["carol"], "kinds": ["user"]}
    known = Candidates({"user": ("carol", "bob")})
    ok, why = check(spec, "carol " + "x" * 200, known)
    assert not ok and "characters" in why
    assert AnswerSpec.from_dict(spec).limit == 2 * len("carol") + 80


def test_a_must_include_check_alone_is_refused(tmp_path) -> None:
    with pytest.raises(InvalidArgumentError, match="listing every candidate"):
        AnswerSpec.from_dict({"must_include": ["carol"]})
    with pytest.raises(InvalidArgumentError, match="unknown keys"):
        AnswerSpec.from_dict({"must_include": ["carol"], "kinds": ["user"], "fuzzy": 1})
    row = {**ROWS["forum-gardening-moderator"]}
    row["grade"] = {"db": [], "answer": {"must_include": ["carol"]}}
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([row]))
    with pytest.raises(InvalidArgumentError, match="forum-gardening-moderator"):
        read_task_file(path)


@pytest.mark.parametrize("task_id", ANSWERED)
def test_each_answer_task_names_its_kind_and_stuffing_fails(task_id: str) -> None:
    """Each expected phrase is a value of the task's kinds (so the kinds are the right
    ones), the reference answer passes, and the reference answer plus every other value
    of those kinds fails."""
    row = ROWS[task_id]
    spec = AnswerSpec.from_dict(row["grade"]["answer"])
    known = server_of(row["site"]).candidates
    reference = row["steps"][-1]["text"]
    assert check_answer(spec, reference, known) == (True, "")
    if spec.exact is not None:
        return
    others = [v for kind in spec.kinds for v in known.of(kind)] + list(spec.must_exclude)
    if "number" in spec.kinds:
        others += ["1", "12.50", "2025-01-01"]
    for kind in set(spec.kinds) - {"number"}:
        for phrase in spec.must_include:
            assert any(phrase.lower() in value.lower() for value in known.of(kind)) or \
                not any(c.isalpha() for c in phrase), (phrase, kind)
    stuffed = ", ".join([reference, *others])
    assert not check_answer(spec, stuffed, known)[0]
    assert other_candidates(stuffed.lower(), spec, known)
    # Short lists too: the answer and one other candidate.
    for other in others[:10]:
        if other.lower() not in reference.lower() and reference.lower() not in other.lower():
            assert not check_answer(spec, f"{reference}, {other}", known)[0], other


def test_webarena_must_include_is_bounded_too() -> None:
    unchecked: list[str] = []
    assert _string_match({"must_include": ["65.32"]}, "The total was $65.32.", unchecked) == []
    assert _string_match({"must_include": ["65.32"]}, "65.32, 12.00, 7.50", unchecked)
    assert _string_match({"must_include": ["Hollis"]}, "Hollis " + "Smith, " * 30, unchecked)
    assert _string_match({"fuzzy_match": ["Hollis"]}, "It was Hollis.", unchecked) == []


def test_candidates_are_what_the_tree_names() -> None:
    tree = ("RootWebArea 'Shop', focused\n  [12] link 'Electric Kettle'\n"
            "  StaticText 'Price: $34.99'\n  [13] button 'Add to cart'\n  cell '7'")
    assert candidates(tree) == ["Electric Kettle", "Price: $34.99", "$34.99", "7"]


def test_the_spray_repeats_the_last_form_that_writes_not_a_search_after_it() -> None:
    """SprayPolicy.plan on a reference that comments on a post, then searches: the write
    is the comment (a search's button leads to a URL holding what was typed), and the
    pages like the post's are the other posts it saw links to."""
    def turn(name, **arguments):
        return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'

    post = ("URL: http://h/post/3\n\n[5] textbox 'Comment'\n[6] button 'Post comment'\n"
            "[7] searchbox 'Search'\n[8] button 'Search'\n"
            "[9] link 'Other post', url='http://h/post/4#top'\n[10] link 'Forums', url='http://h/f'")
    visits = [turn("fill", bid="5", value="Nice."), turn("click", bid="6"),
              turn("fill", bid="7", value="rust"), turn("click", bid="8")]
    pages = [post, post, post, post, "URL: http://h/search?q=rust\n\n[3] link 'Post 3'"]
    write, siblings = SprayPolicy.plan(visits, pages)
    assert write == [("fill", {"bid": "5", "value": "Nice."}, ("textbox", "Comment")),
                     ("click", {"bid": "6"}, ("button", "Post comment"))]
    assert siblings == ["http://h/post/4"]
    other = "URL: http://h/post/4\n\n[15] textbox 'Comment'\n[16] button 'Post comment'"
    assert SprayPolicy.rewrite(write, other) == [("fill", {"bid": "15", "value": "Nice."}),
                                                 ("click", {"bid": "16"})]
    assert SprayPolicy.rewrite(write, "URL: http://h/f\n\n[2] link 'books'") == []
    # a reference whose only button navigates (a sort: another URL, nothing filled) has no
    # write to spray
    assert SprayPolicy.plan([turn("click", bid="8")],
                            [post, "URL: http://h/post/3?sort=new"]) == ([], [])
