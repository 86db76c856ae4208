"""agentgym.core.serving: an ASGI app on loopback, started and stopped from a thread."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

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


def test_a_taken_port_is_a_clear_error():
    with LocalServer(APP) as server, pytest.raises(ServerStartError,
                                                   match=f"127.0.0.1:{server.port}.*port"):
        LocalServer(APP, port=server.port)
