"""A site served by agentgym's site server (Starlette on uvicorn), over real HTTP: a page
that fails rolls its episode back, a slow page holds only its own episode, logins set and
clear the session cookie, and a form field's first value is the one a page reads."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from agentgym.plugins.web.sites.server import SiteClient, SiteServer, site_server
from agentgym.plugins.web.sites.site import (
    Site,
    SiteRequest,
    changed_rows,
    redirect,
    table_rows,
)


class Tally(Site):
    name = "tally"
    title = "Tally"

    def build(self, db) -> None:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT, password TEXT)")
        db.execute("CREATE TABLE marks (label TEXT)")
        db.execute("INSERT INTO users VALUES (1, 'ann', 'pw')")


TALLY = Tally()
RELEASE = threading.Event()


@TALLY.route("/")
def home(request: SiteRequest) -> str:
    count = request.db.execute("SELECT COUNT(*) FROM marks").fetchone()[0]
    who = request.user["username"] if request.user else "nobody"
    return f"<!doctype html><title>Tally</title><p>{count} marks; user {who}</p>"


@TALLY.route("/mark", methods=("POST",))
def mark(request: SiteRequest):
    request.db.execute("INSERT INTO marks VALUES (?)", (request.field("label"),))
    if request.field("fail"):
        raise ValueError("the page broke after writing")
    return redirect("/")


@TALLY.route("/login", methods=("POST",))
def login(request: SiteRequest):
    request.log_in(1)
    return redirect("/")


@TALLY.route("/logout")
def logout(request: SiteRequest):
    request.log_out()
    return redirect("/")


@TALLY.route("/wait")
def wait(request: SiteRequest) -> str:
    RELEASE.wait(30)
    return "<!doctype html><p>released</p>"


@pytest.fixture(scope="module")
def server() -> SiteServer:
    return site_server(TALLY)


def test_a_failing_page_rolls_back_and_the_server_goes_on(server: SiteServer) -> None:
    token = server.open_episode()
    try:
        client = SiteClient(server, token)
        client.post("/mark", label="first", fail="1")
        assert client.status == 500 and "ValueError: the page broke" in client.text
        assert server.query(token, "SELECT COUNT(*) FROM marks") == [(0,)]
        client.request("POST", "/mark", {"label": ["kept", "ignored"]})
        assert client.status == 200 and "1 marks" in client.text
        assert server.query(token, "SELECT label FROM marks") == [("kept",)]
    finally:
        server.close_episode(token)


def test_a_slow_page_holds_only_its_own_episode(server: SiteServer) -> None:
    slow, other = server.open_episode(), server.open_episode()
    RELEASE.clear()
    waiting = threading.Thread(target=SiteClient(server, slow).get, args=("/wait",))
    try:
        waiting.start()
        time.sleep(0.2)  # the slow page is being served
        client = SiteClient(server, other)
        client.get("/")
        assert client.status == 200 and waiting.is_alive()
    finally:
        RELEASE.set()
        waiting.join(10)
        server.close_episode(slow)
        server.close_episode(other)


def test_logging_in_and_out_sets_and_clears_the_session(server: SiteServer) -> None:
    token = server.open_episode()
    try:
        client = SiteClient(server, token)
        client.post("/login")
        assert "user ann" in client.text and TALLY.session_cookie in client.cookies
        client.get("/logout")
        assert "user nobody" in client.text and TALLY.session_cookie not in client.cookies
        assert server.query(token, "SELECT COUNT(*) FROM _sessions") == [(0,)]
    finally:
        server.close_episode(token)


def test_changed_rows_key_by_primary_key_and_count_copies_in_tables_without_one() -> None:
    db = sqlite3.connect(":memory:")
    db.executescript("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, seen INTEGER);"
                     "CREATE TABLE tags (name TEXT); CREATE TABLE _log (line TEXT);"
                     "INSERT INTO items VALUES (1, 'a', 0), (2, 'b', 0);"
                     "INSERT INTO tags VALUES ('x'), ('x');")
    volatile = {"items": ("seen",)}
    before = table_rows(db, volatile)
    db.executescript("UPDATE items SET seen = 1; INSERT INTO _log VALUES ('hi');")
    assert changed_rows(before, table_rows(db, volatile)) == {}  # volatile, bookkeeping
    db.executescript("UPDATE items SET name = 'c' WHERE id = 1; DELETE FROM items WHERE id = 2;"
                     "INSERT INTO tags VALUES ('x');")
    assert changed_rows(before, table_rows(db, volatile)) == {"items": 2, "tags": 1}
