"""How a SWE task's tests are run: the runner, its arguments, and the per-repository commands
of the official SWE-bench harness.

Grading runs whole test *files* (the official harness's "test directives"), never a list of
test ids, then looks each listed test up in the log: a suite whose tests depend on state
an earlier test set up runs as the project runs it. :func:`plan` turns an instance into a
:class:`TestPlan`:

* the **arguments**: the files of the ``FAIL_TO_PASS`` / ``PASS_TO_PASS`` ids plus the files
  the ``test_patch`` adds or changes (data files such as ``.json`` and ``.txt`` left out, as
  the harness does), each written as the runner takes it (:class:`Runner`), in the
  project's collection order: sorted part by part, ``a/b.py`` before ``a/c/d.py`` before
  ``a/e.py``, which is how pytest (8 and later) walks folders and how Django and SymPy find
  their test modules. Past :data:`MAX_IDS_CHARS` characters the deepest are replaced by
  their folders, one level at a time (:func:`fit`), so the command line stays under the
  kernel's limit;
* the **command**: the ``test_cmd`` given to grading or the instance's, else the harness's
  command for the repository and version (:data:`HARNESS_SPECS`), else
  :data:`DEFAULT_TEST_CMD`. The arguments are appended, or fill ``{files}``; ``{tests}``
  is filled with the listed ids themselves (the user's explicit choice: that runs them in
  the listed order, not the project's), or with the arguments when the ids would pass
  :data:`MAX_IDS_CHARS`;
* the **setup**: :data:`ACTIVATE_TESTBED` (the images' ``testbed`` conda env, when the
  image has one; otherwise ``python3`` is whatever the image has), then the repository's
  own lines from its harness spec (locale, the checkout's code ahead of an installed copy).

The harness specs, as the official harness gives them (``swebench/harness/constants``):
Django runs ``./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1``
(1.9: ``--verbosity 2`` alone) with test modules as labels (``tests/app/test_x.py`` ->
``app.test_x``); SymPy runs ``bin/test -C --verbose`` with test files; Sphinx runs pytest
through ``tox --current-env -epy39 -v --``; astropy before 3.0 ``pytest -rA -vv -o
console_output_style=classic --tb=no``; seaborn ``pytest --no-header -rA``; every other
repository of SWE-bench ``pytest -rA``. The harness re-runs an install that is not
editable before testing (Django up to 2.2: ``python setup.py install``; requests: ``pip
install .``); a sandbox's user usually cannot write the env's site-packages, so the setup
does that only where it can and otherwise puts the checkout first on ``PYTHONPATH``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from agentgym.plugins.swe.instance import SWEInstance, split_patch
from agentgym.plugins.swe.logs import django_load_errors, pytest_load_errors, sympy_load_errors

#: The test command of a repository without a harness spec, when neither grading nor the
#: instance names one: ``python3``, which every image with Python has (a bare Debian has no
#: ``python``), and which is the testbed env's own once that env is activated.
DEFAULT_TEST_CMD = "python3 -m pytest -rA -p no:cacheprovider"
#: Above this many characters of arguments (test ids for ``{tests}``, else files), the
#: command gets shorter arguments: files instead of ids, folders instead of files (a
#: command line must stay under the kernel's argument limit).
MAX_IDS_CHARS = 500_000
#: Run before the tests: the SWE-bench images' conda env, as the harness activates it.
ACTIVATE_TESTBED = ("if [ -f /opt/miniconda3/bin/activate ]; then"
                    " source /opt/miniconda3/bin/activate && conda activate testbed; fi")
#: Suffixes of test_patch files that are data, not tests to run (as the harness skips them).
DATA_SUFFIXES = (".json", ".png", ".csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml",
                 ".yaml", ".toml")


# --- runners -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Runner:
    """A family of test runners: what its arguments look like and how its logs name things.

    Attributes:
        name: ``pytest``, ``django`` or ``sympy``.
        argument: a test file (path in the repository) -> the argument that runs it, or
            None when the file is not one to run.
        locate: a listed test id -> the argument that runs it, or None when the id does
            not say (SymPy ids are bare function names).
        load_errors: a log -> ``{argument: error line}`` for arguments that failed to load.
        separator: what joins an argument's parts (``/`` for paths, ``.`` for modules).
    """

    name: str
    argument: Callable[[str], str | None]
    locate: Callable[[str], str | None]
    load_errors: Callable[[str], dict[str, str]]
    separator: str = "/"

    def order(self, arguments: list[str]) -> list[str]:
        """``arguments`` once each, in collection order (sorted part by part)."""
        return sorted(dict.fromkeys(arguments), key=lambda a: a.split(self.separator))

    def parent(self, argument: str) -> str:
        """The folder (package) holding ``argument``; itself at the top."""
        head, sep, _ = argument.rpartition(self.separator)
        return head if sep and head else argument


def _is_data(path: str) -> bool:
    return path.endswith(DATA_SUFFIXES)


def _pytest_argument(path: str) -> str | None:
    return None if _is_data(path) else path


def _pytest_locate(test: str) -> str | None:
    if "::" in test:
        return test.split("::", 1)[0]
    return test if test.endswith(".py") else None


def _django_argument(path: str) -> str | None:
    name = path.rsplit("/", 1)[-1]
    if _is_data(path) or not path.endswith(".py") or not (
            name == "tests.py" or name.startswith("test_") or "/tests/" in path
            or "/test_" in path):
        return None
    module = path[: -len(".py")].removesuffix("/__init__").removeprefix("tests/")
    return module.replace("/", ".")


_DJANGO_TEST = re.compile(r"^\w+ \(([\w.]+)\)$")


def _django_locate(test: str) -> str | None:
    """``test_x (app.tests.Case)`` -> ``app.tests``: the parts before the class (the first
    capitalised part). Ids that are docstring lines say nothing."""
    match = _DJANGO_TEST.match(test)
    if not match:
        return None
    parts = match.group(1).split(".")
    module = []
    for part in parts:
        if part[:1].isupper():
            break
        module.append(part)
    return ".".join(module) if module and len(module) < len(parts) else None


PYTEST = Runner("pytest", _pytest_argument, _pytest_locate, pytest_load_errors)
DJANGO = Runner("django", _django_argument, _django_locate, django_load_errors, ".")
SYMPY = Runner("sympy", _pytest_argument, lambda test: None, sympy_load_errors)


# --- the harness's specs -----------------------------------------------------------------


@dataclass(frozen=True)
class RepoSpec:
    """How the official harness runs one repository's tests, for a range of its versions.

    Attributes:
        repo: ``owner/name``.
        test_cmd: the command the arguments are appended to.
        runner: the runner family (arguments, load errors).
        setup: shell lines run first, in the same shell (their output is not parsed).
        versions: first and last version (inclusive) this spec is for; None is open.
    """

    repo: str
    test_cmd: str
    runner: Runner = PYTEST
    setup: tuple[str, ...] = ()
    versions: tuple[str | None, str | None] = (None, None)

    def holds(self, version: str) -> bool:
        low, high = self.versions
        if low is None and high is None:
            return True
        key = version_key(version)
        if key is None:
            return False
        return ((low is None or key >= version_key(low))  # type: ignore[operator]
                and (high is None or key <= version_key(high)))  # type: ignore[operator]


def version_key(version: str) -> tuple[int, ...] | None:
    """``"1.10"`` -> ``(1, 10)``, ``"v5.3"`` -> ``(5, 3)``; None when it has no number."""
    numbers = re.findall(r"\d+", version or "")
    return tuple(int(n) for n in numbers) if numbers else None


_PYTEST_RA = "pytest -rA"
_DJANGO_CMD = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
# The harness exports en_US.UTF-8, generating it as root at eval time where the image
# lacks it; a sandbox user cannot, so C.UTF-8 stands in (same encoding) when it is missing.
_UTF8 = ("if locale -a 2>/dev/null | grep -qix 'en_US.utf-\\?8'; then"
         " export LANG=en_US.UTF-8 LC_ALL=en_US.UTF-8;"
         " else export LANG=C.UTF-8 LC_ALL=C.UTF-8; fi; export LANGUAGE=en_US:en")
_CHECKOUT_FIRST = 'export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"'


def _reinstall(command: str) -> str:
    # The harness reinstalls so the agent's code is what gets imported; only root can
    # write a SWE-bench image's site-packages, so otherwise the checkout goes first.
    return ("if [ -w \"$(python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'"
            f" 2>/dev/null)\" ]; then {command}; else {_CHECKOUT_FIRST}; fi")


_PYTEST_REPOS = (
    "astropy/astropy", "dbt-labs/dbt-core", "marshmallow-code/marshmallow",
    "matplotlib/matplotlib", "pallets/flask", "pvlib/pvlib-python", "pydata/xarray",
    "pydicom/pydicom", "pylint-dev/astroid", "pylint-dev/pylint", "pytest-dev/pytest",
    "pyvista/pyvista", "scikit-learn/scikit-learn", "sqlfluff/sqlfluff",
)

#: The official harness's test command per repository (and version range), first match
#: wins. Repositories not here get :data:`DEFAULT_TEST_CMD` with the pytest runner.
HARNESS_SPECS: tuple[RepoSpec, ...] = (
    RepoSpec("django/django", "./tests/runtests.py --verbosity 2", DJANGO,
             (_UTF8, "export PYTHONIOENCODING=utf8", _reinstall("python setup.py install")),
             ("1.9", "1.9")),
    RepoSpec("django/django", _DJANGO_CMD, DJANGO,
             (_UTF8, "export PYTHONIOENCODING=utf8", _reinstall("python setup.py install")),
             ("1.7", "2.2")),
    RepoSpec("django/django", _DJANGO_CMD, DJANGO, (_reinstall("python setup.py install"),),
             (None, "1.6")),
    RepoSpec("django/django", _DJANGO_CMD, DJANGO, (_UTF8,), ("3.0", "3.2")),
    RepoSpec("django/django", _DJANGO_CMD, DJANGO),
    RepoSpec("sympy/sympy", "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning'"
             " bin/test -C --verbose", SYMPY),
    RepoSpec("sphinx-doc/sphinx", "tox --current-env -epy39 -v --"),
    RepoSpec("astropy/astropy", "pytest -rA -vv -o console_output_style=classic --tb=no",
             versions=(None, "1.3")),
    RepoSpec("mwaskom/seaborn", "pytest --no-header -rA"),
    RepoSpec("psf/requests", _PYTEST_RA, setup=(_CHECKOUT_FIRST,)),
    *(RepoSpec(repo, _PYTEST_RA) for repo in _PYTEST_REPOS),
)


def spec_for(repo: str, version: str = "") -> RepoSpec | None:
    """The harness spec of ``repo`` (``owner/name``, any case) at ``version``, or None."""
    key = repo.lower()
    return next((s for s in HARNESS_SPECS if s.repo == key and s.holds(version)), None)


def runner_for(repo: str, version: str = "") -> Runner:
    """The runner family of ``repo``: its harness spec's, else :data:`PYTEST`."""
    spec = spec_for(repo, version)
    return spec.runner if spec else PYTEST


