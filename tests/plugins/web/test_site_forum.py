"""The forum site and its tasks, over HTTP without a browser.

Every task must fail on a fresh episode (doing nothing scores 0) and pass after the HTTP
requests its reference steps stand for (``REPLAYS``); answers must be on the page they are
read from. Pages render for visitors, members and moderators; locked posts take no
comments; unknown pages are 404; moderation is closed to everyone but a forum's moderators.
"""

from __future__ import annotations

import html
import json
import re
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentgym.plugins.web.sites.forum import SITE, Forum
from agentgym.plugins.web.sites.server import SiteClient as Client
from agentgym.plugins.web.sites.server import SiteServer, site_server
from agentgym.plugins.web.sites_env import failed_checks

TASK_FILE = (Path(__file__).resolve().parents[3]
             / "agentgym" / "plugins" / "web" / "tasks" / "forum.json")
TASKS = json.loads(TASK_FILE.read_text(encoding="utf-8"))
BY_ID = {task["id"]: task for task in TASKS}
CATEGORIES = ("navigate", "search", "form", "settings", "multi-page", "answer")
ACTIONS = {"click", "fill", "select_option", "press", "goto", "go_back", "send_msg_to_user"}
ROLES = {"link", "button", "textbox", "combobox", "checkbox"}


@pytest.fixture(scope="module")
def server() -> SiteServer:
    return site_server(SITE)


@pytest.fixture
def token(server: SiteServer) -> Iterator[str]:
    token = server.open_episode()
    yield token
    server.close_episode(token)


def grade(server: SiteServer, token: str, task: dict, answer: str | None) -> list[str]:
    """The checks of ``task`` that fail, by the gym's own grader (none: reward 1.0)."""
    return failed_checks(server, token, task["grade"], answer)

def post_id(server: SiteServer, token: str, title: str) -> int:
    return server.query(token, "SELECT id FROM posts WHERE title = ?", (title,))[0][0]


def comment_id(server: SiteServer, token: str, title: str, author: str) -> int:
    rows = server.query(token, "SELECT c.id FROM comments c JOIN users u ON u.id = c.user_id "
                        "WHERE c.post_id = ? AND u.username = ?",
                        (post_id(server, token, title), author))
    assert len(rows) == 1
    return rows[0][0]


def message_id(server: SiteServer, token: str, subject: str) -> int:
    return server.query(token, "SELECT id FROM messages WHERE subject = ?", (subject,))[0][0]


def on_page(c: Client, *phrases: str) -> None:
    """Each phrase is on the page the client shows (an answer is read there)."""
    for phrase in phrases:
        assert phrase.lower() in c.text.lower(), f"{phrase!r} not on {c.url}"


def answered(c: Client, task_id: str) -> str:
    """The final answer of the task's reference steps, checked to be on the current page."""
    answer = BY_ID[task_id]["steps"][-1]["text"]
    spec = BY_ID[task_id]["grade"]["answer"]
    phrases = [spec["exact"]] if "exact" in spec else spec["must_include"]
    on_page(c, *phrases)
    return answer


# ---- the HTTP requests each task's reference steps make -------------------------------------
# A replay gets the client (logged in as the task says) and the episode; it returns what the
# agent sends with send_msg_to_user.

Replay = Callable[[Client, SiteServer, str], str]
REPLAYS: dict[str, Replay] = {}


def replay(task_id: str) -> Callable[[Replay], Replay]:
    def register(fn: Replay) -> Replay:
        REPLAYS[task_id] = fn
        return fn
    return register


@replay("forum-gardening-moderator")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/forums")
    c.get("/f/gardening")
    on_page(c, "Moderators: carol")
    return answered(c, "forum-gardening-moderator")


