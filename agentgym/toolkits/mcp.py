"""MCP tools in: the tools of Model Context Protocol servers, offered to the agent.

An env lists the MCP servers its episodes use (:class:`MCPServer`); each episode gets its
own connection to each, and the servers' tools become the agent's, with their schemas
(names, descriptions, JSON schemas as the server lists them), their results as text and
their errors as messages the agent sees. Built on the official ``mcp`` SDK, the optional
extra ``pip install 'agentgym[mcp]'``.

**Where a server runs.** A stdio server (``command``) runs *inside the episode's sandbox*
when the env has one: its state (the repository it edits, the database it writes) is the
episode's, graded like anything else there, and it sees nothing of the host. Its Python
packages (``requirements``) are installed once on the host into a read-only environment
(:mod:`agentgym.core.pyenv`) mounted at ``/opt/agentgym-mcp/NAME``, so its command is
usually ``["{env}/bin/python", "-m", "the_server", ...]`` (``{env}`` is replaced by that
mount). The server's stdin and stdout reach the host through a Unix socket in a folder of
the episode's own, bound into the sandbox: a launcher connects to it, then becomes the
server with the socket as its stdio. ``on_host=True`` runs the command on the host
instead (a server with no state of the episode's, such as a clock), and ``url`` connects to
a streamable-HTTP server that is already running (on the loopback unless the server says
``allow_remote=True``).

**What the agent sees.** A tool's result is its text content (other content is named,
``[image/png, 2 KB]``), or its structured content as JSON when it has no text; cut in the
middle past ``max_output_chars``. A result the server flags as an error
(``isError``) and a call the server refuses (unknown tool, bad arguments) are tool errors:
messages to the agent, the episode goes on. A call that outlives the turn's time budget
(or ``call_timeout_s``) is stopped and reported the same way.

**What ends an episode.** A server that does not start (its command fails, it never
connects, its handshake fails within ``start_timeout_s``), that exits or whose connection
breaks mid-episode, or that answers with what is not MCP: :class:`MCPServerError`, a
:class:`~agentgym.core.sandbox.SandboxError`, so the episode ends with the reason and the
rollout goes on. Nothing waits without a bound.

**Tools are known before any episode.** The agent's tool schemas are part of every
episode's first observation, so an env lists each server's tools once, when first asked
(:func:`discover_tools`): the server is started as an episode would start it (in a
sandbox of the env's first task), listed, and stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agentgym.core.episode import turn_time_left
from agentgym.core.errors import InvalidArgumentError, MissingResourceError
from agentgym.core.sandbox import Sandbox, SandboxError
from agentgym.core.tools import Tool, ToolError, Toolset
from agentgym.core.waiting import wait_within

__all__ = ["MCP_MOUNT", "MCPServer", "MCPServerError", "MCPSession", "MCPTools",
           "discover_tools", "mcp_toolset"]

#: Where a server's Python environment is mounted inside the sandbox (``/NAME`` added).
MCP_MOUNT = "/opt/agentgym-mcp"
#: Where an episode's socket folder is bound inside the sandbox.
SOCKET_MOUNT = "/run/agentgym-mcp"
#: The launcher run inside the sandbox: connect to the socket, then become the server with
#: the connection as stdin and stdout (its stderr goes to a log in /tmp).
_LAUNCH = ("import os,socket,sys;s=socket.socket(socket.AF_UNIX);s.connect(sys.argv[1]);"
           "os.dup2(s.fileno(),0);os.dup2(s.fileno(),1);s.close();"
           "os.execvp(sys.argv[2],sys.argv[2:])")
#: One message of a server longer than this is not MCP (and would hold the host's memory).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,39}")


class MCPServerError(SandboxError):
    """An episode's MCP server did not start, died, or spoke something other than MCP: the
    episode cannot go on, and ends with this reason (never the batch)."""


def _require_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as missing:
        raise MissingResourceError(
            f"MCP servers need the mcp SDK ({missing})",
            "install agentgym's extra from its source folder: pip install -e '.[mcp]'"
        ) from None


@dataclass(frozen=True)
class MCPServer:
    """An MCP server an env's episodes use (module docstring).

    Args:
        name: what errors and the logs call it, and its environment's mount folder
            (letters, digits, ``_`` and ``-``).
        command: a stdio server's command line, run in the episode's sandbox (``{env}`` is
            replaced by where ``requirements`` are mounted), or on the host with
            ``on_host``.
        url: a streamable-HTTP server's URL, instead of ``command``.
        requirements: pip specifiers for a stdio server's Python environment (built once on
            the host, mounted read-only at ``/opt/agentgym-mcp/NAME``).
        env: variables for the server's process.
        on_host: run ``command`` on the host rather than in the sandbox (only for servers
            that hold no state of the episode's; an env without a sandbox needs it).
        allow_remote: let ``url`` name a host other than the loopback.
        tools: the server's tools offered to the agent, by name (default: all of them).
        start_timeout_s: seconds to start, connect and shake hands.
        call_timeout_s: seconds one call may take (the turn's budget, when shorter, wins).
        max_output_chars: a result longer than this is cut in the middle, with a marker.
    """

    name: str
    command: Sequence[str] = ()
    url: str | None = None
    requirements: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    on_host: bool = False
    allow_remote: bool = False
    tools: Sequence[str] | None = None
    start_timeout_s: float = 60.0
    call_timeout_s: float = 60.0
    max_output_chars: int = 10_000

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalized once, here
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise InvalidArgumentError(
                f"MCPServer name={self.name!r} must start with a letter and hold only"
                " letters, digits, '_' and '-' (at most 40), e.g. name='git'")
        if isinstance(self.command, str):
            set_(self, "command", tuple(shlex.split(self.command)))
        set_(self, "command", tuple(self.command))
        set_(self, "requirements", tuple(self.requirements))
        set_(self, "env", dict(self.env))
        if self.tools is not None:
            set_(self, "tools", tuple(self.tools))
        if bool(self.command) == bool(self.url):
            raise InvalidArgumentError(
                f"MCPServer {self.name!r} needs exactly one of command (a stdio server) and"
                f" url (a streamable-HTTP server); got command={list(self.command)!r},"
                f" url={self.url!r}")
        if self.url is not None:
            host = urlsplit(self.url).hostname or ""
            if not self.allow_remote and host not in ("127.0.0.1", "localhost", "::1"):
                raise InvalidArgumentError(
                    f"MCPServer {self.name!r}: url={self.url!r} is not on the loopback;"
                    " agentgym talks to other hosts only when told: allow_remote=True")
        for key in ("start_timeout_s", "call_timeout_s"):
            if not getattr(self, key) > 0:
                raise InvalidArgumentError(f"MCPServer {self.name!r}: {key} must be > 0"
                                           f" seconds, got {getattr(self, key)!r}")
        if not self.max_output_chars >= 100:
            raise InvalidArgumentError(
                f"MCPServer {self.name!r}: max_output_chars must be >= 100, got"
                f" {self.max_output_chars!r}")

    @classmethod
    def from_dict(cls, value: Any) -> MCPServer:
        """An :class:`MCPServer` from its fields as a mapping (env kwargs, YAML)."""
        if isinstance(value, MCPServer):
            return value
        if not isinstance(value, Mapping):
            raise InvalidArgumentError(
                f"an MCP server is given as a mapping of MCPServer's fields, got {value!r};"
                " e.g. {'name': 'time', 'command': ['python3', '-m', 'mcp_server_time']}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise InvalidArgumentError(
                f"MCP server {value.get('name')!r}: unknown field(s) {', '.join(unknown)};"
                f" MCPServer takes {', '.join(sorted(known))}")
        return cls(**value)

    @property
    def in_sandbox(self) -> bool:
        """Whether its process runs in the episode's sandbox."""
        return bool(self.command) and not self.on_host

    @property
    def env_mount(self) -> str:
        return f"{MCP_MOUNT}/{self.name}"

    def argv(self, env_folder: str | None) -> list[str]:
        """The command with ``{env}`` replaced by ``env_folder``."""
        if "{env}" in " ".join(self.command) and env_folder is None:
            raise InvalidArgumentError(
                f"MCPServer {self.name!r}: its command names {{env}} but it has no"
                " requirements to install there; list them, or write the command in full")
        return [part.replace("{env}", env_folder or "") for part in self.command]

    def python_env(self) -> Path | None:
        """The host folder of its requirements' environment (built on first use), or
        None when it has none."""
        if not self.requirements:
            return None
        from agentgym.core.pyenv import SANDBOX_PYTHON, build_python_env

        mount = self.env_mount if self.in_sandbox else None
        if mount is None:  # on the host: an environment of the host's own interpreter
            return build_python_env(self.requirements, "", name=f"mcp-host-{self.name}",
                                    python=shutil.which("python3") or SANDBOX_PYTHON)
        return build_python_env(self.requirements, mount, name=f"mcp-{self.name}")


# ---- the connection --------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _stream_transport(stream: Any) -> AsyncIterator[tuple[Any, Any]]:
    """An MCP transport over a byte stream (newline-delimited JSON-RPC, as stdio): what the
    SDK's ``Client`` takes as ``Transport``. A line that is not JSON-RPC reaches the
    session as an exception; a stream that ends closes the session's read side."""
    import anyio
    import mcp_types
    from mcp.shared.message import SessionMessage

    to_session, from_server = anyio.create_memory_object_stream(0)
    to_server, from_session = anyio.create_memory_object_stream(0)

    async def read() -> None:
        buffer = b""
        async with to_session:
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError,
                                     anyio.ClosedResourceError, OSError):
                while True:
                    lines = (buffer + await stream.receive()).split(b"\n")
                    buffer = lines.pop()
                    if len(buffer) > MAX_MESSAGE_BYTES:
                        await to_session.send(ValueError(
                            f"the server sent a line of over {MAX_MESSAGE_BYTES} bytes"))
                        return
                    for line in lines:
                        if not line.strip():
                            continue
                        try:
                            message: Any = SessionMessage(
                                mcp_types.jsonrpc_message_adapter.validate_json(
                                    line, by_name=False))
                        except ValueError as error:
                            message = error
                        await to_session.send(message)

    async def write() -> None:
        async with from_session:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError,
                                     OSError):
                async for message in from_session:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stream.send(data.encode() + b"\n")

    async with anyio.create_task_group() as group:
        group.start_soon(read)
        group.start_soon(write)
        try:
            yield from_server, to_server
        finally:
            group.cancel_scope.cancel()
            with contextlib.suppress(Exception):
                await stream.aclose()


