"""Log parsers (pytest, Django, SymPy, the harness's id spellings), their per-repository
registry, and reading which test files failed to load."""

from __future__ import annotations

import pytest

from agentgym.core.errors import AgentGymError
from agentgym.plugins.swe import grading, logs
from agentgym.plugins.swe.logs import (
    ERROR,
    FAILED,
    PASSED,
    XFAIL,
    XPASS,
    django_load_errors,
    log_parser_for,
    parse_log_django,
    parse_log_matplotlib,
    parse_log_pytest,
    parse_log_pytest_options,
    parse_log_sympy,
    pytest_load_errors,
    register_log_parser,
    split_node_id,
    sympy_load_errors,
)

PYTEST_RA_LOG = """\
============================= test session starts ==============================
platform linux -- Python 3.11.2, pytest-8.3.3, pluggy-1.5.0
rootdir: /testbed
configfile: setup.cfg
collected 9 items / 1 error

tests/test_core.py ..FEsxX.E                                             [100%]

==================================== ERRORS ====================================
_____________________ ERROR at setup of test_fixture_err _______________________
E   RuntimeError: boom
=================================== FAILURES ===================================
______________________________ test_parse[a - b] _______________________________

    def test_parse(pair):
>       assert 1 == 2
E       assert 1 == 2

tests/test_core.py:12: AssertionError
----------------------------- Captured stdout call -----------------------------
PASSED tests/test_core.py::test_parse[a - b]
==================================== PASSES ====================================
___________________________________ test_ok ____________________________________
----------------------------- Captured stdout call -----------------------------
FAILED tests/test_core.py::test_ok - printed by the test itself
=========================== short test summary info ============================
PASSED tests/test_core.py::test_ok
PASSED tests/test_core.py::TestThing::test_method[x y-[nested]]
PASSED tests/test_core.py::test_teardown
FAILED tests/test_core.py::test_parse[a - b] - assert 1 == 2
ERROR tests/test_core.py::test_fixture_err - RuntimeError: boom
SKIPPED [1] tests/test_core.py:30: needs network
XFAIL tests/test_core.py::test_xfail - known bug
XPASS tests/test_core.py::test_xpass - fixed upstream?
ERROR tests/test_broken.py - ImportError: cannot import name 'x' from 'pkg'
ERROR tests/test_core.py::test_teardown - OSError: teardown failed
===== 1 failed, 3 passed, 1 skipped, 1 xfailed, 1 xpassed, 3 errors in 0.12s =====
"""


def test_pytest_parser_reads_the_ra_summary() -> None:
    assert parse_log_pytest(PYTEST_RA_LOG) == {
        "tests/test_core.py::test_ok": PASSED,
        "tests/test_core.py::TestThing::test_method[x y-[nested]]": PASSED,
        "tests/test_core.py::test_parse[a - b]": FAILED,
        "tests/test_core.py::test_fixture_err": ERROR,
        "tests/test_core.py::test_xfail": XFAIL,
        "tests/test_core.py::test_xpass": XPASS,
        "tests/test_broken.py": ERROR,
        # passed its call, then its teardown failed: the failure sticks
        "tests/test_core.py::test_teardown": ERROR,
    }


def test_pytest_parser_reads_verbose_xdist_colour_and_pytest7_lines() -> None:
    verbose = """\
tests/test_a.py::test_one PASSED                                         [ 25%]
tests/test_a.py::test_two[1 PASSED 2] FAILED                             [ 50%]
tests/test_a.py::TestK::test_three SKIPPED (no reason)                   [ 75%]
tests/test_a.py::test_four XFAIL (flaky)                                 [100%]
tests/test_a.py ... some other line PASSED here
"""
    assert parse_log_pytest(verbose) == {
        "tests/test_a.py::test_one": PASSED,
        "tests/test_a.py::test_two[1 PASSED 2]": FAILED,
        "tests/test_a.py::TestK::test_three": "SKIPPED",
        "tests/test_a.py::test_four": XFAIL,
    }
    xdist = "[gw1] [ 50%] PASSED tests/test_a.py::test_one\n[gw0] [100%] FAILED tests/b.py::t\n"
    assert parse_log_pytest(xdist) == {"tests/test_a.py::test_one": PASSED,
                                       "tests/b.py::t": FAILED}
    colour = "\x1b[32mPASSED\x1b[0m tests/test_a.py::test_one\r\n"
    assert parse_log_pytest(colour) == {"tests/test_a.py::test_one": PASSED}
    pytest7 = ("XFAIL tests/a.py::test_x\n  reason: bug 12\n"
               "XPASS tests/a.py::test_y unexpectedly passing\n")
    assert parse_log_pytest(pytest7) == {"tests/a.py::test_x": XFAIL, "tests/a.py::test_y": XPASS}