@replay("forum-fewest-subscribers")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/forums")
    counts = dict(re.findall(r'<a href="/f/(\w+)">\w+</a></td><td>[^<]*</td><td>(\d+)</td>',
                             c.html))
    assert len(counts) == 6
    fewest = min(counts, key=lambda name: int(counts[name]))
    assert (fewest, counts[fewest]) == ("programming", "4")
    assert sorted(counts.values()).count("4") == 1
    return answered(c, "forum-fewest-subscribers")


@replay("forum-newest-books-post")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/forums")
    c.get("/f/books?sort=new")
    first = re.search(r'<h3><a href="/post/\d+">([^<]+)</a>', c.html)
    assert first and html.unescape(first.group(1)) == "Technical books that read like novels"
    return answered(c, "forum-newest-books-post")


@replay("forum-top-gardener-joined")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/f/gardening?sort=top")
    first = re.search(r'<h3><a href="/post/(\d+)">([^<]+)</a>', c.html)
    assert first and first.group(2) == "Why I stopped tilling my vegetable beds"
    c.get(f"/post/{first.group(1)}")
    c.get("/u/oscar")
    on_page(c, "Joined 2022-04-02")
    return answered(c, "forum-top-gardener-joined")


@replay("forum-search-sourdough-count")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/search?q=sourdough")
    on_page(c, "4 posts found")
    return answered(c, "forum-search-sourdough-count")


@replay("forum-search-fig-author")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/search?q=fiddle+leaf+fig")
    on_page(c, "1 post found", "Repotting a fiddle leaf fig without killing it", "by judy")
    return answered(c, "forum-search-fig-author")


@replay("forum-search-comment-rust")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/search?q=borrow+checker")
    pid = post_id(s, t, "Fighting the Rust borrow checker with shared state")
    c.get(f"/post/{pid}")
    c.post(f"/post/{pid}/comment", body="Scoped threads might also help here.")
    on_page(c, "Your comment was posted.", "Scoped threads might also help here.")
    return "Done"


@replay("forum-search-segfault-advice")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/search?q=segfault")
    c.get(f"/post/{post_id(s, t, 'Debugging a segfault that only happens in release builds')}")
    scores = re.findall(r'<a href="/u/(\w+)">\w+</a> · (-?\d+) points?', c.html)
    assert max(scores, key=lambda item: int(item[1])) == ("bob", "6")
    return answered(c, "forum-search-segfault-advice")


@replay("forum-create-cooking-post")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/submit")
    c.post("/submit", forum="cooking", title="Best knife for a small kitchen?",
           body="I have room for exactly one good knife. Chef's knife or santoku?")
    on_page(c, "Your post was created.")
    return "Done"


@replay("forum-message-bob")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/messages")
    c.get("/messages/new")
    c.post("/messages/new", to="bob", subject="Ramen night",
           body="Want to try your miso-tahini ramen on Friday?")
    on_page(c, "Message sent.")
    return "Done"


@replay("forum-reply-carol-comment")
def _(c: Client, s: SiteServer, t: str) -> str:
    title = "Looking for cozy mysteries set in small towns"
    c.get("/f/books")
    c.get(f"/post/{post_id(s, t, title)}")
    cid = comment_id(s, t, title, "carol")
    assert f'href="/comment/{cid}/reply">Reply to carol</a>' in c.html
    c.get(f"/comment/{cid}/reply")
    c.post(f"/comment/{cid}/reply", body="Aunt Dimity sounds perfect, thanks!")
    on_page(c, "Your comment was posted.")
    return "Done"


@replay("forum-edit-japan-title")
def _(c: Client, s: SiteServer, t: str) -> str:
    pid = post_id(s, t, "Is a rail pass worth it for Japan in 2025?")
    c.get(f"/post/{pid}")
    c.get(f"/post/{pid}/edit")
    body = html.unescape(re.search(r'<textarea id="body" name="body">([^<]*)</textarea>',
                                   c.html).group(1))
    c.post(f"/post/{pid}/edit", title="Is the JR Pass still worth it for a 10-day trip?",
           body=body)
    on_page(c, "Your post was updated.")
    return "Done"