class _Connection:
    """One running server and the SDK client connected to it.

    The client lives in a task of its own (the SDK's task groups must be left by the task
    that entered them, and an episode is set up and released by different tasks); calls
    come from any task of the same event loop.
    """

    def __init__(self, server: MCPServer):
        self.server = server
        self.client: Any = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._failure: BaseException | None = None
        self._cleanup: list[Callable[[], Any]] = []

    async def start(self, transport: Any) -> None:
        """Connect through ``transport`` and shake hands, within the start timeout."""
        from mcp import Client

        async def run() -> None:
            try:
                async with Client(transport, read_timeout_seconds=self.server.call_timeout_s,
                                  mode="legacy") as client:
                    self.client = client
                    self._ready.set()
                    await self._stop.wait()
            except BaseException as error:  # what ended it is what the next call reports
                self._failure = error
                raise
            finally:
                self._ready.set()

        self._task = asyncio.ensure_future(run())
        try:
            await wait_within(self._ready.wait(), self.server.start_timeout_s)
        except asyncio.TimeoutError:
            raise MCPServerError(
                f"MCP server {self.server.name!r} did not answer MCP's handshake within"
                f" {self.server.start_timeout_s:g} s (start_timeout_s)") from None
        if self.client is None or self._task.done():
            raise MCPServerError(f"MCP server {self.server.name!r} did not start: "
                                 f"{_reason(self._failure)}")

    def dead(self) -> MCPServerError | None:
        """Why the connection is over, when it is."""
        if self._task is not None and self._task.done():
            return MCPServerError(f"MCP server {self.server.name!r} is gone:"
                                  f" {_reason(self._failure)}")
        return None

    async def list_tools(self) -> list[Any]:
        found, cursor = [], None
        for _ in range(100):  # a paginator that never ends cannot hang the setup
            page = await self._request(self.client.list_tools(cursor=cursor),
                                       self.server.start_timeout_s, "listing its tools")
            found.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return found

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """The server's result of one call, within the turn's budget and the call's."""
        budget = self.server.call_timeout_s
        left = turn_time_left()
        if left is not None:
            budget = min(budget, max(left, 0.1))
        return await self._request(self.client.call_tool(name, arguments,
                                                         read_timeout_seconds=budget),
                                   budget + 1, f"calling {name}")

    async def _request(self, request: Any, timeout_s: float, doing: str) -> Any:
        from mcp.shared.exceptions import MCPError

        gone = self.dead()
        if gone is not None:
            request.close()
            raise gone
        try:
            return await wait_within(request, timeout_s)
        except asyncio.TimeoutError:
            raise ToolError(f"{doing} took over {timeout_s:g} s and was stopped") from None
        except MCPError as error:
            from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

            code, message = error.error.code, error.error.message
            gone = self.dead()
            if gone is not None or (code == CONNECTION_CLOSED and "closed" in message.lower()):
                raise gone or MCPServerError(
                    f"MCP server {self.server.name!r} closed its connection while {doing}"
                    " (it exited or was stopped)") from None
            if code == REQUEST_TIMEOUT:  # the SDK's own read timeout
                raise ToolError(f"{doing} took too long and was stopped: {message}") from None
            raise ToolError(f"the server refused {doing}: {message}") from None
        except (OSError, EOFError, ValueError) as error:
            raise MCPServerError(f"MCP server {self.server.name!r} failed while {doing}:"
                                 f" {type(error).__name__}: {error}") from None
        except Exception as error:  # anything else the SDK raises: the connection is unusable
            gone = self.dead()
            raise (gone or MCPServerError(
                f"MCP server {self.server.name!r} failed while {doing}:"
                f" {type(error).__name__}: {error}")) from None

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None and not self._task.done():
            try:
                await wait_within(asyncio.shield(self._task), 10)
            except (asyncio.TimeoutError, Exception):
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task
        for cleanup in reversed(self._cleanup):
            with contextlib.suppress(Exception):
                result = cleanup()
                if asyncio.iscoroutine(result):
                    await result


