"""Bridge: one host server reachable from inside a sandbox, and nothing else of the host.

A sandbox has no network (its own namespace with nothing but loopback on ``local``,
network ``none`` on ``docker``). To let a program in it (an agent harness) call one host
server (the capture proxy), the server listens on a Unix socket
(:class:`~agentgym.core.serving.LocalServer` with ``uds=``), whose folder is bound into the
sandbox read-only (:func:`bridge_mounts`, added to the spec's ``mounts``), and
:func:`start_bridge` runs a relay in the sandbox (:mod:`agentgym.sandboxes.forward`, any
``python3``) that listens on the sandbox's own ``127.0.0.1:PORT`` and forwards each
connection to that socket. The program inside uses ``http://127.0.0.1:PORT``; the host's
loopback and every other address stay out of reach, and the relay dies with the sandbox
(or its next ``fresh_session``).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from agentgym.core.errors import InvalidArgumentError
from agentgym.core.sandbox import Sandbox, SandboxError

__all__ = ["BRIDGE_PORT", "bridge_mounts", "start_bridge"]

#: The port the relay listens on inside the sandbox by default.
BRIDGE_PORT = 18080
#: Where the socket's folder and the relay script are bound inside the sandbox.
SOCKET_DIR = "/run/agentgym-bridge"
SCRIPT = "/opt/agentgym-bridge/forward.py"
_LOG = "/tmp/agentgym-bridge.log"


def bridge_mounts(socket_path: str | Path) -> dict[str, str]:
    """The mounts a sandbox spec needs for :func:`start_bridge` to reach ``socket_path``
    (a Unix socket on the host). Its folder is bound, so the socket may be made after the
    sandbox starts; that folder must hold nothing else, since all of it becomes visible
    inside."""
    socket_path = Path(socket_path)
    folder = socket_path.parent
    others = sorted(p.name for p in folder.iterdir() if p.name != socket_path.name) \
        if folder.is_dir() else []
    if not folder.is_dir() or others:
        raise InvalidArgumentError(
            f"socket_path={str(socket_path)!r}: its folder is bound into the sandbox whole,"
            + (f" and it holds {', '.join(others[:5])}" if others else " and it does not"
               " exist")
            + "; give the socket a folder of its own (tempfile.mkdtemp(), mode 0755)")
    return {SOCKET_DIR: str(folder),
            SCRIPT: str(Path(__file__).with_name("forward.py"))}


async def start_bridge(box: Sandbox, socket_path: str | Path, port: int = BRIDGE_PORT,
                       python: str = "python3") -> str:
    """Start the relay in ``box`` (opened with :func:`bridge_mounts`); returns the URL
    that reaches the host server from inside, ``http://127.0.0.1:PORT``."""
    inside = f"{SOCKET_DIR}/{Path(socket_path).name}"
    # Started from a subshell, the relay is not one of the session shell's jobs (a `wait`
    # in a later command does not wait for it); the wait for it runs in a subshell too, so
    # its exit ends only the wait, never the session shell.
    relay = f"{shlex.quote(python)} {SCRIPT} {int(port)} {shlex.quote(inside)}"
    started = await box.exec(
        f"test -f {SCRIPT} || {{ echo 'no relay script at {SCRIPT}'; false; }} &&"
        f" ( nohup {relay} > {_LOG} 2>&1 & echo $! > {_LOG}.pid ) &&"
        f" ( for _ in $(seq 200); do grep -q ready {_LOG} && exit 0;"
        f" kill -0 $(cat {_LOG}.pid) 2>/dev/null || break; sleep 0.05; done;"
        f" cat {_LOG}; exit 1 )", timeout=30)
    if started.exit_code != 0:
        raise SandboxError(
            f"the bridge to {socket_path} did not start in the sandbox: {started.output.strip()}"
            f" (it needs {python} inside, and the spec's mounts from bridge_mounts())")
    return f"http://127.0.0.1:{int(port)}"
