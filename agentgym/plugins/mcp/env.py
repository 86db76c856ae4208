"""Envs whose tools are real third-party MCP servers from PyPI, run in each episode's sandbox.

* ``mcp-git``: a small repository in the sandbox and the tools of ``mcp-server-git``
  (status, diff, add, commit, reset, branch, checkout, log, show). Tasks ask for a state
  of the repository: commit exactly one file's change with a given message, start a
  branch and switch to it, leave one file staged and another not. The grader reads the
  repository with ``git`` after the episode (its history must still start at the task's
  commit); the agent has no shell, only the server's tools.
* ``mcp-time``: the tools of ``mcp-server-time``; tasks ask what a clock shows in one
  city when it shows a given time in another (cities without daylight saving time, so the
  answer is the same every day), answered with ``submit(answer)`` as ``HH:MM``.

Both take ``mcp_servers`` (more servers whose tools the agent gets besides, as
:class:`~agentgym.toolkits.mcp.MCPServer` or its fields) and ``backend``. Tasks are
generated from a seed (``num_tasks``, ``seed``) and carry reference solutions.
"""

from __future__ import annotations

import datetime
import os
import random
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym.core.cache import cache_root, file_lock
from agentgym.core.episode import Episode, Submitted
from agentgym.core.parsers import ToolCall
from agentgym.core.reward import RewardResult
from agentgym.core.sandbox import SandboxSpec
from agentgym.core.task import SolutionTurn, Task, TaskList, TaskSource
from agentgym.core.tools import tool
from agentgym.toolkits.mcp import MCPServer
from agentgym.toolkits.sandboxed import SandboxedEnv, episode_sandbox

__all__ = ["GIT_SERVER", "TIME_SERVER", "GitEnv", "MCPTaskEnv", "TimeEnv", "git_tasks",
           "local_time", "time_tasks"]

#: The repository's folder inside the sandbox.
REPO = "/workspace/repo"
GIT_SERVER = MCPServer("git", command=["{env}/bin/python", "-m", "mcp_server_git",
                                       "--repository", REPO],
                       requirements=["mcp-server-git==2026.10.19"])
TIME_SERVER = MCPServer("time", command=["{env}/bin/python", "-m", "mcp_server_time",
                                         "--local-timezone", "UTC"],
                        requirements=["mcp-server-time==2026.10.19"])
#: Bump when the generated repositories change: their cached folders are rebuilt.
REPO_VERSION = 1
_IDENTITY = {"GIT_AUTHOR_NAME": "Ada Lovelace", "GIT_AUTHOR_EMAIL": "ada@example.com",
             "GIT_COMMITTER_NAME": "Ada Lovelace", "GIT_COMMITTER_EMAIL": "ada@example.com",
             "GIT_AUTHOR_DATE": "2026-01-05T10:00:00+00:00",
             "GIT_COMMITTER_DATE": "2026-01-05T10:00:00+00:00"}


def _call(name: str, **arguments: Any) -> SolutionTurn:
    return SolutionTurn([ToolCall(name, arguments)])


class MCPTaskEnv(SandboxedEnv):
    """The base of the MCP envs: a sandbox per episode, the family's MCP server (plus any in
    ``mcp_servers``), and ``submit``."""

    system_prompt = ("You are working through the tools you are given. Do what the task asks"
                     " with them, then call submit.")
    server: MCPServer
    harbor_refusal = (
        "the agent works only through an MCP server's tools (no shell), a server agentgym"
        " runs from a Python environment it installs; a Harbor agent works in a shell in the"
        " container, where the task would be another one (git or date by hand), and an"
        " answer given as a submit tool call (mcp-time) is nothing tests/test.sh can read")

    def __init__(self, tasks: TaskSource | None = None, *, num_tasks: int = 200, seed: int = 0,
                 backend: str | None = None, mcp_servers: Sequence[Any] = (),
                 max_turns: int = 10, **kwargs: Any):
        if num_tasks < 1:
            from agentgym.core.errors import InvalidArgumentError

            raise InvalidArgumentError(f"num_tasks must be >= 1, got {num_tasks}")
        super().__init__(tasks if tasks is not None else TaskList(self.generate(num_tasks, seed)),
                         max_turns=max_turns, **kwargs)
        self.backend = backend
        self.mcp_servers = [self.server, *(MCPServer.from_dict(s) for s in mcp_servers)]

    def generate(self, n: int, seed: int) -> list[Task]:
        raise NotImplementedError