def _log(server: MCPServer) -> str:
    """Where an in-sandbox server's stderr goes."""
    return f"/tmp/agentgym-mcp-{server.name}.log"


def _reason(error: BaseException | None) -> str:
    if error is None:
        return "its connection ended"
    if hasattr(error, "exceptions"):  # an exception group (anyio task groups raise them)
        return "; ".join(_reason(e) for e in error.exceptions)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


class MCPSession:
    """An episode's connections to its env's MCP servers.

    Made before the episode's sandbox opens (:attr:`mounts` go into its spec: each
    in-sandbox server's environment and the episode's socket folder), started once it is
    open (:meth:`start`), closed when the episode ends (:meth:`aclose`, which also stops the
    servers' processes: those in the sandbox go with it).
    """

    def __init__(self, servers: Sequence[MCPServer]):
        _require_mcp()
        self.servers = list(servers)
        self.connections: dict[str, _Connection] = {}
        self.mounts: dict[str, str] = {}
        self._folder: str | None = None
        if any(s.in_sandbox for s in self.servers):
            # The folder is bound into the sandbox whole: it holds this episode's sockets
            # and nothing else; the launcher (the sandbox's user) must reach them.
            self._folder = tempfile.mkdtemp(prefix="agentgym-mcp-")
            os.chmod(self._folder, 0o755)
            self.mounts[SOCKET_MOUNT] = self._folder
        for server in self.servers:
            if server.in_sandbox:
                folder = server.python_env()
                if folder is not None:
                    self.mounts[server.env_mount] = str(folder)

    async def start(self, sandbox: Sandbox | None) -> dict[str, _Connection]:
        """Start every server (in ``sandbox`` unless it runs on the host) and connect."""
        for server in self.servers:
            connection = _Connection(server)
            self.connections[server.name] = connection
            if server.url is not None:
                from mcp.client.streamable_http import streamable_http_client

                await connection.start(streamable_http_client(server.url))
            elif server.on_host:
                await connection.start(await self._host_transport(server, connection))
            else:
                if sandbox is None:
                    raise InvalidArgumentError(
                        f"MCP server {server.name!r} runs in the episode's sandbox, and this"
                        " env has none; run it on the host (on_host=True) if it holds no"
                        " state of the episode's")
                stream = await self._launch_in(sandbox, server, connection)
                try:
                    await connection.start(_stream_transport(stream))
                except MCPServerError as error:  # what the server wrote says why
                    wrote = await sandbox.exec(f"tail -c 1500 {_log(server)} 2>/dev/null",
                                               timeout=10)
                    raise MCPServerError(f"{error}; it wrote: "
                                         f"{wrote.output.strip() or '(nothing)'}") from None
        return self.connections

    async def _launch_in(self, sandbox: Sandbox, server: MCPServer,
                         connection: _Connection) -> Any:
        """Start ``server`` in ``sandbox`` and return its stdio as a byte stream."""
        import anyio

        assert self._folder is not None
        path = os.path.join(self._folder, f"{server.name}.sock")
        listener = await anyio.create_unix_listener(path)
        os.chmod(path, 0o777)  # the sandbox's user connects
        log = _log(server)
        try:
            env_folder = server.env_mount if server.requirements else None
            argv = server.argv(env_folder)
            variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in server.env.items())
            launch = (f"{variables} python3 -c {shlex.quote(_LAUNCH)}"
                      f" {SOCKET_MOUNT}/{server.name}.sock {shlex.join(argv)}")
            # From a subshell, not one of the session shell's jobs (see sandboxes.bridge).
            started = await sandbox.exec(f"( nohup {launch} > /dev/null 2> {log} & )",
                                         timeout=30)
            if started.exit_code != 0:
                raise MCPServerError(f"MCP server {server.name!r} could not be started in"
                                     f" the sandbox: {started.output.strip()[-500:]}")
            try:
                with anyio.fail_after(server.start_timeout_s):
                    stream = await listener.accept()
            except TimeoutError:
                tail = await sandbox.exec(f"tail -c 1500 {log} 2>/dev/null", timeout=10)
                raise MCPServerError(
                    f"MCP server {server.name!r} did not connect within"
                    f" {server.start_timeout_s:g} s (start_timeout_s); its command"
                    f" {shlex.join(argv)!r} wrote: {tail.output.strip() or '(nothing)'}"
                ) from None
        finally:
            # One connection only: nothing else in the sandbox may take the server's place.
            await listener.aclose()
            with contextlib.suppress(OSError):
                os.unlink(path)
        connection._cleanup.append(stream.aclose)
        return stream

    async def _host_transport(self, server: MCPServer, connection: _Connection) -> Any:
        """A host process's stdio, as a transport (the SDK starts and stops it)."""
        from mcp.client.stdio import StdioServerParameters, stdio_client

        folder = server.python_env()
        argv = server.argv(str(folder) if folder is not None else None)
        log = open(os.devnull, "w")  # noqa: SIM115 - closed with the connection
        connection._cleanup.append(log.close)
        return stdio_client(StdioServerParameters(command=argv[0], args=argv[1:],
                                                  env=dict(server.env)), errlog=log)

    async def aclose(self) -> None:
        for connection in reversed(list(self.connections.values())):
            await connection.close()
        self.connections.clear()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None


