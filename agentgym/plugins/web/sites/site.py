"""How a local site is written: routes over one SQLite database, pages from Jinja2 templates.

A **site** (:class:`Site`) builds its database with ``build(db)`` (schema and seed, the same
rows every time) and registers its pages with :meth:`Site.route`, in Starlette's path syntax
(``/product/{pid:int}``). A handler is a plain function ``handler(request, **path_params)``
over a :class:`SiteRequest` (Starlette's request plus the episode's database, the logged-in
user and the parsed form) that returns a Starlette response (a page from
:meth:`Site.render`, or :func:`redirect` after a POST) or HTML text. It runs in a worker
thread holding its episode's database, as Starlette runs sync endpoints. Pages are
server-rendered HTML with labelled controls, so every element an agent needs is in the
accessibility tree.

Templates live in ``templates/`` (package data): ``base.html`` the page, ``macros.html``
the form controls every site shares, ``<site>/`` a site's own; autoescaping is on, so a
template prints user text safely with ``{{ value }}``. A site adds its filters and globals
(money, dates) to :attr:`Site.templates`. :mod:`agentgym.plugins.web.sites.server` serves a
site, one database per episode.

**Changes.** Grading bounds what an episode may change: :func:`changed_rows` counts, per
table, the rows of an episode's database that differ from the template (added, removed, or
changed in a column that is not :attr:`Site.volatile`), keyed by each table's primary key;
tables whose names start with ``_`` (login sessions) are the site's bookkeeping and not
counted. A column a page writes when it is only looked at (a message's ``read`` flag) is
volatile, so looking around is never a change.

**Users.** A site with a ``users`` table (columns ``id``, ``username``, ``password``) gets
logins: :meth:`SiteRequest.log_in` / :meth:`SiteRequest.log_out` keep sessions in
``_sessions`` and set the cookie :attr:`Site.session_cookie`; ``request.user`` is the
logged-in user's row or ``None``.
"""

from __future__ import annotations

import secrets
import sqlite3
import urllib.parse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import Scope

#: A page handler: the request and the path's parameters; a response (or HTML text).
Handler = Callable[..., "Response | str"]
TEMPLATES = Path(__file__).parent / "templates"


@dataclass(frozen=True)
class SiteRoute:
    """One registered page: a Starlette path, its methods, its handler."""

    path: str
    methods: tuple[str, ...]
    handler: Handler


class Site:
    """A web application over one SQLite database (see the module docstring).

    Subclasses set :attr:`name` and :attr:`title` and implement :meth:`build`; pages are
    registered on an instance with :meth:`route`.
    """

    #: Short name: env ids (``web-<name>``), cookie names, task files, its template folder.
    name: str = ""
    #: Shown in page titles.
    title: str = ""
    #: Candidate kinds of its tasks' answers: kind -> SQL giving one value a row, run on
    #: the seeded database (see :mod:`agentgym.plugins.web.answers`).
    answer_kinds: dict[str, str] = {}
    #: Columns that pages change by being viewed (table -> columns): left out of
    #: :func:`changed_rows`, so browsing is not counted as changing the site.
    volatile: dict[str, tuple[str, ...]] = {}

    def __init__(self) -> None:
        self.routes: list[SiteRoute] = []
        # trim_blocks/lstrip_blocks: block tags leave no blank lines in the page.
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
            undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.templates.globals["site"] = self

    def build(self, db: sqlite3.Connection) -> None:
        """Create the schema and seed the data: the same rows on every call."""
        raise NotImplementedError

    def route(self, path: str, methods: tuple[str, ...] = ("GET",)
              ) -> Callable[[Handler], Handler]:
        """Register ``handler`` for ``path`` (Starlette syntax: ``/post/{pid:int}``)."""
        def register(handler: Handler) -> Handler:
            self.routes.append(SiteRoute(path, methods, handler))
            return handler

        return register

    def render(self, request: SiteRequest, template: str, status_code: int = 200,
               **context: Any) -> HTMLResponse:
        """The page ``template`` (a path under ``templates/``) with ``context`` and the
        ``request``."""
        html = self.templates.get_template(template).render(request=request, **context)
        return HTMLResponse(html, status_code)

    @property
    def session_cookie(self) -> str:
        return f"{self.name}_session"