# ---- mcp-git ---------------------------------------------------------------------------------

_FILES = ["README.md", "setup.cfg", "src/app.py", "src/util.py", "docs/guide.md",
          "tests/test_app.py", "Makefile", "CHANGELOG.md"]
_WORDS = ["parser", "cache", "logging", "retry", "config", "export", "timeout", "search",
          "login", "upload", "metrics", "schema"]
_BRANCHES = ["feature/{w}", "fix/{w}-bug", "release/{n}", "docs/{w}", "try-{w}"]


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "core.hooksPath=/dev/null", *args], cwd=folder,
                          env={**os.environ, **_IDENTITY}, check=True, capture_output=True,
                          text=True).stdout


def _build_repo(folder: Path, spec: dict[str, Any]) -> None:
    """The task's repository: every file committed once, then the task's edits (unstaged
    and staged) on top."""
    repo = folder / "repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    for name in spec["files"]:
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {name}\nversion = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "Initial import")
    for name in spec["modified"] + spec["staged"]:
        with open(repo / name, "a") as handle:
            handle.write(f"changed = {spec['word']}\n")
    if spec["staged"]:
        _git(repo, "add", *spec["staged"])


def _repo_template(task: Task) -> tuple[str, str]:
    """The host folder holding ``task``'s repository (built once, cached) and its first
    commit's id."""
    folder = cache_root() / "mcp-git" / f"v{REPO_VERSION}" / task.id
    done = folder / "HEAD_SHA"
    if not done.is_file():
        with file_lock(folder.parent / f"{task.id}.lock"):
            if not done.is_file():
                import shutil

                shutil.rmtree(folder, ignore_errors=True)
                _build_repo(folder / "tree", task.metadata["repo"])
                head = _git(folder / "tree" / "repo", "rev-parse", "HEAD").strip()
                done.write_text(head)
    return str(folder / "tree"), done.read_text().strip()


def git_tasks(n: int, seed: int) -> list[Task]:
    """``n`` seeded repository tasks of three kinds, with reference solutions."""
    rng = random.Random(f"mcp-git/{seed}")
    tasks = []
    for i in range(n):
        kind = ("commit", "branch", "stage")[i % 3]
        files = sorted(rng.sample(_FILES, 5))
        word = rng.choice(_WORDS)
        changed = rng.sample(files, 3)
        repo: dict[str, Any] = {"files": files, "word": word, "modified": changed, "staged": []}
        if kind == "commit":
            target, message = changed[0], f"Update {changed[0]} for {word}"
            prompt = (f"The repository at {REPO} has uncommitted changes to"
                      f" {', '.join(sorted(changed))}. Commit the change to {target} alone,"
                      f" with the message \"{message}\", and leave the other changes"
                      " uncommitted.")
            expect = {"kind": kind, "file": target, "message": message,
                      "still_modified": sorted(changed[1:])}
            solution = [_call("git_add", repo_path=REPO, files=[target]),
                        _call("git_commit", repo_path=REPO, message=message)]
            wrong = [[_call("git_add", repo_path=REPO, files=sorted(changed)),
                      _call("git_commit", repo_path=REPO, message=message), _call("submit")]]
        elif kind == "branch":
            branch = rng.choice(_BRANCHES).format(w=word, n=f"{rng.randint(1, 9)}.{i % 10}")
            prompt = (f"In the repository at {REPO}, create a branch named {branch} from the"
                      " current commit and switch to it. Keep the uncommitted changes.")
            expect = {"kind": kind, "branch": branch, "still_modified": sorted(changed)}
            solution = [_call("git_create_branch", repo_path=REPO, branch_name=branch),
                        _call("git_checkout", repo_path=REPO, branch_name=branch)]
            wrong = [[_call("git_create_branch", repo_path=REPO, branch_name=branch),
                      _call("submit")]]
        else:
            staged, keep = changed[0], changed[1]
            repo["modified"], repo["staged"] = changed[2:], sorted([staged, keep])
            prompt = (f"In the repository at {REPO}, {staged} and {keep} are staged. Unstage"
                      f" {staged} (keep its change in the working tree) and leave {keep}"
                      " staged. Do not commit.")
            expect = {"kind": kind, "staged": [keep], "unstaged": sorted([staged, changed[2]])}
            solution = [_call("git_reset", repo_path=REPO),
                        _call("git_add", repo_path=REPO, files=[keep])]
            wrong = [[_call("git_reset", repo_path=REPO), _call("submit")]]
        tasks.append(Task(
            id=f"git-{kind}-{i:04d}", prompt=prompt,
            metadata={"repo": repo, "expect": expect, "wrong_solutions":
                      [[t.to_dict() for t in w] for w in wrong]},
            solution=[*solution, _call("submit")]))
    return tasks


