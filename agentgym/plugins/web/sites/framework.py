"""The small web framework agentgym's local sites are written in, and the server that
gives every episode its own copy of a site's database.

A **site** (:class:`Site`) is a set of routes over one SQLite database. ``build(db)``
creates its schema and seeds it (deterministically: the same rows every time); each route
is a function ``handler(request, **params) -> Response | str`` registered with
:meth:`Site.route`. Pages are plain server-rendered HTML (forms that POST and redirect), so
every element an agent needs is in the page's accessibility tree.

**Episodes.** One :class:`SiteServer` per site and process serves it on ``127.0.0.1`` at a
free port (:func:`site_server`). The built database is the *template*; an episode gets its
own copy (:meth:`SiteServer.open_episode`, SQLite's backup API from memory to memory:
well under a millisecond, no restart), named by a token. The browser context of the
episode carries the token in the cookie :meth:`SiteServer.cookie_name`, set by its first
page load (:meth:`SiteServer.entry_url` redirects to the start page with the cookie: no
browser call of its own); every request is served from the database that token names, so
two concurrent episodes never see each other's changes. A request without a known token
gets 403. Grading reads the episode's database with :meth:`SiteServer.query`;
:meth:`SiteServer.close_episode` drops it.

**Users.** A site with a ``users`` table (columns ``id``, ``username``, ``password``) gets
logins: :meth:`Request.log_in` and :meth:`SiteServer.log_in` (an episode that starts
logged in, as WebArena's do) store a session in ``_sessions``; ``request.user`` is the
logged-in user's row or ``None``.
"""

from __future__ import annotations

import contextlib
import html
import http.server
import re
import secrets
import socketserver
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agentgym.plugins.web.answers import Candidates

#: A route handler: the request and the pattern's named parameters; HTML text or a Response.
Handler = Callable[..., "Response | str"]
#: The path of :meth:`SiteServer.entry_url` on every site.
ENTRY_PATH = "/_agentgym/enter"
_PARAM = re.compile(r"<(?:(int|str|path):)?(\w+)>")


