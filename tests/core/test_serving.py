"""agentgym.core.serving: an ASGI app on loopback, started and stopped from a thread."""

from __future__ import annotations

import ast
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

import agentgym
from agentgym.core.serving import LOOPBACK, LocalServer, ServerStartError


def hello(request):
    return PlainTextResponse(f"hello {request.query_params.get('name', '')}")


APP = Starlette(routes=[Route("/", hello)])


def test_a_server_answers_on_loopback_and_stops():
    with LocalServer(APP, name="test-http") as server:
        assert server.url == f"http://{LOOPBACK}:{server.port}" and server.port > 0
        with urllib.request.urlopen(server.url + "/?name=ada", timeout=5) as response:
            assert response.read() == b"hello ada"
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(server.url, timeout=2)


def test_connections_turn_nagle_off():
    """asyncio sets TCP_NODELAY on accepted connections only when the listening socket's
    proto says TCP; without it a kept-alive client waited 44 ms for every response (the
    server's second write held back until the client's delayed ACK)."""
    import asyncio
    import socket

    with LocalServer(APP, name="test-http") as server:
        listening = server._socket
        assert listening.proto == socket.IPPROTO_TCP

        async def accepted_nodelay() -> int:  # what asyncio does with such a socket
            loop = asyncio.get_running_loop()
            client = socket.create_connection(("127.0.0.1", server.port))
            try:
                probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM, listening.proto)
                probe.bind(("127.0.0.1", 0))
                probe.listen(1)
                other = socket.create_connection(probe.getsockname())
                conn, _ = probe.accept()
                conn.setblocking(False)
                transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, conn)
                value = conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                transport.close()
                other.close()
                probe.close()
                return value
            finally:
                client.close()

        assert asyncio.run(accepted_nodelay())


def test_a_taken_port_is_a_clear_error():
    with LocalServer(APP) as server, pytest.raises(ServerStartError,
                                                   match=f"127.0.0.1:{server.port}.*port"):
        LocalServer(APP, port=server.port)


#: The standard library's servers, which LocalServer replaces.
STDLIB_SERVERS = {"http.server", "socketserver"}


def stdlib_server_imports() -> list[str]:
    """Where a module under agentgym/ imports one of :data:`STDLIB_SERVERS`."""
    root = Path(agentgym.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:  # also `from http import server`
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            found += [f"{path.relative_to(root.parent)}:{node.lineno}: {name}"
                      for name in names if name in STDLIB_SERVERS]
    return found


def test_every_server_is_on_the_one_web_stack():
    """Every HTTP server agentgym starts is an ASGI app on LocalServer: none is built on
    ``http.server`` or ``socketserver``."""
    assert stdlib_server_imports() == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "127.0.0.2", "::1"])
def test_loopback_hosts_are_served_without_being_told(host):
    from agentgym.core.serving import check_host, is_loopback

    assert is_loopback(host)
    assert check_host(host) in {"127.0.0.1", "127.0.0.2", "::1"}


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::", "example.org"])
def test_other_hosts_are_refused_unless_told(host):
    from agentgym.core.errors import InvalidArgumentError
    from agentgym.core.serving import check_host

    with pytest.raises(InvalidArgumentError, match=r"allow_remote=True \(--allow-remote\)"):
        LocalServer(APP, host=host)
    assert check_host(host, allow_remote=True) == host


def test_the_serve_command_refuses_another_host_before_it_builds_anything(tmp_path):
    from click.testing import CliRunner

    from agentgym.cli import main

    result = CliRunner().invoke(main, ["serve", "hf:" + str(tmp_path), "--host", "0.0.0.0"])
    assert result.exit_code == 2, result.output
    assert "--allow-remote" in result.output and "0.0.0.0" in result.output