class GitEnv(MCPTaskEnv):
    """``mcp-git``: the module docstring."""

    server = GIT_SERVER

    def generate(self, n: int, seed: int) -> list[Task]:
        return git_tasks(n, seed)

    async def sandbox_spec(self, task: Task) -> SandboxSpec:
        template, _ = _repo_template(task)
        return SandboxSpec(template=template)

    @tool
    def submit(self) -> str:
        """Say that the repository is as the task asks. This ends the episode."""
        raise Submitted("", "Submitted.")

    async def grade(self, episode: Episode) -> RewardResult:
        box = episode_sandbox(episode)
        task = episode.task
        if box is None or task is None:
            return RewardResult(0.0, {"reason": "no sandbox"})
        _, first = _repo_template(task)
        # Only the repository's own settings, and none of those that run programs: the
        # grader reads git's output, never anything a planted config or hook could print.
        git = (f"GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null git -c core.hooksPath=/dev/null"
               f" -c core.fsmonitor=false -c safe.directory='*' -C {REPO}")
        ran = await box.exec(
            f"{git} rev-parse HEAD HEAD~1 2>/dev/null; echo '--branch'; {git} symbolic-ref"
            f" --short HEAD; echo '--log'; {git} log -1 --format=%s; echo '--files';"
            f" {git} diff-tree --no-commit-id --name-only -r HEAD; echo '--status';"
            f" {git} status --porcelain", timeout=60)
        sections = _sections(ran.output)
        shas = sections.get("", [])
        expect = task.metadata["expect"]
        status = {line[3:]: line[:2] for line in sections.get("--status", [])}
        unstaged = sorted(f for f, code in status.items() if code[1] == "M")
        staged = sorted(f for f, code in status.items() if code[0] in "MA")
        checks: dict[str, bool] = {}
        if expect["kind"] == "commit":
            checks["one new commit on the task's"] = len(shas) == 2 and shas[1] == first
            checks["message"] = sections.get("--log", [""])[0].strip() == expect["message"]
            checks["only the file"] = sections.get("--files", []) == [expect["file"]]
        else:
            checks["no new commit"] = bool(shas) and shas[0] == first
        if expect["kind"] == "branch":
            checks["on the branch"] = sections.get("--branch", [""])[0] == expect["branch"]
        if expect["kind"] == "stage":
            checks["staged"] = staged == expect["staged"]
            checks["unstaged"] = unstaged == expect["unstaged"]
        else:
            checks["changes kept"] = unstaged == expect["still_modified"] and not staged
        reward = float(all(checks.values()))
        return RewardResult(reward, {k: float(v) for k, v in checks.items()})


