"""AgentBench OS (the operating-system tasks of AgentBench), as terminal task folders.

**Source.** The ``inspect-evals`` package (``pip install 'inspect-evals==0.26.0'``, or
``pip install 'agentgym[terminal]'`` from a source checkout) ships the tasks as JSON:
``inspect_evals/agent_bench/data/agent_bench_os.json`` (split ``dev``, 26 tasks) and
``agent_bench_os_test.json`` (split ``test``, 119 tasks), with the check and example scripts
under ``data/scripts/``. :func:`materialize` reads those files from the installed package
(without importing it: ``inspect_evals.agent_bench`` imports ``inspect_ai``) and writes one
Harbor task folder per task, ``agentbench-os-<split>-<id>``. Nothing of the benchmark is
stored in this repository.

**The environment.** As in inspect-evals, the agent's home and working directory is
``/home/agent`` (``WORKDIR`` and ``HOME``), and every ``/root`` and ``/usr`` in a task's
strings becomes ``/home/agent`` (inspect-evals' ``change_path_to_agent_home``). The task's
``create.init`` runs once when the workspace is built, as one bash script in
``/home/agent`` with ``RANDOM=3`` first (inspect-evals seeds its file inits the same way;
seeding every init keeps the files the same on every build). A task that names
``bin/find`` gets its own copy at ``/home/agent/bin/find``, as inspect-evals' Dockerfile makes
(the one that does, the SUID hunt, is left out: see below).
Commands run as an unprivileged user: ``/usr/local/bin`` is read-only, so the tasks that
ask for a new command (``calc``, ``date-format``) put ``/home/agent`` on ``PATH``, the place
their instruction names ("expose it in your home directory").

**Grading** keeps inspect-evals' scorer (``agent_bench_os_scorer.py``), with one change of
channel: where the original compares the agent's final chat answer, the agent writes its
answer to ``/tmp/answer.txt`` (outside the home directory, so the file never changes a count
of the files there). ``tests/grade.py`` then

* ``check: [null, {file: check/<kind>-match.py}]`` - runs the task's example command the way
  the scorer does (bash, in ``/home/agent``, its exit status 0, its stdout stripped) for the
  expected answer, and the package's own comparison script (``integer-match.py``,
  ``string-match.py``, ``size-match.py``, copied from the installed package into ``tests/``)
  on the answer and that value. The dev split also holds a fixed ``match`` value per task,
  recorded in inspect-evals' Docker image (``/home`` holding an AgentBench clone, 4 CPUs,
  43 groups); the example command measures the sandbox the agent actually sees, so it is
  used instead wherever the task has one;
* ``match`` alone - the answer, stripped of surrounding whitespace (a file usually ends in a
  newline), must equal the value exactly;
* ``check: {file: ...}`` - runs the package's check script (e.g. ``checking/0.sh`` calls
  ``calc`` on 30 expressions), exit status 0 passes; ``check: {code: ...}`` - runs the
  command, exit status 0 passes. The converter closes three holes of the ``calc`` checks
  (:data:`_CHECK_FIXES`): the command's output pasted into Python code (``0)<1)#`` turned
  every comparison into True), the agent's home first on their ``PATH`` (its own
  ``python3`` ran), and a comparison that passes when ``[`` fails; it refuses to write a
  check that still holds one.

The reference solution is the task's example (``evaluation.example``: a command whose
output is the answer, or a script from ``data/scripts/example/`` with ``/usr/local/bin``
read as ``/home/agent``); the known-wrong one is a typical slip: an answer off by one, the
opposite yes/no, a size without its unit, ``calc`` in integer arithmetic, ``date-format``
ignoring the format, a permission fix that forgets the directories.

**Left out** (:func:`select` returns each with its reason, deterministically):

* tasks whose setup is ``init/*.sh`` from the AgentBench repository (the stock log and the
  nested folders): inspect-evals clones that repository when it builds the image, and the
  package does not ship those scripts;
* tasks with a ``start`` program or ``init_at_start`` (a writer running in the background,
  ``sleep`` processes, files stamped when the container starts): a task's setup runs once,
  when its workspace is built, and leaves no process running;
* tasks that need root: new users and groups (``useradd``, ``su``, ``runuser``), ``chown``
  or ``chgrp`` to other groups, ``sudo``, ``apt``; the ``packages`` image (npm installed);
* tasks whose setup writes outside ``/home/agent`` (``/home``, ``/home/user``, ``/tmp``):
  only the workspace survives the build, and the rest of the file system is read-only;
* tasks about ``/var/log``, which the sandbox does not have;
* tasks that count processes (``ps``, ``who``, ``$PPID``): the answer depends on the
  process tree of whoever asks, which differs between the agent's shell and the grader;
* a few single tasks named in :data:`SKIP`, each with its reason: a check that walks the
  host's whole ``/lib`` in bash, setups whose answer is random or follows the calendar, and
  the SUID task, whose planted setuid bit the workspace build does not keep.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

from agentgym.core.errors import AgentGymError, InvalidArgumentError, MissingResourceError
from agentgym.plugins.terminal.sources import PROCESSES_BEFORE, STOP_THEN_REWARD

#: The package and version the task files come from.
PACKAGE = "inspect-evals"
PACKAGE_VERSION = "0.26.0"
#: The data file of each split, under ``inspect_evals/agent_bench/data``.
SPLITS = {"dev": "agent_bench_os.json", "test": "agent_bench_os_test.json"}
#: The agent's home and working directory (inspect-evals' ``AGENT_HOME_DIR``).
HOME = "/home/agent"
#: Where the agent writes its answer, for the tasks that ask a question.
ANSWER_FILE = "/tmp/answer.txt"
#: PATH of the tasks that ask for a new command: the home directory first.
COMMAND_PATH = f"{HOME}:/usr/local/bin:/usr/bin:/bin"
#: PATH their checks run with: the system's programs first, so that a ``python3`` or a
#: ``bash`` the agent put in its home never stands in for the real one; its new command
#: (``calc``) is found in the home, last.
GRADER_PATH = f"/usr/local/bin:/usr/bin:/bin:{HOME}"
#: Seconds one example or check command may run while grading.
COMMAND_TIMEOUT_S = 45

#: Single tasks left out, with the reason (the categories are found by :func:`skip_reason`).
SKIP: dict[tuple[str, int], str] = {
    ("test", 19): "its check compares `count` with a bash function that walks the host's"
                  " /lib and /etc file by file (tens of thousands of files), far longer"
                  " than a grading run may take",
    ("test", 31): "the setuid bit its setup plants on bin/find does not survive the workspace"
                  " build (the built workspace is unpacked with tarfile's 'tar' filter,"
                  " which clears setuid bits), so there is nothing left to fix",
    ("test", 71): "its setup writes random bytes (from /dev/urandom) including newlines, so"
                  " the expected line count differs on every build",
    ("test", 120): "its setup names files by the days before the build and the answer counts"
                   " those within 7 days of grading, so it changes as the workspace ages",
    ("test", 122): "its setup writes a random string (from /dev/urandom), so the expected"
                   " count of distinct characters differs between builds",
}

_ROOT_COMMANDS = re.compile(
    r"\b(useradd|groupadd|usermod|userdel|runuser|chown|chgrp|sudo|apt|apt-get)\b"
    r"|\bsu\s+-|/etc/sudoers")
_PROCESS_COUNT = re.compile(r"\bps\s+-|\bwho\b|\$PPID|\bpgrep\b")
_ABSOLUTE_PATH = re.compile(r"(?:^|(?<=[\s\"'=>(:]))(/[A-Za-z0-9_.{},~-]+(?:/[^\s\"';|&<>()]*)?)")
#: Absolute paths an init may name without writing outside the workspace.
_INIT_PATHS_OK = ("/dev/null", "/dev/urandom", "/bin/bash", "/bin/sh")
_CHECKERS = ("check/integer-match.py", "check/string-match.py", "check/size-match.py")
_HEREDOC = "AGENTBENCH_EOF"
#: Fixes to the package's check scripts, each a pattern and its replacement, for three
#: holes a red team's ``calc`` went through:
#: - the agent's output pasted into Python code (``calc`` printing ``0)<1)#`` made every
#:   comparison print True): it is handed to Python as data instead, a number or nothing;
#: - ``PATH="$HOME:$PATH"`` (for ``calc`` in the home) put the agent's own ``python3`` before
#:   the system's: the home goes last, as in :data:`GRADER_PATH`;
#: - ``[ `check ...`x != Truex ] && exit 1`` passes when ``[`` fails (an output of several
#:   words is too many arguments): both sides are quoted, and a failing ``[`` fails.
_CHECK_FIXES = (
    (re.escape('echo `python3 -c "print(abs($output - $expected_result)<1e-5)"`'),
     "echo `python3 -c 'import sys; print(abs(float(sys.argv[1]) - float(sys.argv[2]))"
     " < 1e-5)' \"$output\" \"$expected_result\" 2>/dev/null`"),
    (re.escape('PATH="$HOME:$PATH"'), 'PATH="$PATH:$HOME"'),
)
#: ``[ A x != B x ] && exit 1`` (or ``return 1``), each side a `command`, a quoted string
#: or a word: what :func:`check_script` writes as ``[ "A" = "B" ] || exit 1``.
_FAIL_OPEN_TEST = re.compile(
    r'\[ (`[^`]*`|"[^"]*"|[\w.-]+)x != (`[^`]*`|"[^"]*"|[\w.-]+)x \] && (exit|return) 1')
#: What a check script must not hold once fixed: output of the agent's command inside
#: code that Python or bash evaluates.
_OUTPUT_AS_CODE = re.compile(r"""(python3?\s+-c\s+"[^"]*\$output|\beval\b[^\n]*\$output)""")


# ---- reading the package -----------------------------------------------------------------


def package_dir() -> Path:
    """``inspect_evals/agent_bench`` of the installed package (found, not imported)."""
    spec = importlib.util.find_spec("inspect_evals")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        folder = Path(location) / "agent_bench"
        if (folder / "data" / SPLITS["test"]).is_file():
            return folder
    raise MissingResourceError(
        "the AgentBench OS tasks come from the inspect-evals package, which is not installed"
        " (or has no agent_bench data)",
        f"Install it: pip install '{PACKAGE}=={PACKAGE_VERSION}' (or, from a source"
        " checkout of agentgym, pip install 'agentgym[terminal]')")


def load_records(split: str) -> list[dict[str, Any]]:
    """The split's task records as the package ships them."""
    if split not in SPLITS:
        raise InvalidArgumentError(
            f"split={split!r} is not an AgentBench OS split; use one of {sorted(SPLITS)}")
    return json.loads((package_dir() / "data" / SPLITS[split]).read_text())


