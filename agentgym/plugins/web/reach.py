"""What a web episode's browser may reach: its env's own origins, and nothing else.

An episode's pages may request only the origins (scheme, host, port) its env names: the
site's server, MiniWoB's static server, the WebArena base URLs. Any other address is
refused, whoever asks (a ``goto``, a link, a form, a redirect, an iframe, a fetch, a worker,
a WebSocket, a popup), on this machine's loopback as anywhere else: another service on
``127.0.0.1`` (``agentgym view``, a training dashboard, another episode's site) is out of
reach. Two layers enforce it, both on the addresses Chromium itself parsed (so
``http://a\\@127.0.0.1/``, ``http://127.1:PORT`` or ``http://0x7f000001:PORT`` are judged as
Chromium reads them, not as Python would):

* **Request routing** (:func:`install_routes`): the episode's browser context routes every
  request and WebSocket whose URL is not on an allowed origin to a refusal
  (``ERR_BLOCKED_BY_CLIENT``), recorded in :attr:`BrowserSession.blocked
  <agentgym.plugins.web.browser.BrowserSession.blocked>`. Routing covers navigations,
  subresources, fetch/XHR, iframes, popups and workers; service workers are blocked
  outright when the context is made.
* **The connection guard** (:class:`ConnectionGuard`): the context's only proxy is a SOCKS5
  server on 127.0.0.1 that opens connections to allowed ``host:port`` pairs only, loopback
  included (Chromium is told not to bypass the proxy for loopback). It holds what routing
  does not see: the hops of a redirect (Playwright continues them unrouted), preconnects,
  anything a later Chromium adds.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import re
import socket
import struct
import urllib.parse
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from agentgym.core.errors import InvalidArgumentError
from agentgym.core.loop_thread import LoopThread

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
#: WebSocket schemes and the HTTP scheme of the same origin.
_WS = {"ws": "http", "wss": "https"}


def origin_of(url: str) -> str:
    """``url``'s origin as Chromium writes it: ``scheme://host[:port]``, lower case, the
    default port left out, IPv6 hosts in brackets. Only http(s) URLs have one here."""
    parts = urllib.parse.urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise InvalidArgumentError(f"{url!r} is not an http(s) URL with a host: an episode's"
                                   " origins are its sites' base URLs")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    return f"{scheme}://{host}" + (f":{port}" if port and port != _DEFAULT_PORTS[scheme] else "")


def endpoint_of(origin: str) -> tuple[str, int]:
    """The ``(host, port)`` a connection to ``origin`` opens (IPv6 without brackets)."""
    parts = urllib.parse.urlsplit(origin)
    return (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS[parts.scheme]


def _not_on(origins: Iterable[str], schemes: dict[str, str] | None = None) -> re.Pattern:
    """A regex that matches every URL *not* on one of ``origins`` (for WebSockets:
    ``schemes`` maps ``ws``/``wss`` to the origin's http scheme)."""
    alternatives = []
    for origin in origins:
        scheme, rest = origin.split("://", 1)
        if schemes is not None:
            scheme = next(ws for ws, http in schemes.items() if http == scheme)
        alternatives.append(_js_escape(f"{scheme}://{rest}"))
    # An empty list of origins matches everything.
    allowed = "|".join(alternatives) or "(?!)"
    return re.compile(rf"^(?!(?:{allowed})(?:[/?#]|$))")


def _js_escape(text: str) -> str:
    """``text`` as a regex literal that Python and JavaScript read alike."""
    return re.sub(r"([.*+?^${}()|\[\]\\/])", r"\\\1", text)


async def install_routes(context: Any, origins: Iterable[str],
                         blocked: Callable[[str], None]) -> None:
    """Route every request and WebSocket of ``context`` that is not on ``origins`` to a
    refusal, calling ``blocked(url)`` for each (module docstring)."""
    origins = tuple(origins)

    async def refuse(route: Any) -> None:
        blocked(route.request.url)
        with contextlib.suppress(Exception):  # the page may be gone already
            await route.abort("blockedbyclient")

    async def refuse_socket(socket_route: Any) -> None:
        blocked(socket_route.url)
        with contextlib.suppress(Exception):
            await socket_route.close(code=1008, reason="blocked: not this episode's site")

    await context.route(_not_on(origins), refuse)
    await context.route_web_socket(_not_on(origins, _WS), refuse_socket)


class ConnectionGuard:
    """A SOCKS5 proxy on 127.0.0.1 that connects only to the ``host:port`` pairs it
    allows (module docstring); one per browser context. Serve it with
    :func:`start_guard`; :meth:`allow` sets what it allows, :meth:`close` stops it."""

    def __init__(self, refused: Callable[[str], None] | None = None):
        self.allowed: frozenset[tuple[str, int]] = frozenset()
        self.refused = refused
        self.port = 0
        self._server: asyncio.AbstractServer | None = None
        self._thread: LoopThread | None = None
        self._links: set[asyncio.Task] = set()

    def allow(self, origins: Iterable[str]) -> None:
        """Allow connections to the endpoints of ``origins`` (and to nothing else)."""
        self.allowed = frozenset(endpoint_of(origin) for origin in origins)

    @property
    def proxy(self) -> dict[str, str]:
        """The ``proxy`` option of a Playwright context that sends everything through this
        guard (an empty bypass list: loopback too)."""
        return {"server": f"socks5://127.0.0.1:{self.port}", "bypass": ""}

    def close(self) -> None:
        """Stop listening and cut every open link."""
        server, self._server = self._server, None
        if server is None or self._thread is None:
            return

        async def stop() -> None:
            server.close()
            for link in list(self._links):
                link.cancel()

        with contextlib.suppress(Exception):
            self._thread.submit(stop())

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._links.add(task)
        try:
            await self._link(reader, writer)
        except (OSError, asyncio.IncompleteReadError, ValueError, asyncio.CancelledError):
            pass  # a link cut by either side, or by close(): nothing to report
        finally:
            if task is not None:
                self._links.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        version, count = await reader.readexactly(2)
        await reader.readexactly(count)
        if version != 5:
            return
        writer.write(b"\x05\x00")  # no authentication
        _, command, _, kind = await reader.readexactly(4)
        if kind == 1:
            host = socket.inet_ntop(socket.AF_INET, await reader.readexactly(4))
        elif kind == 4:
            host = socket.inet_ntop(socket.AF_INET6, await reader.readexactly(16))
        elif kind == 3:
            host = (await reader.readexactly((await reader.readexactly(1))[0])).decode("idna")
        else:
            return
        (port,) = struct.unpack("!H", await reader.readexactly(2))
        host = _canonical_host(host)
        if command != 1 or (host, port) not in self.allowed:
            if self.refused is not None:
                self.refused(f"{host}:{port}")
            writer.write(b"\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00")  # not allowed
            await writer.drain()
            return
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.write(b"\x05\x05\x00\x01\x00\x00\x00\x00\x00\x00")  # refused
            await writer.drain()
            return
        writer.write(b"\x05\x00\x00\x01\x00\x00\x00\x00\x00\x00")
        await writer.drain()
        try:
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        finally:
            with contextlib.suppress(Exception):
                upstream_writer.close()


def _canonical_host(host: str) -> str:
    host = host.lower().strip("[]")
    with contextlib.suppress(ValueError):
        return str(ipaddress.ip_address(host))
    return host


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(Exception):
            writer.write_eof()


_guard_thread: LoopThread | None = None
_guard_pid = 0
_guards: weakref.WeakSet[ConnectionGuard] = weakref.WeakSet()


def guard_ports() -> set[int]:
    """The ports of this process's listening guards (not services an episode could want)."""
    return {guard.port for guard in list(_guards) if guard._server is not None}


async def start_guard(refused: Callable[[str], None] | None = None) -> ConnectionGuard:
    """A new :class:`ConnectionGuard`, listening on a free port of 127.0.0.1 (served by the
    process's guard thread, so that relaying bytes never waits on the browsers' loop), and
    allowing nothing yet."""
    global _guard_thread, _guard_pid
    if _guard_thread is None or _guard_pid != os.getpid():  # a forked child makes its own
        _guard_thread, _guard_pid = LoopThread("agentgym-web-guard"), os.getpid()
    guard = ConnectionGuard(refused)
    guard._thread = _guard_thread

    async def listen() -> None:
        guard._server = await asyncio.start_server(guard._serve, "127.0.0.1", 0)
        guard.port = guard._server.sockets[0].getsockname()[1]

    await asyncio.wrap_future(_guard_thread.submit(listen()))
    _guards.add(guard)
    return guard
