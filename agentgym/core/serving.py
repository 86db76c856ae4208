"""Loopback HTTP servers: every server agentgym starts is an ASGI app served here.

The viewer, the local web sites, the MiniWoB++ page server (and the model server and capture
proxy to come) are Starlette apps; this module runs one on uvicorn in a background thread,
bound to ``127.0.0.1`` (agentgym never listens on another address unless told: a sandbox's or
a browser's traffic must not leave the machine), on a port the OS picks unless one is asked
for. Servers a user starts to share an env (``agentgym mcp serve``, ``agentgym openenv
serve``) may name another ``host``, and only with ``allow_remote=True`` (their CLI's
``--allow-remote``): :func:`check_host` refuses it otherwise.

    server = LocalServer(app).start()       # returns once the port accepts connections
    requests.get(server.url + "/path")
    server.close()                           # stops accepting, finishes open requests, joins

or ``with LocalServer(app) as server: ...``; ``LocalServer(app, port=8000).serve()`` runs in
the calling thread until interrupted (``agentgym view``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import threading
import time
from typing import Any

LOOPBACK = "127.0.0.1"


class ServerStartError(RuntimeError):
    """The server could not bind its port or did not come up."""


class LocalServer:
    """An ASGI ``app`` on uvicorn at ``http://127.0.0.1:PORT`` (``port=0``: a free port), or
    on the Unix socket at path ``uds`` (which a folder bound into a sandbox can expose to
    it alone; no TCP port is opened then).

    ``name`` names the thread (and appears in errors); ``startup_timeout`` bounds how long
    ``start`` waits for the server to accept connections; ``host`` is another address to
    listen on, refused unless ``allow_remote`` (:func:`check_host`); ``lifespan`` runs the
    app's startup and shutdown events (apps that start a task group there, such as an MCP
    streamable-HTTP app).
    """

    def __init__(self, app: Any, *, port: int = 0, name: str = "agentgym-http",
                 startup_timeout: float = 30.0, uds: str | os.PathLike | None = None,
                 host: str = LOOPBACK, allow_remote: bool = False,
                 lifespan: bool = False) -> None:
        import uvicorn  # lazy: importing agentgym.core must stay cheap

        self.host = check_host(host, allow_remote)
        self.name = name
        self._startup_timeout = startup_timeout
        self.uds = None if uds is None else os.fspath(uds)
        if self.uds is not None:
            self._socket = _unix_socket(self.uds, name)
            self.port = 0
        else:
            self._socket = self._tcp_socket(port)
            self.port = self._socket.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="on" if lifespan else "off",
            timeout_graceful_shutdown=5, timeout_keep_alive=30))
        self._thread: threading.Thread | None = None

    def _tcp_socket(self, port: int) -> socket.socket:
        name = self.name
        # IPPROTO_TCP named, not 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only
        # on sockets whose proto says TCP. With it on, a response written in two parts
        # (headers, body) waited for the client's delayed ACK: 44 ms a request on a
        # kept-alive connection instead of 0.3.
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        listening = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listening.bind((self.host, port))
        except OSError as error:
            listening.close()
            raise ServerStartError(
                f"{name}: cannot listen on {self.host}:{port} ({error}); pick another port,"
                " or 0 for any free one") from error
        listening.listen(2048)
        return listening

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (or the ``host`` it listens on); on a Unix socket,
        ``http://localhost`` (the host an HTTP client sends, through a transport on
        :attr:`uds`)."""
        if self.uds is not None:
            return "http://localhost"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> LocalServer:
        """Serve in a daemon thread; return once connections are accepted."""
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self._startup_timeout
        while not self._server.started:
            if not self._thread.is_alive():
                self.close()
                raise ServerStartError(f"{self.name} stopped before it accepted connections")
            if time.monotonic() > deadline:
                self.close()
                raise ServerStartError(
                    f"{self.name} did not start within {self._startup_timeout:.0f} s")
            time.sleep(0.005)
        return self

    def serve(self) -> None:
        """Serve in the calling thread until interrupted (Ctrl-C) or ``close``d."""
        try:
            self._run()
        finally:
            self._socket.close()

    def _run(self) -> None:
        self._server.run(sockets=[self._socket])

    def close(self) -> None:
        """Stop: finish open requests (up to 5 s), close the port (or remove the socket
        file), join the thread."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        with contextlib.suppress(OSError):
            self._socket.close()
        if self.uds is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.uds)

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) means this machine only."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_host(host: str, allow_remote: bool = False) -> str:
    """``host`` to listen on: a loopback address always; any other only with
    ``allow_remote`` (anyone who can reach it can then play, or drive, what is served)."""
    from agentgym.core.errors import InvalidArgumentError

    if not host:
        raise InvalidArgumentError("host='' names no address; the default is 127.0.0.1")
    if not is_loopback(host) and not allow_remote:
        raise InvalidArgumentError(
            f"host={host!r} is not a loopback address: agentgym serves on 127.0.0.1 only"
            " unless told; pass allow_remote=True (--allow-remote) to listen there, or"
            " leave host at 127.0.0.1")
    return "127.0.0.1" if host.lower() == "localhost" else host.strip("[]")


def _unix_socket(path: str, name: str) -> socket.socket:
    """A listening Unix socket at ``path`` that any local user may connect to (a sandbox's
    user is not the server's): the socket is the only way in, so its mode is 0666."""
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISSOCK(os.stat(path).st_mode):
                os.unlink(path)  # a stale socket of a server that died
        listening.bind(path)
        os.chmod(path, 0o666)
    except OSError as error:
        listening.close()
        raise ServerStartError(f"{name}: cannot listen on the Unix socket {path} ({error});"
                               " pick a path in a folder you may write") from error
    listening.listen(2048)
    return listening