def to_agent_home(value: Any) -> Any:
    """inspect-evals' path change: ``/root`` and ``/usr`` become the agent's home, in
    strings and (recursively) dicts; lists are left as they are, as there."""
    if isinstance(value, dict):
        return {key: to_agent_home(item) for key, item in value.items()}
    if isinstance(value, str):
        return value.replace("/root", HOME).replace("/usr", HOME)
    return value


def prepare(record: dict[str, Any]) -> dict[str, Any]:
    """A record with inspect-evals' path change applied to its top-level values."""
    return {key: to_agent_home(value) for key, value in record.items()}


# ---- what a task is made of ----------------------------------------------------------------


def init_steps(record: dict[str, Any]) -> list[Any]:
    create = record.get("create")
    init = create.get("init") if isinstance(create, dict) else None
    if init is None:
        return []
    return list(init) if isinstance(init, list) else [init]


def init_script(record: dict[str, Any]) -> str:
    """The task's setup commands (``create.init``) as one script, '' if there are none."""
    parts = []
    for step in init_steps(record):
        if isinstance(step, dict) and "code" in step:
            parts.append(step["code"])
        elif isinstance(step, str):
            parts.append(step)
    return "\n".join(part.strip("\n") for part in parts if part.strip())


def example_of(record: dict[str, Any]) -> Any:
    evaluation = record["evaluation"]
    if "example" in evaluation:
        return evaluation["example"]
    return record.get("example") or None


