"""WebArena's task files, for users who run WebArena's servers (``webarena`` env id).

WebArena's tasks need its six self-hosted sites (a Magento shop and its admin, a Postmill
forum, GitLab, a wiki, a map); agentgym does not ship or start them. Give their base URLs
with ``base_urls={"shopping": "http://host:7770", ...}`` or environment variables
``WEBARENA_<SITE>`` (``WEBARENA_SHOPPING_ADMIN``; BrowserGym's ``WA_<SITE>`` works too).
Making the env checks that every site its tasks need is configured and answers, and
otherwise raises :class:`~agentgym.core.errors.MissingResourceError` naming the site, the
URL and the variable. The origins of the base URLs are the only ones its pages may reach
(:mod:`agentgym.plugins.web.reach`).

**Task files.** By default the 812 tasks of WebArena Verified, read from the
``webarena-verified`` package's data (installed without its dependencies, which pin
versions other extras cannot share: ``pip install --no-deps webarena-verified``). ``tasks=``
also reads WebArena's original format (``test.raw.json``, or a folder of per-task
``config_files/*.json``). ``sites=("shopping",)`` keeps the tasks that use only those sites.

**Grading**, as the files say:

* Verified ``AgentResponseEvaluator``: the agent's final ``send_msg_to_user`` is a JSON
  object ``{"task_type", "status", "retrieved_data"}``; type and status must match, and
  the data must equal the expected list (normalized text, numbers by value; in order only
  where the task says ``ordered``).
* Verified ``NetworkEventEvaluator``: some request the episode's pages made matches the
  expected URL (any of the alternatives, with the base URLs filled in, ignoring the query
  parameters the task lists), method, form or JSON post data (a subset match) and response
  status. Headers, response bodies, cookies and schemas are not checked: the fields left
  unchecked are listed in ``reward_metrics["unchecked"]``.
* Original ``string_match`` (``exact_match``, ``must_include``; ``fuzzy_match`` needs a
  judge model and is checked as ``must_include``, noted in the metrics), ``url_match``
  (the final URL) and ``program_html`` (the locator's text on the given page). An answer
  checked by inclusion must also not be a list of candidates: it may be at most twice as
  long as the references plus a sentence's room, and where the references are numbers,
  name no other number (:mod:`agentgym.plugins.web.answers`).
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym.core.episode import Episode
from agentgym.core.errors import InvalidArgumentError, MissingFileError, MissingResourceError
from agentgym.core.package_data import package_file
from agentgym.core.reward import RewardResult
from agentgym.core.task import Task, TaskList
from agentgym.plugins.web.answers import NUMBER, AnswerSpec, check_answer, normalize
from agentgym.plugins.web.browser import BrowserSession
from agentgym.plugins.web.env import WebEnv, episode_page
from agentgym.plugins.web.reach import origin_of

#: WebArena's sites, as task files name them.
SITES = ("shopping", "shopping_admin", "reddit", "gitlab", "wikipedia", "map")
_PLACEHOLDER = re.compile(r"__([A-Z_]+)__")


def verified_file() -> Path:
    """The WebArena Verified task file of the ``webarena-verified`` package."""
    return package_file(
        "webarena_verified", "assets/dataset/webarena-verified.json",
        what="WebArena's task files",
        install="install its data without its pinned dependencies: pip install --no-deps"
                " webarena-verified; or pass tasks=PATH of a WebArena task file")


def read_tasks(path: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """Task objects of a WebArena task file or folder (verified or original format)."""
    path = Path(path) if path is not None else verified_file()
    if path.is_dir():
        rows = [json.loads(p.read_text()) for p in sorted(path.glob("*.json"),
                                                           key=lambda p: (len(p.stem), p.stem))]
    elif path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        rows = data if isinstance(data, list) else [data]
    else:
        raise MissingFileError(f"the WebArena task file {str(path)!r} does not exist",
                               "pass tasks=PATH of a WebArena task file or folder")
    for row in rows:
        if "task_id" not in row or "intent" not in row or "eval" not in row:
            raise InvalidArgumentError(f"{path}: {str(row)[:200]} is not a WebArena task"
                                       " (needs task_id, intent and eval)")
    return rows


def base_urls_from_environment() -> dict[str, str]:
    """Base URLs from ``WEBARENA_<SITE>`` (or ``WA_<SITE>``) variables."""
    found = {}
    for site in SITES:
        value = os.environ.get(f"WEBARENA_{site.upper()}") or os.environ.get(f"WA_{site.upper()}")
        if value:
            found[site] = value.rstrip("/")
    return found


def fill_urls(text: str, base_urls: dict[str, str]) -> str:
    """``text`` with ``__SITE__`` placeholders replaced by base URLs."""
    return _PLACEHOLDER.sub(lambda m: base_urls.get(m.group(1).lower(), m.group(0)), text)


class WebArenaEnv(WebEnv):
    """WebArena tasks against servers you run (module docstring).

    Args:
        tasks: a WebArena task file or folder (default: WebArena Verified's).
        base_urls: site -> base URL (default: from the environment).
        sites: keep the tasks that use only these sites (default: those configured).
        storage_states: site -> a Playwright storage-state file (JSON with ``cookies``)
            whose cookies log the episode in, as WebArena's ``.auth`` files do.
        check_servers: check that each site answers when the env is made.
        Other arguments: see :class:`~agentgym.plugins.web.env.WebEnv`.
    """

    def __init__(self, tasks: str | os.PathLike | None = None, *,
                 base_urls: dict[str, str] | None = None, sites: Sequence[str] | None = None,
                 storage_states: dict[str, str] | None = None, check_servers: bool = True,
                 max_turns: int = 30, **kwargs: Any):
        urls = {k: v.rstrip("/") for k, v in (base_urls or base_urls_from_environment()).items()}
        rows = read_tasks(tasks)
        wanted = set(sites) if sites is not None else set(urls)
        if not wanted:
            raise MissingResourceError(
                "no WebArena server is configured",
                "run WebArena's servers and give their base URLs, e.g. base_urls={'shopping':"
                " 'http://127.0.0.1:7770'} or WEBARENA_SHOPPING=http://127.0.0.1:7770"
                f" (sites: {', '.join(SITES)})")
        missing = sorted(wanted - set(urls))
        if missing:
            raise MissingResourceError(
                f"no base URL for WebArena site(s) {', '.join(missing)}",
                "set base_urls= or " + ", ".join(f"WEBARENA_{s.upper()}" for s in missing))
        rows = [r for r in rows if set(r.get("sites", [])) <= wanted]
        if not rows:
            raise InvalidArgumentError(f"no task uses only the sites {sorted(wanted)}")
        if check_servers:
            for site in sorted(wanted):
                _check_reachable(site, urls[site])
        self.base_urls = urls
        self.storage_states = dict(storage_states or {})
        self.rows = {f"webarena/{r['task_id']}": r for r in rows}
        #: The only origins an episode may reach: the sites' base URLs.
        self.origins = tuple(sorted({origin_of(u) for u in urls.values()}))
        tasks_list = [Task(id=i, prompt=r["intent"], metadata={"sites": r.get("sites", [])})
                      for i, r in self.rows.items()]
        super().__init__(TaskList(tasks_list), max_turns=max_turns, **kwargs)

    def instructions(self, task: Task) -> str:
        row = self.rows[task.id]
        if not any(e.get("evaluator") == "AgentResponseEvaluator" for e in _evals(row)):
            return ""
        return ("When done, call send_msg_to_user with a JSON object: {\"task_type\":"
                " \"retrieve\"|\"mutate\"|\"navigate\", \"status\": \"SUCCESS\" or an error"
                " such as \"NOT_FOUND_ERROR\", \"retrieved_data\": [answers] or null}.")

    async def lease_options(self, task: Task) -> dict[str, Any]:
        cookies: list[dict] = []
        for site in task.metadata["sites"]:
            if site in self.storage_states:
                state = json.loads(Path(self.storage_states[site]).read_text())
                cookies += state.get("cookies", [])
        return {"origins": self.origins, "cookies": cookies}

    async def open_page(self, task: Task, session: BrowserSession) -> None:
        row = self.rows[task.id]
        starts = row.get("start_urls") or [row.get("start_url", "")]
        start = fill_urls(starts[0].split(" |AND| ")[0], self.base_urls)
        await session.page.goto(start, wait_until="domcontentloaded",
                                timeout=self.action_timeout_s * 4000)

    async def grade(self, episode: Episode) -> RewardResult:
        page = episode_page(episode)
        if page is None:
            return RewardResult(0.0, {"reason": "the episode's browser never started"})
        row = self.rows[episode.task.id]
        answer = episode.submission if isinstance(episode.submission, str) else None
        session = page.session
        failed: list[str] = []
        unchecked: list[str] = []
        for spec in _evals(row):
            kind = spec.get("evaluator") or spec.get("kind")
            if kind == "AgentResponseEvaluator":
                failed += _agent_response(spec, answer)
            elif kind == "NetworkEventEvaluator":
                problems, skipped = _network_event(spec, session.requests, self.base_urls)
                failed += problems
                unchecked += skipped
            elif kind == "string_match":
                failed += _string_match(spec["reference_answers"], answer, unchecked)
            elif kind == "url_match":
                want = fill_urls(spec["reference_url"], self.base_urls)
                if _url_key(session.page.url, ()) not in {
                        _url_key(u, ()) for u in want.split(" |OR| ")}:
                    failed.append(f"final URL {session.page.url} is not {want}")
            elif kind == "program_html":
                failed += await session.run(
                    lambda s, spec=spec: _program_html(s, spec, self.base_urls),
                    page.deadline_s * 4)
        return RewardResult(0.0 if failed else 1.0,
                            {"failed": failed, "unchecked": sorted(set(unchecked)),
                             "answer": answer})


def _evals(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A task's checks in one shape: the verified list, or the original's eval types."""
    if isinstance(row["eval"], list):
        return row["eval"]
    original = row["eval"]
    checks = []
    for kind in original.get("eval_types", []):
        check = {"kind": kind, **original}
        if kind == "program_html":
            for program in original.get("program_html", []):
                checks.append({"kind": kind, **program})
            continue
        checks.append(check)
    return checks


def _check_reachable(site: str, url: str) -> None:
    try:
        urllib.request.urlopen(url, timeout=5).close()
    except urllib.error.HTTPError:
        return  # it answered
    except (OSError, ValueError) as error:
        raise MissingResourceError(
            f"WebArena's {site} server at {url} is not reachable ({error})",
            f"start WebArena's servers (see WebArena's setup) or fix base_urls /"
            f" WEBARENA_{site.upper()}") from None


def _values(data: Any) -> list[Any]:
    return list(data) if isinstance(data, list) else ([] if data is None else [data])


def _same(got: Any, want: Any) -> bool:
    try:
        return float(str(got).replace(",", "").lstrip("$")) == float(
            str(want).replace(",", "").lstrip("$"))
    except ValueError:
        return normalize(str(got)) == normalize(str(want))


def _agent_response(spec: dict[str, Any], answer: str | None) -> list[str]:
    expected = spec["expected"]
    try:
        response = json.loads(answer or "")
        assert isinstance(response, dict)
    except (ValueError, AssertionError):
        return [f"the answer {str(answer)[:200]!r} is not the JSON object asked for"]
    problems = []
    for key in ("task_type", "status"):
        if normalize(str(response.get(key))) != normalize(str(expected.get(key))):
            problems.append(f"{key} {response.get(key)!r} is not {expected.get(key)!r}")
    got, want = _values(response.get("retrieved_data")), _values(expected.get("retrieved_data"))
    if spec.get("ordered"):
        same = len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want, strict=False))
    else:
        left = list(got)
        same = len(got) == len(want)
        for w in want:
            match = next((g for g in left if _same(g, w)), None)
            if match is None:
                same = False
                break
            left.remove(match)
    if not same:
        problems.append(f"retrieved_data {got} is not {want}")
    return problems


