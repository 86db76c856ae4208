"""NL2Bash on InterCode's file systems (InterCode-ALFA), as terminal task folders.

**Source.** The ``icalfa`` package (``pip install 'icalfa==0.3.6'``, or
``pip install 'agentgym[terminal]'`` from a source checkout) ships InterCode-ALFA's
NL2Bash test set: ``icalfa/assets/datasets/nl2bash_fs_<k>.json`` (k = 1..5; 153, 49, 57, 23
and 18 tasks), each task a request in English (``query``) and the reference command
(``gold``), and per file system the script that builds it
(``icalfa/assets/docker/setup_nl2b_fs_<k>.sh``, run by ``nl2bash<k>.Dockerfile``).
:func:`materialize` reads those files from the installed package and writes one Harbor task
folder per task, ``nl2bash-fs<k>-<n>``. Nothing of the benchmark is stored in this
repository.

**The environment.** The setup script builds the task's file tree in the workspace:
``/testbed`` (file systems 1 and 5), ``/system`` (2), ``/workspace`` (3); file system 4 has
no files (``/app``). The scripts' own clean-up (``rm -rf /testbed/``) and the lines that
write outside that tree (``/index.html``, ``/backup``) are left out, and relative writes land
in ``/tmp`` (the original's working directory was ``/``). Files the script does not date
itself (``touch -t``) are dated 90 minutes before the build, before any archive is made
and at the end: recent, as in InterCode, whose image is built for the run (so "modified in
the last 2 hours" finds them, and never sits at the edge of such a window). The grader
gives both of its rebuilds one time, so that listings, archives and checksums agree between
the two runs it compares. A
task whose request names ``setup_nl2b_fs_1.sh`` (a file that sat in the original's working
directory) gets that script as a file in the workspace.

**Grading** follows InterCode's ``BashEnv.get_reward`` as ``icalfa.submit_command`` uses it
(a command scores 1 only when all three parts of the reward are full): the agent writes its
command to ``/tmp/command.sh``; ``tests/grade.py`` rebuilds the initial files (the same setup
script), runs the agent's command there (``bash -c``, ``sh -c`` on file system 5 as in
icalfa's ``IMAGE_TO_SETTINGS``, in the workspace, no stdin), records its output (stdout and
stderr together, as docker's ``exec_run`` returns it) and the resulting files, then does
the same for the gold command from a fresh rebuild. The command passes when

* its output equals the gold's exactly, or the command equals the gold (InterCode's answer
  part; the LLM and embedding judges of icalfa's other modes are not used), and
* the files it leaves equal the gold's: every path under the workspace, with its type,
  permission bits, content hash and link target (InterCode compares ``git status`` and the
  md5 of files both added; the full comparison sees the same changes and also directories,
  permissions and edits in place, which ``git status`` alone misses).

The reference solution is the gold command; the known-wrong one is a typical slip on it:
the pipeline's last filter inverted or left out, a ``find`` age or size test turned around
or its name test left out, the output printed instead of written to the file, a variable's
name instead of its value, the last argument or an option left out.

**Left out** (:func:`select` returns each with its reason, deterministically): tasks whose
gold needs the network, root or another user (``chown``, ``wall``, ``crontab``, ``service``),
a program the sandbox lacks (``tree``, ``cpio``, ``dig``, ``md5deep``...) or ``/sys``,
writes outside the workspace (``/``, ``/backup``, ``/usr``, ``~``), or uses a path relative
to the original working directory ``/`` (``testbed/``); tasks whose output depends on the
moment or the machine's live state (the date, processes, open files, memory, network
interfaces, free disk space, the shell's PID, a random salt); and the single tasks in
:data:`SKIP`, each with its reason: among them the tasks whose gold prints nothing and
changes nothing here (no history in a non-interactive shell, no file matches), which any
silent command would pass, and one whose gold is bash syntax that file system 5's ``sh``
rejects.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym.core.errors import InvalidArgumentError, MissingResourceError
from agentgym.plugins.terminal.sources import PROCESSES_BEFORE, STOP_THEN_REWARD

#: The package and version the task files come from.
PACKAGE = "icalfa"
PACKAGE_VERSION = "0.3.6"
#: Where the agent writes its command.
COMMAND_FILE = "/tmp/command.sh"
#: Files the setup does not date itself are dated this long ago (seconds): recent, and far
#: from the bounds tasks ask about ("in the last hour", "the last 2 hours") whenever the
#: commands run, so that no answer flips with the clock between two runs.
AGE_S = 5400
#: Seconds one command may run while grading.
COMMAND_TIMEOUT_S = 15


@dataclass(frozen=True)
class FileSystem:
    """One of InterCode's NL2Bash file systems: its number, the workspace holding its files,
    and the shell icalfa runs commands with."""

    number: int
    workdir: str
    shell: str

    @property
    def name(self) -> str:
        return f"fs{self.number}"


FILE_SYSTEMS = {fs.name: fs for fs in (
    FileSystem(1, "/testbed", "bash"), FileSystem(2, "/system", "bash"),
    FileSystem(3, "/workspace", "bash"), FileSystem(4, "/app", "bash"),
    FileSystem(5, "/testbed", "sh"))}
#: ``split`` values: one file system, or all of them.
SPLITS = (*FILE_SYSTEMS, "all")

_OUTSIDE = "it writes outside the workspace ({}), which the sandbox keeps read-only"
_LIVE = "its output is the machine's live state ({}), different on every run"
_SILENT = ("{}: the gold prints nothing and changes nothing, so any silent command would"
           " pass")
#: Single tasks left out, with the reason (the categories are found by :func:`skip_reason`).
SKIP: dict[tuple[str, int], str] = {
    ("fs1", 21): _SILENT.format("a non-interactive shell has no history"),
    ("fs1", 34): "it needs route, which is not on the sandbox's PATH (/usr/sbin)",
    ("fs1", 41): "its output holds the file's change and birth times, new on every build",
    ("fs1", 45): _SILENT.format("a non-interactive shell has no jobs"),
    ("fs1", 55): "it needs /sys, which the sandbox does not have",
    ("fs1", 57): "it reads ~/.bashrc, which the sandbox's home does not have",
    ("fs1", 59): "it needs /sys, which the sandbox does not have",
    ("fs1", 60): _SILENT.format("no file is larger than 100 MB"),
    ("fs1", 75): _SILENT.format("the sandbox has no dpkg database"),
    ("fs1", 85): _LIVE.format("getconf -a, which includes the free memory"),
    ("fs1", 104): "its output file is encrypted with a random salt, different on every run",
    ("fs1", 139): "it archives /var/log, which the sandbox does not have",
    ("fs1", 150): _OUTSIDE.format("a link in /"),
    ("fs2", 7): _SILENT.format("no directory there is empty"),
    ("fs2", 37): _OUTSIDE.format("a link in /"),
    ("fs2", 40): _OUTSIDE.format("/backup"),
    ("fs2", 48): _SILENT.format("the sandbox's host name is not in /etc/hosts"),
    ("fs3", 2): _SILENT.format("every file's status changed within the hour (the build)"),
    ("fs3", 11): _OUTSIDE.format("files moved to /"),
    ("fs3", 12): _OUTSIDE.format("files moved to /"),
    ("fs3", 31): _OUTSIDE.format("a copy of the tree under /usr"),
    ("fs3", 41): _OUTSIDE.format("links in ~/newlinks"),
    ("fs3", 46): _SILENT.format("the file holds only NUL bytes (the setup overwrites it)"),
    ("fs3", 51): _OUTSIDE.format("a link in /"),
    ("fs3", 55): _OUTSIDE.format("/backup"),
    ("fs5", 4): _SILENT.format("the tree has no symbolic links"),
    ("fs5", 17): ("its gold uses bash's process substitution, a syntax error in sh, which"
                  " icalfa runs file system 5's commands with"),
}

#: Programs the sandbox does not have (the gold needs them).
_MISSING_PROGRAMS = ("tree", "md5deep", "cpio", "dig", "nslookup", "crontab", "cal", "apt")
#: Where a word is a command: the start, after a pipe, ``;``, ``&``, ``(``, a backquote,
#: ``xargs [options]``, ``-exec`` or ``time``.
_AT_COMMAND = r"(?:^|[|;&(`]\s*|\bxargs\s+(?:-\S+\s+)*|-exec(?:dir)?\s+)"
_NETWORK = re.compile(_AT_COMMAND + r"(curl|wget|ping|ssh\s+\S+@)\b")
_ROOT = re.compile(_AT_COMMAND + r"(chown|chgrp|sudo|wall|crontab|service|swapon)\b")
_MISSING = re.compile(_AT_COMMAND + "(" + "|".join(_MISSING_PROGRAMS) + r")\b")
_LIVE_STATE = re.compile(
    _AT_COMMAND + r"(date|uptime|ps|top|lsof|vmstat|free|w|who|last|pstree|time|ifconfig"
    r"|netstat|sysctl|lscpu|df)\b"
    r"|\$\$|\$PPID|\$BASHPID|\$RANDOM")
_RELATIVE_TREE = re.compile(r"(?<![\w/.-])(testbed|system|workspace)(?=/|\s|$)")
_FIND_NAME = re.compile(r"\s-(i?name|i?path)\s+(?:\"[^\"]*\"|'[^']*'|[^\s|;&]+)")
_FIND_TESTS = re.compile(
    r"\s-(i?name|type|size|m(?:time|min)|a(?:time|min)|c(?:time|min)|perm|i?path|maxdepth"
    r"|mindepth|newer|daystart|empty)\b(?:\s+(?:\"[^\"]*\"|'[^']*'|[^\s|;&]+))?")
_HEREDOC = "NL2BASH_EOF"


# ---- reading the package -----------------------------------------------------------------


def package_dir() -> Path:
    """``icalfa/assets`` of the installed package (found, not imported: icalfa imports
    docker, openai and scikit-learn)."""
    spec = importlib.util.find_spec("icalfa")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        folder = Path(location) / "assets"
        if (folder / "datasets" / "nl2bash_fs_1.json").is_file():
            return folder
    raise MissingResourceError(
        "the NL2Bash tasks come from the icalfa package (InterCode-ALFA), which is not"
        " installed (or has no NL2Bash data)",
        f"Install it: pip install '{PACKAGE}=={PACKAGE_VERSION}' (or, from a source checkout"
        " of agentgym, pip install 'agentgym[terminal]')")


def file_systems(split: str) -> list[FileSystem]:
    if split == "all":
        return list(FILE_SYSTEMS.values())
    if split not in FILE_SYSTEMS:
        raise InvalidArgumentError(
            f"split={split!r} is not an NL2Bash file system; use one of {list(SPLITS)}")
    return [FILE_SYSTEMS[split]]


def load_records(fs: FileSystem) -> list[dict[str, Any]]:
    """The file system's tasks as the package ships them (with ``index``: their position)."""
    data = json.loads((package_dir() / "datasets" / f"nl2bash_fs_{fs.number}.json")
                      .read_text())
    return [dict(record, index=index) for index, record in enumerate(data)]