def example_code(record: dict[str, Any]) -> str | None:
    """The example as a command (``None`` when it is a script file or absent)."""
    example = example_of(record)
    if isinstance(example, dict):
        return example.get("code")
    return example if isinstance(example, str) else None


def kind_of(record: dict[str, Any]) -> str:
    """How the task is graded: ``answer`` (compared by a check script), ``match`` (exact),
    ``check_file`` or ``check_code`` (a script or command judges the final state)."""
    evaluation = record["evaluation"]
    check = evaluation.get("check")
    if isinstance(check, dict) and "file" in check:
        return "check_file"
    if isinstance(check, dict) and "code" in check:
        return "check_code"
    if (isinstance(check, list) and len(check) >= 2 and isinstance(check[1], dict)
            and check[1].get("language") == "python" and "file" in check[1]):
        return "answer"
    if isinstance(check, list) and len(check) == 1 and isinstance(check[0], str):
        return "check_code"
    if check is None and "match" in evaluation:
        return "match"
    raise InvalidArgumentError(f"unrecognized evaluation of task {record.get('id')}: {evaluation}")


def check_code(record: dict[str, Any]) -> str:
    check = record["evaluation"]["check"]
    return check["code"] if isinstance(check, dict) else check[0]


def code_texts(record: dict[str, Any]) -> str:
    """Every command of the task (init, example, check), for the scans below."""
    texts = [init_script(record), example_code(record) or ""]
    if kind_of(record) == "check_code":
        texts.append(check_code(record))
    return "\n".join(texts)


