"""Real headless Chromium for web episodes: a pool of browser processes, one fresh context
per episode, loopback-only networking, and crashes that end only their own episode.

**The pool** (:func:`browser_pool`). One per process, with its own event-loop thread on
which every Playwright call runs, so that envs on any loop (each sync env has its own; a
pipeline drives many envs on one) share the same warm browsers. An episode leases a whole
browser process (:meth:`BrowserPool.lease`) and gets a fresh context in it; the pool keeps
one unused context ready in each idle browser, so that a lease costs a cookie and a
navigation, not a renderer start. A released browser's context is closed and the browser
goes back to the pool. Browsers are Debian's ``/usr/bin/chromium`` (or
``AGENTGYM_CHROMIUM``), launched with the flags MACHINE.md lists.

**Reused pages** (``lease(reuse=True)``). A new page costs a renderer process: about
1.3 s and half a CPU-second on these machines, against 0.13 s to load a page again in a tab
that has one. An env whose pages keep no state between loads (static files whose problem
lives in the page, such as MiniWoB's) may ask for its tab to be reused: on release, a
session with one page still on its origins is wiped instead of closed (routes, cookies,
the origins' storage, listeners, history, the mouse) and its tab loads the preload URL
afresh, a new document; the next lease of the same origins gets it (its tab loads that
lease's preload URL first when it is another page of them, so a MiniWoB family's tab
serves the next family too). Each episode still starts from a fresh document; what stays
is the HTTP cache of the same origins and the renderer process. Anything else (other
origins, more pages or none, a failed wipe) gets a fresh context as before. A lease takes
an idle browser whose spare fits it first.

**Failures.** A browser whose process exits (killed, crashed) or that does not answer a
call within its deadline (hung: its process is then killed) raises
:class:`BrowserCrashed`, a :class:`~agentgym.core.sandbox.SandboxError`: the rollout loop
ends that episode with finish reason ``sandbox_error``. The pool drops the dead browser and
launches another for the next lease, so no other episode notices.

**Load.** A rollout may run many more episodes than the machine has cores (GRPO plays 64
at once), and Chromium on an oversubscribed CPU misses every deadline: 32 episodes on 2
busy cores lost 45 of 64 to page-load timeouts. So at most ``max_busy`` browser operations
run at once (a launch, or one :meth:`BrowserSession.run`: a page's opening, an action and
its observation); the others wait their turn, and the wait counts against no timeout. A
browser waiting for the model costs no CPU and holds no turn.

**Network.** An episode's pages reach only the origins its env names when it leases the
browser (:meth:`BrowserPool.lease`): every other request is refused where requests are
routed, and the context's only proxy is a connection guard that opens connections to
those origins' ``host:port`` only, loopback included (:mod:`agentgym.plugins.web.reach`).
:attr:`BrowserSession.blocked` lists what tried. A browser's own default proxy is an
address on 127.0.0.1 where nothing listens, loopback not bypassed, so a context made
without a guard reaches nothing at all.

**Settling.** :class:`PageWatch` follows each page's navigations (the ones an action asked
for, loading, the document's ready state) and its requests in flight, so that an action
can wait for what it started (:meth:`PageWatch.settle`) and say what was still pending
when a bound ran out.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import threading
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from agentgym.core.errors import InvalidArgumentError, MissingResourceError
from agentgym.core.loop_thread import LoopThread
from agentgym.core.sandbox import SandboxError
from agentgym.plugins.web.reach import ConnectionGuard, install_routes, origin_of, start_guard

T = TypeVar("T")

#: Chromium's flags (MACHINE.md): headless, no GPU, no background traffic of its own.
LAUNCH_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
               "--disable-extensions", "--mute-audio",
               "--disable-features=AutofillServerCommunication,OptimizationHints,"
               "MediaRouter,Translate")
#: Seconds a reused tab's wipe and reload may take before a fresh context replaces it.
_REUSE_TIMEOUT_S = 40.0
#: The viewport of every page (BrowserGym's default).
VIEWPORT = {"width": 1280, "height": 720}


class BrowserCrashed(SandboxError):
    """The episode's browser process died or stopped answering; the episode cannot go on."""