def setup_source(fs: FileSystem) -> str:
    return (package_dir() / "docker" / f"setup_nl2b_fs_{fs.number}.sh").read_text()


# ---- what a task is made of ----------------------------------------------------------------


def task_id(fs: FileSystem, record: dict[str, Any]) -> str:
    return f"nl2bash-{fs.name}-{record['index']}"


def gold_of(record: dict[str, Any]) -> str:
    gold = record["gold"]
    return ";".join(gold) if isinstance(gold, list) else str(gold)


def needs_setup_file(fs: FileSystem, record: dict[str, Any]) -> bool:
    """The task names the setup script itself (it sat in the original's working
    directory)."""
    name = f"setup_nl2b_fs_{fs.number}.sh"
    return name in record["query"] or name in gold_of(record)


def skip_reason(fs: FileSystem, record: dict[str, Any]) -> str | None:
    """Why the task cannot be graded faithfully in the local sandbox, or None."""
    fixed = SKIP.get((fs.name, record["index"]))
    if fixed:
        return fixed
    gold = gold_of(record).strip()
    if _NETWORK.search(gold):
        return "it needs the network, which the sandbox does not have"
    root = _ROOT.search(gold)
    if root:
        return (f"it needs root or other users ({root.group(1)}); commands run as one"
                " unprivileged user")
    missing = _MISSING.search(gold)
    if missing:
        return f"it needs {missing.group(1)}, which the sandbox does not have"
    live = _LIVE_STATE.search(gold)
    if live:
        return _LIVE.format(live.group(1) or live.group(0))
    relative = _RELATIVE_TREE.search(gold)
    if relative:
        return (f"it names {relative.group(1)}/ relative to the original working directory /;"
                f" here the tree is the working directory {fs.workdir} itself")
    return None