@replay("forum-update-bio")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/settings")
    c.post("/settings", email="alice@example.com", bio="Reader of old maps.",
           email_replies="on", timezone="UTC")
    on_page(c, "Settings saved.")
    return "Done"


@replay("forum-timezone-no-emails")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/settings")
    c.post("/settings", email="alice@example.com",
           bio="Weekend baker and science fiction reader.", timezone="Asia/Tokyo")
    on_page(c, "Settings saved.")
    return "Done"


@replay("forum-dave-email-bio")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/settings")
    c.post("/settings", email="dave.hikes@example.net",
           bio="Hiker, photographer and now a trail runner.", timezone="America/Los_Angeles")
    on_page(c, "Settings saved.")
    return "Done"


@replay("forum-message-top-travel-author")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/f/travel?sort=top")
    first = re.search(r'<h3><a href="/post/\d+">[^<]+</a></h3><p class="meta">\d+ points · by '
                      r'<a href="/u/(\w+)">', c.html)
    assert first and first.group(1) == "grace"
    c.get("/messages/new")
    c.post("/messages/new", to="grace", subject="Loved your post",
           body="Thanks for sharing, it helped me plan my trip!")
    on_page(c, "Message sent.")
    return "Done"


@replay("forum-reply-dave-hike")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/messages")
    c.get(f"/messages/{message_id(s, t, 'Hiking trip this weekend?')}")
    reply = re.search(r'<a href="([^"]+)">Reply</a>', c.html)
    assert reply
    c.get(html.unescape(reply.group(1)))
    assert 'value="Re: Hiking trip this weekend?"' in c.html and 'value="dave"' in c.html
    c.post("/messages/new", to="dave", subject="Re: Hiking trip this weekend?",
           body="Yes, count me in for Saturday!")
    on_page(c, "Message sent.")
    return "Done"


@replay("forum-ivan-latest-post")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/u/ivan")
    first = re.search(r'<h3><a href="/post/(\d+)">([^<]+)</a>', c.html)
    assert first and first.group(2) == "Debugging a segfault that only happens in release builds"
    c.get(f"/post/{first.group(1)}")
    c.post(f"/post/{first.group(1)}/vote", dir="up")
    on_page(c, "You upvoted this post.")
    c.post("/f/programming/subscribe", next="/f/programming")
    on_page(c, "Subscribed.", "Unsubscribe")
    return "Done"


@replay("forum-thank-moby-commenter")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get(f"/post/{post_id(s, t, 'Is Moby-Dick worth finishing?')}")
    scores = re.findall(r'<a href="/u/(\w+)">\w+</a> · (-?\d+) points?', c.html)
    assert max(scores, key=lambda item: int(item[1]))[0] == "oscar"
    c.get("/u/oscar")
    c.get("/messages/new?to=oscar")
    assert 'value="oscar"' in c.html
    c.post("/messages/new", to="oscar", subject="Moby-Dick", body="Thanks, I finished it!")
    return "Done"


@replay("forum-crosspost-to-books")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get(f"/post/{post_id(s, t, 'Movies that are better than the book')}")
    on_page(c, "I will start: The Remains of the Day. Fight me.")
    c.get("/submit")
    c.post("/submit", forum="books", title="Movies that are better than the book",
           body="I will start: The Remains of the Day. Fight me.")
    return "Done"


@replay("forum-ramen-comment-count")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get(f"/post/{post_id(s, t, 'Weeknight ramen in 25 minutes')}")
    on_page(c, "5 comments")
    assert c.html.count('<article class="comment"') == 5
    return answered(c, "forum-ramen-comment-count")


@replay("forum-bob-karma")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/u/bob")
    on_page(c, "Karma 53")
    return answered(c, "forum-bob-karma")