def _url_key(url: str, ignored: Sequence[str]) -> tuple[str, tuple]:
    parts = urllib.parse.urlsplit(url)
    query = tuple(sorted((k, v) for k, v in urllib.parse.parse_qsl(parts.query)
                         if not any(re.fullmatch(p, k) for p in ignored)))
    return (f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}".lower(), query)


def _network_event(spec: dict[str, Any], requests: list[dict[str, Any]],
                   base_urls: dict[str, str]) -> tuple[list[str], list[str]]:
    expected = spec["expected"]
    ignored = [*spec.get("ignored_query_params_patterns", []),
               *(re.escape(p) for p in spec.get("ignored_query_params", []))]
    urls = [expected["url"]] if isinstance(expected["url"], str) else expected["url"]
    wanted = {_url_key(fill_urls(u, base_urls), ignored) for u in urls}
    unchecked = [k for k in expected if k not in ("url", "http_method", "post_data",
                                                  "response_status")]
    unchecked += [k for k in spec if k.endswith("_schema") or k in ("decode_base64_query",)]
    candidates = requests[-1:] if spec.get("last_event_only") else requests
    for request in candidates:
        if _url_key(request["url"], ignored) not in wanted:
            continue
        if expected.get("http_method") and request["method"] != expected["http_method"]:
            continue
        if expected.get("response_status") and request.get("status") != \
                expected["response_status"]:
            continue
        if "post_data" in expected and not _subset(expected["post_data"],
                                                   request.get("post_data")):
            continue
        return ([] if not spec.get("should_not_exist") else
                [f"a request to {request['url']} was made and should not have been"]), unchecked
    if spec.get("should_not_exist"):
        return [], unchecked
    return [f"no request matched {expected.get('http_method', 'GET')} {urls[0]}"], unchecked


