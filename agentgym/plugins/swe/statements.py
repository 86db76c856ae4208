"""Problem statements of synthesized tasks: who writes them, and what they may not say.

A *statement writer* turns the failing behaviour of a task, its :class:`BugEvidence`, into
the task's ``problem_statement``. Writers are plugins: the hook
``agentgym_statement_writers`` (which this plugin adds, :mod:`agentgym.plugins.swe.hookspecs`)
returns :class:`~agentgym.core.contributions.Spec` objects, and a writer named ``ID`` or
``ID:ARG`` (``agentgym swe synth --statement NAME``) is built
by ``factory(ARG)`` (:func:`build_statement_writer`). Built in, from the ``swe`` plugin:

* ``template`` (``template:no-test-ids``): the failing tests' ids (left out with
  ``no-test-ids``) and the error messages they report. Deterministic, so rows written with
  it are byte-identical on every machine.
* ``policy:POLICY``: asks a policy, any name :func:`~agentgym.core.policies.build_policy`
  takes (``openai:URL``, ``hf:PATH``, a plugin's text policy), for a short bug report as a
  user would file it: a title, the symptom, a small reproduction (a Python snippet that
  calls the public API with the failing test's inputs) and the observed vs expected
  result; no test ids, no fix, no file names. A text-level policy gets the conversation;
  for a token-level one the conversation is rendered with the tokenizer's chat template
  and the completion decoded. The prompt (:func:`report_prompt`) is built from the
  evidence alone: the package, the failing tests' source and the errors they report,
  never the patch or where it applies. What a policy writes is not reproducible across
  policies (or sampling): the row names its writer in ``statement_writer``.

A writer is an object with a ``name`` (what the row's ``statement_writer`` records) and
``async write(evidence, rejected) -> str``, ``rejected`` holding ``(text, reasons)`` for its
earlier attempts at the same task, so that it can do better; ``close()`` is optional.

**Leaks.** :func:`write_statement` checks what any writer but the template returns with
:class:`LeakGuard` and retries a bounded number of times, telling the writer what was wrong
(never quoting the patch), then falls back to the template and says so. A statement leaks
when it names

* a mutated file (its path or file name) or its module path (``toolz.itertoolz``; a
  top-level package or module such as ``toolz`` is the public API, not a location);
* a line of the patch's added or removed code (compared without whitespace; lines under
  :data:`MIN_CODE_CHARS` characters, such as ``else:``, are too common to count);
* a mutated function that the evidence never shows. An issue names the function that
  misbehaves, and a reporter knows it from the failing test that calls it; a function
  the tests do not mention (a private helper the bug lives in) is known only from the
  code, so naming it is location;
* a failing test: its id, its file, or its function's name.

It is also rejected when it is empty or has no reproduction (a fenced Python block that
parses, doctest prompts allowed, and that names the package), which turns garbage (an
untrained model's) into a fallback rather than a statement.
"""

from __future__ import annotations

import ast
import inspect
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agentgym.core.errors import AgentGymError
from agentgym.core.plugins import plugin_host

#: Patch lines shorter than this (whitespace removed) are not looked for in a statement.
MIN_CODE_CHARS = 12
#: Attempts a writer gets per task before the template is used.
ATTEMPTS = 3
#: Failing tests a report prompt shows at most.
PROMPT_TESTS = 2
#: Lines of one test's source a prompt shows at most.
SOURCE_LINES = 40
TEMPLATE = "template"
NO_TEST_IDS = "no-test-ids"

# Why a statement is rejected, and what the writer is told (never the leaked text itself).
FILE = "names a mutated file"
MODULE = "names a mutated module"
CODE = "quotes the patched code"
FUNCTION = "names a function the tests do not show"
TEST = "names a failing test"
EMPTY = "is empty"
NO_REPRODUCTION = "has no reproduction"
FEEDBACK = {
    FILE: "It names a source file of the library. A user does not know where the code"
          " lives: do not name files.",
    MODULE: "It names a submodule of the library. Import from the top-level package only.",
    CODE: "It quotes the library's source code. Describe the behaviour, not the code.",
    FUNCTION: "It names a function the failing behaviour does not show. Describe only the"
              " public function you call.",
    TEST: "It mentions a test, a test file or a test function. Write it as a user's report"
          " with no tests in it.",
    EMPTY: "It is empty.",
    NO_REPRODUCTION: "It has no reproduction. Add one ```python block that imports from the"
                     " top-level package, calls the function and prints the result.",
}