def escape(value: Any) -> str:
    """``value`` as HTML text (quotes escaped too, so it is safe in attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


@dataclass
class Response:
    """What a handler returns: a body, a status, headers and cookies to set."""

    body: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    cookies: dict[str, str] = field(default_factory=dict)
    content_type: str = "text/html; charset=utf-8"


def redirect(location: str, status: int = 303) -> Response:
    """Send the browser to ``location``, a path on this site (a GET after a POST). A
    location that would leave the site (a URL, ``//host``, or a backslash, which browsers
    read as a slash: ``/\\host``) sends it to ``/`` instead: a ``next=`` field must not
    make the site an open redirect."""
    if not location_on_site(location):
        location = "/"
    return Response(status=status, headers={"Location": location})


def location_on_site(location: str) -> bool:
    """Whether ``location`` is a path on the same site (``/x``, not ``//x`` nor ``/\\x``)."""
    return location.startswith("/") and not location.startswith("//") and \
        "\\" not in location and not any(ord(c) < 32 for c in location)


def not_found(message: str = "Not found") -> Response:
    return Response(f"<!doctype html><title>Not found</title><h1>{escape(message)}</h1>", 404)


@dataclass
class Request:
    """One HTTP request, with the episode's database and the logged-in user."""

    site: Site
    method: str
    path: str
    query: dict[str, list[str]]
    form: dict[str, list[str]]
    cookies: dict[str, str]
    db: sqlite3.Connection
    user: sqlite3.Row | None = None
    #: Cookies the response will set (``log_in`` and ``log_out`` add to it).
    set_cookies: dict[str, str] = field(default_factory=dict)

    def arg(self, name: str, default: str = "") -> str:
        """A query-string parameter (first value), stripped."""
        return self.query.get(name, [default])[0].strip()

    def field(self, name: str, default: str = "") -> str:
        """A form field (first value), stripped."""
        return self.form.get(name, [default])[0].strip()

    def fields(self, name: str) -> list[str]:
        """Every value of a form field (checkboxes, multi-selects)."""
        return self.form.get(name, [])

    def log_in(self, user_id: int) -> None:
        """Start a session for ``user_id``; the response sets its cookie."""
        self.set_cookies[self.site.session_cookie] = _new_session(self.db, user_id)
        self.user = self.db.execute("SELECT * FROM users WHERE id = ?", (user_id,)).fetchone()

    def log_out(self) -> None:
        token = self.cookies.get(self.site.session_cookie)
        if token:
            self.db.execute("DELETE FROM _sessions WHERE token = ?", (token,))
        self.set_cookies[self.site.session_cookie] = ""
        self.user = None


class Site:
    """A web application over one SQLite database (see the module docstring).

    Subclasses set :attr:`name` and :attr:`title`, implement :meth:`build`, and register
    routes on an instance with :meth:`route`.
    """

    #: Short name: env ids (``web-<name>``), cookie names, task files.
    name: str = ""
    #: Shown in page titles.
    title: str = ""
    #: Candidate kinds of its tasks' answers: kind -> SQL giving one value a row, run on
    #: the seeded database (see :mod:`agentgym.plugins.web.answers`).
    answer_kinds: dict[str, str] = {}

    def __init__(self) -> None:
        self._routes: list[tuple[re.Pattern[str], tuple[str, ...], Handler]] = []

    def build(self, db: sqlite3.Connection) -> None:
        """Create the schema and seed the data: the same rows on every call."""
        raise NotImplementedError

    def route(self, pattern: str, methods: tuple[str, ...] = ("GET",)
              ) -> Callable[[Handler], Handler]:
        """Register ``handler`` for paths matching ``pattern``: ``/product/<int:pid>``
        passes ``pid`` as an int, ``<name>`` a path segment, ``<path:name>`` the rest."""
        def to_regex(match: re.Match[str]) -> str:
            kind, name = match.group(1) or "str", match.group(2)
            body = {"int": r"\d+", "str": r"[^/]+", "path": r".+"}[kind]
            return f"(?P<{name}>{body})"

        regex = re.compile("^" + _PARAM.sub(to_regex, pattern) + "/?$")
        ints = {m.group(2) for m in _PARAM.finditer(pattern) if m.group(1) == "int"}

        def register(handler: Handler) -> Handler:
            def call(request: Request, **params: str) -> Response | str:
                typed = {k: int(v) if k in ints else urllib.parse.unquote(v)
                         for k, v in params.items()}
                return handler(request, **typed)

            self._routes.append((regex, tuple(m.upper() for m in methods), call))
            return handler

        return register

    @property
    def session_cookie(self) -> str:
        return f"{self.name}_session"

    def dispatch(self, request: Request) -> Response:
        """Run the route that matches ``request``: 404 when none, 405 for a wrong method."""
        allowed = False
        for regex, methods, handler in self._routes:
            match = regex.match(request.path)
            if match:
                if request.method not in methods:
                    allowed = True
                    continue
                result = handler(request, **match.groupdict())
                return Response(result) if isinstance(result, str) else result
        if allowed:
            return Response("Method not allowed", 405)
        return not_found(f"No page at {request.path}")


def _new_session(db: sqlite3.Connection, user_id: int) -> str:
    token = secrets.token_hex(16)
    db.execute("INSERT INTO _sessions (token, user_id) VALUES (?, ?)", (token, user_id))
    return token


class _Episode:
    """One episode's database, and the lock that serializes its requests."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db
        self.lock = threading.Lock()


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
        #: The values of each answer kind, from the template no episode writes.
        self.candidates = Candidates({
            kind: tuple(str(row[0]) for row in self.template.execute(sql) if row[0] is not None)
            for kind, sql in site.answer_kinds.items()})
        self._episodes: dict[str, _Episode] = {}
        self._httpd = _Server(("127.0.0.1", 0), _handler_class(self))
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        name=f"agentgym-site-{site.name}", daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

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
        self._episodes[token] = _Episode(db)
        return token

    def entry_url(self, token: str, path: str = "/", session: str | None = None) -> str:
        """A URL that sets the episode's cookies (``token``'s, and the login ``session``
        of :meth:`log_in` if given) and redirects to ``path``: an episode's first page."""
        query = {"episode": token, "next": path}
        if session is not None:
            query["session"] = session
        return f"{self.base_url}{ENTRY_PATH}?{urllib.parse.urlencode(query)}"

    def close_episode(self, token: str) -> None:
        episode = self._episodes.pop(token, None)
        if episode is not None:
            with episode.lock:
                episode.db.close()

    @contextlib.contextmanager
    def database(self, token: str) -> Iterator[sqlite3.Connection]:
        """The episode's database, held for the block (requests wait meanwhile)."""
        episode = self._episodes.get(token)
        if episode is None:
            raise KeyError(f"no open episode {token!r} on site {self.site.name!r}")
        with episode.lock:
            yield episode.db
            episode.db.commit()

    def query(self, token: str, sql: str, params: tuple = ()) -> list[tuple]:
        """Rows of ``sql`` in the episode's database, as plain tuples."""
        with self.database(token) as db:
            return [tuple(row) for row in db.execute(sql, params).fetchall()]

    def log_in(self, token: str, username: str) -> str:
        """A session for ``username`` in the episode's database: the value of the cookie
        :attr:`Site.session_cookie`."""
        with self.database(token) as db:
            row = db.execute("SELECT id FROM users WHERE username = ?", (username,)).fetchone()
            if row is None:
                raise KeyError(f"site {self.site.name!r} has no user {username!r}")
            return _new_session(db, row[0])

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        for token in list(self._episodes):
            self.close_episode(token)

    # ---- serving --------------------------------------------------------------------------

    def serve(self, method: str, target: str, body: bytes, cookie_header: str
              ) -> Response:
        url = urllib.parse.urlsplit(target)
        if url.path == ENTRY_PATH:
            return self._enter(urllib.parse.parse_qs(url.query))
        cookies = _parse_cookies(cookie_header)
        episode = self._episodes.get(cookies.get(self.cookie_name, ""))
        if episode is None:
            return Response("<!doctype html><title>Forbidden</title><h1>No episode</h1>"
                            "<p>This site serves agentgym episodes only.</p>", 403)
        form = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        with episode.lock:
            db = episode.db
            user = None
            session = cookies.get(self.site.session_cookie)
            if session:
                user = db.execute("SELECT u.* FROM _sessions s JOIN users u ON u.id = s.user_id"
                                  " WHERE s.token = ?", (session,)).fetchone()
            request = Request(self.site, method, url.path or "/",
                              urllib.parse.parse_qs(url.query, keep_blank_values=True), form,
                              cookies, db, user)
            try:
                response = self.site.dispatch(request)
                db.commit()
            except Exception as error:  # a bug in a site: a 500 page, the server goes on
                db.rollback()
                request.set_cookies.clear()  # a session it made was rolled back too
                response = Response(f"<!doctype html><title>Error</title><h1>Server error</h1>"
                                    f"<pre>{escape(type(error).__name__)}: {escape(error)}</pre>",
                                    500)
        response.cookies = {**request.set_cookies, **response.cookies}
        return response

    def _enter(self, query: dict[str, list[str]]) -> Response:
        token = (query.get("episode") or [""])[0]
        target = (query.get("next") or ["/"])[0]
        if token not in self._episodes or not location_on_site(target):
            return Response("<!doctype html><title>Forbidden</title><h1>No episode</h1>", 403)
        response = redirect(target)
        response.cookies[self.cookie_name] = token
        if query.get("session"):
            response.cookies[self.site.session_cookie] = query["session"][0]
        return response