# ---- the tools ---------------------------------------------------------------------------


class MCPTools(Toolset):
    """The base of one server's toolset: its tools are made from the server's listing
    (:func:`mcp_toolset`), each bound to an episode's connection to that server."""

    #: The server whose tools these are (set on each class :func:`mcp_toolset` makes).
    server: MCPServer

    def __init__(self, connection: _Connection):
        self.connection = connection

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        result = await self.connection.call(name, arguments)
        text = _result_text(result, self.server.max_output_chars)
        if getattr(result, "is_error", False):
            raise ToolError(text or "the tool failed (the server gave no message)")
        return text


class _MCPTool(Tool):
    """A tool of an MCP server: its schema as the server lists it (not derived from a
    signature), its call forwarded to the episode's connection."""

    def __init__(self, listed: Any):
        name = listed.name
        self.fn = None  # type: ignore[assignment]
        self.name = name
        self.description = (listed.description or listed.title or name).strip()
        schema = dict(listed.input_schema or {})
        self.parameters = {"type": "object", "properties": dict(schema.get("properties") or {}),
                           "required": list(schema.get("required") or [])}
        if "$defs" in schema:  # what nested arguments' "$ref"s point to (pydantic models)
            self.parameters["$defs"] = schema["$defs"]
        self.is_method = True

    async def call(self, arguments: Any, instance: Any = None) -> str:
        kwargs = self.validate(arguments)
        if instance is None:
            raise ToolError(f"{self.name!r} is not available yet: the episode is still"
                            " being set up; call it again")
        return await instance.call(self.name, kwargs)