def skip_reason(record: dict[str, Any], split: str) -> str | None:
    """Why the task cannot run in the local sandbox, or None when it can."""
    fixed = SKIP.get((split, int(record["id"])))
    if fixed:
        return fixed
    create = record.get("create")
    if "start" in record:
        return ("it needs a program started with the container and running in the"
                " background; a task's setup runs once, when the workspace is built, and"
                " leaves no process running")
    if isinstance(create, dict) and create.get("init_at_start"):
        return ("its setup runs when the container starts (background processes, files"
                " stamped at start); a task's setup runs once, when the workspace is built,"
                " and leaves no process running")
    files = [step["file"] for step in init_steps(record)
             if isinstance(step, dict) and "file" in step]
    if files:
        return (f"its setup is {files[0]} of the AgentBench repository, which inspect-evals"
                " clones from GitHub when it builds the image; the package does not ship it")
    if isinstance(create, dict) and create.get("local") not in (None, "default"):
        return (f"it needs AgentBench's {create['local']!r} image (npm installed), not the"
                " default one")
    code = code_texts(record)
    root = _ROOT_COMMANDS.search(code)
    if root:
        return (f"it needs root ({root.group(0).strip()}: other users and groups, sudo or"
                " packages); commands run as one unprivileged user")
    commands = "\n".join(line for line in init_script(record).splitlines()
                         if not line.lstrip().startswith("#"))
    for path in _ABSOLUTE_PATH.findall(commands):
        if not (path == HOME or path.startswith(HOME + "/") or path in _INIT_PATHS_OK):
            return (f"its setup writes {path}, outside the agent's home {HOME}; only the"
                    " workspace is writable and kept from the build")
    if "/var/log" in code:
        return "it asks about /var/log, which the sandbox does not have"
    if _PROCESS_COUNT.search(example_code(record) or ""):
        return ("its answer counts processes or logged-in users, which differ between the"
                " agent's shell and the grader's")
    return None