def chromium_path() -> str:
    """The Chromium executable: ``AGENTGYM_CHROMIUM`` or Debian's, else an error saying how
    to install it."""
    candidates = [os.environ.get("AGENTGYM_CHROMIUM", ""), "/usr/bin/chromium",
                  shutil.which("chromium") or "", shutil.which("chromium-browser") or ""]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    raise MissingResourceError(
        "Chromium is not installed (looked for AGENTGYM_CHROMIUM, /usr/bin/chromium and"
        " chromium on PATH)",
        "install it, e.g. `apt-get install chromium` on Debian, or point AGENTGYM_CHROMIUM"
        " at a Chromium executable; `playwright install` needs a network this machine may"
        " not have")


@contextlib.contextmanager
def sync_chromium() -> Iterator[Any]:
    """A headless Chromium (the pool's executable and flags) for synchronous scripts, such
    as tests and benches that open a page: yields playwright's ``Browser``, closed after."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(),
                                             args=list(LAUNCH_ARGS))
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class _Context:
    """A browser context made ahead of its lease: its first page, the CDP session and
    watch of that page, and its connection guard."""

    context: Any
    page: Any
    watch: PageWatch
    guard: ConnectionGuard
    blocked: list[str]


@dataclass
class _Browser:
    """One Chromium process and its spare context."""

    browser: Any
    pid: int | None
    spare: asyncio.Task | None = None
    spare_preload: str | None = None
    #: The origins a reused spare's last episode had; None for a fresh spare (any lease).
    spare_origins: tuple[str, ...] | None = None
    dead: bool = False
    leased: bool = False


class PageWatch:
    """What one page is busy with: a navigation an action asked for, a document still
    loading, requests without an answer. Made for each page of a session
    (:meth:`BrowserSession.watch`); its CDP session follows the main frame's navigations,
    Playwright's events its requests."""

    def __init__(self, page: Any):
        self.page = page
        self.cdp: Any = None
        #: Requests without an answer yet -> when each started (the loop's clock).
        self.inflight: dict[Any, float] = {}
        self.requested = False  # a navigation of this tab was asked for, not yet begun
        self.loading = False  # the main frame is loading a document
        self.main_frame = ""
        #: The document answered the last look of :meth:`settle`.
        self.answered = True
        self._changed = asyncio.Event()
        page.on("request", self._on_request)
        page.on("requestfinished", self._on_done)
        page.on("requestfailed", self._on_done)

    async def attach(self, cdp: Any) -> PageWatch:
        """Follow the main frame's navigations through ``cdp`` (the page's CDP session)."""
        self.cdp = cdp
        for event, handler in (("Page.frameRequestedNavigation", self._on_requested),
                               ("Page.frameStartedLoading", self._on_started),
                               ("Page.frameStoppedLoading", self._on_stopped),
                               ("Page.navigatedWithinDocument", self._on_same_document),
                               ("Page.frameNavigated", self._on_committed)):
            cdp.on(event, handler)
        await cdp.send("Page.enable")
        tree = await cdp.send("Page.getFrameTree")
        self.main_frame = tree["frameTree"]["frame"]["id"]
        return self

    # ---- events -------------------------------------------------------------------------

    def _touch(self) -> None:
        self._changed.set()

    def _on_request(self, request: Any) -> None:
        if request.resource_type not in ("eventsource", "websocket"):
            self.inflight[request] = asyncio.get_running_loop().time()
            self._touch()

    def _on_done(self, request: Any) -> None:
        if self.inflight.pop(request, None) is not None:
            self._touch()

    def _main(self, event: dict[str, Any]) -> bool:
        return event.get("frameId") == self.main_frame

    def _on_requested(self, event: dict[str, Any]) -> None:
        if self._main(event) and event.get("disposition", "currentTab") == "currentTab":
            self.requested = True
            self._touch()

    def _on_started(self, event: dict[str, Any]) -> None:
        if self._main(event):
            self.requested, self.loading = False, True
            self._touch()

    def _on_stopped(self, event: dict[str, Any]) -> None:
        if self._main(event):
            self.requested = self.loading = False
            self._touch()

    def _on_same_document(self, event: dict[str, Any]) -> None:
        if self._main(event):
            self.requested = False
            self._touch()

    def _on_committed(self, event: dict[str, Any]) -> None:
        frame = event.get("frame", {})
        if not frame.get("parentId"):  # the main frame (its id may change on a swap)
            self.main_frame = frame.get("id", self.main_frame)
            self.requested = False
            self._touch()

    # ---- waiting ------------------------------------------------------------------------

    async def ready_state(self, timeout_s: float = 1.0) -> str:
        """The document's ``readyState``: ``navigating`` while none answers, ``unanswered``
        when the document did not answer within ``timeout_s`` (Chromium holds commands to
        a frame whose navigation is waiting for its server until the new document
        commits). One round trip on the watch's CDP session, so the events sent before it
        have arrived."""
        if self.cdp is None:
            return "complete"
        try:
            answer = await asyncio.wait_for(self.cdp.send("Runtime.evaluate", {
                "expression": "document.readyState", "returnByValue": True}), timeout_s)
            return str(answer.get("result", {}).get("value", "navigating"))
        except asyncio.TimeoutError:
            return "unanswered"
        except Exception:  # the document was replaced mid-call
            return "navigating"

    @property
    def held(self) -> bool:
        """A navigation is under way and the document did not answer: Chromium holds the
        commands sent to it until the new document commits, so asking it anything waits
        for the server. (A document that does not answer with no navigation under way is
        hung, and asking it runs into the caller's bound.)"""
        return not self.answered and (self.requested or self.loading)

    def pending(self, state: str, since: float = 0.0) -> list[str]:
        """What the page is still busy with, in words (empty: settled). Requests count
        only when they started at or after ``since`` (the loop's clock): a long-lived
        connection opened before an action does not hold the action up."""
        busy = []
        if self.requested:
            busy.append("a navigation the action asked for, not yet begun")
        if self.loading or state != "complete":
            url = self.page.url if not self.page.is_closed() else "(closed)"
            busy.append(f"the page {url} is still loading ({state})")
        waiting = [r.url for r, started in self.inflight.items() if started >= since]
        if waiting:
            shown = ", ".join(waiting[:3]) + (" ..." if len(waiting) > 3 else "")
            busy.append(f"{len(waiting)} request{'s' if len(waiting) > 1 else ''} without"
                        f" an answer ({shown})")
        return busy

    async def settle(self, timeout_s: float, since: float = 0.0) -> str:
        """Wait until the page is settled: no navigation asked for or loading, the
        document ``complete``, no request (started since ``since``) in flight, twice in a
        row (a request or navigation just starting shows on the second look). Returns ""
        when it settled, else what was still pending when ``timeout_s`` ran out."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        calm = 0
        while True:
            self._changed.clear()
            state = "complete" if self.page.is_closed() else await self.ready_state(
                max(0.05, min(end - loop.time(), 1.0)))
            self.answered = state != "unanswered"
            busy = [] if self.page.is_closed() else self.pending(state, since)
            if not busy:
                calm += 1
                if calm >= 2:
                    return ""
                continue
            calm = 0
            left = end - loop.time()
            if left <= 0:
                return "; ".join(busy)
            with contextlib.suppress(asyncio.TimeoutError):
                # Woken by any event; the poll also catches a ready state that changed
                # without one.
                await asyncio.wait_for(self._changed.wait(), min(left, 0.25))


@dataclass
class BrowserSession:
    """One episode's browser context: its pages (tabs), the active page, the origins it
    may reach and the requests it tried that were blocked. Every method runs on the
    pool's loop; call them from any loop. Only :class:`BrowserPool` makes one."""

    pool: BrowserPool
    _browser: _Browser
    context: Any
    pages: list[Any]
    #: The only origins (``scheme://host:port``) its pages may reach.
    origins: tuple[str, ...] = ()
    #: The URL the lessee expects to open first: its browser's next spare context loads it
    #: ahead of time, so the next lease of the same kind finds it loaded.
    preload: str | None = None
    #: What its pages tried to reach and were refused: URLs (refused where requests are
    #: routed) and ``host:port`` (connections the guard refused).
    blocked: list[str] = field(default_factory=list)
    #: The requests the episode's pages made, in order: ``url``, ``method``, ``post_data``
    #: (parsed JSON or form fields, else the text) and, once answered, ``status``.
    requests: list[dict[str, Any]] = field(default_factory=list)
    active: int = 0
    closed: bool = False
    guard: ConnectionGuard | None = None
    #: Its tab is reused on release (module docstring, "Reused pages").
    reuse: bool = False
    _watches: dict[int, PageWatch] = field(default_factory=dict)
    #: The event handlers the session added: (emitter, event, handler), removed when its
    #: tab is reused.
    _listeners: list[tuple[Any, str, Callable]] = field(default_factory=list)

    def listen(self, emitter: Any, event: str, handler: Callable, once: bool = False) -> None:
        """``emitter.on(event, handler)`` (or ``once``), removed by :meth:`forget`."""
        (emitter.once if once else emitter.on)(event, handler)
        self._listeners.append((emitter, event, handler))

    def forget(self) -> None:
        """Remove every handler :meth:`listen` added."""
        listeners, self._listeners = self._listeners, []
        for emitter, event, handler in listeners:
            with contextlib.suppress(Exception):
                emitter.remove_listener(event, handler)

    @property
    def page(self) -> Any:
        """The active tab."""
        return self.pages[self.active]

    async def run(self, work: Callable[[BrowserSession], Awaitable[T]],
                  timeout: float = 30.0) -> T:
        """Run ``work(self)`` on the pool's loop within ``timeout`` seconds. A browser that
        is dead, or that does not finish in time, raises :class:`BrowserCrashed` (and a
        hung one is killed)."""
        return await self.pool.call(self.pool.in_turn(self._guarded(work, timeout)))

    async def _guarded(self, work: Callable[[BrowserSession], Awaitable[T]],
                       timeout: float) -> T:
        if self.closed:
            raise BrowserCrashed("the episode's browser context is closed")
        self._check_alive()
        try:
            return await asyncio.wait_for(work(self), timeout)
        except asyncio.TimeoutError:
            if self._browser.dead:
                self._check_alive()
            # Playwright's own timeouts are shorter: a call past this one is a hung browser.
            self.pool.kill(self._browser)
            raise BrowserCrashed(f"the browser did not answer within {timeout:g} s and was"
                                 " stopped; this episode cannot go on") from None
        except Exception as error:
            if self._browser.dead or not self._browser.browser.is_connected():
                self._browser.dead = True
                self._check_alive()
            if type(error).__name__ == "TargetClosedError" and self._all_pages_closed():
                raise BrowserCrashed("the episode's page was closed or crashed") from error
            raise

    async def cdp(self, page: Any) -> Any:
        """A CDP session of ``page``, kept for the page's life (one per call costs ~10 ms)."""
        return (await self.watch(page)).cdp

    async def watch(self, page: Any) -> PageWatch:
        """The :class:`PageWatch` of ``page`` (made, with its CDP session, on first use)."""
        watch = self._watches.get(id(page))
        if watch is None:
            watch = self._keep_watch(page, PageWatch(page))
        if watch.cdp is None:
            cdp = await self.context.new_cdp_session(page)
            if watch.cdp is None:  # not attached meanwhile
                await watch.attach(cdp)
        return watch

    def _keep_watch(self, page: Any, watch: PageWatch) -> PageWatch:
        self._watches[id(page)] = watch
        self.listen(page, "close", lambda _p: self._watches.pop(id(page), None), once=True)
        return watch

    def _all_pages_closed(self) -> bool:
        return all(page.is_closed() for page in self.pages)

    def _check_alive(self) -> None:
        if self._browser.dead:
            raise BrowserCrashed("the browser process exited (killed or crashed); this"
                                 " episode cannot go on")

    def track(self, page: Any) -> Any:
        """Record ``page``'s requests in :attr:`requests` and watch what it waits for
        (:meth:`watch`)."""
        answered: dict[int, dict[str, Any]] = {}

        def on_request(request: Any) -> None:
            if len(self.requests) < 5000:
                entry = {"url": request.url, "method": request.method,
                         "post_data": _parse_body(request.post_data)}
                self.requests.append(entry)
                answered[id(request)] = entry

        def on_response(response: Any) -> None:
            entry = answered.pop(id(response.request), None)
            if entry is not None:
                entry["status"] = response.status

        self.listen(page, "request", on_request)
        self.listen(page, "response", on_response)
        if id(page) not in self._watches:
            self._keep_watch(page, PageWatch(page))
        return page


