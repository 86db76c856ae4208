"""Reading what a test suite reports: statuses, failure excerpts, normalised output and
each failure's error type."""

from __future__ import annotations

import pytest

from agentgym.plugins.swe.suite import (
    crashes,
    error_type,
    errors_by_test,
    failure_excerpts,
    failure_types,
    normalise_output,
    parse_pytest_report,
)

REPORT = """\
============================= test session starts ==============================
collected 5 items

tests/test_a.py .F.E                                                     [100%]

==================================== ERRORS ====================================
___________________________ ERROR at setup of test_d ___________________________
E   RuntimeError: fixture broke
=================================== FAILURES ===================================
______________________________ TestB.test_b[x-1] _______________________________
tests/test_a.py:12: in test_b
    assert f(1) == 2
E   assert 3 == 2
E    +  where 3 = <function f at 0x7f225ecbbba0>(1)
E   Use -v to get more diff
=========================== short test summary info ============================
PASSED tests/test_a.py::test_a
PASSED tests/test_a.py::test_c[a b]
FAILED tests/test_a.py::TestB::test_b[x-1] - assert 3 == 2
ERROR tests/test_a.py::test_d - RuntimeError: fixture broke
ERROR tests/test_broken.py - ImportError: cannot import name 'g'
SKIPPED [1] tests/test_a.py:30: no network
XFAIL tests/test_a.py::test_e - known
==================== 1 failed, 2 passed, 1 error in 0.12s =====================
"""


def test_status_lines_are_read_by_node_id() -> None:
    assert parse_pytest_report(REPORT) == {
        "tests/test_a.py::test_a": "PASSED",
        "tests/test_a.py::TestB::test_b[x-1]": "FAILED",
        "tests/test_a.py::test_d": "ERROR",
        "tests/test_a.py::test_e": "XFAIL",
    }  # ids with spaces and file-level collection errors are left out


def test_failure_messages_are_excerpted_without_addresses_or_noise() -> None:
    assert failure_excerpts(REPORT) == {
        "test_d": ["RuntimeError: fixture broke"],
        "TestB.test_b[x-1]": ["assert 3 == 2", "+  where 3 = <function f at 0x...>(1)"],
    }


def test_test_output_is_normalised_for_problem_statements() -> None:
    output = ("E   FileNotFoundError: '/workspace/pkg/data.txt' in /workspace\n"
              "E   at <Thing object at 0x7f225ecbbba0>: /tmp/pytest-of-root/pytest-12/x0/a"
              " /tmp/tmpab_c9x12/b took 0.123s\n")
    assert normalise_output(output) == (
        "E   FileNotFoundError: 'pkg/data.txt' in .\n"
        "E   at <Thing object at 0x...>: /tmp/pytest/x0/a /tmp/tmpXXXXXXXX/b took N.NNs\n")
    # Not a workspace path: another folder that starts alike, or a word.
    assert normalise_output("/workspaces/x /my/workspace/y") == "/workspaces/x /my/workspace/y"


@pytest.mark.parametrize("message, kind", [
    ("assert 3 == 2", "AssertionError"),
    ("AssertionError: assert {'a': 1} == {}", "AssertionError"),
    ("Failed: DID NOT RAISE <class 'ValueError'>", "Failed"),
    ("TypeError: unsupported operand type(s) for +: 'int' and 'str'", "TypeError"),
    ("toolz.utils.CustomError: boom", "CustomError"),
    ("RecursionError", "RecursionError"),
    ("fixture 'x' not found", "unknown"),
])
def test_error_types_are_read_from_failure_messages(message: str, kind: str) -> None:
    assert error_type(message) == kind


def test_each_failing_test_gets_its_error_type_and_crashes_are_told_apart() -> None:
    failing = ["tests/test_a.py::TestB::test_b[x-1]", "tests/test_a.py::test_d"]
    types = failure_types(REPORT, failing)
    assert types == {"tests/test_a.py::TestB::test_b[x-1]": "AssertionError",
                     "tests/test_a.py::test_d": "RuntimeError"}
    assert crashes(types) and not crashes({failing[0]: types[failing[0]]})
    # Without a summary message, the failure section says it.
    bare = REPORT.replace(" - assert 3 == 2", "").replace(" - RuntimeError: fixture broke", "")
    assert failure_types(bare, failing) == types
    assert errors_by_test(failing, failure_excerpts(REPORT)) == {
        failing[0]: ["assert 3 == 2", "+  where 3 = <function f at 0x...>(1)"],
        failing[1]: ["RuntimeError: fixture broke"]}
