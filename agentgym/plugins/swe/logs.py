"""Reading test logs: which test got which status, and which test files failed to load.

A log parser maps a test run's log to ``{test_id: status}`` with the statuses
:data:`PASSED`, :data:`FAILED`, :data:`ERROR`, :data:`SKIPPED`, :data:`XFAIL` and
:data:`XPASS`, naming tests as the SWE-bench datasets name them:

* :func:`parse_log_pytest`: pytest's ``-rA`` summary and ``-v`` lines (node ids);
* :func:`parse_log_django`: Django's ``runtests.py --verbosity 2`` (unittest) lines,
  ``test_x (app.tests.Case)``, and a test whose docstring is printed also under the
  docstring's first line, which is the name the official harness records for it;
* :func:`parse_log_sympy`: SymPy's ``bin/test --verbose`` lines (bare function names);
* :func:`parse_log_pytest_options` and :func:`parse_log_matplotlib`: pytest's, plus the id
  spellings the official harness writes for some repositories (a parameter that is an
  absolute path shortened to its last part; matplotlib's ``MouseButton.LEFT`` as ``1``).

:data:`LOG_PARSERS` holds the repositories whose parser is not :func:`parse_log_pytest`, as
the official harness assigns them; :func:`log_parser_for` picks one and
:func:`register_log_parser` lets a plugin add its own.

Load errors (a test file that could not even be imported) are read per runner by
:func:`pytest_load_errors`, :func:`django_load_errors` and :func:`sympy_load_errors`:
``{the file or module: the error line}``, so that a listed test missing from the log can be
explained.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from agentgym.core.errors import AgentGymError

PASSED, FAILED, ERROR, SKIPPED, XFAIL, XPASS = (
    "PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")
STATUSES = (PASSED, FAILED, ERROR, SKIPPED, XFAIL, XPASS)
#: Statuses that count as passing (the official harness also accepts an expected failure).
PASSING = frozenset({PASSED, XFAIL})

LogParser = Callable[[str], dict[str, str]]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_SUMMARY_HEADER = re.compile(r"^=+ short test summary info =+\s*$")
_STATUS_WORDS = "|".join(STATUSES)
_SUMMARY_LINE = re.compile(rf"^(?:\[gw\d+\] \[\s*\d+%\] )?({_STATUS_WORDS}) (.+)$")
_VERBOSE_LINE = re.compile(
    rf"^(\S.*?) ({_STATUS_WORDS})(?: \(.*\))?(?:\s+\[\s*\d+%\])?\s*$")
_FAILING = frozenset({FAILED, ERROR})


def _clean_lines(log: str) -> list[str]:
    return [_ANSI.sub("", line).rstrip("\r") for line in log.split("\n")]


def _record(results: dict[str, str], test: str, status: str) -> None:
    # A test can be reported twice (PASSED, then ERROR at teardown): a failure sticks.
    if results.get(test) not in _FAILING:
        results[test] = status


# --- pytest ------------------------------------------------------------------------------


def split_node_id(text: str) -> tuple[str, str]:
    """Split ``"tests/a.py::test_b[x - y] - AssertionError"`` into the pytest node id and
    what follows it. Parameter ids in brackets may hold spaces, `` - `` and nested
    brackets; outside brackets, a node id holds no space."""
    start = text.find("::")
    if start < 0:  # a module-level ERROR (collection) names a file
        node, _, rest = text.partition(" - ")
        node = node.strip()
        if " " in node:  # pytest 7 XPASS: "XPASS path reason"
            node, _, more = node.partition(" ")
            rest = f"{more} - {rest}" if rest else more
        return node, rest.strip()
    i = start
    while text.startswith("::", i):
        i += 2
        while i < len(text) and text[i] not in " [" and not text.startswith("::", i):
            i += 1
        if i < len(text) and text[i] == "[":
            depth, j = 0, i
            while j < len(text):
                depth += {"[": 1, "]": -1}.get(text[j], 0)
                j += 1
                if depth == 0:
                    break
            if depth:  # unbalanced brackets: the id ends at the last "]" before a message
                cut = text.rfind("]", i, text.find(" - ", i) if " - " in text[i:] else None)
                j = cut + 1 if cut >= 0 else len(text)
            i = j
    rest = text[i:].strip()
    if rest.startswith("- "):
        rest = rest[2:]
    return text[:i], rest


def _pytest_summary(lines: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(statuses, messages) of the ``-rA`` summary lines, after the last summary header
    when there is one."""
    headers = [i for i, line in enumerate(lines) if _SUMMARY_HEADER.match(line)]
    summary_from = headers[-1] + 1 if headers else 0
    statuses: dict[str, str] = {}
    messages: dict[str, str] = {}
    for line in lines[summary_from:]:
        match = _SUMMARY_LINE.match(line)
        if not match:
            continue
        status, rest = match.groups()
        if status == SKIPPED and rest.startswith("["):
            continue  # "SKIPPED [1] path:line: reason" names no test
        node, message = split_node_id(rest)
        if node:
            _record(statuses, node, status)
            if message:
                messages.setdefault(node, message)
    return statuses, messages