def select(split: str = "all") -> tuple[list[tuple[FileSystem, dict[str, Any]]],
                                        dict[str, str]]:
    """The tasks of ``split`` that can run (with their file system) and the ids left out,
    each with its reason."""
    kept, skipped = [], {}
    for fs in file_systems(split):
        for record in load_records(fs):
            reason = skip_reason(fs, record)
            if reason:
                skipped[task_id(fs, record)] = reason
            else:
                kept.append((fs, record))
    return kept, skipped


# ---- the setup script ----------------------------------------------------------------------


def setup_script(fs: FileSystem, with_setup_file: bool = False) -> str:
    """The file system's setup script, run from ``/tmp``: its clean-up and writes outside the
    workspace dropped, undated files dated 90 minutes back before every
    archive and at the end."""
    settle = (f'_nl2bash_settle() {{ find {fs.workdir} -newer "$_nl2bash_marker" -exec touch'
              ' -h -d "@$_nl2bash_time" {} + 2>/dev/null; }')
    lines = ["#!/bin/bash",
             f"# Builds the files of InterCode's NL2Bash file system {fs.number} in"
             f" {fs.workdir}",
             f"# (setup_nl2b_fs_{fs.number}.sh of the icalfa package, adapted: see"
             " agentgym.plugins.terminal.sources.nl2bash).",
             # The grader passes one time to both of its rebuilds.
             f"_nl2bash_time=${{NL2BASH_TIME:-$(( $(date +%s) - {AGE_S} ))}}",
             "_nl2bash_marker=$(mktemp)",
             settle, f"mkdir -p {fs.workdir}", "cd /tmp"]
    workdir = re.escape(fs.workdir)
    for line in setup_source(fs).splitlines():
        stripped = line.strip()
        if stripped.startswith("#!"):
            continue
        if re.match(rf"rm -rf {workdir}/?$|rm -rf /backup/?$", stripped):
            continue  # the clean-up of an earlier build: the workspace starts empty
        if re.search(r"(^|[\s>])/(index\.html|backup)\b", stripped):
            continue  # writes outside the workspace
        if re.search(r"\b(tar|gzip)\s", stripped) and not stripped.startswith("#"):
            lines.append("_nl2bash_settle")
        lines.append(line)
    if with_setup_file:
        lines.append(f"cp /tmp/.nl2bash-setup-source.sh {fs.workdir}/setup_nl2b_fs_"
                     f"{fs.number}.sh")
    lines += ["_nl2bash_settle",
              f"find {fs.workdir} -exec touch -h -a -d \"@$_nl2bash_time\" {{}} + 2>/dev/null",
              'rm -f "$_nl2bash_marker"', "exit 0"]
    return "\n".join(lines) + "\n"


