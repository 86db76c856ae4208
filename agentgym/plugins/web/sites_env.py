"""WebArena-style tasks on agentgym's own sites (``web-shop``, ``web-forum``), graded by the
site's database state and the agent's answer.

**Sites** (:data:`SITES`) are small web applications backed by SQLite
(:mod:`agentgym.plugins.web.sites.site`), each served on 127.0.0.1 by one server per
process. Every episode gets its own copy of the site's database, made from the seeded
template in well under a millisecond; its browser context carries the cookie that names
it, so concurrent episodes never see each other's changes.

**Tasks** live in ``tasks/<site>.json`` (package data), a JSON list of objects:

``id``, ``site``, ``category``
    the task's id, its site, and a label (navigate, search, form, settings, ...).
``goal``
    the intent, as WebArena writes it: the outcome wanted, with every value needed.
``start``, ``login``
    the path the browser opens, and the user the episode starts logged in as (or null).
``grade``
    ``db``: checks ``{"sql", "expected"}``, each query's rows equal to ``expected``;
    ``answer``: null, ``{"exact": text}``, or ``{"must_include": [phrases], "kinds":
    [...], "must_exclude": [...]}`` against the agent's last ``send_msg_to_user``
    (lower-cased, spaces collapsed): an answer that also names another candidate of its
    kinds (the site's :attr:`~.sites.site.Site.answer_kinds`, or ``number``) or is
    much longer than the expected phrases fails, so listing every candidate is never paid
    (:mod:`agentgym.plugins.web.answers`); ``changes``: table -> rows, the most rows of
    each table the episode may change (:meth:`~.sites.server.SiteServer.changes`; a
    table not named: none). The author tool records what the reference solution changed,
    so doing the task's write everywhere (the comment on every post, the new price on
    every product, in the hope that the checked one is among them) fails, as does any
    change the task did not ask for. A task with ``db`` checks must carry it; without
    ``changes`` a task with only an answer check may change nothing. Reward 1.0 when every
    check passes, else 0.0; ``reward_metrics`` says which failed.
``steps``
    the reference solution as symbolic actions (targets by role and name), written by
    people; :mod:`agentgym.plugins.web.author` replays them in Chromium and writes
    ``solution``.
``solution``
    the same actions with the bids they resolved to: the assistant turns ``oracle``
    replays through ``step``, as a model's turns are.
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym.core.episode import Episode
from agentgym.core.errors import InvalidArgumentError, MissingFileError
from agentgym.core.parsers import ToolCall
from agentgym.core.reward import RewardResult
from agentgym.core.task import SolutionTurn, Task, TaskList
from agentgym.plugins.web.answers import AnswerSpec, check_answer
from agentgym.plugins.web.browser import BrowserSession
from agentgym.plugins.web.env import WebEnv
from agentgym.plugins.web.sites.server import SiteServer, site_server
from agentgym.plugins.web.sites.site import Site

#: Site name -> ``module:attribute`` of its :class:`~.sites.site.Site` instance.
SITES = {"shop": "agentgym.plugins.web.sites.shop:SITE",
         "forum": "agentgym.plugins.web.sites.forum:SITE"}
#: The folder of the shipped task files, ``<site>.json``.
TASKS_DIR = Path(__file__).parent / "tasks"
#: The episode's resource that holds its :class:`SiteVisit`.
VISIT = "site"


@dataclass(frozen=True)
class SiteVisit:
    """One episode's visit to a local site, kept on its :class:`Episode` as
    ``resources["site"]``: the server, the token of the episode's own database (closed when
    the episode is released), and the URL its browser enters by."""

    server: SiteServer
    token: str
    entry: str


def server_of(site: str | Site) -> SiteServer:
    """The process's server of ``site``: a :class:`~.sites.site.Site`, or the name of
    one of agentgym's (:data:`SITES`)."""
    if isinstance(site, Site):
        return site_server(site)
    if site not in SITES:
        raise InvalidArgumentError(f"site={site!r} is not one of agentgym's sites"
                                   f" ({', '.join(SITES)})")
    module, _, attribute = SITES[site].partition(":")
    return site_server(getattr(importlib.import_module(module), attribute))


