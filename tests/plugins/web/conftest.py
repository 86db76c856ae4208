"""Shared fixtures of the web plugin's tests: skip (saying why) where Chromium or playwright
is missing, and a small site of the tests' own for the browser layer."""

from __future__ import annotations

import html
import json
import threading
import time
from pathlib import Path

import pytest
from starlette.responses import Response

from agentgym.core import MissingResourceError
from agentgym.plugins.web.sites.site import Site, redirect


def chromium_missing() -> str:
    """Why real-browser tests cannot run here, or "" when they can."""
    try:
        import playwright  # noqa: F401

        from agentgym.plugins.web.browser import chromium_path

        chromium_path()
    except (ImportError, MissingResourceError) as error:
        return str(error)
    return ""


@pytest.fixture(scope="session")
def chromium() -> None:
    missing = chromium_missing()
    if missing:
        pytest.skip(f"real-browser test: {missing}")


class Notes(Site):
    """A note-taking site: a form, a select, a checkbox, a long page, a page that hangs."""

    name = "notes"
    title = "Notes"

    def build(self, db) -> None:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT, password TEXT)")
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT, colour TEXT,"
                   " pinned INTEGER)")
        db.execute("INSERT INTO users VALUES (1, 'ann', 'pw')")


NOTES = Notes()


@NOTES.route("/")
def home(request) -> str:
    rows = request.db.execute("SELECT id, text, colour, pinned FROM notes").fetchall()
    items = "".join(f"<li>{html.escape(r[1])} ({html.escape(r[2])}"
                    f"{', pinned' if r[3] else ''})</li>" for r in rows)
    return f"""<!doctype html><title>Notes</title><main><h1>Notes</h1>
<form method=post action=/add>
<label for=text>Note</label><input id=text name=text>
<label for=colour>Colour</label><select id=colour name=colour>
<option>red</option><option>green</option><option>blue</option></select>
<input type=checkbox id=pin name=pin value=1><label for=pin>Pin it</label>
<button>Add note</button></form>
<ul>{items}</ul><a href=/long>Long page</a> <a href=/spin>Spin</a>
<a href="/slow?s=6">Slow page</a> <a href=/held>Held page</a></main>"""


@NOTES.route("/add", methods=("POST",))
def add(request):
    request.db.execute("INSERT INTO notes (text, colour, pinned) VALUES (?, ?, ?)",
                       (request.field("text"), request.field("colour"),
                        int(bool(request.field("pin")))))
    return redirect("/")


@NOTES.route("/long")
def long_page(request) -> str:
    rows = "".join(f"<li><a href=/?n={i}>Item number {i}</a></li>" for i in range(2000))
    return f"<!doctype html><title>Long</title><ul>{rows}</ul>"


@NOTES.route("/spin")
def spin(request) -> str:
    return ("<!doctype html><title>Spin</title>"
            "<button onclick='while (true) {}'>Hang the page</button>"
            "<button onclick=\"fetch('http://example.com/x').catch(() => 0);"
            " fetch('http://10.11.12.13/y').catch(() => 0)\">Phone home</button>")


@NOTES.route("/slow")
def slow(request) -> str:
    """A page whose server takes ``s`` seconds (a loaded machine, a slow site)."""
    time.sleep(float(request.arg("s", "2")))
    return "<!doctype html><title>Slow</title><h1>Slow page</h1><button>Done waiting</button>"


#: Released by a test: /held answers only then (a load that outlasts any bound, whatever
#: the machine's load).
HELD = threading.Event()


@NOTES.route("/held")
def held(request) -> str:
    """A page whose server answers once :data:`HELD` is set (at most 60 s)."""
    HELD.wait(60)
    return "<!doctype html><title>Held</title><h1>Held page</h1><button>Done waiting</button>"


@NOTES.route("/go")
def open_redirect(request) -> Response:
    """An open redirect, as real sites have them (the framework's redirect() refuses)."""
    return Response(status_code=302, headers={"Location": request.arg("to")})


@NOTES.route("/inject")
def inject(request) -> str:
    """A page that reaches for another origin every way a page can (as if the agent had
    got HTML onto the site): image, iframe, stylesheet, prefetch, fetch, beacon, worker,
    WebSocket, EventSource, a popup link and a script that opens one."""
    other = html.escape(request.arg("to"))
    ws = other.replace("http://", "ws://")
    return f"""<!doctype html><title>Inject</title>
<img src="{other}/img"><iframe src="{other}/iframe"></iframe>
<link rel=stylesheet href="{other}/css"><link rel=prefetch href="{other}/prefetch">
<a href="{other}/popup-link" target=_blank>Open popup</a>
<a href="/go?to={other}/via-redirect">Redirected link</a>
<p id=out>nothing read</p>
<script>
fetch("{other}/fetch").then(r => r.text()).then(t => out.textContent = 'READ ' + t, () => 0);
navigator.sendBeacon("{other}/beacon", "x");
new Worker(URL.createObjectURL(new Blob(["fetch('{other}/worker').catch(() => 0)"])));
try {{ new WebSocket("{ws}/ws"); }} catch (e) {{}}
new EventSource("{other}/events");
window.open("{other}/window-open");
</script>"""


NOTE_TASKS = [
    {"id": "notes-add", "site": "notes", "goal": "Add a pinned blue note saying 'buy milk'.",
     "start": "/", "login": "ann",
     "grade": {"db": [{"sql": "SELECT text, colour, pinned FROM notes",
                       "expected": [["buy milk", "blue", 1]]}], "answer": None,
               "changes": {"notes": 1}},
     "steps": [
         {"action": "fill", "target": {"role": "textbox", "name": "Note"}, "text": "buy milk"},
         {"action": "select_option", "target": {"role": "combobox", "name": "Colour"},
          "value": "blue"},
         {"action": "click", "target": {"role": "checkbox", "name": "Pin it"}},
         {"action": "click", "target": {"role": "button", "name": "Add note"}},
         {"action": "send_msg_to_user", "text": "Done"}]},
    {"id": "notes-count", "site": "notes", "goal": "How many items does the long page list?",
     "start": "/", "login": None, "grade": {"db": [], "answer": {"exact": "2000"}},
     "steps": [{"action": "click", "target": {"role": "link", "name": "Long page"}},
               {"action": "send_msg_to_user", "text": "2000"}]},
]


@pytest.fixture(scope="session")
def notes_tasks(tmp_path_factory) -> Path:
    """The notes site's task file, solutions written by the author tool's replay."""
    path = tmp_path_factory.mktemp("notes") / "notes.json"
    path.write_text(json.dumps(NOTE_TASKS))
    return path
