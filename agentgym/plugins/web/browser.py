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

**Failures.** A browser whose process exits (killed, crashed) or that does not answer a
call within its deadline (hung: its process is then killed) raises
:class:`BrowserCrashed`, a :class:`~agentgym.core.sandbox.SandboxError`: the rollout loop
ends that episode with finish reason ``sandbox_error``. The pool drops the dead browser and
launches another for the next lease, so no other episode notices.

**Network.** Every browser sends all traffic through a proxy address on 127.0.0.1 where
nothing listens (a bound port that never accepts), bypassed only for loopback hosts
(``127.0.0.1``, ``localhost``, ``[::1]``) and the hosts a session allows. Any other request
fails in the browser; :attr:`BrowserSession.blocked` lists the URLs that tried.
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

from agentgym.core.errors import MissingResourceError
from agentgym.core.loop_thread import LoopThread
from agentgym.core.sandbox import SandboxError

T = TypeVar("T")

#: Chromium's flags (MACHINE.md): headless, no GPU, no background traffic of its own.
LAUNCH_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
               "--disable-extensions", "--mute-audio")
#: Hosts every session may reach.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
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


def is_loopback_url(url: str, allowed_hosts: Sequence[str] = ()) -> bool:
    """Whether ``url`` stays on this machine (or on one of ``allowed_hosts``): what a page
    may request. ``data:``, ``blob:`` and ``about:`` URLs never leave the browser."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme in ("data", "blob", "about", "chrome-error"):
        return True
    host = (parts.hostname or "").lower()
    return host in ("127.0.0.1", "localhost", "::1") or host in allowed_hosts


@dataclass
class _Browser:
    """One Chromium process and its spare context."""

    browser: Any
    pid: int | None
    spare: asyncio.Task | None = None
    spare_preload: str | None = None
    dead: bool = False
    leased: bool = False


@dataclass
class BrowserSession:
    """One episode's browser context: its pages (tabs), the active page, the requests it
    tried that were blocked. Every method runs on the pool's loop; call them from any
    loop. Only :class:`BrowserPool` makes one."""

    pool: BrowserPool
    _browser: _Browser
    context: Any
    pages: list[Any]
    allowed_hosts: tuple[str, ...] = ()
    #: The URL the lessee expects to open first: its browser's next spare context loads it
    #: ahead of time, so the next lease of the same kind finds it loaded.
    preload: str | None = None
    blocked: list[str] = field(default_factory=list)
    #: The requests the episode's pages made, in order: ``url``, ``method``, ``post_data``
    #: (parsed JSON or form fields, else the text) and, once answered, ``status``.
    requests: list[dict[str, Any]] = field(default_factory=list)
    active: int = 0
    closed: bool = False
    _cdp: dict[int, Any] = field(default_factory=dict)

    @property
    def page(self) -> Any:
        """The active tab."""
        return self.pages[self.active]

    async def run(self, work: Callable[[BrowserSession], Awaitable[T]],
                  timeout: float = 30.0) -> T:
        """Run ``work(self)`` on the pool's loop within ``timeout`` seconds. A browser that
        is dead, or that does not finish in time, raises :class:`BrowserCrashed` (and a
        hung one is killed)."""
        return await self.pool.call(self._guarded(work, timeout))

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
        session = self._cdp.get(id(page))
        if session is None:
            session = self._keep_cdp(page, await self.context.new_cdp_session(page))
        return session

    def _keep_cdp(self, page: Any, session: Any) -> Any:
        self._cdp[id(page)] = session
        page.once("close", lambda _p: self._cdp.pop(id(page), None))
        return session

    def _all_pages_closed(self) -> bool:
        return all(page.is_closed() for page in self.pages)

    def _check_alive(self) -> None:
        if self._browser.dead:
            raise BrowserCrashed("the browser process exited (killed or crashed); this"
                                 " episode cannot go on")

    def track(self, page: Any) -> Any:
        """Watch ``page``'s requests: each is recorded in :attr:`requests`, and those
        leaving loopback (and the allowed hosts) in :attr:`blocked` (the proxy has already
        refused them)."""
        answered: dict[int, dict[str, Any]] = {}

        def on_request(request: Any) -> None:
            if not is_loopback_url(request.url, self.allowed_hosts):
                self.blocked.append(request.url)
            if len(self.requests) < 5000:
                entry = {"url": request.url, "method": request.method,
                         "post_data": _parse_body(request.post_data)}
                self.requests.append(entry)
                answered[id(request)] = entry

        def on_response(response: Any) -> None:
            entry = answered.pop(id(response.request), None)
            if entry is not None:
                entry["status"] = response.status

        page.on("request", on_request)
        page.on("response", on_response)
        return page


class BrowserPool:
    """Chromium processes shared by every web episode of a process (module docstring).

    Args:
        executable: the Chromium binary (default: :func:`chromium_path`).
        max_idle: idle browsers kept warm; more are closed when released.
    """

    def __init__(self, executable: str | None = None, max_idle: int = 8):
        self.executable = executable or chromium_path()
        self.max_idle = max_idle
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

    # ---- leases ---------------------------------------------------------------------------

    async def lease(self, allowed_hosts: Sequence[str] = (), cookies: Sequence[dict] = (),
                    preload: str | None = None) -> BrowserSession:
        """A browser with a fresh context (and one page) for one episode, from any loop.
        ``allowed_hosts``: hosts besides loopback its pages may reach; ``cookies``: set on
        the context before anything loads; ``preload``: a page that needs no cookies and
        that the lessee opens first (static pages such as MiniWoB's): fresh contexts made
        for later leases load it ahead of time, untouched until leased (the session's page
        is then already at that URL)."""
        return await self.call(self._lease(tuple(allowed_hosts), list(cookies), preload))

    async def prepare_next(self, session: BrowserSession) -> None:
        """Start the context the next lease of ``session``'s browser will get, while
        ``session``'s episode runs. Call it once the episode's first page is up: made
        earlier, it would compete with that page for the CPU."""
        await self.call(self._prepare_next(session))

    async def _prepare_next(self, session: BrowserSession) -> None:
        browser = session._browser
        if browser.spare is None and not browser.dead and not session.closed:
            self._make_spare(browser, session.preload)

    async def release(self, session: BrowserSession) -> None:
        """End ``session``: close its context and return its browser to the pool."""
        await self.call(self._release(session))

    async def _lease(self, allowed_hosts: tuple[str, ...], cookies: list[dict],
                     preload: str | None) -> BrowserSession:
        for _ in range(3):  # a spare context of a browser that just died: try another
            browser = await self._take()
            spare, browser.spare = browser.spare, None
            try:
                if allowed_hosts or spare is None or browser.spare_preload != preload:
                    if spare is not None:
                        spare.add_done_callback(_close_context_of)
                    context, page, cdp = await self._new_context(browser, allowed_hosts, None)
                else:
                    context, page, cdp = await spare
                if cookies:
                    await context.add_cookies(cookies)
            except Exception as error:
                if not browser.dead and browser.browser.is_connected():
                    browser.leased = False
                    self._idle.append(browser)
                    raise BrowserCrashed(f"a browser context could not be opened: {error}"
                                         ) from error
                self._drop(browser)
                continue
            session = BrowserSession(self, browser, context, [page], allowed_hosts, preload)
            session.track(page)
            session._keep_cdp(page, cdp)
            context.on("page", lambda p, s=session: s.pages.append(s.track(p)))
            return session
        raise BrowserCrashed("three browsers in a row died while opening a context")

    async def _take(self) -> _Browser:
        while self._idle:
            browser = self._idle.pop()
            if not browser.dead and browser.browser.is_connected():
                browser.leased = True
                return browser
            self._drop(browser)
        browser = await self._launch()
        browser.leased = True
        return browser

    async def _release(self, session: BrowserSession) -> None:
        if session.closed:
            return
        session.closed = True
        browser = session._browser
        browser.leased = False
        if browser.dead or not browser.browser.is_connected():
            self._drop(browser)
        elif len(self._idle) >= self.max_idle or self._closed:
            self._drop(browser)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(browser.browser.close(), 10)
        else:
            # The next lease uses the spare context, so the old one can close while the
            # next episode starts: that is off the reset's path.
            _close_soon(session.context)
            if browser.spare is None:
                self._make_spare(browser, session.preload)
            self._idle.append(browser)

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
                proxy={"server": f"http://127.0.0.1:{port}",
                       "bypass": ",".join(LOOPBACK_HOSTS)})
        except Exception as error:
            raise BrowserCrashed(f"Chromium ({self.executable}) did not start: {error}"
                                 ) from error
        self.launches += 1
        record = _Browser(browser, _find_pid(marker))
        browser.on("disconnected", lambda _b: setattr(record, "dead", True))
        self._all.append(record)
        return record

    def _make_spare(self, browser: _Browser, preload: str | None) -> None:
        spare = asyncio.ensure_future(self._new_context(browser, (), preload))
        # A spare of a browser that dies or closes fails unseen; a lease that takes it
        # still gets its error when it awaits it.
        spare.add_done_callback(lambda f: f.cancelled() or f.exception())
        browser.spare, browser.spare_preload = spare, preload

    async def _new_context(self, browser: _Browser, allowed_hosts: tuple[str, ...],
                           preload: str | None) -> tuple[Any, Any, Any]:
        options: dict[str, Any] = {"viewport": VIEWPORT, "service_workers": "block"}
        if allowed_hosts:
            port = self._proxy_socket.getsockname()[1]
            options["proxy"] = {"server": f"http://127.0.0.1:{port}",
                                "bypass": ",".join((*LOOPBACK_HOSTS, *allowed_hosts))}
        context = await browser.browser.new_context(**options)
        page = await context.new_page()
        cdp = await context.new_cdp_session(page)  # observations use it: ready ahead
        if preload:
            with contextlib.suppress(Exception):  # the lessee will load it itself
                await page.goto(preload, wait_until="domcontentloaded", timeout=30_000)
        return context, page, cdp

    def _drop(self, browser: _Browser) -> None:
        browser.dead = True
        if browser in self._idle:
            self._idle.remove(browser)
        if browser in self._all:
            self._all.remove(browser)
        if browser.pid:
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
        for browser in list(self._all):
            self._drop(browser)
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                self._thread.run(asyncio.wait_for(self._playwright.stop(), 10))
        self._thread.stop()
        if self._proxy_socket is not None:
            self._proxy_socket.close()


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
    """Close the context of a spare that a session could not use."""
    if not spare.cancelled() and spare.exception() is None:
        _close_soon(spare.result()[0])


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
