"""Reused tabs (browser.py, "Reused pages"): a session leased with ``reuse=True`` gives its
tab to the next lease of the same origins, wiped, at a fresh document of that lease's
preload URL; in every other case the next lease gets a fresh context. MiniWoB's episodes
reuse their tab, and play exactly as they do in a fresh one."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

import agentgym
from agentgym.core.errors import InvalidArgumentError
from agentgym.core.serving import LocalServer
from agentgym.plugins.web.browser import BrowserPool, BrowserSession

pytestmark = pytest.mark.usefixtures("chromium")

PAGE = "<!doctype html><title>{0}</title><h1>{0}</h1><img src=/pixel>"


def _page(request) -> HTMLResponse:
    return HTMLResponse(PAGE.format(request.url.path.strip("/") or "home"))


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    app = Starlette(routes=[Route("/", _page), Route("/other", _page),
                            Route("/pixel", lambda r: HTMLResponse(""))])
    with LocalServer(app, name="reuse-site").start() as server:
        yield server.url


@pytest.fixture
def pool() -> Iterator[BrowserPool]:
    pool = BrowserPool(max_idle=1)
    yield pool
    pool.close()


def lease(pool: BrowserPool, site: str, **options) -> BrowserSession:
    """A session at ``site``'s home page (loaded by the lessee unless it is preloaded, as
    a web env's ``open_page`` does)."""
    options.setdefault("origins", (site,))
    session = asyncio.run(pool.lease(preload=f"{site}/", reuse=options.pop("reuse", True),
                                     **options))

    async def home(s: BrowserSession) -> None:
        if s.page.url != f"{site}/":
            await s.page.goto(f"{site}/")

    asyncio.run(session.run(home))
    return session


def run(session: BrowserSession, script: str):
    return asyncio.run(session.run(lambda s: s.page.evaluate(script)))


def release(pool: BrowserPool, session: BrowserSession) -> None:
    asyncio.run(pool.release(session))


LEAVE_STATE = """async () => {
  localStorage.setItem('k', 'v'); sessionStorage.setItem('k', 'v');
  document.cookie = 'c=1; max-age=3600';
  indexedDB.open('db');
  window.marker = 1;
  history.pushState({}, '', '/other');
  return [localStorage.length, document.cookie, history.length];
}"""
STATE = """() => [localStorage.length, sessionStorage.length, document.cookie, history.length,
                  typeof window.marker, location.pathname]"""


def test_a_reused_tab_starts_each_episode_from_a_wiped_fresh_document(pool, site) -> None:
    first = lease(pool, site)
    page = first.page
    stored, cookie, history = run(first, LEAVE_STATE)
    assert (stored, cookie) == (1, "c=1") and history > 1
    old_requests = list(first.requests)
    release(pool, first)
    second = lease(pool, site)
    try:
        assert second.page is page  # the same tab, so the same renderer
        assert run(second, STATE) == [0, 0, "", 1, "undefined", "/"]
        assert second.blocked == [] and second.requests == []
        assert first.requests == old_requests  # the old session hears nothing any more
        # One record per request: the first session's handlers are gone.
        run(second, "() => fetch('/pixel').then(r => r.status)")
        assert [r["url"] for r in second.requests] == [f"{site}/pixel"]
        with pytest.raises(Exception, match="closed"):
            run(first, "() => 1")
    finally:
        release(pool, second)


def test_a_tab_goes_to_another_page_of_the_same_origins_at_that_page(pool, site) -> None:
    first = asyncio.run(pool.lease(origins=(site,), preload=f"{site}/", reuse=True))
    page = first.page
    run(first, LEAVE_STATE)
    release(pool, first)
    second = asyncio.run(pool.lease(origins=(site,), preload=f"{site}/other", reuse=True))
    try:
        assert second.page is page
        # At the lease's own page, a new document, nothing behind it.
        assert run(second, STATE) == [0, 0, "", 1, "undefined", "/other"]
        assert run(second, "() => document.title") == "other"
    finally:
        release(pool, second)


def test_a_lease_takes_the_idle_browser_whose_tab_fits_it() -> None:
    pool = BrowserPool(max_idle=2)
    try:
        with LocalServer(Starlette(routes=[Route("/", _page)]), name="reuse-b").start() as b:
            site_a = asyncio.run(pool.lease(origins=(b.url,), preload=f"{b.url}/", reuse=True))
            other = asyncio.run(pool.lease())  # a second browser, released last
            page = site_a.page
            release(pool, site_a)
            release(pool, other)
            again = asyncio.run(pool.lease(origins=(b.url,), preload=f"{b.url}/", reuse=True))
            assert again.page is page and pool.launches == 2
            release(pool, again)
    finally:
        pool.close()