def test_pytest_parser_prefers_the_summary_over_earlier_lines() -> None:
    log = ("tests/a.py::test_f PASSED\nPASSED tests/a.py::test_g\n"
           "==== short test summary info ====\nFAILED tests/a.py::test_f - boom\n"
           "FAILED tests/a.py::test_g\n")
    assert parse_log_pytest(log) == {"tests/a.py::test_f": FAILED, "tests/a.py::test_g": FAILED}


@pytest.mark.parametrize(("text", "node", "rest"), [
    ("tests/a.py::test_b - AssertionError: x", "tests/a.py::test_b", "AssertionError: x"),
    ("tests/a.py::T::test_b[a - b] - E", "tests/a.py::T::test_b[a - b]", "E"),
    ("tests/a.py::test_b[x[1]-y] extra", "tests/a.py::test_b[x[1]-y]", "extra"),
    ("tests/a.py::test_b[unbalanced[] - msg", "tests/a.py::test_b[unbalanced[]", "msg"),
    ("tests/a.py - ImportError", "tests/a.py", "ImportError"),
    ("tests/a.py::test_b", "tests/a.py::test_b", ""),
])
def test_split_node_id(text: str, node: str, rest: str) -> None:
    assert split_node_id(text) == (node, rest)


def test_django_parser() -> None:
    log = """\
Testing against Django installed in '/testbed/django'
test_ascii_validator (auth_tests.test_validators.UsernameValidatorsTests) ... ok
test_unicode_validator (auth_tests.test_validators.UsernameValidatorsTests) ... FAIL
test_help_text (auth_tests.test_validators.UserAttributeSimilarityValidatorTest)
Validator help text is translated. ... ok
test_path (model_fields.test_filepathfield.FilePathFieldTests) ... Importing application x
System check identified no issues (0 silenced).
ok
test_skip (x.tests.Y) ... skipped 'Requires PIL'
test_xf (x.tests.Y) ... expected failure
test_new (x.tests.Y.test_new) ... ERROR
test_never_finished (x.tests.Z) ...

======================================================================
FAIL: test_unicode_validator (auth_tests.test_validators.UsernameValidatorsTests)
----------------------------------------------------------------------
Ran 8 tests in 0.011s

OK
"""
    assert parse_log_django(log) == {
        "test_ascii_validator (auth_tests.test_validators.UsernameValidatorsTests)": PASSED,
        "test_unicode_validator (auth_tests.test_validators.UsernameValidatorsTests)": FAILED,
        "test_help_text (auth_tests.test_validators.UserAttributeSimilarityValidatorTest)":
            PASSED,
        "Validator help text is translated.": PASSED,  # the harness's name for it
        "test_path (model_fields.test_filepathfield.FilePathFieldTests)": PASSED,
        "test_skip (x.tests.Y)": "SKIPPED",
        "test_xf (x.tests.Y)": XFAIL,
        "test_new (x.tests.Y.test_new)": ERROR,
        "test_new (x.tests.Y)": ERROR,
    }


def test_sympy_parser() -> None:
    log = """\
============================= test process starts ==============================
sympy/printing/tests/test_mathml.py[4]
test_presentation_symbol ok
test_mathml_printer F
test_print_basic E
test_known_bug f                                                            [OK]
________________________________ xpassed tests _________________________________
"""
    assert parse_log_sympy(log) == {
        "test_presentation_symbol": PASSED, "test_mathml_printer": FAILED,
        "test_print_basic": ERROR, "test_known_bug": XFAIL}


def test_log_parsers_are_chosen_and_registered_per_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "LOG_PARSERS", dict(logs.LOG_PARSERS))
    assert log_parser_for("Django/Django") is parse_log_django
    assert log_parser_for("psf/requests") is parse_log_pytest_options
    assert log_parser_for("pallets/flask") is parse_log_pytest
    # grading re-exports the registry's functions
    assert grading.log_parser_for is log_parser_for
    assert grading.register_log_parser is register_log_parser

    def parse_mine(log: str) -> dict[str, str]:
        return {"only": PASSED}

    register_log_parser("me/mine", parse_mine)
    assert log_parser_for("me/mine") is parse_mine
    with pytest.raises(AgentGymError, match=r"already has the log parser.*replace=True"):
        register_log_parser("django/django", parse_mine)
    register_log_parser("django/django", parse_mine, replace=True)
    assert log_parser_for("django/django") is parse_mine


