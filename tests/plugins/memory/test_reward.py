"""Scoring memory answers: normalized exact match, token F1, abstention, per-type means."""

from agentgym.core.episode import Episode
from agentgym.core.task import Task
from agentgym.plugins.memory.reward import (
    MAX_ABSTENTION_WORDS,
    MemoryAnswers,
    exact_match,
    is_abstention,
    lcs_f1,
    normalize,
    score_answer,
    token_f1,
)


def test_normalized_exact_match():
    assert normalize("The  Glass Menagerie!") == "glass menagerie"
    assert normalize("Four") == "4"
    assert exact_match("It's Lisbon.", "Lisbon") and exact_match("four", "4")
    assert exact_match("9 days", "9")
    assert not exact_match("Lisbon or Porto", "Lisbon") and not exact_match("19", "9")
    assert not exact_match("", "Lisbon")


def test_token_f1():
    assert token_f1("the suburbs", "The suburbs.") == 1.0
    assert token_f1("Chicago", "the suburbs") == 0.0
    assert round(token_f1("worked on five model kits", "worked on or bought five model kits"),
                 3) == round(2 * 1 * (5 / 7) / (1 + 5 / 7), 3)


def test_lcs_f1_counts_order_where_token_f1_does_not():
    expected = ("First, I helped my friend prepare the nursery, then I helped my cousin pick"
                " out stuff for her baby shower, and lastly, I ordered a customized phone case")
    reversed_ = ("First, I ordered a customized phone case, then I helped my cousin pick out"
                 " stuff for her baby shower, and lastly, I helped my friend prepare the"
                 " nursery")
    assert token_f1(reversed_, expected) == 1.0  # the hole: the same words, any order
    assert lcs_f1(expected.upper(), expected) == 1.0
    assert lcs_f1(reversed_, expected) < 0.8
    assert lcs_f1("worked on five model kits", "worked on or bought five model kits") == \
        token_f1("worked on five model kits", "worked on or bought five model kits")
    assert lcs_f1("", "x") == 0.0 and lcs_f1("Chicago", "the suburbs") == 0.0
    assert score_answer(reversed_, expected, "lcs_f1") == lcs_f1(reversed_, expected)


def test_longmemeval_pays_no_answer_in_the_wrong_order():
    """A red team's answer: an order question's events, named by the question, reversed."""
    from agentgym.plugins.memory.longmemeval import longmemeval_tasks

    task = next(t for t in longmemeval_tasks() if t.id == "longmemeval-gpt4_f49edff3")
    question = task.metadata["questions"][0]
    assert question["metric"] == "lcs_f1"
    reversed_ = ("First, I ordered a customized phone case for my friend's birthday, then I"
                 " helped my cousin pick out stuff for her baby shower, and lastly, I helped"
                 " my friend prepare the nursery.")
    assert score_answer(reversed_, question["answer"], question["metric"]) < 0.8
    assert score_answer(question["answer"], question["answer"], question["metric"]) == 1.0


def test_abstention():
    for text in ("I don't know", "I do not know.", "You never mentioned that", "Unknown",
                 "That is not in my memory", "I don\u2019t know"):
        assert is_abstention(text), text
    for text in ("Lisbon", "Biscuit", "The knowledge base says Porto"):
        assert not is_abstention(text), text


def test_an_abstention_that_lists_every_candidate_is_not_paid():
    """Stuffing: "I don't know" followed by every name of the history is no abstention
    (the memory.stuff-answers probe scored the abstention question with it)."""
    assert score_answer("I don't know, you never mentioned where your sister works", "",
                        "abstain") == 1.0
    stuffed = "I don't know, " + ", ".join(f"Name{i}" for i in range(MAX_ABSTENTION_WORDS))
    assert is_abstention(stuffed) and score_answer(stuffed, "", "abstain") == 0.0


def test_the_reward_is_the_mean_and_reports_each_type():
    questions = [{"type": "single", "question": "q1", "answer": "Lisbon", "metric": "exact"},
                 {"type": "single", "question": "q2", "answer": "4", "metric": "exact"},
                 {"type": "abstention", "question": "q3", "answer": "I don't know",
                  "metric": "abstain"},
                 {"type": "free", "question": "q4", "answer": "the suburbs", "metric": "f1"}]
    episode = Episode(task=Task(id="t", prompt="p", metadata={"questions": questions}))
    episode.resources["answers"] = ["lisbon", "five", "Not mentioned anywhere"]
    result = MemoryAnswers().score(episode)
    assert result.value == (1 + 0 + 1 + 0) / 4  # the unanswered fourth scores 0
    assert result.metrics["by_type"] == {"single": 0.5, "abstention": 1.0, "free": 0.0}
    assert result.metrics["answered"] == 3 and result.metrics["scores"] == [1.0, 0.0, 1.0, 0.0]
