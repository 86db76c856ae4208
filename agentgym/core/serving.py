"""Loopback HTTP servers: every server agentgym starts is an ASGI app served here.

The viewer, the local web sites, the MiniWoB++ page server (and the model server and capture
proxy to come) are Starlette apps; this module runs one on uvicorn in a background thread,
bound to ``127.0.0.1`` only (agentgym never listens on another address: a sandbox's or a
browser's traffic must not leave the machine), on a port the OS picks unless one is asked for.

    server = LocalServer(app).start()       # returns once the port accepts connections
    requests.get(server.url + "/path")
    server.close()                           # stops accepting, finishes open requests, joins

or ``with LocalServer(app) as server: ...``; ``LocalServer(app, port=8000).serve()`` runs in
the calling thread until interrupted (``agentgym view``).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any

LOOPBACK = "127.0.0.1"


class ServerStartError(RuntimeError):
    """The server could not bind its port or did not come up."""


class LocalServer:
    """An ASGI ``app`` on uvicorn at ``http://127.0.0.1:PORT`` (``port=0``: a free port).

    ``name`` names the thread (and appears in errors); ``startup_timeout`` bounds how long
    ``start`` waits for the server to accept connections.
    """

    def __init__(self, app: Any, *, port: int = 0, name: str = "agentgym-http",
                 startup_timeout: float = 30.0) -> None:
        import uvicorn  # lazy: importing agentgym.core must stay cheap

        self.name = name
        self._startup_timeout = startup_timeout
        # IPPROTO_TCP named, not 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only
        # on sockets whose proto says TCP. With it on, a response written in two parts
        # (headers, body) waited for the client's delayed ACK: 44 ms a request on a
        # kept-alive connection instead of 0.3.
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((LOOPBACK, port))
        except OSError as error:
            self._socket.close()
            raise ServerStartError(
                f"{name}: cannot listen on {LOOPBACK}:{port} ({error}); pick another port,"
                " or 0 for any free one") from error
        self._socket.listen(2048)
        self.port: int = self._socket.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off",
            timeout_graceful_shutdown=5, timeout_keep_alive=30))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

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
        """Stop: finish open requests (up to 5 s), close the port, join the thread."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        with contextlib.suppress(OSError):
            self._socket.close()

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
