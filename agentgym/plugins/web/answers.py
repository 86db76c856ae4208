"""Answer checks that listing every candidate cannot pass.

A check that only asks an answer to *include* the expected phrases pays an agent that
answers with every name, number and price the pages showed: the right one is among them.
Every text answer of a web task is therefore checked by :func:`check_answer` against an
:class:`AnswerSpec`:

``exact``
    the normalized answer (:func:`normalize`) equals this text; nothing else is needed.
``must_include``
    phrases the normalized answer must contain, as whole words (``4`` is not in ``14``),
    and then two more rules:

    * **no other candidate**: each phrase of ``must_exclude`` and each value of the
      candidate ``kinds`` (the site's products, users, forums, ...; ``number`` is every
      number) that appears in the answer must be part of an expected phrase (or contain
      one: ``Dark Roast Coffee Beans 1 lb`` names the expected ``Dark Roast Coffee
      Beans``). An answer that also names another product, user or number is wrong.
    * **a length bound**: at most ``max_chars`` characters, by default twice the
      expected phrases' length plus :data:`SLACK_CHARS` (room for a sentence around the
      value, not for a list).

    A ``must_include`` check with neither ``kinds`` nor ``must_exclude`` is refused
    (:meth:`AnswerSpec.from_dict`): the length bound alone leaves room for a short list.

Candidates of a kind come from the site's seeded database (its template, which no
episode writes), so an agent cannot remove the values that would give it away.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym.core.errors import InvalidArgumentError

#: The candidate kind every check knows: each number in the answer (``34.99``, ``1,024``,
#: the parts of ``2025-03-03``).
NUMBER = "number"
#: Characters an answer may add to its expected phrases (twice their length, plus this).
SLACK_CHARS = 80
# Thousands groups of exactly three digits, then at most one decimal part: "19.99,24.99"
# is two numbers (a list joined without spaces), not one that contains both.
_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?![\d,])(?:\.\d+)?|\d+(?:\.\d+)?")


def normalize(text: str) -> str:
    """An answer as compared: lower case, spaces collapsed, outer quotes and a final period
    dropped."""
    text = re.sub(r"\s+", " ", str(text)).strip().lower()
    return text.strip("'\"` ").rstrip(".").strip()


@dataclass(frozen=True)
class AnswerSpec:
    """How a text answer is checked (module docstring).

    Args:
        exact: the whole answer, when it must be exactly this.
        must_include: phrases the answer must contain.
        kinds: candidate kinds (a site's, or ``number``) none of whose other values the
            answer may name.
        must_exclude: further phrases the answer may not name (the other candidates the
            pages show that no kind covers).
        max_chars: the longest answer accepted (default: twice the expected phrases'
            length plus :data:`SLACK_CHARS`).
    """

    exact: str | None = None
    must_include: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    must_exclude: tuple[str, ...] = ()
    max_chars: int | None = None

    def __post_init__(self) -> None:
        if self.exact is None and not self.must_include:
            raise InvalidArgumentError("an answer check needs 'exact' or 'must_include'")

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> AnswerSpec:
        """A spec from a task file's ``answer`` object. Unknown keys are an error, and so is
        a ``must_include`` check with neither ``kinds`` nor ``must_exclude``."""
        known = {"exact", "must_include", "kinds", "must_exclude", "max_chars"}
        unknown = sorted(set(spec) - known)
        if unknown:
            raise InvalidArgumentError(f"answer check {dict(spec)} has unknown keys {unknown}"
                                       f" (known: {', '.join(sorted(known))})")
        made = cls(exact=spec.get("exact"), must_include=tuple(spec.get("must_include", ())),
                   kinds=tuple(spec.get("kinds", ())),
                   must_exclude=tuple(spec.get("must_exclude", ())),
                   max_chars=spec.get("max_chars"))
        if made.exact is None and not (made.kinds or made.must_exclude):
            raise InvalidArgumentError(
                f"the answer check must_include={list(made.must_include)} can be passed by"
                " listing every candidate: add 'kinds' (the kinds of value the answer is,"
                " e.g. ['product'] or ['number']) or 'must_exclude' (the other candidates),"
                " or use 'exact'")
        return made

    @property
    def limit(self) -> int:
        """The longest answer accepted, in normalized characters."""
        if self.max_chars is not None:
            return self.max_chars
        return 2 * len(", ".join(normalize(p) for p in self.must_include)) + SLACK_CHARS


@dataclass
class Candidates:
    """Values of each candidate kind (``{"product": [...], "user": [...]}``), as a site's
    seeded database holds them; ``number`` needs none."""

    values: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def kinds(self) -> list[str]:
        return sorted({*self.values, NUMBER})

    def of(self, kind: str) -> tuple[str, ...]:
        """The values of ``kind`` (none for ``number``, which matches every number)."""
        if kind == NUMBER:
            return ()
        if kind not in self.values:
            raise InvalidArgumentError(f"answer kind {kind!r} is not known here (known:"
                                       f" {', '.join(self.kinds())})")
        return self.values[kind]


def check_answer(spec: AnswerSpec | Mapping[str, Any] | None, answer: str | None,
                 candidates: Candidates | None = None) -> tuple[bool, str]:
    """Whether ``answer`` passes ``spec`` (module docstring), and why not."""
    if not spec:
        return True, ""
    if not isinstance(spec, AnswerSpec):
        spec = AnswerSpec.from_dict(spec)
    if answer is None:
        return False, "no answer was sent (send_msg_to_user)"
    got = normalize(answer)
    if spec.exact is not None:
        want = normalize(spec.exact)
        return (True, "") if got == want else (False, f"answer {got!r} is not {want!r}")
    # Whole words: "4" is in "4 subscribers", not in "14".
    missing = [p for p in spec.must_include if not _spans(got, [normalize(p)], words=True)]
    if missing:
        return False, f"answer {got!r} lacks {missing}"
    if len(got) > spec.limit:
        return False, (f"answer is {len(got)} characters, more than the {spec.limit} an"
                       f" answer of {list(spec.must_include)} may take: give the answer, not"
                       " a list of candidates")
    others = other_candidates(got, spec, candidates or Candidates())
    if others:
        return False, (f"answer {_short(got)!r} also names {others[:5]}"
                       + (f" and {len(others) - 5} more" if len(others) > 5 else "")
                       + ", which are not the answer")
    return True, ""


def other_candidates(got: str, spec: AnswerSpec, candidates: Candidates) -> list[str]:
    """The candidates (of ``spec``'s kinds and ``must_exclude``) named in the normalized
    answer ``got`` outside its expected phrases, in order of appearance."""
    expected = _spans(got, (normalize(p) for p in spec.must_include), words=True)
    found: list[tuple[int, str]] = []
    phrases: list[str] = list(spec.must_exclude)
    for kind in spec.kinds:
        if kind == NUMBER:
            # A number must lie inside an expected phrase: one that contains it is
            # another number ("100,200,300" is not "200").
            found += [(m.start(), m.group()) for m in _NUMBER.finditer(got)
                      if not _within_expected((m.start(), m.end()), expected, inside=True)]
        else:
            phrases += candidates.of(kind)
    for phrase in {normalize(p) for p in phrases if normalize(p)}:
        for start, end in _spans(got, [phrase], words=True):
            if not _within_expected((start, end), expected):
                found.append((start, phrase))
    seen: list[str] = []
    for _, text in sorted(found):
        if text not in seen:
            seen.append(text)
    return seen


def _spans(text: str, phrases: Iterable[str], words: bool) -> list[tuple[int, int]]:
    """Every occurrence (overlapping ones too) of each phrase in ``text``, as (start, end);
    whole words only when ``words``."""
    spans = []
    for phrase in phrases:
        if not phrase:
            continue
        pattern = re.escape(phrase)
        if words:
            pattern = rf"(?<![a-z0-9]){pattern}(?![a-z0-9])"
        spans += [(m.start(), m.start() + len(phrase))
                  for m in re.finditer(f"(?={pattern})", text)]
    return spans


def _within_expected(span: tuple[int, int], expected: Sequence[tuple[int, int]],
                     inside: bool = False) -> bool:
    """Whether a candidate at ``span`` is part of an expected phrase, or (unless
    ``inside``) names one more fully (contains it)."""
    start, end = span
    return any((s <= start and end <= e) or (not inside and start <= s and e <= end)
               for s, e in expected)


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."