def parse_log_pytest(log: str) -> dict[str, str]:
    """Test statuses from a pytest log.

    Reads the ``-rA`` short summary lines (``PASSED tests/a.py::test_b``,
    ``FAILED tests/a.py::test_c[1 - 2] - assert 1 == 2``, pytest-xdist's ``[gw0] [ 50%]``
    prefix) and the ``-v`` lines (``tests/a.py::test_b PASSED  [ 50%]``). When the log has
    a "short test summary info" header, summary lines count only after the last one, and
    they override verbose lines. ``SKIPPED [1] path:line: reason`` lines name no test and
    are ignored. ANSI colours are stripped.
    """
    lines = _clean_lines(log)
    headers = [i for i, line in enumerate(lines) if _SUMMARY_HEADER.match(line)]
    summary_from = headers[-1] + 1 if headers else 0
    verbose: dict[str, str] = {}
    for number, line in enumerate(lines):
        if number >= summary_from and _SUMMARY_LINE.match(line):
            continue
        match = _VERBOSE_LINE.match(line)
        if match and "::" in match.group(1):
            _record(verbose, match.group(1), match.group(2))
    summary, _ = _pytest_summary(lines)
    for node, status in summary.items():
        verbose.pop(node, None)
        verbose[node] = status
    return verbose


def _with_aliases(statuses: dict[str, str], alias: Callable[[str], str]) -> dict[str, str]:
    """``statuses`` plus each test under ``alias(test)`` too, when that differs."""
    out = dict(statuses)
    for test, status in statuses.items():
        other = alias(test)
        if other != test:
            _record(out, other, status)
    return out


_OPTION = re.compile(r"^(.*?)\[(.*)\]$")


def _short_path_option(test: str) -> str:
    match = _OPTION.match(test)
    if not match:
        return test
    main, option = match.groups()
    if option.startswith("/") and not option.startswith("//") and "*" not in option:
        return f"{main}[/{option.split('/')[-1]}]"
    return test


def parse_log_pytest_options(log: str) -> dict[str, str]:
    """:func:`parse_log_pytest`, each test whose parameter is an absolute path also named
    with the path cut to its last part (``test_x[/tmp/a/b]`` as ``test_x[/b]``), which is
    how the official harness names them for requests, pydicom and pylint."""
    return _with_aliases(parse_log_pytest(log), _short_path_option)


def parse_log_matplotlib(log: str) -> dict[str, str]:
    """:func:`parse_log_pytest`, with ``MouseButton.LEFT`` / ``MouseButton.RIGHT`` in an id
    also written ``1`` / ``3``, as the official harness names matplotlib's tests."""
    return _with_aliases(parse_log_pytest(log), lambda test: test.replace(
        "MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3"))


_COLLECTING = re.compile(r"^_+ ERROR collecting (\S+) _+$")


def pytest_load_errors(log: str) -> dict[str, str]:
    """Test files pytest could not import: ``{file: error}`` from the ``ERROR path - msg``
    summary lines, the message else taken from the file's "ERROR collecting" section (its
    last ``E`` line)."""
    lines = _clean_lines(log)
    statuses, messages = _pytest_summary(lines)
    sections: dict[str, str] = {}
    current: str | None = None
    for line in lines:
        match = _COLLECTING.match(line)
        if match:
            current = match.group(1)
            continue
        if current and re.match(r"^[_=]{5,}", line):
            current = None
        elif current and line.startswith("E "):
            sections[current] = line[1:].strip()
    errors = {node: messages.get(node) or sections.get(node, "")
              for node, status in statuses.items() if status == ERROR and "::" not in node}
    for node, message in sections.items():
        errors.setdefault(node, message)
    return errors