def _parse_cookies(header: str) -> dict[str, str]:
    """Cookie pairs of a Cookie header, one at a time: cookies on 127.0.0.1 are shared by
    every port, so another local app's odd cookie must not spoil ours."""
    cookies = {}
    for pair in header.split(";"):
        name, sep, value = pair.strip().partition("=")
        if sep and name:
            cookies[name] = value.strip().strip('"')
    return cookies


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a page closed mid-response (its episode ended): nothing to report


def _handler_class(server: SiteServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            response = server.serve(self.command, self.path, body,
                                    self.headers.get("Cookie", ""))
            payload = response.body.encode()
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Cache-Control", "no-store")
            for name, value in response.headers.items():
                self.send_header(name, value)
            for name, value in response.cookies.items():
                expiry = "; Max-Age=0" if value == "" else ""
                self.send_header("Set-Cookie", f"{name}={value}; Path=/; HttpOnly{expiry}")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_POST = do_HEAD = _serve

        def log_message(self, format: str, *args: Any) -> None:  # quiet: no stderr per hit
            pass

    return Handler


class SiteClient:
    """A browser stand-in for tests of a site: one episode's cookies (logged in as
    ``username`` when given), redirects followed, the last page kept.

    ``client.post("/cart/add", product_id=3)`` then ``client.text`` (the page's text) and
    ``client.status``; the episode's database is ``server.query(token, sql)``.
    """

    def __init__(self, server: SiteServer, token: str, username: str | None = None):
        self.server = server
        self.cookies = {server.cookie_name: token}
        if username is not None:
            self.cookies[server.site.session_cookie] = server.log_in(token, username)
        self.status, self.url, self.html = 0, "", ""

    def request(self, method: str, path: str, data: dict[str, Any] | None = None) -> str:
        """Send a request (a POST's ``data`` form-encoded), follow redirects, return the
        final page's HTML."""
        import http.client

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
                value = rest.split(";", 1)[0]
                if value and "Max-Age=0" not in header:
                    self.cookies[name] = value
                else:
                    self.cookies.pop(name, None)
            connection.close()
            if response.status in (301, 302, 303, 307):
                method, data, path = "GET", None, response.headers["Location"]
                continue
            self.status, self.url, self.html = response.status, path, text
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