class SiteRequest(Request):
    """Starlette's request inside one episode: its database (held for the request), the
    logged-in user's row, and the urlencoded form of a POST."""

    #: The logged-in user's row, or None (in place of Starlette's authentication ``user``,
    #: which the sites do not use).
    user: sqlite3.Row | None = None

    def __init__(self, scope: Scope, site: Site, db: sqlite3.Connection, form: FormData):
        super().__init__(scope)
        self.site = site
        self.db = db
        self.form_data = form
        #: Cookies the response will set ("" deletes one): ``log_in`` and ``log_out``.
        self.set_cookies: dict[str, str] = {}
        session = self.cookies.get(site.session_cookie)
        if session:
            self.user = db.execute("SELECT u.* FROM _sessions s JOIN users u ON u.id ="
                                   " s.user_id WHERE s.token = ?", (session,)).fetchone()

    def arg(self, name: str, default: str = "") -> str:
        """A query-string parameter, stripped."""
        return self.query_params.get(name, default).strip()

    def field(self, name: str, default: str = "") -> str:
        """A form field, stripped (:meth:`raw_field` for passwords)."""
        return self.raw_field(name, default).strip()

    def raw_field(self, name: str, default: str = "") -> str:
        values = self.form_data.getlist(name)  # the first, as browsers send them in order
        return values[0] if values and isinstance(values[0], str) else default

    def log_in(self, user_id: int) -> None:
        """Start a session for ``user_id``; the response sets its cookie."""
        self.set_cookies[self.site.session_cookie] = new_session(self.db, user_id)
        self.user = self.db.execute("SELECT * FROM users WHERE id = ?", (user_id,)).fetchone()

    def log_out(self) -> None:
        token = self.cookies.get(self.site.session_cookie)
        if token:
            self.db.execute("DELETE FROM _sessions WHERE token = ?", (token,))
        self.set_cookies[self.site.session_cookie] = ""
        self.user = None


def table_rows(db: sqlite3.Connection, volatile: dict[str, tuple[str, ...]] | None = None
               ) -> dict[str, dict[tuple, tuple]]:
    """Every counted table of ``db`` (not ``_``-prefixed, not SQLite's own) as primary key
    -> the row's values, ``volatile`` columns left out. A table without a declared primary
    key is keyed by its whole row and how many equal rows came before it (a second copy of
    a row is a row added)."""
    tables = [r[0] for r in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        " AND substr(name, 1, 1) != '_' ORDER BY name")]
    snapshot: dict[str, dict[tuple, tuple]] = {}
    for table in tables:
        info = db.execute(f'PRAGMA table_info("{table}")').fetchall()
        skip = set((volatile or {}).get(table, ()))
        columns = [row[1] for row in info if row[1] not in skip]
        key = [row[1] for row in sorted(info, key=lambda r: r[5]) if row[5]]
        listed = ", ".join(f'"{c}"' for c in key + columns)
        rows = db.execute(f'SELECT {listed} FROM "{table}"').fetchall()
        if key:
            snapshot[table] = {tuple(row[:len(key)]): tuple(row[len(key):]) for row in rows}
        else:
            seen: Counter[tuple] = Counter()
            snapshot[table] = {}
            for row in map(tuple, rows):
                snapshot[table][(*row, seen[row])] = row
                seen[row] += 1
    return snapshot


def changed_rows(before: dict[str, dict[tuple, tuple]], after: dict[str, dict[tuple, tuple]]
                 ) -> dict[str, int]:
    """Per table, the rows that differ between two :func:`table_rows` snapshots (added,
    removed or changed; an update of a row with a primary key is one row). Tables with none
    are left out."""
    counts: dict[str, int] = {}
    for table in sorted(set(before) | set(after)):
        old, new = before.get(table, {}), after.get(table, {})
        changed = sum(old.get(k) != new.get(k) for k in set(old) | set(new))
        if changed:
            counts[table] = changed
    return counts


def new_session(db: sqlite3.Connection, user_id: int) -> str:
    """A login session for ``user_id`` in ``db``: the session cookie's value."""
    token = secrets.token_hex(16)
    db.execute("INSERT INTO _sessions (token, user_id) VALUES (?, ?)", (token, user_id))
    return token


def parse_form(body: bytes) -> FormData:
    """An urlencoded body as form data (the sites' forms post nothing else)."""
    return FormData(urllib.parse.parse_qsl(body.decode("utf-8", "replace"),
                                           keep_blank_values=True))


def redirect(location: str, status: int = 303) -> RedirectResponse:
    """Send the browser to ``location``, a path on this site (a GET after a POST). A
    location that would leave the site (a URL, ``//host``, or a backslash, which browsers
    read as a slash: ``/\\host``) sends it to ``/`` instead: a ``next=`` field must not
    make the site an open redirect."""
    if not location_on_site(location):
        location = "/"
    return RedirectResponse(location, status)


def location_on_site(location: str) -> bool:
    """Whether ``location`` is a path on the same site (``/x``, not ``//x`` nor ``/\\x``)."""
    return location.startswith("/") and not location.startswith("//") and \
        "\\" not in location and not any(ord(c) < 32 for c in location)
