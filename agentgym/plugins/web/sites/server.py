"""Serving a :class:`~agentgym.plugins.web.sites.site.Site`: a Starlette app on uvicorn
(:class:`~agentgym.core.serving.LocalServer`) with one copy of its database per episode.

**Episodes.** One :class:`SiteServer` per site and process serves it on ``127.0.0.1`` at a
free port (:func:`site_server`). The built database is the *template*; an episode gets its
own copy (:meth:`SiteServer.open_episode`, SQLite's backup API from memory to memory:
well under a millisecond, no restart), named by a token. The browser context of the
episode carries the token in the cookie :attr:`SiteServer.cookie_name`, set by its first
page load (:meth:`SiteServer.entry_url` redirects to the start page with the cookie: no
browser call of its own). :class:`EpisodeMiddleware` picks each request's database by that
cookie, so two concurrent episodes never see each other's changes; a request without a
known token gets 403. A page runs inside its episode's lock and commits (or rolls back and
answers 500 when the site raises). Grading reads the episode's database with
:meth:`SiteServer.query` and what it changed with :meth:`SiteServer.changes`;
:meth:`SiteServer.close_episode` drops it.

:class:`SiteClient` is a browser stand-in for tests of a site, over real HTTP.
"""

from __future__ import annotations

import contextlib
import html
import http.client
import re
import secrets
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentgym.core.serving import LocalServer
from agentgym.plugins.web.answers import Candidates
from agentgym.plugins.web.sites.site import (
    Handler,
    Site,
    SiteRequest,
    changed_rows,
    location_on_site,
    new_session,
    parse_form,
    redirect,
    table_rows,
)

#: The path of :meth:`SiteServer.entry_url` on every site.
ENTRY_PATH = "/_agentgym/enter"
NO_EPISODE = ("<!doctype html><title>Forbidden</title><h1>No episode</h1>"
              "<p>This site serves agentgym episodes only.</p>")


class Episode:
    """One episode's database, and the lock that serializes its pages and its grader."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db
        self.lock = threading.Lock()


class EpisodeMiddleware:
    """Chooses the request's episode by its cookie (``scope["state"]["episode"]``), answers
    the entry URL, refuses strangers (403), and marks every page ``no-store``."""

    def __init__(self, app: ASGIApp, server: SiteServer):
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if scope["path"] == ENTRY_PATH:
            await self.server.enter(request)(scope, receive, send)
            return
        episode = self.server.episodes.get(request.cookies.get(self.server.cookie_name, ""))
        if episode is None:
            await HTMLResponse(NO_EPISODE, 403)(scope, receive, send)
            return
        scope.setdefault("state", {})["episode"] = episode

        async def no_store(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()),
                                      (b"cache-control", b"no-store")]
            await send(message)

        await self.app(scope, receive, no_store)


class Page:
    """The ASGI endpoint of one route: the handler run on the episode's database."""

    def __init__(self, site: Site, handler: Handler):
        self.site = site
        self.handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        form = parse_form(await Request(scope, receive).body())
        # In a worker thread, as Starlette runs sync endpoints: a slow page holds its own
        # episode only, never the server.
        response = await run_in_threadpool(self.run, scope, form)
        await response(scope, receive, send)

    def run(self, scope: Scope, form: FormData) -> Response:
        episode: Episode = scope["state"]["episode"]
        with episode.lock:
            request = SiteRequest(scope, self.site, episode.db, form)
            try:
                response = self.handler(request, **scope["path_params"])
                if isinstance(response, str):
                    response = HTMLResponse(response)
                episode.db.commit()
            except Exception as error:  # a bug in a site: a 500 page, the server goes on
                episode.db.rollback()
                request.set_cookies.clear()  # a session it made was rolled back too
                response = HTMLResponse(
                    "<!doctype html><title>Error</title><h1>Server error</h1><pre>"
                    f"{html.escape(type(error).__name__)}: {html.escape(str(error))}</pre>", 500)
        set_cookies(response, request.set_cookies)
        return response