@replay("forum-portugal-top-commenter")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get(f"/post/{post_id(s, t, 'Two weeks in Portugal by train: my itinerary')}")
    authors = Counter(re.findall(r'<p class="meta"><a href="/u/(\w+)">', c.html))
    assert authors.most_common(2) == [("dave", 3), ("alice", 1)] or (
        authors.most_common(1)[0] == ("dave", 3) and authors.most_common(2)[1][1] < 3)
    return answered(c, "forum-portugal-top-commenter")


@replay("forum-mont-blanc-date")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/search?q=Mont+Blanc")
    on_page(c, "1 post found", "Hiking the Tour du Mont Blanc in September")
    return answered(c, "forum-mont-blanc-date")


@replay("forum-book-club-shortlist")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/messages")
    c.get(f"/messages/{message_id(s, t, 'Book club in December')}")
    return answered(c, "forum-book-club-shortlist")


@replay("forum-upvote-scifi")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.post(f"/post/{post_id(s, t, 'Underrated science fiction films of the 1970s')}/vote",
           dir="up")
    on_page(c, "You upvoted this post.", "8 points")
    return "Done"


@replay("forum-downvote-mallory")
def _(c: Client, s: SiteServer, t: str) -> str:
    cid = comment_id(s, t, "Movies that are better than the book", "mallory")
    c.post(f"/comment/{cid}/vote", dir="down")
    on_page(c, "-4 points")
    return "Done"


@replay("forum-flip-tabs-vote")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.post(f"/post/{post_id(s, t, 'Tabs vs spaces, 2025 edition')}/vote", dir="up")
    on_page(c, "You upvoted this post.")
    return "Done"


@replay("forum-manage-subscriptions")
def _(c: Client, s: SiteServer, t: str) -> str:
    c.get("/forums")
    c.post("/f/gardening/subscribe", next="/forums")
    c.post("/f/travel/subscribe", next="/forums")
    c.post("/f/movies/unsubscribe", next="/forums")
    assert c.url.startswith("/forums")
    return "Done"


@replay("forum-lock-moby")
def _(c: Client, s: SiteServer, t: str) -> str:
    pid = post_id(s, t, "Is Moby-Dick worth finishing?")
    c.get(f"/post/{pid}")
    assert "Lock post" in c.text
    c.post(f"/post/{pid}/lock")
    on_page(c, "The post was locked.", "New comments are disabled.")
    return "Done"


@replay("forum-remove-spam")
def _(c: Client, s: SiteServer, t: str) -> str:
    pid = post_id(s, t, "Buy cheap garden followers now!!!")
    c.get(f"/post/{pid}")
    c.post(f"/post/{pid}/remove")
    on_page(c, "The post was removed.")
    c.get("/f/gardening")
    assert "Buy cheap garden followers" not in c.text
    return "Done"


# ---- the task file --------------------------------------------------------------------------

def test_task_file_is_well_formed() -> None:
    assert len(TASKS) >= 22
    assert len(BY_ID) == len(TASKS), "task ids must be unique"
    counts = Counter(task["category"] for task in TASKS)
    for category in CATEGORIES:
        assert counts[category] >= 3, f"only {counts[category]} {category} tasks"
    assert counts["moderation"] + counts["voting"] >= 3
    assert set(counts) <= {*CATEGORIES, "moderation", "voting"}
    db = sqlite3.connect(":memory:")
    Forum().build(db)
    usernames = {row[0] for row in db.execute("SELECT username FROM users")}
    for task in TASKS:
        assert task["id"].startswith("forum-") and task["site"] == "forum"
        assert task["goal"] and task["start"].startswith("/")
        assert task["login"] is None or task["login"] in usernames
        grade_spec = task["grade"]
        assert grade_spec["db"] or grade_spec["answer"], task["id"]
        for check in grade_spec["db"]:
            assert set(check) == {"sql", "expected"}
            assert all(isinstance(row, list) for row in check["expected"])
        answer = grade_spec["answer"]
        assert answer is None or set(answer) in ({"exact"}, {"must_include", "kinds"},
                                                 {"must_include", "must_exclude"})
        steps = task["steps"]
        assert steps and steps[-1]["action"] == "send_msg_to_user", task["id"]
        for step in steps:
            assert step["action"] in ACTIONS, step
            target = step.get("target")
            if target is not None:
                assert "css" in target or (target["role"] in ROLES and target["name"]), step
        if answer is None:
            assert steps[-1]["text"] == "Done"