def select(split: str = "test") -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The split's records that can run (paths already moved to the agent's home) and the
    ids left out, each with its reason."""
    kept, skipped = [], {}
    for raw in load_records(split):
        record = prepare(raw)
        try:
            reason = skip_reason(record, split)
        except ValueError as error:  # an evaluation shape inspect-evals' scorer lacks
            reason = f"its evaluation cannot be graded: {error}"
        if reason:
            skipped[task_id(split, record)] = reason
        else:
            kept.append(record)
    return kept, skipped


def task_id(split: str, record: dict[str, Any]) -> str:
    return f"agentbench-os-{split}-{record['id']}"


# ---- writing the folders -------------------------------------------------------------------


def materialize(dest: str | Path, split: str = "test") -> tuple[list[Path], dict[str, str]]:
    """Write the split's runnable tasks as Harbor folders under ``dest``; returns the folders
    written (sorted by task number) and the ids left out with their reasons. The same
    package version writes the same files on every call."""
    dest = Path(dest)
    records, skipped = select(split)
    scripts = package_dir() / "data" / "scripts"
    written = []
    for record in sorted(records, key=lambda r: int(r["id"])):
        folder = dest / task_id(split, record)
        if folder.exists():
            shutil.rmtree(folder)
        write_task(folder, record, split, scripts)
        written.append(folder)
    return written, skipped


def write_task(folder: Path, record: dict[str, Any], split: str, scripts: Path) -> None:
    kind = kind_of(record)
    needs_command = kind == "check_file"
    files: dict[str, str] = {
        "instruction.md": instruction(record, split, kind, needs_command),
        "task.toml": task_toml(record, kind, snapshot_command(record, kind)),
        "environment/Dockerfile": dockerfile(record, needs_command),
        "tests/test.sh": TEST_SH.format(split=split, id=record["id"], home=HOME),
        "tests/grade.py": GRADE_PY,
        "tests/task.json": json.dumps(grading_spec(record, kind, needs_command), indent=1,
                                      sort_keys=True) + "\n",
        "solution/solve.sh": solve_sh(record, kind, scripts),
        "solution/wrong.sh": wrong_sh(record, kind, split, scripts),
    }
    setup = setup_script(record)
    if setup:
        files["environment/home/.agentbench-setup.sh"] = setup
    if kind == "answer":
        name = record["evaluation"]["check"][1]["file"]
        files[f"tests/{Path(name).name}"] = (scripts / name).read_text()
    elif kind == "check_file":
        name = record["evaluation"]["check"]["file"]
        files["tests/check.sh"] = check_script((scripts / name).read_text(), name)
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def check_script(text: str, name: str) -> str:
    """The package's check script ``name`` with :data:`_CHECK_FIXES` applied; one that
    still holds a hole they close is an error (a new upstream script to fix before it is
    shipped as a grader)."""
    for unsafe, safe in _CHECK_FIXES:
        text = re.sub(unsafe, safe, text)

    def quoted(side: str) -> str:
        if side.startswith("`"):
            return f'"$({side[1:-1]})"'
        return side if side.startswith('"') else f'"{side}"'

    text = _FAIL_OPEN_TEST.sub(
        lambda m: f"[ {quoted(m[1])} = {quoted(m[2])} ] || {m[3]} 1", text)
    found = (_OUTPUT_AS_CODE.search(text) or re.search(r"\[ `|x != |PATH=\"\$HOME:", text))
    if found:
        raise AgentGymError(f"{name} still holds {found.group(0)!r}, which a check's output"
                            " or the agent's programs could pass: add its fix to"
                            " _CHECK_FIXES")
    return text


def instruction(record: dict[str, Any], split: str, kind: str, needs_command: bool) -> str:
    lines = [f"# AgentBench OS ({split} task {record['id']})", "",
             record["description"].strip(), "",
             "---", "",
             f"You work in a Linux shell as an unprivileged user. Your home directory and"
             f" working directory is `{HOME}`."]
    if needs_command:
        lines.append(f"System directories such as `/usr/local/bin` are read-only here;"
                     f" `{HOME}` is on your `PATH`, so an executable file placed there can"
                     " be run by its name.")
    if kind in ("answer", "match"):
        checker = (record["evaluation"]["check"][1]["file"] if kind == "answer" else "")
        how = {
            "check/integer-match.py": "as an integer (e.g. `42`)",
            "check/string-match.py": "as a string, ignoring surrounding whitespace",
            "check/size-match.py": "as a size: a number with an optional unit such as"
                                   " `4.0K`, `12M` or `512B` (K = 1024 bytes)",
        }.get(checker, "exactly, ignoring surrounding whitespace")
        lines += ["", f"When you have the answer, write it - only the answer, nothing else -"
                      f" to the file `{ANSWER_FILE}`. It is compared with the expected"
                      f" answer {how}."]
    else:
        lines += ["", "The result is checked in the system after you finish; no written"
                      " answer is needed."]
    return "\n".join(lines) + "\n"


def snapshot_command(record: dict[str, Any], kind: str) -> str | None:
    """What the grader measures when the episode starts (task.toml's ``[verifier]
    snapshot``), before the agent can change the home: the example's answer (an answer
    measured at grading could be measured on a home the agent emptied: many counts are 0
    then); for a check of the final state, the paths the home started with (a check that
    passes once its files are gone, as ``find`` on a deleted folder does, must not)."""
    code = example_code(record) if kind == "answer" else None
    if code is not None:
        return f"cd {HOME} && bash -c {shlex.quote(code)} 2>/dev/null"
    if kind == "check_code":
        # "TYPE PATH" (find's %y: d, f, l ...): a path that was no link must not be one
        # now, nor be reached through one (grade.py's missing_from_start).
        return f"cd {HOME} && find . -mindepth 1 ! -name '.*' -printf '%y %P\\n' | sort -k2"
    return None


def task_toml(record: dict[str, Any], kind: str, snapshot: str | None = None) -> str:
    labels = [str(label) for label in record.get("labels") or []]
    tags = ["agentbench", "os", *dict.fromkeys(label.lower() for label in labels)]
    difficulty = "easy" if kind in ("answer", "match") else "medium"
    verifier = "timeout_sec = 60.0\n" + (f"snapshot = {json.dumps(snapshot)}\n"
                                          if snapshot else "")
    return (f'[metadata]\nauthor_name = "agentgym"\ndifficulty = "{difficulty}"\n'
            f'category = "agentbench-os"\ntags = {json.dumps(tags)}\n\n'
            f"[verifier]\n{verifier}\n[agent]\ntimeout_sec = 300.0\n")


def setup_script(record: dict[str, Any]) -> str:
    """The build-time setup: the SUID task's ``bin/find``, then ``create.init``."""
    init = init_script(record)
    needs_find = "bin/find" in json.dumps(record)
    if not init and not needs_find:
        return ""
    lines = ["# Setup of the task (AgentBench create.init), run once when the workspace is"
             " built.", f"export HOME={HOME}", f"cd {HOME}", "RANDOM=3"]
    if needs_find:
        lines += [f"mkdir -p {HOME}/bin", f"cp /usr/bin/find {HOME}/bin/find"]
    if init:
        lines.append(init)
    return "\n".join(lines) + "\n"