def set_cookies(response: Response, cookies: dict[str, str]) -> None:
    """Set (or, for "", delete) each cookie for the whole site."""
    for name, value in cookies.items():
        if value:
            response.set_cookie(name, value, httponly=True, samesite=None)
        else:
            response.delete_cookie(name, httponly=True, samesite=None)


async def error_page(request: Request, error: Exception) -> Response:
    """404 (no such page) and 405 (wrong method) as small HTML pages."""
    assert isinstance(error, HTTPException)
    title, text = error.detail, error.detail
    if error.status_code == 404:
        title, text = "Not found", f"No page at {request.url.path}"
    return HTMLResponse(f"<!doctype html><title>{html.escape(title)}</title>"
                        f"<h1>{html.escape(text)}</h1>", error.status_code)


class SiteServer:
    """Serves one :class:`Site` on 127.0.0.1 with a database per episode (module docstring).

    Use :func:`site_server` for the process's shared server of a site.
    """

    def __init__(self, site: Site):
        self.site = site
        self.template = sqlite3.connect(":memory:", check_same_thread=False)
        self.template.row_factory = sqlite3.Row
        site.build(self.template)
        self.template.execute(
            "CREATE TABLE IF NOT EXISTS _sessions (token TEXT PRIMARY KEY, user_id INTEGER)")
        self.template.commit()
        self._template_lock = threading.Lock()
        #: The template's rows, what :meth:`changes` compares an episode's with.
        self.template_rows = table_rows(self.template, site.volatile)
        #: The values of each answer kind, from the template no episode writes.
        self.candidates = Candidates({
            kind: tuple(str(row[0]) for row in self.template.execute(sql) if row[0] is not None)
            for kind, sql in site.answer_kinds.items()})
        self.episodes: dict[str, Episode] = {}
        self.app = Starlette(
            routes=[Route(r.path, Page(site, r.handler), methods=list(r.methods))
                    for r in site.routes],
            middleware=[Middleware(EpisodeMiddleware, server=self)],
            exception_handlers={HTTPException: error_page})
        self._http = LocalServer(self.app, name=f"agentgym-site-{site.name}").start()
        self.port = self._http.port

    @property
    def base_url(self) -> str:
        return self._http.url

    @property
    def cookie_name(self) -> str:
        """The cookie that names the episode's database."""
        return f"agentgym_episode_{self.site.name}"

    def open_episode(self) -> str:
        """A fresh copy of the site's database for one episode; returns its token."""
        db = sqlite3.connect(":memory:", check_same_thread=False)
        db.row_factory = sqlite3.Row
        with self._template_lock:
            self.template.backup(db)
        token = secrets.token_hex(16)
        self.episodes[token] = Episode(db)
        return token

    def entry_url(self, token: str, path: str = "/", session: str | None = None) -> str:
        """A URL that sets the episode's cookies (``token``'s, and the login ``session``
        of :meth:`log_in` if given) and redirects to ``path``: an episode's first page."""
        query = {"episode": token, "next": path}
        if session is not None:
            query["session"] = session
        return f"{self.base_url}{ENTRY_PATH}?{urllib.parse.urlencode(query)}"

    def enter(self, request: Request) -> Response:
        """The answer to :meth:`entry_url`: cookies and a redirect, or 403."""
        token = request.query_params.get("episode", "")
        target = request.query_params.get("next", "/")
        if token not in self.episodes or not location_on_site(target):
            return HTMLResponse("<!doctype html><title>Forbidden</title><h1>No episode</h1>",
                                403)
        response = redirect(target)
        cookies = {self.cookie_name: token}
        if request.query_params.get("session"):
            cookies[self.site.session_cookie] = request.query_params["session"]
        set_cookies(response, cookies)
        return response

    def close_episode(self, token: str) -> None:
        episode = self.episodes.pop(token, None)
        if episode is not None:
            with episode.lock:
                episode.db.close()

    @contextlib.contextmanager
    def database(self, token: str) -> Iterator[sqlite3.Connection]:
        """The episode's database, held for the block (requests wait meanwhile)."""
        episode = self.episodes.get(token)
        if episode is None:
            raise KeyError(f"no open episode {token!r} on site {self.site.name!r}")
        with episode.lock:
            yield episode.db
            episode.db.commit()

    def query(self, token: str, sql: str, params: tuple = ()) -> list[tuple]:
        """Rows of ``sql`` in the episode's database, as plain tuples."""
        with self.database(token) as db:
            return [tuple(row) for row in db.execute(sql, params).fetchall()]

    def changes(self, token: str) -> dict[str, int]:
        """Per table, the rows the episode ``token`` changed (added, removed or edited;
        :func:`~agentgym.plugins.web.sites.site.changed_rows`): what its grader bounds."""
        with self.database(token) as db:
            return changed_rows(self.template_rows, table_rows(db, self.site.volatile))

    def log_in(self, token: str, username: str) -> str:
        """A session for ``username`` in the episode's database: the value of the cookie
        :attr:`Site.session_cookie`."""
        with self.database(token) as db:
            row = db.execute("SELECT id FROM users WHERE username = ?", (username,)).fetchone()
            if row is None:
                raise KeyError(f"site {self.site.name!r} has no user {username!r}")
            return new_session(db, row[0])

    def close(self) -> None:
        self._http.close()
        for token in list(self.episodes):
            self.close_episode(token)


