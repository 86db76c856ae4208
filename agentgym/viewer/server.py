"""``agentgym view``: a local web page over trajectory files, a Starlette app that
:class:`~agentgym.core.serving.LocalServer` serves on 127.0.0.1 only.

    server = LocalServer(viewer_app(open_index(targets)), name="agentgym-view").start()

The page (``page.html``, plain HTML and JavaScript, no build step) is ``GET /`` (and
``/index.html``); it asks the app for:

* ``GET /api/facets``: episode count, envs, finish reasons, policies and files (their
  short names, by file number), for the filters;
* ``GET /api/episodes?sort=&desc=&env=&finish=&policy=&file=&q=&min=&max=&offset=&limit=``:
  one page of the list, filtered and sorted (:meth:`EpisodeIndex.query`), with the
  matching ``total`` and their ``mean_reward`` and ``pass_rate``;
* ``GET /api/episode/N``: one whole episode (messages, tokens and loss mask, metrics;
  with a tokenizer, ``completion_pieces``: each completion token as text);
* ``GET /api/locate?file=F&position=P``: ``{"index"}`` of the episode at position ``P`` of
  file number ``F`` (what a link to an episode names);
* ``GET /api/runs``: per training run folder given (``agentgym train`` output), its
  ``metrics.jsonl`` records and its ``eval.json`` (held-out results by stage, or null),
  which the page plots, runs overlaid.

Every list and facets request first indexes what was appended to the files, so a file
still being written shows its new episodes. Errors are ``{"error": reason}``: 400 for a bad
parameter, 404 for an episode or a page that does not exist. No response is cached (the
files grow under the page).
"""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentgym.core.errors import InvalidArgumentError
from agentgym.trainers.layout import EVAL_FILE, METRICS_FILE
from agentgym.viewer.index import EpisodeIndex

#: The most rows one list request returns.
MAX_PAGE = 1000
#: Every response: the files grow under the page, so nothing may be served from a cache.
_NO_STORE = {"Cache-Control": "no-store"}


def viewer_app(index: EpisodeIndex, runs: list[Path] | None = None,
               tokenizer: Any = None) -> Starlette:
    """The page and its JSON API (module docstring) over ``index``; ``runs``: training run
    folders whose curves the page draws; ``tokenizer`` (a transformers tokenizer) decodes
    the loss-mask view's token ids to text."""
    api = _Api(index, list(runs or []), tokenizer)
    # Plain ``def`` endpoints: Starlette runs them in its thread pool, so indexing a large
    # appended file never stalls the event loop (and the other requests with it).
    return Starlette(routes=[
        Route("/", api.page), Route("/index.html", api.page),
        Route("/api/facets", api.facets), Route("/api/episodes", api.episodes),
        Route("/api/episode/{number}", api.episode), Route("/api/locate", api.locate),
        Route("/api/runs", api.runs), Route("/{path:path}", _missing),
    ], exception_handlers={HTTPException: _http_error, ValueError: _bad_request})


def open_index(targets: list[str | Path]) -> EpisodeIndex:
    """The index of the trajectory files of ``targets`` (files or run folders)."""
    from agentgym.viewer.index import trajectory_files

    files = [f for target in targets for f in trajectory_files(target)]
    return EpisodeIndex(files)


def training_runs(targets: list[str | Path]) -> list[Path]:
    """The folders among ``targets`` that hold a training run's ``metrics.jsonl``."""
    return [Path(t) for t in targets if (Path(t) / METRICS_FILE).is_file()]