def dockerfile(record: dict[str, Any], needs_command: bool) -> str:
    lines = ["FROM agentgym/sandbox:default", f"WORKDIR {HOME}", f"ENV HOME={HOME}"]
    if needs_command:
        lines.append(f"ENV PATH={COMMAND_PATH}")
    if setup_script(record):
        lines += [f"COPY home/ {HOME}/",
                  "RUN bash .agentbench-setup.sh && rm .agentbench-setup.sh"]
    return "\n".join(lines) + "\n"


def grading_spec(record: dict[str, Any], kind: str, needs_command: bool) -> dict[str, Any]:
    evaluation = record["evaluation"]
    spec: dict[str, Any] = {"kind": kind, "home": HOME, "answer_file": ANSWER_FILE,
                            "timeout": COMMAND_TIMEOUT_S,
                            "path": GRADER_PATH if needs_command else None}
    if kind == "answer":
        spec["checker"] = Path(evaluation["check"][1]["file"]).name
        code = example_code(record)
        if code is not None:
            spec["example"] = code
        else:
            spec["match"] = str(evaluation["match"])
    elif kind == "match":
        spec["match"] = str(evaluation["match"])
    elif kind == "check_code":
        spec["code"] = check_code(record)
    else:
        spec["script"] = "check.sh"
    return spec


def _run_example(code: str) -> str:
    """Shell lines running ``code`` as the grader does (bash, in the home directory) with its
    stdout, stripped, in ``$expected``."""
    return (f"cat > /tmp/.agentbench-example.sh <<'{_HEREDOC}'\n{code.rstrip()}\n{_HEREDOC}\n"
            f"expected=$(cd {HOME} && bash /tmp/.agentbench-example.sh)\n"
            "rm -f /tmp/.agentbench-example.sh\n")


def _example_script(record: dict[str, Any], scripts: Path) -> str:
    """A ``create``-a-command example script, writing into the home instead of
    /usr/local/bin (read-only here)."""
    example = example_of(record)
    if isinstance(example, dict) and "file" in example:
        text = (scripts / example["file"]).read_text()
    else:
        text = example_code(record) or ""
    return text.replace("/usr/local/bin", HOME).replace("/home/agent/local/bin", HOME)