# ---- writing the folders -------------------------------------------------------------------


def materialize(dest: str | Path, split: str = "all") -> tuple[list[Path], dict[str, str]]:
    """Write the runnable tasks of ``split`` (``fs1`` .. ``fs5`` or ``all``) as Harbor folders
    under ``dest``; returns the folders written and the ids left out with their reasons.
    The same package version writes the same files on every call."""
    dest = Path(dest)
    kept, skipped = select(split)
    written = []
    for fs, record in kept:
        folder = dest / task_id(fs, record)
        if folder.exists():
            shutil.rmtree(folder)
        write_task(folder, fs, record)
        written.append(folder)
    return written, skipped


def write_task(folder: Path, fs: FileSystem, record: dict[str, Any]) -> None:
    with_file = needs_setup_file(fs, record)
    setup = setup_script(fs, with_file)
    gold = gold_of(record)
    spec = {"workdir": fs.workdir, "shell": fs.shell, "gold": gold,
            "command_file": COMMAND_FILE, "timeout": COMMAND_TIMEOUT_S}
    files = {
        "instruction.md": instruction(fs, record, with_file),
        "task.toml": task_toml(fs, record),
        "environment/Dockerfile": dockerfile(fs, with_file),
        "environment/files/.nl2bash-setup.sh": setup,
        "tests/test.sh": TEST_SH.format(fs=fs.name, n=record["index"], workdir=fs.workdir),
        "tests/grade.py": GRADE_PY,
        "tests/setup.sh": setup,
        "tests/task.json": json.dumps(spec, indent=1, sort_keys=True) + "\n",
        "solution/solve.sh": solve_sh(gold),
        "solution/wrong.sh": wrong_sh(WRONG.get((fs.name, record["index"]))
                                      or wrong_command(gold)),
    }
    if with_file:
        source = setup_source(fs)
        files["environment/files/.nl2bash-setup-source.sh"] = source
        files["tests/setup-source.sh"] = source
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def instruction(fs: FileSystem, record: dict[str, Any], with_file: bool) -> str:
    shell = "bash" if fs.shell == "bash" else "sh (POSIX sh, not bash)"
    lines = [f"# NL2Bash ({fs.name} task {record['index']})", "",
             "Write a shell command for this request:", "",
             f"> {' '.join(record['query'].split())}", "",
             "---", "",
             f"You are in a Linux shell as an unprivileged user; the files of this task are in"
             f" `{fs.workdir}`, your working directory."]
    if with_file:
        lines.append(f"`setup_nl2b_fs_{fs.number}.sh` is the file of that name in"
                     f" `{fs.workdir}`.")
    lines += ["",
              f"Write your command - one command line, as you would type it - to the file"
              f" `{COMMAND_FILE}`. It is graded by running it once with {shell}, with"
              f" `{fs.workdir}` as the working directory, on a fresh copy of the task's"
              " initial files and with no input. Its output (stdout and stderr together) and"
              f" the files it leaves in `{fs.workdir}` must be the same as those of the"
              " reference command run the same way. You may explore and try commands in your"
              " shell; what you change yourself does not count, only the command in the file."]
    return "\n".join(lines) + "\n"