@pytest.mark.parametrize("task_id", sorted(t["id"] for t in TASKS if t["grade"]["answer"]))
def test_reference_answers_pass_the_answer_checks(server: SiteServer, token: str,
                                                  task_id: str) -> None:
    answer_only = {**BY_ID[task_id], "grade": {"db": [],
                                               "answer": BY_ID[task_id]["grade"]["answer"]}}
    assert grade(server, token, answer_only, BY_ID[task_id]["steps"][-1]["text"]) == []
    for guess in ("", "Done", "I don't know", "0", "1", "alice", "yes"):
        assert grade(server, token, answer_only, guess), (task_id, guess)


def test_every_task_has_a_replay() -> None:
    assert set(REPLAYS) == set(BY_ID)


@pytest.mark.parametrize("task_id", sorted(BY_ID))
def test_task_fails_on_the_seed(server: SiteServer, token: str, task_id: str) -> None:
    task = BY_ID[task_id]
    assert grade(server, token, task, None)
    assert grade(server, token, task, "Done")
    if task["grade"]["db"]:  # the database checks alone fail: doing nothing scores 0
        answer = task["steps"][-1]["text"] if task["grade"]["answer"] else "Done"
        assert grade(server, token, task, answer)


@pytest.mark.parametrize("task_id", sorted(BY_ID))
def test_task_passes_after_its_solution(server: SiteServer, token: str, task_id: str) -> None:
    task = BY_ID[task_id]
    client = Client(server, token, task["login"])
    client.get(task["start"])
    assert client.status == 200
    answer = REPLAYS[task_id](client, server, token)
    assert client.status == 200, f"{client.url} answered {client.status}"
    assert answer == task["steps"][-1]["text"]
    assert grade(server, token, task, answer) == []


def test_the_seed_is_deterministic() -> None:
    dumps = []
    for _ in range(2):
        db = sqlite3.connect(":memory:")
        Forum().build(db)
        dumps.append(list(db.iterdump()))
    assert dumps[0] == dumps[1]


def test_the_seed_has_the_promised_size(server: SiteServer, token: str) -> None:
    def count(table: str) -> int:
        return server.query(token, f"SELECT COUNT(*) FROM {table}")[0][0]

    assert count("forums") == 6
    assert count("users") >= 8
    assert count("posts") >= 40
    assert count("comments") >= 80
    assert count("messages") >= 5
    assert server.query(token, "SELECT username FROM users WHERE is_moderator = 1 "
                        "ORDER BY username") == [("carol",), ("frank",)]
    assert server.query(token, "SELECT COUNT(*) FROM posts WHERE created NOT LIKE '2025-%'"
                        ) == [(0,)]


# ---- pages ----------------------------------------------------------------------------------

PUBLIC = ["/", "/?sort=new", "/?sort=top&page=2", "/?page=3", "/forums", "/f/books",
          "/f/cooking?sort=top", "/f/movies?sort=new", "/post/1", "/post/23", "/u/alice",
          "/u/mallory", "/search?q=Lisbon", "/search", "/search?q=%25_%5C", "/login"]
MEMBER = [*PUBLIC, "/submit", "/submit?forum=travel", "/settings", "/messages",
          "/messages/sent", "/messages/new", "/messages/new?to=bob", "/messages/4",
          "/messages/1", "/post/2/edit", "/comment/1/reply"]


@pytest.mark.parametrize("path", PUBLIC)
def test_pages_render_logged_out(server: SiteServer, token: str, path: str) -> None:
    c = Client(server, token)
    c.get(path)
    assert c.status == 200, path
    assert "Log in" in c.text and "Log out" not in c.text
    assert "<main" in c.html and "<nav" in c.html