def solve_sh(record: dict[str, Any], kind: str, scripts: Path) -> str:
    head = f"#!/usr/bin/env bash\nexport HOME={HOME}\n"
    if kind in ("answer", "match"):
        code = example_code(record)
        if code is None:
            match = str(record["evaluation"]["match"])
            return (head + "# Reference: the benchmark's known answer.\n"
                    f"printf '%s\\n' {_quote(match)} > {ANSWER_FILE}\n")
        return (head + "# Reference: the benchmark's example command; its output is the"
                " answer.\n" + _run_example(code)
                + f"printf '%s\\n' \"$expected\" > {ANSWER_FILE}\ncat {ANSWER_FILE}\n")
    if kind == "check_file":
        return (head + "# Reference: the benchmark's example script (commands go to the home"
                " directory,\n# on PATH here, instead of the read-only /usr/local/bin).\n"
                f"cd /tmp\n{_example_script(record, scripts).rstrip()}\n")
    return (head + "# Reference: the benchmark's example command.\n"
            f"cd {HOME}\n{(example_code(record) or '').rstrip()}\n")


#: Known-wrong solutions of the tasks graded by a check script or command (by the check
#: script, or by split and id), each a typical slip.
WRONG_BY_CHECK = {
    "check/0.sh": ("# Slip: integer shell arithmetic (6.7 * 9 and 20 / 7 come out wrong).\n"
                   f"printf '#!/bin/bash\\necho $(( $* ))\\n' > {HOME}/calc\n"
                   f"chmod +x {HOME}/calc\n"),
    "checking/2.sh": ("# Slip: the format argument is ignored (always %Y-%m-%d).\n"
                      f"printf '#!/bin/bash\\ndate -d \"$1\" +%%Y-%%m-%%d\\n' >"
                      f" {HOME}/date-format\nchmod +x {HOME}/date-format\n"),
}
WRONG_BY_CHECK["checking/0.sh"] = WRONG_BY_CHECK["check/0.sh"]
WRONG_BY_TASK = {
    ("test", 31): ("# Slip: clears the setgid bit instead of the setuid one.\n"
                   f"chmod g-s {HOME}/bin/find\n"),
    ("test", 32): ("# Slip: fixes the files but forgets the directories.\n"
                   "find ~/videos -type f -exec chmod 660 {} +\n"),
}

_PERTURB = """\
import re, sys
expected, checker = sys.argv[1].strip(), sys.argv[2]
opposite = {"yes": "no", "no": "yes", "installed": "not-yet", "not-yet": "installed"}
if expected in opposite:
    print(opposite[expected])
elif checker == "size-match.py":
    number = re.sub(r"[A-Za-z]+$", "", expected)
    print(number if number != expected else expected + "K")
else:
    found = re.search(r"-?[0-9]+", expected)
    if found:
        print(expected[:found.start()] + str(int(found.group()) + 1) + expected[found.end():])
    else:
        print(expected + "s")
"""


def wrong_sh(record: dict[str, Any], kind: str, split: str, scripts: Path) -> str:
    head = f"#!/usr/bin/env bash\nexport HOME={HOME}\n"
    if kind in ("answer", "match"):
        checker = (Path(record["evaluation"]["check"][1]["file"]).name if kind == "answer"
                   else "match")
        code = example_code(record)
        if code is None:
            source = f"expected={_quote(str(record['evaluation']['match']))}\n"
        else:
            source = _run_example(code)
        slip = {"size-match.py": "the size without its unit (or with one too many)"}.get(
            checker, "an answer off by one (or the opposite yes/no)")
        return (head + f"# Slip: {slip}.\n" + source
                + f"python3 - \"$expected\" {checker} > {ANSWER_FILE} <<'{_HEREDOC}'\n"
                + _PERTURB + f"{_HEREDOC}\ncat {ANSWER_FILE}\n")
    if kind == "check_file":
        name = record["evaluation"]["check"]["file"]
        return head + WRONG_BY_CHECK[name]
    return head + f"cd {HOME}\n" + WRONG_BY_TASK[(split, int(record["id"]))]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


TEST_SH = """\
#!/usr/bin/env bash
# Grader of AgentBench OS {split} task {id}: inspect-evals' scorer, as tests/grade.py runs it.
""" + PROCESSES_BEFORE + """\
export HOME={home}
cd {home} 2>/dev/null || true
python3 /tests/grade.py
status=$?
""" + STOP_THEN_REWARD