# --- Django ------------------------------------------------------------------------------

_DJANGO_STATUS = {
    "ok": PASSED, "FAIL": FAILED, "ERROR": ERROR, "skipped": SKIPPED,
    "expected failure": XFAIL, "unexpected success": XPASS,
}
_DJANGO_ID = r"(\w+) \(([\w.]+)\)"
_DJANGO_LINE = re.compile(
    rf"^{_DJANGO_ID} \.\.\. (ok|FAIL|ERROR|skipped|expected failure|unexpected success)\b")
_DJANGO_PENDING = re.compile(rf"^{_DJANGO_ID}(?: \.\.\. .*)?$")
# unittest's report of each failure after the run ("FAIL: test_x (app.tests.Case)"): the
# status that sticks, whatever the test's own line read (code under test that writes "ok"
# to stderr completes that line before the runner writes FAIL on a line of its own).
_DJANGO_REPORTED = re.compile(rf"^(FAIL|ERROR): {_DJANGO_ID}(?:\s.*)?$")
# Not "OK": that is unittest's final summary line, not a test's status.
_DJANGO_BARE = re.compile(r"^(ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)$")


def _django_ids(name: str, where: str) -> list[str]:
    # Python >= 3.11 writes "test_x (app.tests.Case.test_x)"; SWE-bench ids read
    # "test_x (app.tests.Case)". Both are recorded.
    ids = [f"{name} ({where})"]
    if where.endswith(f".{name}"):
        ids.append(f"{name} ({where[: -len(name) - 1]})")
    return ids


def parse_log_django(log: str) -> dict[str, str]:
    """Test statuses from Django's ``runtests.py --verbosity 2`` (unittest) log:
    ``test_x (app.tests.Case) ... ok``, with the status possibly on a later line (a
    docstring line, or setup chatter, in between). A test printed with its docstring is
    recorded under the docstring's first line too (``Validator help text is translated.``),
    as the official harness names it."""
    results: dict[str, str] = {}
    pending: list[str] = []
    after_report = None  # the status of a failure report, whose next line may be a docstring's
    for raw in log.split("\n"):
        line = _ANSI.sub("", raw).rstrip("\r").rstrip()
        reported = _DJANGO_REPORTED.match(line)
        if reported:
            word, name, where = reported.groups()
            after_report = _DJANGO_STATUS[word]
            for test in _django_ids(name, where):
                results[test] = after_report
            continue
        if after_report is not None:
            if line.strip() and not line.startswith("---"):
                results[line.strip()] = after_report  # its docstring's first line
            after_report = None
            continue
        match = _DJANGO_LINE.match(line)
        if match:
            name, where, word = match.groups()
            for test in _django_ids(name, where):
                _record(results, test, _DJANGO_STATUS[word])
            pending = []
            continue
        match = _DJANGO_PENDING.match(line)
        if match:
            pending = _django_ids(*match.groups())
            continue
        if pending:
            head, dots, tail = line.rpartition(" ... ")
            word = tail.strip() if dots else line.strip()
            bare = _DJANGO_BARE.match(word)
            if bare:
                status = _DJANGO_STATUS["skipped" if word.startswith("skipped") else word]
                described = [head.strip()] if dots and head.strip() else []
                for test in pending + described:
                    _record(results, test, status)
                pending = []
    return results


_DJANGO_IMPORT = re.compile(r"^ImportError: Failed to import test module: ([\w.]+)")


def django_load_errors(log: str) -> dict[str, str]:
    """Test modules unittest could not import: ``{module: error}``, the error being the
    last line of the traceback printed under ``Failed to import test module: module``."""
    lines = _clean_lines(log)
    errors: dict[str, str] = {}
    for number, line in enumerate(lines):
        match = _DJANGO_IMPORT.match(line.strip())
        if not match:
            continue
        last = line.strip()
        for following in lines[number + 1:]:
            if not following.strip() or re.match(r"^[-=]{10,}", following):
                break
            if not following.startswith(" "):
                last = following.strip()
        errors[match.group(1)] = last
    return errors


# --- SymPy -------------------------------------------------------------------------------