def run_records(folder: Path) -> list[dict[str, Any]]:
    """The complete records of ``folder/metrics.jsonl`` (a line being written waits)."""
    from agentgym.rollout.jsonl import complete_lines

    records = []
    for line in complete_lines(folder / METRICS_FILE):
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def run_evals(folder: Path) -> dict[str, Any] | None:
    """``folder/eval.json``, or None when the run has none (or it cannot be read yet)."""
    try:
        data = json.loads((folder / EVAL_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class _Api:
    """The endpoints, over one index, its runs and its tokenizer."""

    def __init__(self, index: EpisodeIndex, runs: list[Path], tokenizer: Any):
        self.index = index
        self.run_folders = runs
        self.tokenizer = tokenizer
        self.html = resources.files("agentgym.viewer").joinpath("page.html").read_bytes()

    def page(self, request: Request) -> Response:
        return Response(self.html, media_type="text/html", headers=_NO_STORE)

    def facets(self, request: Request) -> Response:
        self.index.refresh()
        return _json(self.index.facets())

    def episodes(self, request: Request) -> Response:
        options = _list_options(dict(request.query_params))
        self.index.refresh()
        page = self.index.query(**options)
        return _json({"total": page.total, "mean_reward": page.mean_reward,
                      "pass_rate": page.pass_rate,
                      "episodes": [r.to_dict() for r in page.rows]})

    def episode(self, request: Request) -> Response:
        given = request.path_params["number"]
        if not given.isdigit():
            raise HTTPException(400, f"episode {given!r} is not a number: /api/episode/N,"
                                     " N from 0")
        number = int(given)
        if not 0 <= number < len(self.index.rows):
            raise HTTPException(404, f"no episode {number}: there are {len(self.index.rows)}")
        episode = self.index.episode(number)
        if self.tokenizer is not None:
            episode["completion_pieces"] = [self.tokenizer.decode([i]) for i in
                                            episode.get("completion_ids") or ()]
            for sample in episode.get("earlier_samples") or ():
                sample["pieces"] = [self.tokenizer.decode([i]) for i in sample["token_ids"]]
        return _json(episode)

    def locate(self, request: Request) -> Response:
        query = dict(request.query_params)
        file = _count(query, "file", 0, 0, 2 ** 31)
        position = _count(query, "position", 0, 0, 2 ** 62)
        try:
            return _json({"index": self.index.locate(file, position)})
        except IndexError as missing:
            raise HTTPException(404, str(missing)) from None

    def runs(self, request: Request) -> Response:
        return _json({"runs": [{"name": run.name, "records": run_records(run),
                                "evals": run_evals(run)} for run in self.run_folders]})


def _missing(request: Request) -> Response:
    raise HTTPException(404, f"no page {request.url.path}")


def _json(data: Any, status: int = 200) -> Response:
    # json.dumps, not JSONResponse: a metric may be NaN or a path, which the page has
    # always been sent as json.dumps(default=str) writes them.
    return Response(json.dumps(data, default=str), status, media_type="application/json",
                    headers=_NO_STORE)


async def _http_error(request: Request, error: HTTPException) -> Response:
    return _json({"error": error.detail}, error.status_code)


async def _bad_request(request: Request, error: ValueError) -> Response:
    return _json({"error": str(error)}, 400)


def _number(query: dict[str, str], key: str) -> float | None:
    """``query[key]`` as a number (None when absent); what is not one is named."""
    if not query.get(key):
        return None
    try:
        value = float(query[key])
    except ValueError:
        value = math.nan
    if math.isnan(value):
        raise InvalidArgumentError(f"{key}={query[key]!r} is not a number")
    return value


def _count(query: dict[str, str], key: str, default: int, low: int, high: int) -> int:
    """A row count or position, clamped to [low, high] (``inf`` is the most there is)."""
    value = _number(query, key)
    return default if value is None else int(min(max(value, low), high))


def _list_options(query: dict[str, str]) -> dict[str, Any]:
    return {"sort": query.get("sort") or "index", "descending": query.get("desc") == "1",
            "env": query.get("env", ""), "finish_reason": query.get("finish", ""),
            "policy": query.get("policy", ""),
            "file": None if not query.get("file") else _count(query, "file", 0, -1, 2 ** 31),
            "text": query.get("q", "").strip(), "min_reward": _number(query, "min"),
            "max_reward": _number(query, "max"),
            "offset": _count(query, "offset", 0, 0, 2 ** 62),
            "limit": _count(query, "limit", 100, 1, MAX_PAGE)}