def _subset(want: Any, got: Any) -> bool:
    if isinstance(want, dict):
        return isinstance(got, dict) and all(k in got and _subset(v, got[k])
                                             for k, v in want.items())
    if isinstance(want, list):
        return isinstance(got, list) and len(want) == len(got) and all(
            _subset(w, g) for w, g in zip(want, got, strict=False))
    return _same(got, want) if got is not None else want is None


def _string_match(references: dict[str, Any], answer: str | None,
                  unchecked: list[str]) -> list[str]:
    got = normalize(answer or "")
    problems = []
    if "exact_match" in references and got != normalize(references["exact_match"]):
        problems.append(f"answer {got!r} is not {references['exact_match']!r}")
    phrases = [str(p) for p in references.get("must_include", [])]
    if "fuzzy_match" in references:
        unchecked.append("fuzzy_match (checked as must_include)")
        fuzzy = references["fuzzy_match"]
        phrases += [] if fuzzy == "N/A" else [str(p) for p in _values(fuzzy)]
    for phrase in phrases:
        if normalize(phrase) not in got:
            problems.append(f"answer {got!r} lacks {phrase!r}")
    if phrases and not problems:
        problems += _stuffing(got, phrases)
    return problems


def _stuffing(got: str, phrases: list[str]) -> list[str]:
    """Why an answer that includes every expected phrase is still not paid: it is longer
    than an answer of them may be, or (for numeric references) it names other numbers
    (:mod:`agentgym.plugins.web.answers`)."""
    numeric = any(char.isdigit() for phrase in phrases for char in phrase)
    spec = AnswerSpec(must_include=tuple(phrases), kinds=(NUMBER,) if numeric else ())
    ok, why = check_answer(spec, got)
    return [] if ok else [why]


async def _program_html(session: BrowserSession, spec: dict[str, Any],
                        base_urls: dict[str, str]) -> list[str]:
    page = session.page
    url = spec.get("url", "last")
    if url != "last":
        url = fill_urls(url, base_urls)
        if url.startswith("func:"):
            return [f"program_html url {url!r} is a WebArena function, not supported"]
        await page.goto(url, wait_until="domcontentloaded")
    locator = spec.get("locator") or ""
    text = await page.evaluate(f"() => {{ return {locator}; }}") if locator else \
        await page.content()
    got = normalize(str(text or ""))
    contents = spec.get("required_contents", {})
    problems = []
    if "exact_match" in contents and got != normalize(contents["exact_match"]):
        problems.append(f"{locator or 'page'} is {got[:100]!r}, not {contents['exact_match']!r}")
    for phrase in contents.get("must_include", []):
        options = str(phrase).split(" |OR| ")
        if not any(normalize(o) in got for o in options):
            problems.append(f"{locator or 'page'} lacks {phrase!r}")
    return problems