def test_a_forged_ok_does_not_outlast_the_runners_failure_report() -> None:
    """Code under test that writes "ok" to stderr completes its test's line before the
    runner writes FAIL on a line of its own; unittest's report of the failure after the
    run, and SymPy's, are what stick."""
    django = ("test_fix (app.tests.Case) ... ok\nFAIL\n"
              "test_doc (app.tests.Case)\nFixes the thing. ... ok\nERROR\n"
              "test_fine (app.tests.Case) ... ok\n\n" + "=" * 70 + "\n"
              "FAIL: test_fix (app.tests.Case.test_fix)\n" + "-" * 70 + "\nTraceback\n"
              + "=" * 70 + "\nERROR: test_doc (app.tests.Case)\nFixes the thing.\n"
              + "-" * 70 + "\nTraceback\n")
    assert parse_log_django(django) == {
        "test_fix (app.tests.Case)": FAILED, "test_fix (app.tests.Case.test_fix)": FAILED,
        "test_doc (app.tests.Case)": ERROR, "Fixes the thing.": ERROR,
        "test_fine (app.tests.Case)": PASSED}
    sympy = ("sympy/core/tests/test_x.py[2] \ntest_fix ok\nF\ntest_fine ok\n"
             + "_" * 20 + " sympy/core/tests/test_x.py:test_fix " + "_" * 20 + "\n"
             "Traceback (most recent call last):\nAssertionError\n")
    assert parse_log_sympy(sympy) == {"test_fix": FAILED, "test_fine": PASSED}


def test_django_parser_names_a_described_test_by_its_docstring_too() -> None:
    # verbosity 2 prints the docstring's first line before the status; the official
    # harness names the test by that line, and SWE-bench ids use it
    log = ("test_help_text (auth_tests.test_validators.Sim)\n"
           "Validator help text is translated. ... ok\n"
           "test_other (auth_tests.test_validators.Sim)\n"
           "Other check fails. ... FAIL\n")
    assert parse_log_django(log) == {
        "test_help_text (auth_tests.test_validators.Sim)": PASSED,
        "Validator help text is translated.": PASSED,
        "test_other (auth_tests.test_validators.Sim)": FAILED,
        "Other check fails.": FAILED,
    }


def test_harness_id_spellings_for_path_parameters_and_mouse_buttons() -> None:
    log = ("==== short test summary info ====\n"
           "PASSED tests/test_utils.py::test_where[/tmp/abc/data.txt]\n"
           "PASSED tests/test_utils.py::test_glob[/tmp/*.txt]\n"
           "FAILED lib/test_widgets.py::test_click[MouseButton.LEFT-x] - boom\n")
    options = parse_log_pytest_options(log)
    assert options["tests/test_utils.py::test_where[/data.txt]"] == PASSED
    assert options["tests/test_utils.py::test_where[/tmp/abc/data.txt]"] == PASSED
    assert "tests/test_utils.py::test_glob[/*.txt]" not in options  # a glob stays whole
    matplotlib = parse_log_matplotlib(log)
    assert matplotlib["lib/test_widgets.py::test_click[1-x]"] == FAILED
    assert matplotlib["lib/test_widgets.py::test_click[MouseButton.LEFT-x]"] == FAILED


def test_pytest_load_errors_name_the_file_and_the_error_line() -> None:
    log = """\
==================================== ERRORS ====================================
____________________ ERROR collecting tests/test_broken.py _____________________
tests/test_broken.py:1: in <module>
    from calc import nothing
E   ImportError: cannot import name 'nothing' from 'calc'
_____________________ ERROR collecting tests/test_old.py _______________________
E   SyntaxError: invalid syntax
=========================== short test summary info ============================
PASSED tests/test_ok.py::test_fine
ERROR tests/test_broken.py - ImportError: cannot import name 'nothing' from 'calc'
ERROR tests/test_old.py
ERROR tests/test_ok.py::test_fixture - RuntimeError: not a load error
"""
    assert pytest_load_errors(log) == {
        "tests/test_broken.py": "ImportError: cannot import name 'nothing' from 'calc'",
        "tests/test_old.py": "SyntaxError: invalid syntax",  # pytest 5 prints no message
    }


def test_django_and_sympy_load_errors() -> None:
    django = """\
app.test_gone (unittest.loader._FailedTest) ... ERROR

======================================================================
ERROR: app.test_gone (unittest.loader._FailedTest)
----------------------------------------------------------------------
ImportError: Failed to import test module: app.test_gone
Traceback (most recent call last):
  File "/usr/lib/python3.11/unittest/loader.py", line 407, in _find_test_path
    module = self._get_module_from_name(name)
ModuleNotFoundError: No module named 'calc.missing'

----------------------------------------------------------------------
Ran 1 test in 0.001s
"""
    assert django_load_errors(django) == {
        "app.test_gone": "ModuleNotFoundError: No module named 'calc.missing'"}
    sympy = """\
sympy/core/tests/test_ops.py[?]   Failed to import                          [FAIL]

________________________________________________________________________________
_____________________ sympy/core/tests/test_ops.py _____________________________
Traceback (most recent call last):
  File "sympy/core/tests/test_ops.py", line 1, in <module>
ImportError: cannot import name 'clamp'
============= tests finished: 0 passed, 1 exceptions, in 0.01 seconds ==========
"""
    assert sympy_load_errors(sympy) == {
        "sympy/core/tests/test_ops.py": "ImportError: cannot import name 'clamp'"}