GRADE_PY = '''\
"""AgentBench OS grading, after inspect-evals' agent_bench_os_scorer (see task.json).

answer:     the task's example command (bash, in the home directory, exit status 0) gives the
            expected answer, its stdout stripped; the benchmark's comparison script
            (integer-match.py, string-match.py, size-match.py) judges the written answer.
match:      the written answer, stripped, equals the known value.
check_file: the benchmark's check script exits 0.  check_code: the check command exits 0.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = json.load(open(os.path.join(HERE, "task.json")))
# The grader's measurement as the episode started ([verifier] snapshot): absent under
# another harness, where the example is measured now instead.
SNAPSHOT = (json.load(open(os.path.join(HERE, "snapshot.json")))
            if os.path.isfile(os.path.join(HERE, "snapshot.json")) else None)
ENV = dict(os.environ, HOME=SPEC["home"])
if SPEC.get("path"):
    ENV["PATH"] = SPEC["path"]


def run(argv):
    try:
        return subprocess.run(argv, cwd=SPEC["home"], env=ENV, capture_output=True,
                              text=True, errors="replace", timeout=SPEC["timeout"])
    except subprocess.TimeoutExpired:
        print("timed out:", argv[:2])
        return None


def tail(text):
    return text[-800:].strip()


def missing_from_start():
    """The first path the home started with (the snapshot's list, "TYPE PATH" lines) that
    is gone, or is now a link or reached through one where it was not (a folder moved
    away and a link to it left in its place: `find` does not follow a link it starts at
    or meets, so a check would judge nothing), with why; else None."""
    home = SPEC["home"]
    for line in (SNAPSHOT or {}).get("output", "").splitlines():
        kind, _, rel = line.partition(" ")
        if not rel:
            continue
        if not os.path.lexists(os.path.join(home, rel)):
            return rel, "is gone"
        parts = rel.split("/")
        # every folder above it was a real one at the start (find went into it), and so
        # was the path itself unless it was a link then
        for depth in range(1, len(parts) + (kind != "l")):
            if os.path.islink(os.path.join(home, *parts[:depth])):
                return rel, f"is now reached through a link ({'/'.join(parts[:depth])})"
    return None


def grade():
    kind = SPEC["kind"]
    if kind == "check_code" and SNAPSHOT is not None:
        gone = missing_from_start()
        if gone:
            print(f"{gone[0]} was in the home at the start and {gone[1]}: the check judges"
                  " the files the task named, which must still be there, not moved away")
            return False
    if kind in ("check_file", "check_code"):
        if kind == "check_file":
            result = run(["bash", os.path.join(HERE, SPEC["script"])])
        else:
            result = run(["bash", "-c", SPEC["code"]])
        if result is None:
            return False
        print(f"check exit status {result.returncode}")
        print(tail(result.stdout + result.stderr))
        if result.returncode == 0 and "Permission denied" in result.stderr:
            # A check that could not read a folder judged less than the task named: a
            # `find ... | [ -z "$(cat)" ]` over a folder closed to its owner passes empty.
            print("the check could not read everything it judged (Permission denied):"
                  " not passed")
            return False
        return result.returncode == 0
    path = SPEC["answer_file"]
    if not os.path.isfile(path):
        print(f"no answer: {path} does not exist")
        return False
    with open(path, errors="replace") as handle:
        answer = handle.read()
    print(f"answer: {answer.strip()[:200]!r}")
    if kind == "match":
        print(f"expected: {SPEC['match']!r}")
        return answer.strip() == SPEC["match"]
    if "example" in SPEC and SNAPSHOT is not None:  # measured as the episode started
        if SNAPSHOT["exit_code"] != 0:
            print(f"the example command failed ({SNAPSHOT['exit_code']}) at the start")
            return False
        expected = SNAPSHOT["output"].strip()
    elif "example" in SPEC:
        result = run(["bash", "-c", SPEC["example"]])
        if result is None:
            return False
        if result.returncode != 0:
            print(f"the example command failed ({result.returncode}): {tail(result.stderr)}")
            return False
        expected = result.stdout.strip()
    else:
        expected = SPEC["match"]
    print(f"expected: {expected[:200]!r} ({SPEC['checker']})")
    if "\\0" in answer:
        return False
    compare = run([sys.executable, os.path.join(HERE, SPEC["checker"]), answer, expected])
    return compare is not None and compare.returncode == 0


sys.exit(0 if grade() else 1)
'''