# --- plans -------------------------------------------------------------------------------


@dataclass
class TestPlan:
    """What grading runs for an instance.

    Attributes:
        command: the test command line, arguments included.
        setup: shell lines run before it in the same shell (env activation, exports).
        runner: the runner family, to read load errors and locate tests.
        arguments: the test files (modules, for Django) the command runs, in order; empty
            when the command runs the whole suite or ``{tests}`` gave it the ids.
    """

    __test__ = False  # not a pytest test class, despite the name

    command: str
    setup: list[str] = field(default_factory=list)
    runner: Runner = PYTEST
    arguments: list[str] = field(default_factory=list)


def directives(instance: SWEInstance, runner: Runner) -> list[str]:
    """The arguments that run ``instance``'s listed tests: the runner's form of the files
    its ids name and of the files its ``test_patch`` adds or changes, in collection
    order."""
    found = [runner.locate(test) for test in instance.tests]
    for part in split_patch(instance.test_patch):
        if part.new_path is not None:  # a deleted file is not there to run
            found.append(runner.argument(part.new_path))
    return runner.order([a for a in found if a])


def fit(arguments: list[str], runner: Runner, limit: int | None = None) -> list[str]:
    """``arguments``, the deepest replaced by their folders one level at a time until
    quoted they take at most ``limit`` (default :data:`MAX_IDS_CHARS`) characters; an
    argument inside a kept folder is dropped (no test runs twice). Empty when even the top
    folders do not fit: the whole suite then runs."""
    limit = MAX_IDS_CHARS if limit is None else limit
    while len(_quoted(arguments)) > limit:
        depth = max(len(a.split(runner.separator)) for a in arguments)
        if depth == 1:
            return []
        lifted = runner.order([runner.parent(a) if len(a.split(runner.separator)) == depth
                               else a for a in arguments])
        arguments = [a for a in lifted if not any(
            a.startswith(other + runner.separator) for other in lifted if other != a)]
    return arguments