@pytest.mark.parametrize("path", MEMBER)
def test_pages_render_logged_in(server: SiteServer, token: str, path: str) -> None:
    c = Client(server, token, "alice")
    c.get(path)
    assert c.status == 200, path
    assert "Log out" in c.text and "Log in to comment" not in c.text
    assert "Messages (" in c.text


def test_form_controls_have_labels(server: SiteServer, token: str) -> None:
    c = Client(server, token, "alice")
    for path in ("/settings", "/submit", "/messages/new", "/post/1", "/comment/1/reply",
                 "/f/books", "/login"):
        c.get(path)
        ids = re.findall(r'<(?:input|textarea|select)(?![^>]*type="hidden")[^>]*\bid="([^"]+)"',
                         c.html)
        assert ids, path
        for control in ids:
            assert f'<label for="{control}"' in c.html, (path, control)


def test_post_page_names_are_unique(server: SiteServer, token: str) -> None:
    c = Client(server, token, "alice")
    c.get("/post/3")
    for name in ("Upvote post", "Downvote post", "Post comment", "Upvote comment by oscar",
                 "Downvote comment by mallory", "Reply to oscar"):
        assert c.html.count(f">{name}<") + c.html.count(f'aria-label="{name}"') == 1, name


@pytest.mark.parametrize("path", ["/post/9999", "/f/knitting", "/u/nobody", "/nowhere",
                                  "/post/9999/edit", "/comment/9999/reply"])
def test_unknown_pages_are_404(server: SiteServer, token: str, path: str) -> None:
    c = Client(server, token, "alice")
    c.get(path)
    assert c.status == 404


def test_pages_that_need_a_login_send_to_it(server: SiteServer, token: str) -> None:
    c = Client(server, token)
    for path in ("/submit", "/settings", "/messages", "/messages/new", "/post/1/edit"):
        c.get(path)
        assert c.url.startswith("/login?next="), path
    c.post("/post/1/vote", dir="up")
    assert c.url == "/login?next=/post/1"
    assert server.query(token, "SELECT COUNT(*) FROM post_votes WHERE post_id = 1") == [(6,)]


def test_log_in_and_out(server: SiteServer, token: str) -> None:
    c = Client(server, token)
    c.post("/login", username="bob", password="wrong")
    assert c.status == 401 and "Wrong username or password." in c.text
    c.post("/login", username="bob", password="bob-pass", next="/settings")
    assert c.url == "/settings" and "bob@example.com" in c.html
    c.post("/logout")
    assert "You are logged out." in c.text and "Log in" in c.text
    c.get("/settings")
    assert c.url.startswith("/login")


def test_a_locked_post_refuses_comments(server: SiteServer, token: str) -> None:
    pid = post_id(server, token, "Is Moby-Dick worth finishing?")
    carol = Client(server, token, "carol")
    carol.post(f"/post/{pid}/lock")
    alice = Client(server, token, "alice")
    alice.get(f"/post/{pid}")
    assert "This post is locked." in alice.text and "Post comment" not in alice.text
    assert "Reply to oscar" not in alice.text
    before = server.query(token, "SELECT COUNT(*) FROM comments WHERE post_id = ?", (pid,))
    alice.post(f"/post/{pid}/comment", body="Sneaking in.")
    assert alice.status == 403 and "locked" in alice.text
    cid = comment_id(server, token, "Is Moby-Dick worth finishing?", "oscar")
    alice.post(f"/comment/{cid}/reply", body="Sneaking in a reply.")
    assert alice.status == 403
    assert server.query(token, "SELECT COUNT(*) FROM comments WHERE post_id = ?",
                        (pid,)) == before
    carol.post(f"/post/{pid}/unlock")
    alice.post(f"/post/{pid}/comment", body="Now it works.")
    assert alice.status == 200 and "Now it works." in alice.text