def task_toml(fs: FileSystem, record: dict[str, Any]) -> str:
    difficulty = {0: "easy", 1: "medium", 2: "hard"}.get(record.get("difficulty"), "medium")
    tags = ["nl2bash", "intercode", fs.name]
    return (f'[metadata]\nauthor_name = "agentgym"\ndifficulty = "{difficulty}"\n'
            f'category = "nl2bash"\ntags = {json.dumps(tags)}\n\n'
            "[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 300.0\n")


def dockerfile(fs: FileSystem, with_file: bool) -> str:
    copy = ("cp .nl2bash-setup.sh .nl2bash-setup-source.sh /tmp/ && rm -f .nl2bash-setup.sh"
            " .nl2bash-setup-source.sh" if with_file else
            "cp .nl2bash-setup.sh /tmp/ && rm -f .nl2bash-setup.sh")
    return ("FROM agentgym/sandbox:default\n"
            f"WORKDIR {fs.workdir}\n"
            f"COPY files/ {fs.workdir}/\n"
            f"RUN {copy} && bash /tmp/.nl2bash-setup.sh\n")


def solve_sh(gold: str) -> str:
    return ("#!/usr/bin/env bash\n# Reference: the benchmark's gold command.\n"
            f"cat > {COMMAND_FILE} <<'{_HEREDOC}'\n{gold}\n{_HEREDOC}\ncat {COMMAND_FILE}\n")


#: Slips on gold commands of one word: a neighbouring command (what it does instead).
_ONE_WORD_SLIPS = {
    "ls": ("ls -a", "hidden entries listed too"),
    "pwd": ("echo $HOME", "the home directory instead of the working directory"),
    "whoami": ("id", "the full identity instead of the user name"),
    "env": ("set", "shell variables and functions too"),
    "hostname": ("cat /etc/hostname", "the host machine's name file"),
    "nice": ("nice -n 1 nice", "the niceness of a child started one level lower"),
    "groups": ("id -G", "group numbers instead of names"),
    "id": ("id -u", "the user number only"),
    "umask": ("umask -S", "the symbolic form"),
    "locale": ("locale -a", "the available locales instead of the current one"),
    "nproc": ("grep -m1 -c processor /proc/cpuinfo", "a line count of /proc/cpuinfo"),
}
#: Slips written for single tasks, where the rules of :func:`wrong_command` give none.
WRONG: dict[tuple[str, int], tuple[str, str]] = {
    ("fs2", 12): ('zcat -r /system/folder2.tar.gz | grep "Special"',
                  "the search word capitalised (no match)"),
    ("fs3", 44): ("diff <(ls /workspace/dir2) <(ls /workspace/dir1)",
                  "the two listings compared the other way round"),
}


