"""``agentgym view``: a local web page over trajectory files, served on 127.0.0.1 only.

The page (``page.html``, plain HTML and JavaScript, no build step) asks this server for:

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
still being written shows its new episodes. Bad parameters get a 400 with the reason.
"""

from __future__ import annotations

import json
import math
import threading
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

from agentgym.viewer.index import EpisodeIndex

HOST = "127.0.0.1"
#: A training run's log and its held-out results (agentgym.trainers.run writes them).
METRICS_FILE = "metrics.jsonl"
EVAL_FILE = "eval.json"
#: The most rows one list request returns.
MAX_PAGE = 1000


class ViewerServer(ThreadingHTTPServer):
    """The viewer's HTTP server over ``index``, on 127.0.0.1 at ``port`` (0: any free)."""

    daemon_threads = True

    def __init__(self, index: EpisodeIndex, port: int = 0, runs: list[Path] | None = None,
                 tokenizer: Any = None):
        self.index = index
        #: Decodes the loss-mask view's token ids to text (a transformers tokenizer).
        self.tokenizer = tokenizer
        #: Training run folders (with ``metrics.jsonl``) whose curves the page draws.
        self.runs = list(runs or [])
        self.page = resources.files("agentgym.viewer").joinpath("page.html").read_bytes()
        super().__init__((HOST, port), _Handler)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/"

    def start(self) -> threading.Thread:
        """Serve in a background thread (for tests and benches); stop with shutdown()."""
        thread = threading.Thread(target=self.serve_forever, name="agentgym-view",
                                  daemon=True)
        thread.start()
        return thread


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


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the page polls
        pass

    def do_GET(self) -> None:  # http.server calls it by this name
        url = urllib.parse.urlsplit(self.path)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
        index = self.server.index
        try:
            if url.path in ("/", "/index.html"):
                return self._send(self.server.page, "text/html; charset=utf-8")
            if url.path == "/api/facets":
                index.refresh()
                return self._json(index.facets())
            if url.path == "/api/episodes":
                index.refresh()
                page = index.query(**_list_options(query))
                return self._json({"total": page.total, "mean_reward": page.mean_reward,
                                   "pass_rate": page.pass_rate,
                                   "episodes": [r.to_dict() for r in page.rows]})
            if url.path == "/api/locate":
                try:
                    number = index.locate(_count(query, "file", 0, 0, 2 ** 31),
                                          _count(query, "position", 0, 0, 2 ** 62))
                except IndexError as missing:
                    return self._error(HTTPStatus.NOT_FOUND, str(missing))
                return self._json({"index": number})
            if url.path == "/api/runs":
                return self._json({"runs": [{"name": run.name, "records": run_records(run),
                                             "evals": run_evals(run)}
                                            for run in self.server.runs]})
            if url.path.startswith("/api/episode/"):
                number = int(url.path.rsplit("/", 1)[1])
                if not 0 <= number < len(index.rows):
                    return self._error(HTTPStatus.NOT_FOUND,
                                       f"no episode {number}: there are {len(index.rows)}")
                episode = index.episode(number)
                if self.server.tokenizer is not None:
                    episode["completion_pieces"] = [
                        self.server.tokenizer.decode([i]) for i in episode.get(
                            "completion_ids") or ()]
                return self._json(episode)
        except ValueError as bad:
            return self._error(HTTPStatus.BAD_REQUEST, str(bad))
        return self._error(HTTPStatus.NOT_FOUND, f"no page {url.path}")

    def _json(self, data: Any) -> None:
        self._send(json.dumps(data, default=str).encode(), "application/json")

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._send(json.dumps({"error": message}).encode(), "application/json", status)

    def _send(self, body: bytes, kind: str, status: HTTPStatus = HTTPStatus.OK) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


def _number(query: dict[str, str], key: str) -> float | None:
    """``query[key]`` as a number (None when absent); what is not one is named."""
    if not query.get(key):
        return None
    try:
        value = float(query[key])
    except ValueError:
        value = math.nan
    if math.isnan(value):
        raise ValueError(f"{key}={query[key]!r} is not a number")
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