def test_a_tab_goes_only_to_a_lease_of_the_same_origins(pool, site) -> None:
    first = lease(pool, site)
    page = first.page
    release(pool, first)
    wider = lease(pool, site, origins=(site, "http://127.0.0.1:9"))
    assert wider.page is not page  # other origins: a fresh context
    release(pool, wider)
    plain = lease(pool, site, reuse=False)
    assert plain.page is not wider.page  # reuse was not asked for: closed on release
    release(pool, plain)


def test_a_session_with_two_tabs_is_not_reused(pool, site) -> None:
    first = lease(pool, site)
    page = first.page

    async def two_tabs(session: BrowserSession) -> int:
        await session.context.new_page()
        return len(session.pages)

    assert asyncio.run(first.run(two_tabs)) == 2
    release(pool, first)
    second = lease(pool, site)
    assert second.page is not page and len(second.pages) == 1
    release(pool, second)


def test_reuse_needs_a_preload_and_no_cookies(pool, site) -> None:
    with pytest.raises(InvalidArgumentError, match="reuse=True needs a preload"):
        asyncio.run(pool.lease(origins=(site,), reuse=True))
    with pytest.raises(InvalidArgumentError, match="no cookies"):
        asyncio.run(pool.lease(origins=(site,), preload=f"{site}/", reuse=True,
                               cookies=[{"name": "a", "value": "b", "url": site}]))


FAMILIES = ["click-button", "enter-text-2", "choose-list", "click-checkboxes", "navigate-tree",
            "use-spinner", "click-collapsible"]


TABS: list = []  # the tab of each episode played, in order


def play(env, task_id: str) -> tuple[list[str], float]:
    """The observations of ``task_id`` played by its solver, and its reward."""
    from agentgym.core.policies import build_policy

    solver = build_policy("miniwob-solver")
    messages, _ = env.reset(options={"task_id": task_id})
    TABS.append(env.unwrapped.page.session.page)
    seen = [messages[-1]["content"]]
    for _ in range(10):
        action = solver.act(messages, env.unwrapped.task)
        new, reward, terminated, truncated, _ = env.step(action)
        messages = [*messages, action, *new]
        seen += [m["content"] for m in new]
        if terminated or truncated:
            return seen, reward
    raise AssertionError(f"{task_id} did not end")


@pytest.mark.slow
def test_miniwob_plays_the_same_in_a_reused_tab_as_in_a_fresh_one(sample) -> None:
    # Three families a run (the day's draw; AGENTGYM_TEST_FULL=1 plays all seven).
    families = sample(FAMILIES, 3)
    env = agentgym.make("miniwob", family=families)
    fresh = agentgym.make("miniwob", family=families, reuse_tabs=False)
    try:
        # Each task twice in a row (the second in the first's tab), then without reuse.
        reused = {}
        for family in families:
            for seed in (5, 6):
                reused[f"{family}/{seed}"] = play(env, f"{family}/{seed}")
            assert TABS[-1] is TABS[-2], f"{family}: the second episode had a new tab"
        for task_id, (seen, reward) in reused.items():
            assert play(fresh, task_id) == (seen, reward), task_id
            assert reward == 1.0, task_id
            assert TABS[-1] is not TABS[-2]
    finally:
        env.close()
        fresh.close()


def test_a_tab_left_busy_is_replaced_by_a_fresh_context(pool, site, monkeypatch) -> None:
    import agentgym.plugins.web.browser as browser

    monkeypatch.setattr(browser, "_REUSE_TIMEOUT_S", 2.0)
    first = lease(pool, site)
    page = first.page
    # A script that keeps the renderer busy for 20 s after the episode ends.
    run(first, "() => { setTimeout(() => { const t = Date.now();"
               " while (Date.now() - t < 20000) {} }, 0); return 1; }")
    release(pool, first)
    started = time.monotonic()
    second = lease(pool, site)
    try:
        assert second.page is not page
        assert time.monotonic() - started < 15  # the busy tab's 20 s were not waited out
        assert run(second, STATE)[-1] == "/"
    finally:
        release(pool, second)


def _singleton_folder(pid: int) -> Path:
    """The folder in /tmp where the Chromium of ``pid`` keeps its singleton socket (its
    profile's SingletonSocket links there)."""
    flags = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    profile = next(f.split(b"=", 1)[1] for f in flags if f.startswith(b"--user-data-dir="))
    return Path(os.readlink(Path(profile.decode()) / "SingletonSocket")).parent


def test_browsers_let_go_are_closed_not_killed(site) -> None:
    """A killed Chromium leaves its singleton folder in /tmp (one per browser, for good);
    a browser the pool does not keep, and every browser at the pool's close, is closed."""
    pool = BrowserPool(max_idle=0)  # nothing is kept: each release lets its browser go
    try:
        session = lease(pool, site, reuse=False)
        released = _singleton_folder(*pool.leased_pids)
        release(pool, session)
        session = lease(pool, site, reuse=False)
        closed = _singleton_folder(*pool.leased_pids)
        assert released.exists() is False and closed.exists()
    finally:
        pool.close()
    assert not closed.exists()