def mcp_toolset(server: MCPServer, listed: Sequence[Any]) -> type[MCPTools]:
    """The :class:`MCPTools` class of ``server`` with the tools of its listing ``listed``
    (the SDK's tool models; :func:`discover_tools`), those of ``server.tools`` only when it
    names some."""
    wanted = server.tools
    by_name = {t.name: t for t in listed}
    if wanted is not None:
        missing = sorted(set(wanted) - set(by_name))
        if missing:
            raise InvalidArgumentError(
                f"MCP server {server.name!r} has no tool(s) {', '.join(missing)}; it lists"
                f" {', '.join(by_name) or 'none'}")
    chosen = [by_name[n] for n in (wanted if wanted is not None else by_name)]
    attributes: dict[str, Any] = {"server": server, "__doc__": f"MCP server {server.name}."}
    for listed_tool in chosen:
        attributes[f"tool_{listed_tool.name}"] = _MCPTool(listed_tool)
    name = "MCP_" + re.sub(r"\W", "_", server.name)
    return type(name, (MCPTools,), attributes)


def _result_text(result: Any, limit: int) -> str:
    """A call result as the text the agent reads."""
    parts = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            size = len(getattr(block, "data", "") or "") * 3 // 4
            parts.append(f"[{getattr(block, 'mime_type', kind)}, {size // 1024 or 1} KB]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        elif kind == "resource":
            inner = block.resource
            parts.append(getattr(inner, "text", None) or f"[resource {inner.uri}]")
        else:
            parts.append(f"[{kind or type(block).__name__}]")
    text = "\n".join(parts)
    structured = getattr(result, "structured_content", None)
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False, default=str)
    if len(text) > limit:
        half = limit // 2
        text = (f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n"
                f"{text[-half:]}")
    return text