def wrong_command(gold: str) -> tuple[str, str]:
    """A typical slip on the gold command, and what it is."""
    gold = gold.strip()
    if gold in _ONE_WORD_SLIPS:
        return _ONE_WORD_SLIPS[gold]
    stages = pipeline_stages(gold)
    if len(stages) >= 2:
        last = stages[-1].strip()
        if re.match(r"grep\s", last):
            flipped = (re.sub(r"^grep\s+-v\s+", "grep ", last) if re.match(r"grep\s+-v\s", last)
                       else "grep -v " + last[len("grep "):])
            return " | ".join([*(stage.strip() for stage in stages[:-1]), flipped]), \
                "the last filter of the pipeline inverted"
        return " | ".join(stage.strip() for stage in stages[:-1]), \
            "the pipeline without its last stage"
    if re.match(r"find\s", gold):
        turned = re.search(r"(\s-(?:[mac](?:time|min)|size)\s+)([+-])(?=\d)", gold)
        if turned:
            sign = "-" if turned.group(2) == "+" else "+"
            return gold[:turned.start(2)] + sign + gold[turned.end(2):], \
                f"the {turned.group(1).strip()} test turned around ({sign} for" \
                f" {turned.group(2)})"
        found = _FIND_NAME.search(gold) or _FIND_TESTS.search(gold)
        if found:
            return (gold[:found.start()] + gold[found.end():]).strip(), \
                f"the find command without its {found.group(0).strip()!r} test"
    redirect = re.search(r"\s+>>?\s*[^\s|;&<>]+$", gold)
    if redirect and not _unquoted(gold)[:redirect.start()].count(">"):
        return gold[:redirect.start()], "the output printed instead of written to the file"
    if re.match(r"echo\s", gold) and "$" in gold:
        return gold.replace("$", ""), "the variable's name instead of its value (no $)"
    if not re.search(r"[|;&<>()`$\\]", _unquoted(gold)):
        try:
            words = shlex.split(gold)
        except ValueError:
            words = []
        if len(words) >= 2:
            return shlex.join(words[:-1]), \
                f"the command without its last argument ({words[-1]!r})"
    found = re.search(r"(?<=\s)-{1,2}[A-Za-z][\w-]*(?:=\S+)?(?=\s|$)", gold)
    if found:
        return (gold[:found.start()] + gold[found.end():]).replace("  ", " "), \
            f"the command without its {found.group(0)!r} option"
    return f"{gold} --help", "the command's help instead of its result"


def _unquoted(command: str) -> str:
    """``command`` with its quoted parts blanked out."""
    return re.sub(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"", lambda m: " " * len(m.group(0)), command)


def pipeline_stages(command: str) -> list[str]:
    """``command`` split at its top-level pipes (not ``||``, not inside quotes, ``$(...)``,
    ``<(...)`` or backquotes)."""
    stages, current, depth, quote, index = [], "", 0, "", 0
    while index < len(command):
        char = command[index]
        if quote:
            if char == "\\" and quote == '"' and index + 1 < len(command):
                current += command[index:index + 2]
                index += 2
                continue
            if char == quote:
                quote = ""
        elif char == "\\" and index + 1 < len(command):
            current += command[index:index + 2]
            index += 2
            continue
        elif char in "'\"`":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        elif char == "|" and depth == 0:
            if command[index + 1:index + 2] == "|" or command[index - 1:index] == "|":
                current += char
                index += 1
                continue
            stages.append(current)
            current = ""
            index += 1
            continue
        current += char
        index += 1
    stages.append(current)
    return stages


def wrong_sh(wrong: tuple[str, str]) -> str:
    command, slip = wrong
    return (f"#!/usr/bin/env bash\n# Slip: {slip}.\n"
            f"cat > {COMMAND_FILE} <<'{_HEREDOC}'\n{command}\n{_HEREDOC}\ncat {COMMAND_FILE}\n")


TEST_SH = """\
#!/usr/bin/env bash
# Grader of NL2Bash {fs} task {n}: InterCode's reward, as tests/grade.py runs it.
""" + PROCESSES_BEFORE + """\
cd {workdir} 2>/dev/null || true
python3 /tests/grade.py
status=$?
""" + STOP_THEN_REWARD

