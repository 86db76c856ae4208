"""Seeded multi-session memory tasks at any scale, with LongMemEval's question types.

A task is a user's chat history: ``sessions`` dated conversations between the user and an
assistant, followed by questions about what the user said. Most of each session is
distractor small talk from a real offline corpus (the ``chatterbot-corpus`` package's
English conversations, read from the installed package); a few sessions also carry a fact,
said by the user in passing ("By the way, ..."). The questions:

* ``single``: recall one fact ("What is my cousin Priya's dog called?").
* ``update``: a fact that changed; the later value is the answer.
* ``count``: how many sessions mention doing something (2 to 5 of them).
* ``temporal``: days between two events, from the sessions' dates.
* ``multi_hop``: two facts joined (where a person works; where that company is based).
* ``abstention``: about a fact never stated; the right answer says it is not known.

Everything is drawn from ``random.Random`` seeded by (seed, index), so a task is the same on
every machine; names are drawn without replacement within a task, so no two facts collide.
Each task also carries its reference solution: save each fact when its session is shown,
move on, and at the end search the memory and answer (see :func:`make_task`).
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib.resources
import random
from dataclasses import dataclass
from typing import Any

from agentgym.core.errors import InvalidArgumentError, MissingResourceError
from agentgym.core.parsers import ToolCall
from agentgym.core.task import SolutionTurn, Task
from agentgym.plugins.memory.store import MAX_NOTE_CHARS

#: The question types, in the order a task asks them.
QUESTION_TYPES = ("single", "update", "count", "temporal", "multi_hop", "abstention")
#: What an agent should answer when the history never said.
ABSTAIN_ANSWER = "I don't know"
#: Sessions each question type puts facts in (never the last session: see ``_sessions``).
FACT_SESSIONS = {"single": 1, "update": 2, "count": 5, "temporal": 2, "multi_hop": 2,
                 "abstention": 0}
#: Lines of small talk a session takes from its corpus conversation, by default.
SESSION_LINES = 8
#: The first session's date; later sessions follow 1 to 3 days apart.
FIRST_DATE = dt.date(2023, 1, 2)

_RELATIONS = ("cousin", "neighbour", "colleague", "sister", "brother", "friend", "aunt",
              "uncle", "flatmate", "teammate")
_NAMES = ("Priya", "Tomas", "Aiko", "Mateo", "Ingrid", "Kwame", "Leila", "Oskar", "Nadia",
          "Rafael", "Sunita", "Henrik", "Yara", "Dmitri", "Chloe", "Emeka", "Farah", "Jonas",
          "Mei", "Pablo", "Zofia", "Arjun", "Greta", "Tariq", "Elena", "Bruno", "Hana",
          "Idris", "Lucia", "Viktor", "Amara", "Felix", "Noor", "Stefan", "Rosa", "Kenji")
_CITIES = ("Lisbon", "Denver", "Osaka", "Tallinn", "Porto", "Quebec", "Nairobi", "Bergen",
           "Cusco", "Hobart", "Krakow", "Valencia", "Dunedin", "Tucson", "Ghent", "Malmo")
_COMPANIES = ("Northwind Robotics", "Bluefin Analytics", "Copperleaf Foods", "Larkspur Media",
              "Ironbark Energy", "Silverline Rail", "Quillfeather Books", "Redwood Optics")
#: (statement, question, values): what a person has that the user may mention once.
_ATTRIBUTES = (
    ("My {who}'s dog is called {value}.", "What is my {who}'s dog called?",
     ("Biscuit", "Pepper", "Waffles", "Juniper", "Mochi", "Bramble", "Noodle", "Clementine")),
    ("My {who} plays the {value} in a local band.", "What instrument does my {who} play?",
     ("cello", "trombone", "banjo", "oboe", "harp", "accordion", "bassoon", "ukulele")),
    ("My {who} drives a {value}.", "What colour is my {who}'s car?",
     ("red car", "green car", "yellow car", "silver car", "orange car", "purple car")),
    ("My {who}'s favourite board game is {value}.", "What is my {who}'s favourite board game?",
     ("Carcassonne", "Azul", "Catan", "Wingspan", "Ticket to Ride", "Dixit", "Patchwork")),
    ("My {who} studied {value} at university.", "What did my {who} study at university?",
     ("marine biology", "architecture", "linguistics", "astrophysics", "economics",
      "philosophy", "geology")),
)
#: (one occurrence, question): something the user does in several sessions.
_ACTIVITIES = (
    ("I went to a pottery class today.", "How many pottery classes did I go to?"),
    ("I baked a loaf of sourdough bread today.", "How many loaves of sourdough did I bake?"),
    ("I went bouldering at the climbing gym today.",
     "How many times did I go bouldering at the climbing gym?"),
    ("I finished reading another novel today.", "How many novels did I finish reading?"),
    ("I volunteered at the animal shelter today.",
     "How many times did I volunteer at the animal shelter?"),
)
#: Events with a date, as (what the user did, the same in the base form); the user says
#: each happened "today".
_EVENTS = (("ran my first half marathon", "run my first half marathon"),
           ("started my new job", "start my new job"),
           ("adopted a kitten", "adopt a kitten"),
           ("moved into my new flat", "move into my new flat"),
           ("passed my driving test", "pass my driving test"),
           ("flew back from my trip to Iceland", "fly back from my trip to Iceland"),
           ("planted the vegetable garden", "plant the vegetable garden"),
           ("signed up for a Spanish course", "sign up for a Spanish course"))


@dataclass(frozen=True)
class _Fact:
    """A sentence the user says in ``session`` (a 0-based index)."""

    session: int
    text: str


@functools.cache
def distractor_conversations() -> tuple[tuple[str, ...], ...]:
    """The English conversations of the ``chatterbot-corpus`` package (each a tuple of
    alternating lines), read from the installed package: what fills the sessions."""
    try:
        import yaml

        root = importlib.resources.files("chatterbot_corpus") / "data" / "english"
    except ModuleNotFoundError as missing:
        raise MissingResourceError(
            f"the memory plugin's distractor corpus is missing ({missing.name})",
            "pip install 'agentgym[memory]' (from this source), or pip install"
            " chatterbot-corpus pyyaml") from None
    found: list[tuple[str, ...]] = []
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yml"):
            continue
        data = yaml.safe_load(entry.read_text(encoding="utf-8")) or {}
        for conversation in data.get("conversations") or ():
            lines = tuple(str(line).strip() for line in conversation
                          if isinstance(line, str | int | float) and str(line).strip())
            if len(lines) >= 2:
                found.append(lines)
    if not found:
        raise MissingResourceError(f"no conversations found under {root}",
                                   "reinstall chatterbot-corpus")
    return tuple(found)


def task_id(index: int, sessions: int, seed: int, session_lines: int = SESSION_LINES) -> str:
    """The id of generated task ``index``: it names its size and seed, so that tasks of
    different generators never share an id."""
    lines = "" if session_lines == SESSION_LINES else f"-l{session_lines}"
    return f"memory-gen-s{sessions}{lines}-seed{seed}-{index}"


def make_task(index: int, sessions: int = 20, seed: int = 0,
              questions: tuple[str, ...] = QUESTION_TYPES,
              session_lines: int = SESSION_LINES) -> Task:
    """Generated task ``index``: ``sessions`` dated sessions of at most ``session_lines``
    lines of small talk each (plus the facts said in them), and one question of each type
    in ``questions``; deterministic in its arguments."""
    check_options(sessions, questions, session_lines)
    rng = random.Random(f"memory:{seed}:{sessions}:{index}")
    people = _people(rng, len(questions) * 2 + 1)
    corpus = distractor_conversations()
    dates = _dates(rng, sessions)
    facts: list[_Fact] = []
    asked: list[dict[str, Any]] = []
    for kind in questions:
        new_facts, question = _QUESTIONS[kind](rng, sessions, people, dates)
        facts += new_facts
        asked.append({"type": kind, **question,
                      "evidence": [{"session": f.session, "text": f.text} for f in new_facts]})
    by_session: dict[int, list[str]] = {}
    for fact in facts:
        by_session.setdefault(fact.session, []).append(fact.text)
    rendered = []
    for number in range(sessions):
        lines = list(rng.choice(corpus))[:session_lines]
        turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": line}
                 for i, line in enumerate(lines)]
        for text in by_session.get(number, ()):
            at = 2 * rng.randint(0, len(turns) // 2)
            said = f"By the way, {text[0].lower() + text[1:] if text.startswith('My ') else text}"
            turns[at:at] = [{"role": "user", "content": said},
                            {"role": "assistant", "content": "Thanks for telling me!"}]
        rendered.append({"when": dates[number].strftime("%Y/%m/%d (%a)"), "turns": turns})
    return Task(
        id=task_id(index, sessions, seed, session_lines),
        prompt=render_session(rendered, 0),
        metadata={"sessions": rendered, "questions": asked, "source": "generated"},
        solution=reference_solution(rendered, asked),
    )


def check_options(sessions: int, questions: tuple[str, ...],
                  session_lines: int = SESSION_LINES) -> None:
    """Raise a clear error for a size or question list the generator cannot make."""
    unknown = [q for q in questions if q not in QUESTION_TYPES]
    if unknown or not questions:
        raise InvalidArgumentError(
            f"questions={list(questions)!r}: choose from {', '.join(QUESTION_TYPES)}")
    # Each question's facts go in different sessions, all before the last one.
    least = max(2, 1 + max(FACT_SESSIONS[q] for q in questions))
    if not isinstance(sessions, int) or sessions < least:
        raise InvalidArgumentError(
            f"sessions={sessions!r}: tasks asking {', '.join(questions)} need at least"
            f" {least} sessions (a question's facts go in different sessions, never the"
            " last), e.g. sessions=20")
    if not isinstance(session_lines, int) or session_lines < 0:
        raise InvalidArgumentError(
            f"session_lines={session_lines!r}: give the lines of small talk per session, an"
            f" int >= 0 (default {SESSION_LINES})")


# ---- sessions as the agent sees them, and the reference solution --------------------------


def render_session(sessions: list[dict[str, Any]], number: int) -> str:
    """Session ``number`` (0-based) as the observation that shows it: a header with its
    date (``when``), then its turns."""
    session = sessions[number]
    lines = [f"{'User' if t['role'] == 'user' else 'Assistant'}: {t['content']}"
             for t in session["turns"]]
    return "\n".join([f"Session {number + 1} of {len(sessions)} ({session['when']})", *lines])


def note_of(session: dict[str, Any], text: str) -> str:
    """What the reference solution saves for a fact: its session's date, then the fact
    (cut to fit one note)."""
    note = f"{session['when'].split(' ')[0]}: {text.strip()}"
    return note if len(note) <= MAX_NOTE_CHARS else note[:MAX_NOTE_CHARS - 3] + "..."


def reference_solution(sessions: list[dict[str, Any]],
                       questions: list[dict[str, Any]]) -> list[SolutionTurn]:
    """Save every fact a question needs while its session is shown, then per question:
    search the memory, and answer (abstaining where the history never said)."""
    needed: dict[int, list[str]] = {}
    for question in questions:
        for item in question["evidence"]:
            needed.setdefault(item["session"], []).append(item["text"])
    turns = []
    for number in range(len(sessions)):
        calls = [ToolCall("memory_write", {"text": note_of(sessions[number], text)})
                 for text in dict.fromkeys(needed.get(number, ()))]
        turns.append(SolutionTurn([*calls, ToolCall("next_session", {})]))
    for question in questions:
        turns.append(SolutionTurn([ToolCall("memory_search", {"query": question["question"],
                                                              "k": 10})]))
        turns.append(SolutionTurn([ToolCall("answer", {"text": question["answer"]})]))
    return turns


# ---- the question types ------------------------------------------------------------------


def _people(rng: random.Random, count: int) -> list[str]:
    names = rng.sample(_NAMES, count)
    return [f"{rng.choice(_RELATIONS)} {name}" for name in names]


def _dates(rng: random.Random, count: int) -> list[dt.date]:
    dates, day = [], FIRST_DATE
    for _ in range(count):
        dates.append(day)
        day += dt.timedelta(days=rng.randint(1, 3))
    return dates


def _sessions(rng: random.Random, total: int, count: int) -> list[int]:
    """``count`` distinct sessions, in order; never the last one, so that every fact has
    left the newest session when the questions come."""
    return sorted(rng.sample(range(total - 1), count))


def _single(rng, total, people, dates):
    statement, question, values = rng.choice(_ATTRIBUTES)
    who, value = people.pop(), rng.choice(values)
    [at] = _sessions(rng, total, 1)
    answer = value.removesuffix(" car") if "colour" in question else value
    return ([_Fact(at, statement.format(who=who, value=value))],
            {"question": question.format(who=who), "answer": answer, "metric": "exact"})


def _update(rng, total, people, dates):
    who = people.pop()
    first, then = rng.sample(_CITIES, 2)
    old, new = _sessions(rng, total, 2)
    return ([_Fact(old, f"My {who} lives in {first}."),
             _Fact(new, f"My {who} has just moved from {first} to {then}.")],
            {"question": f"Which city does my {who} live in now?", "answer": then,
             "metric": "exact"})


def _count(rng, total, people, dates):
    statement, question = rng.choice(_ACTIVITIES)
    times = rng.randint(2, 5)
    return ([_Fact(at, statement) for at in _sessions(rng, total, times)],
            {"question": f"{question} Answer with a number.", "answer": str(times),
             "metric": "exact"})


def _temporal(rng, total, people, dates):
    (first, _), (second, second_base) = rng.sample(_EVENTS, 2)
    at_first, at_second = _sessions(rng, total, 2)
    days = (dates[at_second] - dates[at_first]).days
    return ([_Fact(at_first, f"I {first} today."), _Fact(at_second, f"I {second} today.")],
            {"question": f"How many days after I {first} did I {second_base}? Answer with a"
                         " number.", "answer": str(days), "metric": "exact"})


def _multi_hop(rng, total, people, dates):
    who, company, city = people.pop(), rng.choice(_COMPANIES), rng.choice(_CITIES)
    job, base = _sessions(rng, total, 2)
    if rng.random() < 0.5:
        job, base = base, job
    return ([_Fact(job, f"My {who} works at {company}."),
             _Fact(base, f"{company} has its head office in {city}.")],
            {"question": f"In which city is the head office of the company my {who} works"
                         " at?", "answer": city, "metric": "exact"})


def _abstention(rng, total, people, dates):
    _, question, _ = rng.choice(_ATTRIBUTES)
    who = people.pop()  # a person no session mentions
    return ([], {"question": question.format(who=who), "answer": ABSTAIN_ANSWER,
                 "metric": "abstain"})


_QUESTIONS = {"single": _single, "update": _update, "count": _count, "temporal": _temporal,
              "multi_hop": _multi_hop, "abstention": _abstention}