def read_task_file(path: str | os.PathLike, sites: Any = SITES, unauthored: bool = False
                   ) -> list[dict[str, Any]]:
    """The task objects of a task file, checked for the fields every task needs (and, unless
    ``sites`` is None, for a site among ``sites``). ``unauthored`` lets tasks with db checks
    lack ``grade.changes`` (the author tool, which records them)."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"the web task file {str(path)!r} does not exist",
                               "pass tasks=PATH of a JSON list of site tasks")
    rows = json.loads(path.read_text(encoding="utf-8"))
    for i, row in enumerate(rows):
        missing = [k for k in ("id", "site", "goal", "grade") if k not in row]
        if missing:
            raise InvalidArgumentError(f"{path}: task #{i} ({row.get('id', '?')}) lacks"
                                       f" {', '.join(missing)}")
        if sites is not None and row["site"] not in sites:
            raise InvalidArgumentError(f"{path}: task {row['id']!r} names site"
                                       f" {row['site']!r}; sites: {', '.join(sites)}")
        grade = row["grade"]
        if not grade.get("db") and not grade.get("answer"):
            raise InvalidArgumentError(f"{path}: task {row['id']!r} has no db or answer check")
        changes = grade.get("changes")
        if changes is None and grade.get("db") and not unauthored:
            raise InvalidArgumentError(
                f"{path}: task {row['id']!r} has db checks but no grade.changes (the rows"
                f" per table its episodes may change); record what its reference solution"
                f" changes with python -m"
                f" agentgym.plugins.web.author {row['site']} --tasks {path} --only {row['id']}")
        if changes is not None and not (isinstance(changes, dict) and all(
                isinstance(k, str) and isinstance(v, int) and v >= 0
                for k, v in changes.items())):
            raise InvalidArgumentError(f"{path}: task {row['id']!r}: grade.changes must map"
                                       f" table names to row counts >= 0, got {changes!r}")
        if grade.get("answer"):
            try:
                AnswerSpec.from_dict(grade["answer"])
            except InvalidArgumentError as error:
                raise InvalidArgumentError(f"{path}: task {row['id']!r}: {error}") from None
    return rows


def to_task(row: dict[str, Any]) -> Task:
    """A task object as a :class:`~agentgym.core.task.Task`."""
    prompt = row["goal"]
    if row.get("login"):
        prompt += f"\n\n(You are logged in to the site as {row['login']}.)"
    solution = None
    if row.get("solution"):
        solution = [SolutionTurn([ToolCall(c["name"], dict(c.get("arguments", {})))
                                  for c in turn]) for turn in row["solution"]]
    metadata = {k: row.get(k) for k in ("site", "category", "start", "login", "grade")}
    return Task(id=row["id"], prompt=prompt, metadata=metadata, solution=solution)


def failed_checks(server: SiteServer, token: str, grade: dict[str, Any],
                  answer: str | None) -> list[str]:
    """The checks of a task's ``grade`` that the episode ``token`` fails, each saying why
    (none: reward 1.0). Database checks read the episode's database; the answer check
    reads ``answer``, the agent's last message; the bound reads what the episode changed
    (``grade["changes"]``, none where absent unless the task has db checks: an unauthored
    task's replay, before its bound is recorded)."""
    failed: list[str] = []
    for number, check in enumerate(grade.get("db") or (), 1):
        try:
            rows = [list(r) for r in server.query(token, check["sql"])]
        except Exception as error:  # a broken check is the task's bug: say so
            failed.append(f"db check {number} ({check['sql']!r}) failed: {error}")
            continue
        if rows != check["expected"]:
            failed.append(f"db check {number} gave {rows[:5]}, expected {check['expected'][:5]}")
    ok, why = check_answer(grade.get("answer"), answer, server.candidates)
    if not ok:
        failed.append(why)
    bound = grade.get("changes")
    if bound is not None or not grade.get("db"):  # unauthored tasks: no bound yet
        for table, count in server.changes(token).items():
            allowed = (bound or {}).get(table, 0)
            if count > allowed:
                failed.append(f"the episode changed {count} row{'s' * (count != 1)} of"
                              f" {table}, the task {allowed} (changes it did not ask for)")
    return failed


class SiteEnv(WebEnv):
    """WebArena-style tasks on one of agentgym's sites (module docstring).

    Args:
        site: ``shop`` or ``forum`` (its shipped tasks unless ``tasks`` is given), or a
            :class:`~agentgym.plugins.web.sites.site.Site` of your own (with
            ``tasks``): every task then runs on it, whatever its ``site`` field says.
        tasks: a task file (JSON list of task objects) instead of the shipped ones.
        max_turns: turns before truncation.
        unauthored: accept tasks with db checks but no ``grade.changes`` (graded without a
            bound on what the episode changes): the author tool's replays, which record it.
        Other arguments: see :class:`~agentgym.plugins.web.env.WebEnv`.
    """

    def __init__(self, site: str | Site = "shop", *, tasks: str | os.PathLike | None = None,
                 max_turns: int = 30, unauthored: bool = False, **kwargs: Any):
        self.server = server_of(site)  # a bad name fails here, before any browser starts
        if tasks is None and isinstance(site, Site):
            raise InvalidArgumentError(f"a site of your own ({site.name!r}) needs tasks=PATH")
        custom = isinstance(site, Site)
        rows = read_task_file(tasks if tasks is not None else TASKS_DIR / f"{site}.json",
                              None if custom else SITES, unauthored)
        for row in rows:  # every answer kind must be one the task's site knows
            spec = (row["grade"].get("answer") or {})
            known = (self.server if custom else server_of(row["site"])).candidates
            for kind in spec.get("kinds", ()):
                known.of(kind)  # raises, naming the known kinds
        self.site = site
        super().__init__(TaskList([to_task(r) for r in rows]), max_turns=max_turns, **kwargs)

    def goal(self, task: Task) -> str:
        return " ".join(str(task.prompt).split())

    async def lease_options(self, task: Task) -> dict[str, Any]:
        episode = self.episode
        assert episode is not None
        server = self.server if isinstance(self.site, Site) else server_of(task.metadata["site"])
        token = server.open_episode()

        async def close() -> None:
            server.close_episode(token)

        login = task.metadata.get("login")
        entry = server.entry_url(token, task.metadata.get("start") or "/",
                                 server.log_in(token, login) if login else None)
        # Kept before the page, so released after it: the site's database outlives the page.
        await episode.keep(VISIT, SiteVisit(server, token, entry), close)
        return {"origins": (server.base_url,)}

    async def open_page(self, task: Task, session: BrowserSession) -> None:
        assert self.episode is not None
        # The entry URL sets the episode's cookies and redirects to the task's start page;
        # the first observation waits for that page to settle.
        await session.page.goto(self.episode.resources[VISIT].entry, wait_until="commit",
                                timeout=self.settle_timeout_s * 1000)

    async def grade(self, episode: Episode) -> RewardResult:
        """Run the task's database checks on the episode's database and check its answer."""
        visit = episode.resources.get(VISIT)
        if visit is None:
            return RewardResult(0.0, {"reason": "the episode's site never opened"})
        grade = episode.task.metadata["grade"]
        answer = episode.submission if isinstance(episode.submission, str) else None
        failed = failed_checks(visit.server, visit.token, grade, answer)
        return RewardResult(0.0 if failed else 1.0,
                            {"reason": "; ".join(failed), "failed": failed, "answer": answer,
                             "checks": len(grade.get("db") or ()) + bool(grade.get("answer"))})
