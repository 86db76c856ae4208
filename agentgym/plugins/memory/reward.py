"""Scoring memory answers: normalized exact match, token F1, and abstention.

Each question names its ``metric``:

* ``exact``: 1.0 when the answer equals the expected one after :func:`normalize` (case,
  punctuation, articles and spacing ignored; number words read as digits, so "four" is
  "4"). An answer that states the expected one and little else ("It's Lisbon.") also
  counts: what is left after the expected words must be filler (:data:`FILLER`).
* ``f1``: the token F1 between the normalized answer and the expected one (SQuAD's). It
  ignores order: the expected events of an "in what order" question, named by the
  question itself, pay 1.0 in any order.
* ``lcs_f1``: the F1 of the longest common subsequence of the two word lists (ROUGE-L's
  F): as ``f1`` for an answer in the expected order, less for the same words reordered.
* ``abstain``: 1.0 only when the answer says the history does not tell
  (:func:`is_abstention`) and says little else: at most :data:`MAX_ABSTENTION_WORDS`
  words, so that an answer listing every candidate after "I don't know" is not paid.

:class:`MemoryAnswers` averages the questions and reports the score per question type.
"""

from __future__ import annotations

import collections
import re
import string
from typing import Any

from agentgym.core.episode import Episode
from agentgym.core.reward import Reward, RewardResult

METRICS = ("exact", "f1", "lcs_f1", "abstain")
_NUMBERS = {w: str(i) for i, w in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty"))}
#: Typographic apostrophes, read as the plain one.
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'"})
_ARTICLES = {"a", "an", "the"}
#: Words an exact answer may wrap around the expected one.
FILLER = {"it", "its", "is", "was", "they", "he", "she", "in", "now", "answer", "days",
          "day", "times", "time", "my", "i", "think", "s", "are", "were", "lives", "live",
          "about", "exactly", "total", "of", "there", "called", "named", "that", "this"}
_ABSTAIN = re.compile(
    r"\b(i (do not|don ?t|cannot|can ?t) (know|tell|say|find|recall|remember)|not (known|"
    r"mentioned|stated|said|told|in (my|the) (memory|history|notes))|never (mentioned|said|"
    r"told|stated)|no (information|record|mention)|unknown|not sure|unanswerable)\b")


#: Words an abstention may take ("I don't know, you never mentioned where your sister
#: works" is 10); an answer that lists candidates besides is no abstention.
MAX_ABSTENTION_WORDS = 25


def normalize(text: str) -> str:
    """Lower case, punctuation and articles removed, number words as digits, one space."""
    text = str(text).lower()
    text = "".join(" " if ch in string.punctuation else ch for ch in text)
    words = [_NUMBERS.get(w, w) for w in text.split() if w not in _ARTICLES]
    return " ".join(words)


def is_abstention(answer: str) -> bool:
    """Whether ``answer`` says the information is not known (e.g. "I don't know", "You
    never mentioned that")."""
    text = str(answer).lower().translate(_APOSTROPHES).replace("'", " ")
    return bool(_ABSTAIN.search(" ".join(text.split())))


def token_f1(answer: str, expected: str) -> float:
    """SQuAD's token F1 of the normalized texts."""
    got, want = normalize(answer).split(), normalize(expected).split()
    if not got or not want:
        return float(got == want)
    common = sum((collections.Counter(got) & collections.Counter(want)).values())
    if not common:
        return 0.0
    precision, recall = common / len(got), common / len(want)
    return 2 * precision * recall / (precision + recall)


def lcs_f1(answer: str, expected: str) -> float:
    """The F1 of the longest common subsequence of the normalized texts' words."""
    got, want = normalize(answer).split(), normalize(expected).split()
    if not got or not want:
        return float(got == want)
    row = [0] * (len(want) + 1)
    for word in got:  # one row of the LCS table at a time
        previous_diagonal = 0
        for j, other in enumerate(want, 1):
            above = row[j]
            row[j] = previous_diagonal + 1 if word == other else max(row[j], row[j - 1])
            previous_diagonal = above
    common = row[-1]
    if not common:
        return 0.0
    precision, recall = common / len(got), common / len(want)
    return 2 * precision * recall / (precision + recall)


def exact_match(answer: str, expected: str) -> bool:
    """Normalized equality, allowing filler words around the expected answer."""
    got, want = normalize(answer), normalize(expected)
    if got == want:
        return True
    if not want or f" {want} " not in f" {got} ":
        return False
    rest = f" {got} ".replace(f" {want} ", " ", 1).split()
    return all(word in FILLER for word in rest)


def score_answer(answer: str | None, expected: str, metric: str) -> float:
    """One question's score in [0, 1] (module docstring)."""
    if answer is None:
        return 0.0
    if metric == "abstain":
        return float(is_abstention(answer)
                     and len(normalize(answer).split()) <= MAX_ABSTENTION_WORDS)
    if metric == "f1":
        return token_f1(answer, expected)
    if metric == "lcs_f1":
        return lcs_f1(answer, expected)
    return float(exact_match(answer, expected))


class MemoryAnswers(Reward):
    """The mean score of the episode's answers to its task's questions.

    Reads ``task.metadata["questions"]`` (each with ``question``, ``answer``, ``type`` and
    ``metric``) and the answers the episode recorded in ``episode.resources["answers"]``
    (one per question, in order; missing ones score 0). Metrics: ``by_type`` (mean score
    per question type), ``answered``, ``questions`` and ``scores``.
    """

    name = "memory_answers"

    def score(self, episode: Episode) -> RewardResult:
        questions = episode.task.metadata["questions"]
        answers = list(episode.resources.get("answers", ()))
        scores = [score_answer(answers[i] if i < len(answers) else None, q["answer"],
                               q.get("metric", "exact")) for i, q in enumerate(questions)]
        by_type: dict[str, list[float]] = {}
        for question, value in zip(questions, scores, strict=True):
            by_type.setdefault(question.get("type", "question"), []).append(value)
        metrics: dict[str, Any] = {
            "by_type": {kind: sum(v) / len(v) for kind, v in by_type.items()},
            "answered": len(answers), "questions": len(questions), "scores": scores}
        return RewardResult(sum(scores) / len(scores) if scores else 0.0, metrics)