class SiteClient:
    """A browser stand-in for tests of a site: one episode's cookies (logged in as
    ``username`` when given), redirects followed, the last page kept.

    ``client.post("/cart/add", product_id=3)`` then ``client.text`` (the page's text) and
    ``client.status``; the episode's database is ``server.query(token, sql)``.
    """

    def __init__(self, server: SiteServer, token: str | None, username: str | None = None):
        self.server = server
        self.cookies = {server.cookie_name: token} if token is not None else {}
        if username is not None and token is not None:
            self.cookies[server.site.session_cookie] = server.log_in(token, username)
        self.status, self.url, self.html = 0, "", ""
        self.headers: http.client.HTTPMessage | None = None

    def request(self, method: str, path: str, data: dict[str, Any] | None = None,
                follow: bool = True) -> str:
        """Send a request (a POST's ``data`` form-encoded), follow redirects (unless
        ``follow`` is false), return the final page's HTML."""
        for _ in range(10):
            connection = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
            body = urllib.parse.urlencode(data or {}, doseq=True) if method == "POST" else None
            headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
            if body is not None:
                headers["Content-Type"] = "application/x-www-form-urlencoded"
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            text = response.read().decode()
            for header in response.headers.get_all("Set-Cookie") or []:
                name, _, rest = header.partition("=")
                value = rest.split(";", 1)[0].strip('"')
                if value and "Max-Age=0" not in header:
                    self.cookies[name] = value
                else:
                    self.cookies.pop(name, None)
            connection.close()
            if follow and response.status in (301, 302, 303, 307):
                method, data, path = "GET", None, response.headers["Location"]
                continue
            self.status, self.url, self.html = response.status, path, text
            self.headers = response.headers
            return text
        raise RuntimeError(f"more than 10 redirects from {path}")

    def get(self, path: str) -> str:
        return self.request("GET", path)

    def post(self, path: str, **data: Any) -> str:
        return self.request("POST", path, data)

    @property
    def text(self) -> str:
        """The last page's text: no tags or styles, entities decoded, spaces collapsed."""
        body = re.sub(r"<style>.*?</style>", " ", self.html, flags=re.S)
        return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


_servers: dict[str, SiteServer] = {}
_servers_lock = threading.Lock()


def site_server(site: Site | type[Site]) -> SiteServer:
    """The process's server of ``site`` (started on first use; one per site and process,
    so each worker of a pipeline or a Ray actor serves its own)."""
    name = site.name
    with _servers_lock:
        server = _servers.get(name)
        if server is None:
            server = SiteServer(site() if isinstance(site, type) else site)
            _servers[name] = server
        return server
