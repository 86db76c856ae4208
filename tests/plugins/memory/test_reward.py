"""Scoring memory answers: normalized exact match, token F1, abstention, per-type means."""

from agentgym.core.episode import Episode
from agentgym.core.task import Task
from agentgym.plugins.memory.reward import (
    MAX_ABSTENTION_WORDS,
    MemoryAnswers,
    exact_match,
    is_abstention,
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