_SYMPY_STATUS = {"ok": PASSED, "F": FAILED, "E": ERROR, "f": XFAIL, "X": XPASS, "s": SKIPPED}
_SYMPY_LINE = re.compile(r"^\s*(test_\w+) (ok|F|E|f|X|s)(?:\s+\[\w+\])?\s*$")


def parse_log_sympy(log: str) -> dict[str, str]:
    """Test statuses from SymPy's ``bin/test --verbose`` log: ``test_name ok``,
    ``test_name F`` (failed), ``E`` (error), ``f`` (expected failure), ``X`` (unexpected
    pass), ``s`` (skipped). SWE-bench names SymPy tests by function name alone."""
    results: dict[str, str] = {}
    reported = set()
    for line in _clean_lines(log):
        match = _SYMPY_LINE.match(line)
        if match:
            _record(results, match.group(1), _SYMPY_STATUS[match.group(2)])
        # The runner's report of each failure and error after the run
        # ("____ sympy/core/tests/test_x.py:test_y ____"): it sticks, whatever the test's
        # own line read (code under test can print "ok" before the runner's "F").
        header = _SYMPY_REPORTED.match(line)
        if header:
            reported.add(header.group(1))
    for test in reported:
        results[test] = FAILED
    return results


_SYMPY_REPORTED = re.compile(r"^_{3,} \S+\.py:(test_\w+) _{3,}$")


_SYMPY_IMPORT = re.compile(r"^(\S+\.py)\[\?\]\s+Failed to import")


def sympy_load_errors(log: str) -> dict[str, str]:
    """Test files SymPy's runner could not import (``path[?]   Failed to import``):
    ``{file: error}``, the error being the last line of the file's traceback section."""
    lines = _clean_lines(log)
    errors = {m.group(1): "failed to import" for m in map(_SYMPY_IMPORT.match, lines) if m}
    for number, line in enumerate(lines):
        header = re.match(r"^_+ (\S+\.py) _+$", line)
        if not header or header.group(1) not in errors:
            continue
        body = []
        for following in lines[number + 1:]:
            if re.match(r"^[_=]{5,}", following):
                break
            if following.strip():
                body.append(following.strip())
        if body:
            errors[header.group(1)] = body[-1]
    return errors


# --- parsers per repository --------------------------------------------------------------

#: Parsers of repositories (``owner/name``, lower case) whose log is not read by
#: :func:`parse_log_pytest` alone, as the official harness assigns them; the others get
#: :func:`parse_log_pytest`. Add to it with :func:`register_log_parser`.
LOG_PARSERS: dict[str, LogParser] = {
    "django/django": parse_log_django,
    "sympy/sympy": parse_log_sympy,
    "psf/requests": parse_log_pytest_options,
    "pydicom/pydicom": parse_log_pytest_options,
    "pylint-dev/pylint": parse_log_pytest_options,
    "matplotlib/matplotlib": parse_log_matplotlib,
}


def log_parser_for(repo: str) -> LogParser:
    """The log parser of ``repo`` (``owner/name``, any case): its registered one, else
    :func:`parse_log_pytest`."""
    return LOG_PARSERS.get(repo.lower(), parse_log_pytest)


def register_log_parser(repo: str, parser: LogParser, *, replace: bool = False) -> None:
    """Make ``parser`` the log parser of ``repo`` (``owner/name``).

    A plugin that brings a dataset of repositories with their own test runners calls this
    when it is imported. Registering a repository that already has a parser raises unless
    ``replace`` is true, so two plugins cannot silently fight over one repository.
    """
    key = repo.lower()
    if key in LOG_PARSERS and not replace and LOG_PARSERS[key] is not parser:
        raise AgentGymError(
            f"repository {repo!r} already has the log parser"
            f" {getattr(LOG_PARSERS[key], '__qualname__', LOG_PARSERS[key])!r}; pass"
            " replace=True to override it")
    LOG_PARSERS[key] = parser


__all__ = [
    "ERROR",
    "FAILED",
    "LOG_PARSERS",
    "PASSED",
    "PASSING",
    "SKIPPED",
    "STATUSES",
    "XFAIL",
    "XPASS",
    "LogParser",
    "django_load_errors",
    "log_parser_for",
    "parse_log_django",
    "parse_log_matplotlib",
    "parse_log_pytest",
    "parse_log_pytest_options",
    "parse_log_sympy",
    "pytest_load_errors",
    "register_log_parser",
    "split_node_id",
    "sympy_load_errors",
]
