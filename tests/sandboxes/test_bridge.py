"""The bridge: a host server on a Unix socket, reached from inside a sandbox through a
relay on the sandbox's own loopback; the host's loopback stays out of reach."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from agentgym.core.errors import InvalidArgumentError
from agentgym.core.sandbox import SandboxError
from agentgym.core.serving import LocalServer
from agentgym.sandboxes.bridge import bridge_mounts, start_bridge


async def hello(request):
    body = await request.body()
    return PlainTextResponse(f"hello from the host: {body.decode()}")


APP = Starlette(routes=[Route("/hello", hello, methods=["GET", "POST"])])

#: A client in the sandbox, with python3 (which the relay needs anyway), not curl: prints
#: the answer, or exits 1 with the error.
CLIENT = """\
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], data=sys.argv[2].encode(), timeout=5) as r:
        print(r.read().decode(), end="")
except OSError as error:
    sys.exit(f"unreachable: {error}")
"""


def post(box, run, url: str, body: str = "", timeout: float = 30):
    run(box.write_file("/tmp/client.py", CLIENT))
    return run(box.exec(f"python3 /tmp/client.py {url} '{body}'", timeout=timeout))


@pytest.fixture
def socket_path():
    # A short path (Unix socket paths are limited to 107 bytes), in a folder the sandbox's
    # user can enter.
    folder = Path(tempfile.mkdtemp(prefix="agentgym-bridge-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder / "proxy.sock"
    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()


def test_the_sandbox_reaches_the_bridged_server_and_not_the_host(make_sandbox, run,
                                                                  socket_path) -> None:
    with LocalServer(APP, uds=socket_path) as bridged, LocalServer(APP) as on_host:
        assert bridged.port == 0 and socket_path.is_socket()
        box = make_sandbox(mounts=bridge_mounts(socket_path))
        url = run(start_bridge(box, socket_path))
        reached = post(box, run, f"{url}/hello", "a call")
        assert reached.exit_code == 0 and reached.output == "hello from the host: a call"
        # Many calls, and calls at once, through the one relay.
        # (`wait` waits for these six only: the relay is not one of the shell's jobs.)
        several = run(box.exec(
            f"for i in 1 2 3 4 5 6; do python3 /tmp/client.py {url}/hello $i & done; wait",
            timeout=30))
        assert several.exit_code == 0
        assert sorted(several.output.split("hello from the host: ")[1:]) == list("123456")
        # The host's own loopback server is not reachable: the sandbox's 127.0.0.1 is its own.
        host = post(box, run, f"{on_host.url}/hello")
        assert host.exit_code != 0 and "unreachable" in host.output
        # Nor any other address: there is no route at all (192.0.2.1 is TEST-NET-1, a
        # documentation address, so a sandbox that had one would send nothing harmful).
        other = post(box, run, "http://192.0.2.1/hello")
        assert other.exit_code != 0 and "Network is unreachable" in other.output
    assert not socket_path.exists()  # the server removed its socket


def test_a_socket_in_a_shared_folder_is_refused(tmp_path) -> None:
    """The socket's folder is bound whole: one holding anything else would show it."""
    (tmp_path / "secret.txt").write_text("host data")
    with pytest.raises(InvalidArgumentError, match=r"secret\.txt.*folder of its own"):
        bridge_mounts(tmp_path / "proxy.sock")


def test_a_half_closed_request_still_gets_its_answer(make_sandbox, run, socket_path) -> None:
    """A client that shuts its sending side after the request reads the whole answer."""
    with LocalServer(APP, uds=socket_path):
        box = make_sandbox(mounts=bridge_mounts(socket_path))
        url = run(start_bridge(box, socket_path))
        port = url.rsplit(":", 1)[1]
        run(box.write_file("/tmp/half.py", (
            "import socket\n"
            f"s = socket.create_connection(('127.0.0.1', {port}))\n"
            "s.sendall(b'POST /hello HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 4\\r\\n"
            "Connection: close\\r\\n\\r\\nhalf')\n"
            "s.shutdown(socket.SHUT_WR)\n"
            "data = b''\n"
            "while chunk := s.recv(4096):\n"
            "    data += chunk\n"
            "print(data.decode().split('\\r\\n\\r\\n', 1)[1])\n")))
        answered = run(box.exec("python3 /tmp/half.py", timeout=30))
    assert answered.exit_code == 0 and answered.output.strip() == "hello from the host: half"


def test_a_sandbox_without_the_mounts_is_told_what_the_bridge_needs(make_sandbox, run,
                                                                     socket_path) -> None:
    box = make_sandbox()
    with pytest.raises(SandboxError, match=r"no relay script.*bridge_mounts"):
        run(start_bridge(box, socket_path))
    # With the mounts but no server on the socket, calls fail (the relay closes them).
    box = make_sandbox(mounts=bridge_mounts(socket_path))
    url = run(start_bridge(box, socket_path))
    failed = post(box, run, f"{url}/hello")
    assert failed.exit_code != 0 and "unreachable" in failed.output