def test_only_moderators_of_the_forum_moderate(server: SiteServer, token: str) -> None:
    books = post_id(server, token, "Is Moby-Dick worth finishing?")
    travel = post_id(server, token, "Two weeks in Portugal by train: my itinerary")
    alice = Client(server, token, "alice")
    alice.get(f"/post/{books}")
    assert "Lock post" not in alice.text and "Remove post" not in alice.text
    alice.post(f"/post/{books}/lock")
    assert alice.status == 403
    carol = Client(server, token, "carol")
    carol.post(f"/post/{travel}/remove")  # carol does not moderate travel
    assert carol.status == 403
    assert server.query(token, "SELECT COUNT(*) FROM posts WHERE locked = 1 OR removed = 1"
                        ) == [(0,)]
    assert server.query(token, "SELECT COUNT(*) FROM mod_log") == [(0,)]


def test_removed_posts_are_hidden(server: SiteServer, token: str) -> None:
    pid = post_id(server, token, "Buy cheap garden followers now!!!")
    Client(server, token, "carol").post(f"/post/{pid}/remove")
    alice = Client(server, token, "alice")
    for path in ("/", "/?page=2", "/?page=3", "/f/gardening", "/u/mallory",
                 "/search?q=followers"):
        alice.get(path)
        assert "Buy cheap garden followers" not in alice.text, path
    alice.get(f"/post/{pid}")
    assert "removed by a moderator" in alice.text
    carol = Client(server, token, "carol")
    carol.get(f"/post/{pid}")
    assert "Restore post" in carol.text
    assert server.query(token, "SELECT action FROM mod_log") == [("remove",)]


def test_votes_toggle(server: SiteServer, token: str) -> None:
    pid = post_id(server, token, "Underrated science fiction films of the 1970s")
    c = Client(server, token, "alice")

    def mine() -> list[tuple]:
        return server.query(token, "SELECT value FROM post_votes WHERE user_id = 1 AND "
                            "post_id = ?", (pid,))

    c.post(f"/post/{pid}/vote", dir="up")
    assert mine() == [(1,)] and "8 points" in c.text
    c.post(f"/post/{pid}/vote", dir="down")
    assert mine() == [(-1,)] and "6 points" in c.text
    c.post(f"/post/{pid}/vote", dir="down")
    assert mine() == [] and "7 points" in c.text


def test_submit_validates(server: SiteServer, token: str) -> None:
    c = Client(server, token, "alice")
    c.post("/submit", forum="", title="", body="Some text")
    assert c.status == 400
    assert "Choose a forum." in c.text and "Title is required." in c.text
    assert "Some text" in c.html  # what was typed is kept
    c.post("/submit", forum="knitting", title="Hello", body="")
    assert c.status == 400 and "Choose a forum." in c.text
    assert server.query(token, "SELECT COUNT(*) FROM posts") == [(43,)]
    c.post("/submit", forum="books", title="<b>Bold</b> & brave", body="")
    assert c.status == 200 and "&lt;b&gt;Bold&lt;/b&gt; &amp; brave" in c.html


def test_messages(server: SiteServer, token: str) -> None:
    c = Client(server, token, "alice")
    c.post("/messages/new", to="nobody", subject="Hi", body="Hello")
    assert c.status == 400 and "There is no user named nobody." in c.text
    c.post("/messages/new", to="alice", subject="", body="")
    assert {"You cannot send a message to yourself.", "Subject is required.",
            "Message is required."} <= {m for m in re.findall(r"<li>([^<]+)</li>", c.html)}
    c.get(f"/messages/{message_id(server, token, 'Book club in December')}")
    assert "Messages (1 unread)" in c.text
    bob = Client(server, token, "bob")
    bob.get(f"/messages/{message_id(server, token, 'Book club in December')}")
    assert bob.status == 404  # someone else's message


