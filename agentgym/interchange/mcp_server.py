"""An agentgym env served as an MCP server: any MCP client plays its tasks.

``agentgym mcp serve ENV_ID`` (or :class:`EnvMCPServer` in code) offers these tools:

* ``start_task(task_id=None)``: starts an episode (the env's ``reset``: the task named,
  or the next one in the env's order) and returns its instruction, the opening messages
  as text, and its ``episode_id``;
* the env's own tools (``calculator``, ``bash``, ``submit``, ...) with their schemas plus
  an optional ``episode_id``: each call is one turn of that episode (an assistant turn
  calling that one tool), its result the tool's message. Without ``episode_id`` a call
  goes to the caller's latest episode: the stdio client's, or the HTTP session's for a
  client that keeps one; a stateless client (MCP's 2026 protocol has no sessions) names
  its episode unless only one is running;
* ``get_reward(episode_id=None)``: whether the episode ended, why, and its reward.

A call that ends the episode (the env's ``submit``, its turn limit) says so with the
reward, and the episode's resources (sandbox, browser) are released then; what it was
paid stays readable with ``get_reward``. Several clients and several episodes at once are
served on one event loop, each episode on its own env instance, at most
``max_episodes`` running (an episode left idle ``idle_timeout_s`` is ended and released,
as a client that goes away leaves it). Tool errors (a bad argument, a refused call) are
the env's own error messages, marked ``is_error``; an env that crashes ends that episode
with the reason, never the server.

Transports: streamable HTTP (``/mcp`` on 127.0.0.1, the server in
:class:`~agentgym.core.serving.LocalServer`; another host only when told) for several
clients, or stdio (one client that starts the server as its subprocess, as desktop apps
do). Needs the ``mcp`` extra (``pip install -e '.[mcp]'`` from agentgym's source).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agentgym.core.errors import AgentGymError, InvalidArgumentError

__all__ = ["EnvMCPServer", "ServedEpisode"]

#: The tools the server adds to the env's own (an env tool of the same name is refused).
START, REWARD = "start_task", "get_reward"
EPISODE_ARG = "episode_id"
#: Ended episodes whose reward stays readable; older ones are forgotten (a server that runs
#: for days would otherwise keep every episode it ever played).
KEPT_ENDED = 1000


def _require_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise AgentGymError(
            "serving an env over MCP needs the `mcp` package: pip install -e '.[mcp]'"
            " (from agentgym's source folder)") from None


@dataclass
class ServedEpisode:
    """One episode a client plays: its env, and what it was paid once it ended."""

    id: str
    task_id: str
    env: Any
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    turns: int = 0
    done: bool = False
    finish_reason: str | None = None
    reward: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)

    def status(self) -> dict[str, Any]:
        return {"episode_id": self.id, "task_id": self.task_id, "done": self.done,
                "finish_reason": self.finish_reason, "reward": self.reward,
                "turns": self.turns}


class EnvMCPServer:
    """``env_id`` (made with ``env_kwargs``) as an MCP server (module docstring).

    Args:
        env_id: a registered env.
        env_kwargs: its keyword arguments, as ``agentgym.make(env_id, **env_kwargs)``.
        max_episodes: episodes running at once; ``start_task`` past it is refused.
        idle_timeout_s: an episode with no call for this long is ended and released.
        make_env: how an episode's env is made (tests); default ``agentgym.make``.
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any] | None = None, *,
                 max_episodes: int = 16, idle_timeout_s: float = 900.0,
                 make_env: Callable[[], Any] | None = None):
        _require_mcp()
        if max_episodes < 1:
            raise InvalidArgumentError(f"max_episodes={max_episodes} must be >= 1")
        if not idle_timeout_s > 0:
            raise InvalidArgumentError(f"idle_timeout_s={idle_timeout_s!r} must be > 0")
        self.env_id, self.env_kwargs = env_id, dict(env_kwargs or {})
        self.max_episodes, self.idle_timeout_s = max_episodes, idle_timeout_s
        self._make_env = make_env or self._default_make
        probe = self._make_env()  # also checks the id and kwargs before anything is served
        try:
            self.env_tools = _tool_schemas(probe)
            self.task_ids: list[str] = list(probe.task_ids())
        finally:
            probe.close()
        self._tools = self._listing()
        self.episodes: dict[str, ServedEpisode] = {}
        self._latest: dict[str, str] = {}  # a client's MCP session -> its newest episode
        self._numbers = itertools.count(1)
        self._next_task = 0
        self._starting = 0  # start_task calls between the limit's check and their episode
        self._sweeper: asyncio.Task | None = None
        self.server = self._lowlevel_server()

    def _default_make(self) -> Any:
        import agentgym

        return agentgym.make(self.env_id, **self.env_kwargs).unwrapped

    # ---- the tools ----------------------------------------------------------------------

    def _listing(self) -> list[Any]:
        from mcp import types

        episode_arg = {"type": "string", "description": (
            "The episode this call plays (start_task's episode_id); default: your latest.")}
        tools = [
            types.Tool(name=START, description=(
                f"Start a task of the agentgym env {self.env_id!r}: returns its instruction,"
                " the opening messages and the episode_id the other tools take. Then call"
                " the env's tools; the episode ends when its submit tool (or its turn limit)"
                " ends it, and the result says the reward."),
                input_schema={"type": "object", "properties": {"task_id": {
                    "type": "string",
                    "description": "The task to play (default: the next one in order)."}}}),
            types.Tool(name=REWARD, description=(
                "Whether an episode ended, why, and its reward (null while it runs)."),
                input_schema={"type": "object", "properties": {EPISODE_ARG: episode_arg}}),
        ]
        for schema in self.env_tools:
            function = schema["function"]
            name = function["name"]
            if name in (START, REWARD):
                raise InvalidArgumentError(
                    f"the env {self.env_id!r} has a tool named {name!r}, which the MCP server"
                    " adds itself; rename the env's tool to serve it over MCP")
            parameters = copy.deepcopy(function.get("parameters") or {"type": "object"})
            properties = parameters.setdefault("properties", {})
            if EPISODE_ARG in properties:
                raise InvalidArgumentError(
                    f"the env {self.env_id!r}'s tool {name!r} takes an argument named"
                    f" {EPISODE_ARG!r}, which the MCP server adds to every tool; rename it")
            properties[EPISODE_ARG] = episode_arg
            tools.append(types.Tool(name=name, description=function.get("description", ""),
                                    input_schema=parameters))
        return tools

    def _lowlevel_server(self) -> Any:
        from mcp.server.lowlevel import Server

        async def list_tools(ctx: Any, params: Any) -> Any:
            from mcp import types

            return types.ListToolsResult(tools=self._tools)

        async def call_tool(ctx: Any, params: Any) -> Any:
            return await self.call(params.name, dict(params.arguments or {}),
                                   session=_session_key(ctx))

        return Server(f"agentgym-{self.env_id}", instructions=(
            f"Tasks of the agentgym env {self.env_id!r}: call {START} first."),
            on_list_tools=list_tools, on_call_tool=call_tool)

    async def call(self, name: str, arguments: dict[str, Any], session: str | None = "") -> Any:
        """Answer one tool call (an MCP ``CallToolResult``). ``session`` is the caller's
        MCP session, whose latest episode a call without ``episode_id`` plays ("": the one
        client of stdio; None: a stateless client, which has no latest episode)."""
        self._start_sweeper()
        try:
            if name == START:
                text, data = await self._start(arguments.get("task_id"), session)
            elif name == REWARD:
                episode = self._episode(arguments.get(EPISODE_ARG), session)
                data = episode.status()
                text = json.dumps(data)
            elif any(s["function"]["name"] == name for s in self.env_tools):
                episode = self._episode(arguments.pop(EPISODE_ARG, None), session)
                return await self._play(episode, name, arguments)
            else:
                known = ", ".join(t.name for t in self._tools)
                raise _Refused(f"there is no tool {name!r}; the tools are: {known}")
        except _Refused as refused:
            return _result(f"Error: {refused}", is_error=True)
        return _result(text, data)

    async def _start(self, task_id: Any, session: str | None) -> tuple[str, dict[str, Any]]:
        running = sum(not e.done for e in self.episodes.values()) + self._starting
        if running >= self.max_episodes:
            raise _Refused(
                f"{running} episodes are running, the most this server plays at once"
                f" (--max-episodes {self.max_episodes}); finish one (its submit tool) or wait"
                f" for idle ones to end ({self.idle_timeout_s:g} s without a call)")
        if task_id is None:
            task_id = self.task_ids[self._next_task % len(self.task_ids)]
            self._next_task += 1
        elif str(task_id) not in self.task_ids:
            import difflib

            close = difflib.get_close_matches(str(task_id), self.task_ids, n=3)
            raise _Refused(f"task_id={task_id!r} is not a task of {self.env_id!r}"
                           + (f"; did you mean {', '.join(map(repr, close))}?" if close else
                              f" ({len(self.task_ids)} tasks, e.g. {self.task_ids[0]!r})"))
        self._starting += 1  # counted from here: calls at once cannot pass the limit
        try:
            env = await asyncio.to_thread(self._make_env)
            try:
                messages, info = await env.areset(options={"task_id": str(task_id)})
            except Exception as error:
                await _close_quietly(env)
                raise _Refused(f"the task {task_id!r} could not start: {error}") from None
            except BaseException:  # cancelled (the client went away): nothing left open
                await _close_quietly(env)
                raise
        finally:
            self._starting -= 1
        # Numbered for people, random for clients: another client cannot guess an episode
        # it did not start and play (or submit) it.
        episode = ServedEpisode(f"e{next(self._numbers)}-{secrets.token_hex(4)}",
                                str(task_id), env)
        self.episodes[episode.id] = episode
        if session is not None:
            self._latest[session] = episode.id
        tools = [t["function"]["name"] for t in info.get("tools", [])]
        opening = "\n\n".join(f"[{m['role']}]\n{m.get('content') or ''}" for m in messages)
        text = (f"Episode {episode.id} started: task {episode.task_id} of {self.env_id}."
                f" Tools: {', '.join(tools)} (pass {EPISODE_ARG}={episode.id!r} with"
                f" each call).\n\n{opening}")
        return text, {"episode_id": episode.id, "task_id": episode.task_id,
                      "messages": messages, "tools": tools}

    def _episode(self, episode_id: Any, session: str | None) -> ServedEpisode:
        if episode_id is None and session is None:  # stateless: only an unambiguous default
            running = [e.id for e in self.episodes.values() if not e.done]
            if len(running) > 1:
                raise _Refused(f"{len(running)} episodes are running here; pass"
                               f" {EPISODE_ARG} (what {START} returned) to say which")
            episode_id = running[0] if running else None
        elif episode_id is None:
            episode_id = self._latest.get(session)
        if episode_id is None:
            raise _Refused(f"no episode is running for you; call {START} first")
        episode = self.episodes.get(str(episode_id))
        if episode is None:
            raise _Refused(f"episode_id={episode_id!r} is not an episode of this server"
                           f" (call {START} for one)")
        return episode

    async def _play(self, episode: ServedEpisode, name: str, arguments: dict[str, Any]) -> Any:
        async with episode.lock:
            if episode.done:
                return _result(
                    f"Error: episode {episode.id} already ended ({episode.finish_reason},"
                    f" reward {episode.reward}); call {START} for another", is_error=True)
            episode.last_used = time.monotonic()
            turn = {"role": "assistant", "content": "", "tool_calls": [{
                "id": f"call_{episode.turns}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)}}]}
            try:
                new, reward, terminated, truncated, info = await episode.env.astep(turn)
            except Exception as error:  # the env broke: this episode ends, the server lives
                await self._finish(episode, "error", 0.0, {"error": f"{error}"})
                return _result(f"Error: the episode ended: the env failed ({error})",
                               episode.status(), is_error=True)
            episode.turns += 1
            episode.last_used = time.monotonic()
            text = "\n\n".join(str(m.get("content") or "") for m in new)
            if terminated or truncated:
                await self._finish(episode, info.get("finish_reason", "ended"), reward,
                                   info.get("reward_metrics") or {})
                text += (f"\n\nThe episode ended ({episode.finish_reason}): reward"
                         f" {episode.reward:g}.")
            return _result(text, episode.status(), is_error=bool(info.get("tool_errors")))

    def _forget_ended(self) -> None:
        ended = [e.id for e in self.episodes.values() if e.done]
        for episode_id in ended[:max(0, len(ended) - KEPT_ENDED)]:
            del self.episodes[episode_id]
        known = set(self.episodes)
        self._latest = {s: e for s, e in self._latest.items() if e in known}

    async def _finish(self, episode: ServedEpisode, reason: str, reward: float,
                      metrics: dict[str, Any]) -> None:
        episode.done, episode.finish_reason = True, reason
        episode.reward, episode.metrics = float(reward), dict(metrics)
        await _close_quietly(episode.env)
        self._forget_ended()

    # ---- idle episodes --------------------------------------------------------------------

    def _start_sweeper(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.ensure_future(self._sweep())

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(min(30.0, self.idle_timeout_s / 2))
            await self.end_idle()

    async def end_idle(self, now: float | None = None) -> list[str]:
        """End the running episodes idle past ``idle_timeout_s`` (reward 0, finish
        reason ``idle``); returns their ids."""
        now = time.monotonic() if now is None else now
        ended = []
        for episode in list(self.episodes.values()):
            if not episode.done and now - episode.last_used > self.idle_timeout_s:
                async with episode.lock:
                    if not episode.done:
                        await self._finish(episode, "idle", 0.0, {})
                        ended.append(episode.id)
        return ended

    async def aclose(self) -> None:
        """End every running episode (releasing their sandboxes) and stop the sweeper."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        for episode in list(self.episodes.values()):
            if not episode.done:
                await self._finish(episode, "server_closed", 0.0, {})

    # ---- transports -----------------------------------------------------------------------

    def http_app(self, host: str = "127.0.0.1") -> Any:
        """The streamable-HTTP ASGI app (``/mcp``), for a
        :class:`~agentgym.core.serving.LocalServer` started with ``lifespan=True``.
        ``host``: where it listens (the DNS-rebinding check allows loopback names for
        loopback hosts)."""
        from starlette.applications import Starlette

        app = self.server.streamable_http_app(host=host)
        manager = self.server._session_manager  # the app's lifespan runs it

        @contextlib.asynccontextmanager
        async def lifespan(_: Starlette) -> Any:
            async with manager.run():
                try:
                    yield
                finally:
                    await self.aclose()

        app.router.lifespan_context = lifespan
        return app

    async def serve_stdio(self) -> None:
        """Serve one client on this process's stdin and stdout until it closes them."""
        from mcp.server.stdio import stdio_server

        try:
            async with stdio_server() as (read, write):
                await self.server.run(read, write, self.server.create_initialization_options())
        finally:
            await self.aclose()


class _Refused(Exception):
    """A call the server refuses: the agent sees the message as a tool error."""


def _result(text: str, data: dict[str, Any] | None = None, *, is_error: bool = False) -> Any:
    from mcp import types

    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structured_content=data, is_error=is_error)


def _session_key(ctx: Any) -> str | None:
    """The caller's MCP session: "" on stdio (one client), the streamable-HTTP session id
    of a client that has one, None for a stateless HTTP client (MCP 2026-07-28 and later:
    calls carry no session, so they name their episode)."""
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    return headers.get("mcp-session-id") if headers is not None else ""


def _tool_schemas(env: Any) -> list[dict[str, Any]]:
    schemas = env.tool_schemas()
    if not schemas:
        raise InvalidArgumentError(
            f"{type(env).__name__} offers no tools before an episode starts, so there is"
            " nothing to list over MCP; serve an env whose tools are declared by the env")
    return schemas


async def _close_quietly(env: Any) -> None:
    closing: Awaitable[None] = env.aclose()
    with contextlib.suppress(Exception):
        await closing