GRADE_PY = '''\
"""NL2Bash grading after InterCode's BashEnv.get_reward (a command scores only when all
three parts are full): the agent's command and the gold command each run once from a fresh
build of the task's files (setup.sh), in the workspace, with no input; they must print the
same output (stdout and stderr together; or the commands are the same) and leave the same
files (every path's type, permission bits, content hash, link target)."""
import hashlib
import json
import os
import resource
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = json.load(open(os.path.join(HERE, "task.json")))
# Both rebuilds date their files alike (see the converter's AGE_S).
SETUP_TIME = str(int(time.time()) - 5400)
WORKDIR = SPEC["workdir"]
OUTPUT_CAP = 1 << 20


def reset():
    """Empty the workspace and build its initial files again."""
    subprocess.run(["chmod", "-R", "u+rwX", WORKDIR], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    for name in os.listdir(WORKDIR):
        path = os.path.join(WORKDIR, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass
    os.chmod(WORKDIR, 0o755)
    source = os.path.join(HERE, "setup-source.sh")
    if os.path.isfile(source):
        shutil.copy(source, "/tmp/.nl2bash-setup-source.sh")
    subprocess.run(["bash", os.path.join(HERE, "setup.sh")], cwd="/tmp",
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
                   env={**os.environ, "NL2BASH_TIME": SETUP_TIME})


def limit():
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, 64 << 20))


def run(command):
    """The command's output (stdout and stderr together) and whether it finished. Like
    docker's exec_run, the output is read until every writer has closed it, so processes
    the command leaves behind (``tee >(wc -l)``) are waited for, within the time limit."""
    deadline = time.monotonic() + SPEC["timeout"]
    process = subprocess.Popen([SPEC["shell"], "-c", command.strip()], cwd=WORKDIR,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, preexec_fn=limit,
                               start_new_session=True)
    output, size, finished = [], 0, False
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not selector.select(left):
                continue
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                finished = True
                break
            if size < OUTPUT_CAP:
                output.append(chunk[:OUTPUT_CAP - size])
            size += len(chunk)
    try:
        os.killpg(process.pid, signal.SIGKILL)  # whatever is left of the command
    except ProcessLookupError:
        pass
    process.stdout.close()
    process.wait()
    return b"".join(output).decode("utf-8", errors="replace"), finished


def snapshot():
    """Every path under the workspace: type, permission bits, content hash or link target."""
    state = {".": ("dir", oct(stat.S_IMODE(os.lstat(WORKDIR).st_mode)))}
    for root, dirs, files in os.walk(WORKDIR):
        for name in dirs + files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, WORKDIR)
            info = os.lstat(path)
            mode = oct(stat.S_IMODE(info.st_mode))
            if stat.S_ISLNK(info.st_mode):
                state[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                state[rel] = ("dir", mode)
            elif stat.S_ISREG(info.st_mode):
                try:
                    with open(path, "rb") as handle:
                        digest = hashlib.sha256(handle.read()).hexdigest()[:16]
                except OSError:
                    digest = "unreadable"
                state[rel] = ("file", mode, digest)
            else:
                state[rel] = ("other", mode)
    return state


def attempt(command):
    reset()
    output, finished = run(command)
    return output, finished, snapshot()


def hide_the_gold():
    """Delete task.json (this process has read it) and make this process non-dumpable, so
    that no process of the sandbox user can read the gold from its memory."""
    try:
        os.unlink(os.path.join(HERE, "task.json"))
    except OSError:
        pass
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def show(text):
    text = text if len(text) < 600 else text[:300] + " [...] " + text[-300:]
    return repr(text)


def grade():
    path = SPEC["command_file"]
    if not os.path.isfile(path):
        print(f"no command: {path} does not exist")
        return False
    with open(path, errors="replace") as handle:
        command = handle.read()
    if not command.strip():
        print(f"no command: {path} is empty")
        return False
    print(f"command: {command.strip()[:300]!r}")
    # The gold first, then hidden: the agent's command must not read it (task.json) nor
    # outlive its run to meddle with the gold's.
    gold_out, gold_finished, gold_state = attempt(SPEC["gold"])
    hide_the_gold()
    out, finished, state = attempt(command)
    if not finished:
        print(f"the command did not finish within {SPEC['timeout']} s")
        return False
    same_command = command.strip() == SPEC["gold"].strip()
    output_ok = same_command or (out == gold_out and gold_finished)
    print(f"output: {'same' if output_ok else 'different'}")
    if not output_ok:
        print(f"  got      {show(out)}")
        print(f"  expected {show(gold_out)}")
    changed = sorted(p for p in set(state) | set(gold_state)
                     if state.get(p) != gold_state.get(p))
    print(f"files: {'same' if not changed else f'{len(changed)} paths differ'}")
    for rel in changed[:8]:
        print(f"  {rel}: got {state.get(rel)}, expected {gold_state.get(rel)}")
    return output_ok and not changed


sys.exit(0 if grade() else 1)
'''