def _sections(output: str) -> dict[str, list[str]]:
    """The grader's output split at its ``--name`` marker lines."""
    found: dict[str, list[str]] = {"": []}
    current = ""
    for line in output.splitlines():
        if re.fullmatch(r"--[a-z]+", line.strip()):
            current = line.strip()
            found[current] = []
        elif line.strip():
            found[current].append(line.rstrip())
    return found


# ---- mcp-time --------------------------------------------------------------------------------

#: Cities whose time zones keep no daylight saving time (the answer is the same all year).
ZONES = {"Tokyo": "Asia/Tokyo", "Kolkata": "Asia/Kolkata", "Singapore": "Asia/Singapore",
         "Dubai": "Asia/Dubai", "Nairobi": "Africa/Nairobi", "Bogota": "America/Bogota",
         "Shanghai": "Asia/Shanghai", "Lima": "America/Lima", "Jakarta": "Asia/Jakarta",
         "Kathmandu": "Asia/Kathmandu", "Reykjavik": "Atlantic/Reykjavik",
         "Brisbane": "Australia/Brisbane", "Honolulu": "Pacific/Honolulu", "Riyadh": "Asia/Riyadh"}


def local_time(hhmm: str, source: str, target: str) -> str:
    """``hhmm`` in zone ``source`` as ``HH:MM`` in zone ``target``."""
    from zoneinfo import ZoneInfo

    hour, minute = map(int, hhmm.split(":"))
    day = datetime.datetime(2026, 1, 15, hour, minute, tzinfo=ZoneInfo(source))
    return day.astimezone(ZoneInfo(target)).strftime("%H:%M")


def time_tasks(n: int, seed: int) -> list[Task]:
    """``n`` seeded conversions between cities without daylight saving time."""
    rng = random.Random(f"mcp-time/{seed}")
    tasks = []
    for i in range(n):
        a, b = rng.sample(sorted(ZONES), 2)
        hhmm = f"{rng.randint(0, 23):02d}:{rng.choice([0, 15, 30, 45, 5, 50]):02d}"
        answer = local_time(hhmm, ZONES[a], ZONES[b])
        wrong = local_time(hhmm, ZONES[b], ZONES[a])  # the conversion the wrong way round
        if wrong == answer:
            wrong = f"{(int(answer[:2]) + 1) % 24:02d}{answer[2:]}"
        tasks.append(Task(
            id=f"time-{i:04d}",
            prompt=(f"When clocks in {a} show {hhmm}, what do clocks in {b} show? Use the"
                    f" time tools ({a}: {ZONES[a]}, {b}: {ZONES[b]}), then submit the time"
                    " as HH:MM (24-hour), nothing else."),
            metadata={"answer": answer, "wrong_solutions": [
                [_call("submit", answer=wrong).to_dict()]]},
            solution=[_call("convert_time", source_timezone=ZONES[a], time=hhmm,
                            target_timezone=ZONES[b]),
                      _call("submit", answer=answer)]))
    return tasks


class TimeEnv(MCPTaskEnv):
    """``mcp-time``: the module docstring."""

    server = TIME_SERVER

    def generate(self, n: int, seed: int) -> list[Task]:
        return time_tasks(n, seed)

    @tool
    def submit(self, answer: str) -> str:
        """Submit the time. This ends the episode.

        Args:
            answer: The time as HH:MM, 24-hour (e.g. 07:30).
        """
        raise Submitted(answer, f"Submitted: {answer}")

    async def grade(self, episode: Episode) -> RewardResult:
        task = episode.task
        answer = (episode.submission or "") if episode.submitted else ""
        given = re.fullmatch(r"\s*(\d{1,2}):(\d{2})\s*", answer)
        expected = task.metadata["answer"] if task is not None else None
        right = bool(given) and expected == f"{int(given[1]):02d}:{given[2]}"
        return RewardResult(float(right), {"well_formed": float(bool(given))})