def test_only_authors_edit_and_delete(server: SiteServer, token: str) -> None:
    pid = post_id(server, token, "Weeknight ramen in 25 minutes")
    alice = Client(server, token, "alice")
    alice.get(f"/post/{pid}")
    assert "Edit post" not in alice.text and "Delete post" not in alice.text
    alice.get(f"/post/{pid}/edit")
    assert alice.status == 403
    alice.post(f"/post/{pid}/delete")
    assert alice.status == 403
    bob = Client(server, token, "bob")
    bob.post(f"/post/{pid}/delete")
    assert bob.url.startswith("/f/cooking") and "Your post was deleted." in bob.text
    assert server.query(token, "SELECT COUNT(*) FROM comments WHERE post_id = ?",
                        (pid,)) == [(0,)]


def test_deleting_a_comment_keeps_its_replies(server: SiteServer, token: str) -> None:
    title = "Looking for cozy mysteries set in small towns"
    judy = Client(server, token, "judy")
    cid = comment_id(server, token, title, "judy")
    judy.post(f"/comment/{cid}/delete")
    assert "Your comment was deleted." in judy.text
    assert "[deleted]" in judy.text and "Ordered the first Flavia book" in judy.text
    assert "3 comments" in judy.text


def test_search_is_case_insensitive(server: SiteServer, token: str) -> None:
    c = Client(server, token)
    c.get("/search?q=LISBON")
    assert "4 posts found" in c.text
    c.get("/search?q=%25")
    assert "0 posts found" in c.text


def test_changes_count_rows_by_primary_key_and_leave_browsing_out(server: SiteServer,
                                                                  token: str) -> None:
    client = Client(server, token, "alice")
    for mid in (1, 2, 3):  # opening messages marks them read: browsing, not a change
        client.get(f"/messages/{mid}")
    client.get("/settings")
    assert server.changes(token) == {}
    client.post(f"/post/{post_id(server, token, TITLE_RUST)}/comment", body="One.")
    client.post("/settings", email="alice@example.org", bio="New bio", timezone="UTC")
    assert server.changes(token) == {"comments": 1, "users": 1}  # an update is one row
    [(forum,)] = server.query(token, "SELECT f.name FROM subscriptions s JOIN forums f ON"
                              " f.id = s.forum_id JOIN users u ON u.id = s.user_id WHERE"
                              " u.username = 'alice' ORDER BY f.name LIMIT 1")
    client.post(f"/f/{forum}/unsubscribe")
    client.post(f"/f/{forum}/subscribe")  # undone: a new row, with the template's key
    assert server.changes(token) == {"comments": 1, "users": 1}


TITLE_RUST = "Fighting the Rust borrow checker with shared state"


def test_a_write_sprayed_on_every_post_is_not_paid(server: SiteServer, token: str) -> None:
    """The comment the task asks for, also on every other post: the checked row is right,
    and the grade fails on what else changed; the comment alone passes."""
    task = BY_ID["forum-search-comment-rust"]
    assert task["grade"]["changes"] == {"comments": 1}
    client = Client(server, token, "alice")
    text = "Scoped threads might also help here."
    client.post(f"/post/{post_id(server, token, TITLE_RUST)}/comment", body=text)
    assert grade(server, token, task, "Done") == []
    for (pid,) in server.query(token, "SELECT id FROM posts ORDER BY id LIMIT 5"):
        if pid != post_id(server, token, TITLE_RUST):
            client.post(f"/post/{pid}/comment", body=text)
    assert grade(server, token, task, "Done") == [
        "the episode changed 6 rows of comments, the task 1 (changes it did not ask for)"]


def test_an_answer_task_pays_no_answer_given_beside_a_change(server: SiteServer,
                                                              token: str) -> None:
    task = BY_ID["forum-gardening-moderator"]
    assert task["grade"]["changes"] == {}
    Client(server, token, "alice").post("/f/gardening/subscribe")
    assert grade(server, token, task, "carol") == [
        "the episode changed 1 row of subscriptions, the task 0 (changes it did not ask for)"]