@dataclass(frozen=True)
class BugEvidence:
    """What a statement may be written from: the failing behaviour, never the fix.

    Attributes:
        package, version: the PyPI project.
        import_name: its top-level import (``toolz``; ``dateutil`` for python-dateutil).
        failing: the ``FAIL_TO_PASS`` test ids.
        errors: per failing test id, the error lines it reports (normalised test output;
            a test may be missing).
        sources: per failing test id, the source of its test function (decorators
            included), where it was found.
    """

    package: str
    version: str
    import_name: str
    failing: tuple[str, ...]
    errors: dict[str, list[str]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        """Everything a writer is shown, as one string (what :class:`LeakGuard` treats as
        known to the writer)."""
        return "\n".join([*self.failing, *(line for lines in self.errors.values()
                                           for line in lines), *self.sources.values()])


class StatementWriter(Protocol):
    """Writes a task's problem statement (see the module docstring)."""

    name: str

    async def write(self, evidence: BugEvidence,
                    rejected: Sequence[tuple[str, list[str]]]) -> str: ...


# ---- the template ----------------------------------------------------------------------------


def problem_statement(package: str, version: str, failing: Sequence[str],
                      errors: dict[str, list[str]], test_ids: bool = True, max_tests: int = 3,
                      max_lines: int = 8) -> str:
    """An issue describing the failing behaviour: the tests that fail (``test_ids``) and what
    they report (``errors``, per test id), with no word of where the fault is or how to fix
    it."""
    count = f"{len(failing)} test{'s' if len(failing) > 1 else ''}"
    verb = "fail" if len(failing) > 1 else "fails"
    lines = [f"Tests fail in {package} {version}", ""]
    if test_ids:
        lines += [f"{count} of the project's own suite {verb}:", "",
                  *(f"- `{test}`" for test in failing)]
    else:
        lines += [f"{count} of the project's own suite {verb}."]
    for number, test in enumerate(failing[:max_tests], 1):
        message = errors.get(test)
        if not message:
            continue
        shown = [line[:200] for line in message[:max_lines]]
        if len(message) > max_lines:
            shown.append("...")
        who = f"`{test}`" if test_ids else f"Failing test {number}"
        lines += ["", f"{who} reports:", "", "```", *shown, "```"]
    these = "these tests" if test_ids else "the failing tests"
    lines += ["", "The tests are correct and must not be changed; the library's behaviour is"
                  f" what is wrong. Make {these} pass without breaking the others."]
    return "\n".join(lines) + "\n"


class TemplateWriter:
    """``template``: :func:`problem_statement` (deterministic; trusted, never checked)."""

    def __init__(self, test_ids: bool = True):
        self.test_ids = test_ids
        self.name = TEMPLATE if test_ids else f"{TEMPLATE}:{NO_TEST_IDS}"

    async def write(self, evidence: BugEvidence,
                    rejected: Sequence[tuple[str, list[str]]] = ()) -> str:
        return problem_statement(evidence.package, evidence.version, evidence.failing,
                                 evidence.errors, test_ids=self.test_ids)


def template_writer(argument: str | None) -> TemplateWriter:
    """The ``template`` factory: ``template`` or ``template:no-test-ids``."""
    if argument not in (None, NO_TEST_IDS):
        raise AgentGymError(f"statement writer 'template:{argument}': the template takes no"
                            f" argument but {NO_TEST_IDS!r}; use 'template' or"
                            f" 'template:{NO_TEST_IDS}'")
    return TemplateWriter(test_ids=argument is None)


# ---- a policy --------------------------------------------------------------------------------


def report_prompt(evidence: BugEvidence) -> list[dict[str, str]]:
    """The conversation that asks for a bug report: the failing tests' source and errors
    (at most :data:`PROMPT_TESTS`), and what the report must and must not hold."""
    shown = [test for test in evidence.failing
             if test in evidence.sources or test in evidence.errors][:PROMPT_TESTS]
    parts = []
    for test in shown or list(evidence.failing[:1]):
        source = evidence.sources.get(test)
        errors = evidence.errors.get(test) or ["(no message)"]
        parts.append(("Code that shows it:\n```python\n" + source.rstrip() + "\n```\n"
                      if source else "") + "It fails with:\n```\n" + "\n".join(errors[:12])
                     + "\n```")
    package = evidence.package
    user = (
        f"Write a short bug report for the Python library {package} {evidence.version},"
        " from the failing behaviour below.\n\n"
        "The report has:\n"
        "1. a one-line title;\n"
        "2. one or two sentences on the symptom: what the library does wrong;\n"
        f"3. a minimal reproduction: one ```python block that imports from"
        f" `{evidence.import_name}` (the top-level package, never its submodules), calls"
        " the public function with the inputs the code below uses, and prints the result;\n"
        "4. the observed result and the expected result.\n\n"
        "Do not mention tests, test files or test names, do not say where in the library's"
        " code the bug is, and do not suggest a fix.\n\n"
        "The failing behaviour:\n\n" + "\n\n".join(parts))
    return [{"role": "system", "content": f"You are a user of the Python library {package}"
             " filing an issue on its tracker."},
            {"role": "user", "content": user}]


class PolicyWriter:
    """``policy:POLICY``: a bug report written by a policy (see the module docstring).

    Args:
        policy: a policy name for :func:`~agentgym.core.policies.build_policy`.
        max_tokens: the longest report a token-level policy may sample.
    """

    def __init__(self, policy: str, max_tokens: int = 512):
        from agentgym.core.policies import build_policy, policy_level

        self.name = f"policy:{policy}"
        self.max_tokens = max_tokens
        self.policy = build_policy(policy)
        #: Which contract it keeps (one that keeps neither raises PolicyContractError).
        self.level = policy_level(self.policy)

    async def write(self, evidence: BugEvidence,
                    rejected: Sequence[tuple[str, list[str]]] = ()) -> str:
        from agentgym.core.task import Task

        messages = report_prompt(evidence)
        for text, reasons in rejected:
            messages += [{"role": "assistant", "content": text},
                         {"role": "user", "content": "That report cannot be filed. "
                          + " ".join(FEEDBACK.get(r, r) for r in reasons)
                          + " Write the whole report again."}]
        if self.level == "text":
            turn = self.policy.act(messages, Task(id=f"statement:{evidence.package}",
                                                  prompt=messages))
            if inspect.isawaitable(turn):
                turn = await turn
            text = (turn.get("content") or "") if isinstance(turn, dict) else str(turn)
        else:
            text = await self._generate(messages, attempt=len(rejected))
        return re.sub(r"(?s)<think>.*?</think>", "", text).strip()

    async def _generate(self, messages: list[dict[str, str]], attempt: int) -> str:
        from agentgym.core.policies import Sampling

        tokenizer = self.policy.tokenizer
        prompt = tokenizer.apply_chat_template(messages, tokenize=False,
                                               add_generation_prompt=True)
        ids = tokenizer.encode(prompt, add_special_tokens=False)
        # Greedy first; a retry samples, or it would write the same report again.
        sampling = Sampling(max_tokens=self.max_tokens, temperature=0.0 if attempt == 0 else 0.8,
                            seed=attempt)
        generation = await self.policy.generate(ids, sampling)
        return tokenizer.decode(generation.token_ids, skip_special_tokens=True)

    def close(self) -> None:
        from agentgym.core.policies import ClosablePolicy

        if isinstance(self.policy, ClosablePolicy):
            self.policy.close()


def policy_writer(argument: str | None) -> PolicyWriter:
    """The ``policy`` factory: ``policy:POLICY``."""
    if not argument:
        raise AgentGymError("the policy statement writer needs a policy: --statement"
                            " policy:openai:http://127.0.0.1:8000/v1 (or policy:hf:PATH, or"
                            " any name from `agentgym list policies`)")
    return PolicyWriter(argument)


def build_statement_writer(name: str) -> Any:
    """Build statement writer ``name`` (``ID`` or ``ID:ARG``) from the plugins'
    ``agentgym_statement_writers``.

    Raises:
        UnknownIdError: no loaded plugin registers ``ID`` (the message lists the ids).
    """
    writer_id, colon, argument = name.partition(":")
    spec = plugin_host().get("statement_writers", writer_id)
    return spec.build(argument if colon and argument else None)


# ---- leaks -----------------------------------------------------------------------------------


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _word(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")


@dataclass(frozen=True)
class LeakGuard:
    """What a statement of one task must not say (see the module docstring); built from
    the row by :meth:`for_task`.

    Attributes:
        files: mutated files' paths and names.
        modules: their module paths (dotted; top-level packages and modules left out).
        code: the patch's added and removed lines, without whitespace.
        functions: mutated functions' names the evidence never shows.
        tests: failing test ids, their files and their functions' names.
        import_name: the package's top-level import (a reproduction must name it).
    """

    files: tuple[str, ...]
    modules: tuple[str, ...]
    code: tuple[str, ...]
    functions: tuple[str, ...]
    tests: tuple[str, ...]
    import_name: str

    @classmethod
    def for_task(cls, row: dict[str, Any], evidence: BugEvidence) -> LeakGuard:
        patch = row.get("patch") or ""
        paths = sorted(set(re.findall(r"^diff --git a/(\S+) b/", patch, re.M)))
        files = sorted({*paths, *(Path(p).name for p in paths)})
        modules = []
        for path in paths:
            parts = list(Path(path).with_suffix("").parts)
            if parts and parts[0] == "src":
                parts = parts[1:]
            if parts and parts[-1] == "__init__":
                parts = parts[:-1]
            if len(parts) > 1:
                modules.append(".".join(parts))
        code = {_squeeze(line[1:]) for line in patch.splitlines()
                if line[:1] in "+-" and not line.startswith(("+++", "---"))}
        known = evidence.text()
        functions: set[str] = set()
        for mutation in row.get("mutations") or []:
            qualified = mutation.get("function", "")
            for name in {qualified, qualified.rsplit(".", 1)[-1]} - {""}:
                if not _word(name.rsplit(".", 1)[-1]).search(known):
                    functions.add(name)
        tests: set[str] = set()
        for test in row.get("FAIL_TO_PASS") or []:
            path, _, rest = test.partition("::")
            tests |= {test, path, Path(path).name}
            if rest:
                tests.add(rest.rsplit("::", 1)[-1].split("[", 1)[0])
        return cls(tuple(files), tuple(sorted(modules)),
                   tuple(sorted(c for c in code if len(c) >= MIN_CODE_CHARS)),
                   tuple(sorted(functions)), tuple(sorted(tests - {""})),
                   evidence.import_name)

    def leaks(self, text: str) -> list[str]:
        """Why ``text`` may not be the statement (the reasons of the module docstring, in
        a fixed order), or ``[]``."""
        if not text.strip():
            return [EMPTY]
        found = []
        if any(name in text for name in self.files):
            found.append(FILE)
        if any(_word(module).search(text) for module in self.modules):
            found.append(MODULE)
        squeezed = _squeeze(text)
        if any(line in squeezed for line in self.code):
            found.append(CODE)
        if any(_word(name).search(text) for name in self.functions):
            found.append(FUNCTION)
        if any(_word(test).search(text) if "/" not in test and "::" not in test
               else test in text for test in self.tests):
            found.append(TEST)
        if not has_reproduction(text, self.import_name):
            found.append(NO_REPRODUCTION)
        return found


def has_reproduction(text: str, import_name: str) -> bool:
    """Whether ``text`` holds a fenced code block that parses as Python (doctest prompts
    allowed) and names ``import_name``."""
    for block in re.findall(r"```[ \t]*(?:python|py|pycon)?[ \t]*\n(.*?)```", text, re.S):
        lines = block.splitlines()
        if any(line.lstrip().startswith(">>>") for line in lines):
            lines = [line.lstrip()[4:] for line in lines
                     if line.lstrip().startswith((">>>", "..."))]
        code = "\n".join(lines)
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        if _word(import_name).search(code) and any(isinstance(node, ast.Call)
                                                   for node in ast.walk(tree)):
            return True
    return False


# ---- writing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    """A statement and how it came about.

    Attributes:
        text: the problem statement.
        writer: the name of the writer that wrote ``text`` (the row's ``statement_writer``).
        rejected: the reasons of each rejected attempt, in order.
        fell_back: every attempt was rejected and ``text`` is the fallback's.
    """

    text: str
    writer: str
    rejected: tuple[tuple[str, ...], ...] = ()
    fell_back: bool = False


async def write_statement(writer: Any, evidence: BugEvidence, guard: LeakGuard,
                          fallback: TemplateWriter, attempts: int = ATTEMPTS) -> Statement:
    """The statement ``writer`` writes for a task, checked by ``guard`` (a template writer is
    trusted); after ``attempts`` rejected ones, ``fallback``'s."""
    if isinstance(writer, TemplateWriter):
        return Statement(await writer.write(evidence, []), writer.name)
    rejected: list[tuple[str, list[str]]] = []
    for _ in range(attempts):
        text = (await writer.write(evidence, list(rejected))).strip()
        reasons = guard.leaks(text)
        if not reasons:
            return Statement(text + "\n", writer.name,
                             tuple(tuple(r) for _, r in rejected))
        rejected.append((text, reasons))
    return Statement(await fallback.write(evidence, []), fallback.name,
                     tuple(tuple(r) for _, r in rejected), fell_back=True)


#: Held while parsing: the synthesizer reads tasks' test sources in threads at once, and
#: CPython 3.11's parser is not safe across threads ("SystemError: AST constructor
#: recursion depth mismatch", seen in the full suite).
_PARSING = threading.Lock()


def failing_test_sources(root: Path, tests: Sequence[str]) -> dict[str, str]:
    """The source of each test function of ``tests`` (ids under ``root``), decorators
    included, at most :data:`SOURCE_LINES` lines; tests not found are left out."""
    found: dict[str, str] = {}
    parsed: dict[str, tuple[list[str], ast.Module] | None] = {}
    for test in tests:
        path, _, rest = test.partition("::")
        if path not in parsed:
            try:
                text = (root / path).read_text()
                with _PARSING:
                    parsed[path] = (text.splitlines(), ast.parse(text))
            except (OSError, SyntaxError, ValueError):
                parsed[path] = None
        if parsed[path] is None or not rest:
            continue
        lines, node = parsed[path]  # type: ignore[misc]
        target: Any = node
        for name in rest.split("[", 1)[0].split("::"):
            target = next((child for child in getattr(target, "body", [])
                           if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                 ast.ClassDef)) and child.name == name), None)
            if target is None:
                break
        if target is None or isinstance(target, ast.ClassDef):
            continue
        start = min([target.lineno, *(d.lineno for d in target.decorator_list)])
        body = lines[start - 1:target.end_lineno]
        indent = min((len(line) - len(line.lstrip()) for line in body if line.strip()),
                     default=0)
        body = [line[indent:] for line in body]
        if len(body) > SOURCE_LINES:
            body = [*body[:SOURCE_LINES], "..."]
        found[test] = "\n".join(body)
    return found


__all__ = [
    "ATTEMPTS",
    "BugEvidence",
    "LeakGuard",
    "PolicyWriter",
    "Statement",
    "StatementWriter",
    "TemplateWriter",
    "build_statement_writer",
    "failing_test_sources",
    "has_reproduction",
    "policy_writer",
    "problem_statement",
    "report_prompt",
    "template_writer",
    "write_statement",
]