def _quoted(words: list[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


def plan(instance: SWEInstance, test_cmd: str | None = None) -> TestPlan:
    """The :class:`TestPlan` of ``instance`` (see the module docstring for the rules)."""
    spec = spec_for(instance.repo, instance.version)
    runner = spec.runner if spec else PYTEST
    template = test_cmd or instance.test_cmd
    setup = [ACTIVATE_TESTBED]
    if not template:
        template = spec.test_cmd if spec else DEFAULT_TEST_CMD
        setup += list(spec.setup) if spec else []
    arguments = fit(directives(instance, runner), runner)
    files = _quoted(arguments)
    if "{tests}" in template or "{files}" in template:
        ids = _quoted(instance.tests)
        if len(ids) <= MAX_IDS_CHARS and "{tests}" in template:
            command = template.replace("{tests}", ids).replace("{files}", files)
            return TestPlan(command, setup, runner, [])
        return TestPlan(template.replace("{tests}", files).replace("{files}", files), setup,
                        runner, arguments)
    return TestPlan(f"{template} {files}".rstrip(), setup, runner, arguments)


__all__ = [
    "ACTIVATE_TESTBED",
    "DATA_SUFFIXES",
    "DEFAULT_TEST_CMD",
    "DJANGO",
    "HARNESS_SPECS",
    "MAX_IDS_CHARS",
    "PYTEST",
    "SYMPY",
    "RepoSpec",
    "Runner",
    "TestPlan",
    "directives",
    "fit",
    "plan",
    "runner_for",
    "spec_for",
    "version_key",
]