# ---- discovery -----------------------------------------------------------------------------


async def discover_tools(servers: Sequence[MCPServer],
                         open_sandbox: Callable[[Mapping[str, str]], Any] | None
                         ) -> list[type[MCPTools]]:
    """Start ``servers`` as an episode would (in a sandbox from ``open_sandbox(mounts)``
    when any runs in one), list their tools, stop them; their toolset classes, in order.
    Two servers offering a tool of the same name are refused."""
    session = MCPSession(servers)
    sandbox = None
    try:
        if any(s.in_sandbox for s in servers):
            if open_sandbox is None:
                raise InvalidArgumentError(
                    "these MCP servers run in the episode's sandbox, and this env has none;"
                    " give them on_host=True if they hold no state of the episode's")
            sandbox = await open_sandbox(session.mounts)
        connections = await session.start(sandbox)
        classes = [mcp_toolset(s, await connections[s.name].list_tools()) for s in servers]
    finally:
        await session.aclose()
        if sandbox is not None:
            await sandbox.close()
    seen: dict[str, str] = {}
    for cls in classes:
        for tool in cls.definitions():
            if tool.name in seen:
                raise InvalidArgumentError(
                    f"MCP servers {seen[tool.name]!r} and {cls.server.name!r} both offer a"
                    f" tool named {tool.name!r}; offer one of them (MCPServer tools=[...])")
            seen[tool.name] = cls.server.name
    return classes