class BrowserPool:
    """Chromium processes shared by every web episode of a process (module docstring).

    Args:
        executable: the Chromium binary (default: :func:`chromium_path`).
        max_idle: idle browsers kept warm; more are closed when released.
        max_busy: browser operations running at once (module docstring, "Load"); default
            ``AGENTGYM_BROWSER_BUSY`` or :func:`default_max_busy`.
    """

    def __init__(self, executable: str | None = None, max_idle: int = 8,
                 max_busy: int | None = None):
        self.executable = executable or chromium_path()
        self.max_idle = max_idle
        self.max_busy = max_busy if max_busy is not None else default_max_busy()
        if self.max_busy < 1:
            raise InvalidArgumentError(f"max_busy={self.max_busy} must be >= 1")
        self._busy: asyncio.Semaphore | None = None  # made on the pool's loop
        self._thread = LoopThread("agentgym-browsers")
        self._idle: list[_Browser] = []
        self._all: list[_Browser] = []
        self._playwright: Any = None
        self._proxy_socket: socket.socket | None = None
        self._start_lock: asyncio.Lock | None = None
        self._closed = False
        self.launches = 0

    # ---- running on the pool's loop ---------------------------------------------------

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the pool's loop from any loop (directly when already on it:
        work given to :meth:`BrowserSession.run` may call the pool's methods)."""
        if self._thread.owns_running_loop():
            return await coro
        return await asyncio.wrap_future(self._thread.submit(coro))

    def kill(self, browser: _Browser) -> None:
        """Stop a browser's process now (a hung browser); it is dropped from the pool."""
        browser.dead = True
        if browser.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(browser.pid, signal.SIGKILL)

    async def in_turn(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the pool's loop once fewer than :attr:`max_busy` operations
        run (module docstring, "Load"); nothing that holds a turn may wait for another."""
        if self._busy is None:
            self._busy = asyncio.Semaphore(self.max_busy)
        async with self._busy:
            return await coro

    # ---- leases ---------------------------------------------------------------------------

    async def lease(self, origins: Sequence[str] = (), cookies: Sequence[dict] = (),
                    preload: str | None = None, reuse: bool = False) -> BrowserSession:
        """A browser with a fresh context (and one page) for one episode, from any loop.
        ``origins``: the only origins its pages may reach (base URLs such as
        ``http://127.0.0.1:8000``; see :mod:`agentgym.plugins.web.reach`); ``cookies``: set
        on the context before anything loads; ``preload``: a page on one of ``origins``
        that needs no cookies and that the lessee opens first (static pages such as
        MiniWoB's): fresh contexts made for later leases load it ahead of time, untouched
        until leased (the session's page is then already at that URL); ``reuse``: the
        session's tab may serve the next lease of the same ``origins``, at its preload URL
        (module docstring, "Reused pages"; it needs ``preload`` and no ``cookies``)."""
        allowed = tuple(dict.fromkeys(origin_of(o) for o in origins))
        if preload is not None and origin_of(preload) not in allowed:
            raise InvalidArgumentError(f"preload={preload!r} is not on the session's origins"
                                       f" {list(allowed)}")
        if reuse and (preload is None or cookies):
            raise InvalidArgumentError(
                "reuse=True needs a preload URL and no cookies: a reused tab reloads the"
                " preload URL, and cookies are state it would have to carry over")
        session = await self.call(self._lease(allowed, list(cookies), preload))
        session.reuse = reuse
        return session

    async def prepare_next(self, session: BrowserSession) -> None:
        """Start the context the next lease of ``session``'s browser will get, while
        ``session``'s episode runs. Call it once the episode's first page is up: made
        earlier, it would compete with that page for the CPU. (A session whose tab is
        reused needs none: its own context is the next one.)"""
        await self.call(self._prepare_next(session))

    async def _prepare_next(self, session: BrowserSession) -> None:
        browser = session._browser
        if browser.spare is None and not browser.dead and not session.closed \
                and not session.reuse:
            self._make_spare(browser, session.preload)

    async def release(self, session: BrowserSession) -> None:
        """End ``session``: close its context and return its browser to the pool."""
        await self.call(self._release(session))

    async def _lease(self, origins: tuple[str, ...], cookies: list[dict],
                     preload: str | None) -> BrowserSession:
        for _ in range(3):  # a spare context of a browser that just died: try another
            browser = await self._take(origins, preload)
            fits = _fits(browser, origins, preload)
            spare, browser.spare = browser.spare, None
            try:
                if not fits:
                    if spare is not None:
                        spare.add_done_callback(_close_context_of)
                    made = await self._new_context(browser, None)
                else:
                    made = await spare
                # What the episode may reach is set before it gets the context.
                made.guard.allow(origins)
                await install_routes(made.context, origins, made.blocked.append)
                if cookies:
                    await made.context.add_cookies(cookies)
                # Not at the preload URL: a reused tab at another page of the origins, or a
                # context made now. Either way the session starts there, a new document.
                if preload and made.page.url != preload:
                    with contextlib.suppress(Exception):  # the lessee will load it itself
                        await _open_afresh(made, preload)
            except Exception as error:
                if not browser.dead and browser.browser.is_connected():
                    browser.leased = False
                    self._idle.append(browser)
                    raise BrowserCrashed(f"a browser context could not be opened: {error}"
                                         ) from error
                self._drop(browser)
                continue
            session = BrowserSession(self, browser, made.context, [made.page], origins,
                                     preload, made.blocked, guard=made.guard)
            session._keep_watch(made.page, made.watch)
            session.track(made.page)
            session.listen(made.context, "page", lambda p, s=session: s.pages.append(s.track(p)))
            return session
        raise BrowserCrashed("three browsers in a row died while opening a context")

    async def _take(self, origins: tuple[str, ...], preload: str | None) -> _Browser:
        # A browser whose spare fits the lease first: its context is ready (or a tab
        # reloads), where any other needs a new context, a renderer's start.
        self._idle.sort(key=lambda b: _fits(b, origins, preload))
        while self._idle:
            browser = self._idle.pop()
            if not browser.dead and browser.browser.is_connected():
                browser.leased = True
                return browser
            self._drop(browser)
        browser = await self.in_turn(self._launch())
        browser.leased = True
        return browser

    async def _release(self, session: BrowserSession) -> None:
        if session.closed:
            return
        session.closed = True
        browser = session._browser
        browser.leased = False
        alive = not browser.dead and browser.browser.is_connected()
        kept = alive and len(self._idle) < self.max_idle and not self._closed
        reuse = kept and session.reuse and browser.spare is None and _reusable(session)
        if session.guard is not None and not reuse:
            session.guard.close()
        if not alive:
            self._drop(browser)
        elif not kept:
            browser.dead = True  # nobody takes it meanwhile
            with contextlib.suppress(Exception):  # closed, not killed (see close)
                await asyncio.wait_for(browser.browser.close(), 10)
            self._drop(browser, kill=browser.browser.is_connected())
        elif reuse:
            spare = asyncio.ensure_future(self._reuse(session))
            spare.add_done_callback(lambda f: f.cancelled() or f.exception())
            browser.spare, browser.spare_preload = spare, session.preload
            browser.spare_origins = session.origins
            self._idle.append(browser)
        else:
            # The next lease uses the spare context, so the old one can close while the
            # next episode starts: that is off the reset's path.
            _close_soon(session.context)
            if browser.spare is None:
                self._make_spare(browser, session.preload)
            self._idle.append(browser)

    async def _reuse(self, session: BrowserSession) -> _Context:
        """``session``'s context wiped for the next episode, its tab at the preload URL
        again (module docstring, "Reused pages"); a fresh context when the wipe fails."""
        page, context, guard = session.pages[0], session.context, session.guard
        watch = session._watches.get(id(page))
        assert session.preload is not None and guard is not None
        session.forget()
        blocked: list[str] = []

        async def wipe() -> None:
            if watch is None or watch.cdp is None:
                raise RuntimeError("the tab has no watch")
            guard.refused = blocked.append
            guard.allow([origin_of(session.preload)])  # as a spare's, until leased
            await context.unroute_all(behavior="ignoreErrors")
            await context.clear_cookies()
            for origin in session.origins:
                await watch.cdp.send("Storage.clearDataForOrigin",
                                     {"origin": origin, "storageTypes": "all"})
            await page.mouse.move(0, 0)
            await _open_afresh(_Context(context, page, watch, guard, blocked), session.preload)

        try:
            # Bounded: a tab left busy (a script still running) must not hold up the
            # next lease, which awaits this; it gets a fresh context instead.
            await asyncio.wait_for(wipe(), _REUSE_TIMEOUT_S)
            return _Context(context, page, watch, guard, blocked)
        except Exception:
            guard.close()
            _close_soon(context)
            if session._browser.dead:
                raise
            return await self._new_context(session._browser, session.preload)

    # ---- browsers -------------------------------------------------------------------------

    async def _launch(self) -> _Browser:
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._playwright is None:
                try:
                    from playwright.async_api import async_playwright
                except ImportError as error:
                    raise MissingResourceError(
                        "playwright is not installed",
                        "install the web extra: pip install -e '.[web]' from agentgym's"
                        " source") from error
                self._playwright = await async_playwright().start()
                self._proxy_socket = _refusing_port()
        marker = f"--agentgym-browser={uuid.uuid4().hex}"
        port = self._proxy_socket.getsockname()[1]
        try:
            browser = await self._playwright.chromium.launch(
                executable_path=self.executable, headless=True,
                args=[*LAUNCH_ARGS, marker],
                # Contexts bring their own guard; without one, nothing is reachable.
                proxy={"server": f"http://127.0.0.1:{port}", "bypass": ""})
        except Exception as error:
            raise BrowserCrashed(f"Chromium ({self.executable}) did not start: {error}"
                                 ) from error
        self.launches += 1
        record = _Browser(browser, _find_pid(marker))
        browser.on("disconnected", lambda _b: setattr(record, "dead", True))
        self._all.append(record)
        return record

    def _make_spare(self, browser: _Browser, preload: str | None) -> None:
        spare = asyncio.ensure_future(self._new_context(browser, preload))
        # A spare of a browser that dies or closes fails unseen; a lease that takes it
        # still gets its error when it awaits it.
        spare.add_done_callback(lambda f: f.cancelled() or f.exception())
        browser.spare, browser.spare_preload, browser.spare_origins = spare, preload, None

    async def _new_context(self, browser: _Browser, preload: str | None) -> _Context:
        blocked: list[str] = []
        guard = await start_guard(blocked.append)
        try:
            if preload:  # its own page only, until the lease says what the episode may reach
                guard.allow([origin_of(preload)])
            context = await browser.browser.new_context(
                viewport=VIEWPORT, service_workers="block", proxy=guard.proxy)
            page = await context.new_page()
            # Observations and settling use the page's CDP session: ready ahead.
            watch = await PageWatch(page).attach(await context.new_cdp_session(page))
        except BaseException:
            guard.close()
            raise
        if preload:
            with contextlib.suppress(Exception):  # the lessee will load it itself
                await page.goto(preload, wait_until="load", timeout=30_000)
        return _Context(context, page, watch, guard, blocked)

    def _drop(self, browser: _Browser, kill: bool = True) -> None:
        """Forget ``browser``, killing its process unless ``kill`` is False (it closed:
        its pid may already be another process's)."""
        browser.dead = True
        spare, browser.spare = browser.spare, None
        if spare is not None:  # its guard stops when it is done
            spare.add_done_callback(_close_context_of)
        if browser in self._idle:
            self._idle.remove(browser)
        if browser in self._all:
            self._all.remove(browser)
        if browser.pid and kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(browser.pid, signal.SIGKILL)

    @property
    def pids(self) -> list[int]:
        """The live browsers' process ids."""
        return [b.pid for b in self._all if b.pid and not b.dead]

    @property
    def leased_pids(self) -> list[int]:
        """The process ids of the browsers leased to episodes now."""
        return [b.pid for b in self._all if b.pid and not b.dead and b.leased]

    def close(self) -> None:
        """Stop every browser and the pool's loop. The pool is unusable afterwards."""
        if self._closed:
            return
        self._closed = True
        live = [b for b in self._all if not b.dead]
        if live and self._playwright is not None:
            # Closed, not killed: a killed Chromium leaves its singleton folder in /tmp.
            async def close_all() -> None:
                await asyncio.wait_for(asyncio.gather(
                    *(b.browser.close() for b in live), return_exceptions=True), 10)

            with contextlib.suppress(Exception):
                self._thread.run(close_all())
        for browser in list(self._all):
            closed = browser in live and not browser.browser.is_connected()
            self._drop(browser, kill=not closed)  # what did not close in time is killed
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                self._thread.run(asyncio.wait_for(self._playwright.stop(), 10))
        self._thread.stop()
        if self._proxy_socket is not None:
            self._proxy_socket.close()


async def _open_afresh(made: _Context, url: str) -> None:
    """Load ``url`` in ``made``'s tab as a new document with no history behind it."""
    await made.page.goto(url, wait_until="load", timeout=30_000)
    await made.watch.cdp.send("Page.resetNavigationHistory")
    made.watch.inflight.clear()


def _fits(browser: _Browser, origins: tuple[str, ...], preload: str | None) -> bool:
    """``browser``'s spare can serve a lease of ``origins`` and ``preload``: a fresh
    context made for the same preload, or a reused tab of the same origins (a tab at
    another page of them is a navigation away; the lessee opens its page, a new document)."""
    if browser.spare is None:
        return False
    if browser.spare_origins is None:
        return browser.spare_preload == preload
    return browser.spare_origins == origins


def _reusable(session: BrowserSession) -> bool:
    """``session``'s tab can serve another episode: one page, open, on its origins."""
    if len(session.pages) != 1 or session.pages[0].is_closed():
        return False
    with contextlib.suppress(ValueError):
        return origin_of(session.pages[0].url) in session.origins
    return False


def _parse_body(body: str | None) -> Any:
    """A request body as JSON, or form fields (first values), or the text."""
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        pass
    fields = urllib.parse.parse_qs(body, keep_blank_values=True)
    return {k: v[0] if len(v) == 1 else v for k, v in fields.items()} if fields else body


_closing: set[asyncio.Future] = set()  # contexts being closed (asyncio keeps weak refs)


def _close_context_of(spare: asyncio.Future) -> None:
    """Close the context (and stop the guard) of a spare that a session could not use."""
    if not spare.cancelled() and spare.exception() is None:
        made = spare.result()
        made.guard.close()
        _close_soon(made.context)


def _close_soon(context: Any) -> None:
    """Close ``context`` in the background (on the running loop), errors ignored."""
    async def close() -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(context.close(), 10)

    _closing.add(task := asyncio.ensure_future(close()))
    task.add_done_callback(_closing.discard)


def _refusing_port() -> socket.socket:
    """A socket bound to a free port on 127.0.0.1 that never listens: connections to it
    are refused, which makes it a proxy through which nothing passes."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


def _find_pid(marker: str) -> int | None:
    """The pid of the browser process launched with ``marker`` among its flags."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker.encode() in argv and not any(a.startswith(b"--type=") for a in argv):
            return int(entry.name)
    return None


_pool: BrowserPool | None = None
_pool_pid: int | None = None
_pool_lock = threading.Lock()


def default_max_busy() -> int:
    """Browser operations at once: ``AGENTGYM_BROWSER_BUSY``, else twice the CPUs this
    process may use (at least 2)."""
    value = os.environ.get("AGENTGYM_BROWSER_BUSY", "")
    if value:
        if not value.strip().isdigit() or int(value) < 1:
            raise InvalidArgumentError(
                f"AGENTGYM_BROWSER_BUSY={value!r} is not a whole number >= 1: set it to the"
                " browser operations to run at once, e.g. 8")
        return int(value)
    return max(2, 2 * len(os.sched_getaffinity(0)))


def browser_pool() -> BrowserPool:
    """The process's :class:`BrowserPool` (made on first use; a forked child makes its
    own, since browsers and threads do not survive a fork)."""
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool, _pool_pid = BrowserPool(), os.getpid()
        return _pool


@atexit.register
def _close_pool() -> None:
    if _pool is not None and _pool_pid == os.getpid():
        _pool.close()
