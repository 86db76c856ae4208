"""OpenEnv both ways: any agentgym env served as an OpenEnv environment server, and a
running one played as an agentgym env.

`OpenEnv <https://github.com/meta-pytorch/OpenEnv>`_ (``openenv-core``, the optional extra
``pip install 'agentgym[openenv]'``) puts an environment behind an HTTP and WebSocket
server with typed actions, observations and state; TRL and torchforge drive such servers.
openenv-core loads lazily: importing it takes seconds (it imports gradio), so nothing here
touches it until a server is built or a session opened.

**Serving** (:func:`openenv_app`; ``agentgym openenv serve ENV_ID``). openenv-core's own
``HTTPEnvServer`` serves the env, one agentgym env instance per WebSocket session
(:class:`AgentGymEnvironment`), up to ``max_sessions`` at once; one more is refused with
OpenEnv's ``CAPACITY_REACHED`` error. A session's env is closed when its connection closes
(uvicorn's WebSocket pings close dead ones). The server runs in OpenEnv's *production*
mode: its stateless ``POST /reset``, ``POST /step`` and ``GET /state`` are left out, since
each builds and closes an env per request and a multi-turn episode cannot live in one
request; ``GET /health``, ``/metadata``, ``/schema``, ``POST /mcp`` and the ``/ws``
sessions stay, and agentgym adds ``GET /agentgym/tasks`` (the env's id, task ids, tool-call
parser and turn limit) and ``GET /agentgym/tasks/{task_id}`` (one task as
:meth:`Task.to_dict <agentgym.core.task.Task.to_dict>`, its solution in the env's tool-call
format). The wire format:

* an action (:class:`AgentGymAction`) is one of ``{"text": ...}`` (the turn as the model
  wrote it; the env's parser reads its tool calls), ``{"message": {...}}`` (the turn as an
  OpenAI assistant message, ``content`` and ``tool_calls``) or ``{"end": REASON}`` (end
  the running episode from outside, as truncated, and grade it: what a rollout loop sends
  when a limit of its own, tokens or wall time, ends an episode);
* an observation (:class:`AgentGymObservation`) carries ``messages`` (the new chat
  messages: at reset the opening ones, then tool results and error messages), ``tools``
  (the episode's tools as OpenAI function schemas), ``task_id``, ``task`` (at reset: the
  task, as agentgym's reset info carries it for text-level policies such as ``oracle``;
  the driver's to read, not the model's; without its solution and metadata unless the
  server reveals them: :func:`shown_task`), ``terminated`` and ``truncated`` (Gymnasium's
  distinction, which OpenEnv's ``done`` joins), ``finish_reason``, ``error`` and ``info``
  (the step's info as JSON: ``assistant_message``, ``tool_calls``, ``tool_errors``,
  ``errors``, ``reward_metrics``, ...; bytes as base64 text), besides OpenEnv's
  ``reward`` (the episode's on the step that ends it, else 0.0; None at reset) and
  ``done``;
* reset takes ``seed``, ``episode_id`` and ``task_id``; the state
  (:class:`AgentGymState`) is the env id, task id, turn, and whether and why the episode
  ended.

A step whose env fails (its sandbox died) ends the episode as agentgym's rollout loop ends
it: ``done``, ``finish_reason`` ``sandbox_error`` (or ``error``) and the reason in
``error``. A reset that fails, and a step without a running episode, are OpenEnv error
responses whose message says why.

**Playing** (:class:`OpenEnvEnv`; ``agentgym.make("openenv", url=...)``). A running
OpenEnv server, on this machine or another, played as an agentgym env; each episode is a
WebSocket session of OpenEnv's own client. Two kinds of server, told apart by ``GET
/agentgym/tasks``:

* one served this way: its task list comes from ``/agentgym/tasks``, and the observations,
  rewards and ends of the server's env map back onto the env protocol unchanged;
* any other OpenEnv server (OpenEnv's example envs, third-party ones): the agent gets one
  tool, ``step``, whose parameters are the server's action schema (``GET /schema``, with
  each ``$ref`` inlined and OpenEnv's own ``metadata`` left out: :func:`action_parameters`);
  a call is one OpenEnv step, its answer the observation's own fields as compact JSON
  (:func:`render_observation`), an action the server refuses a tool error carrying its
  validation errors. The reset's observation opens the conversation after
  ``instructions``; ``done`` ends the episode; the reward is the sum of the steps' (or the
  last's: ``episode_reward``); the tasks are seeds, ``seed-0`` ... (``num_tasks``), without
  reference solutions.

A server that is down, dies, refuses, or does not answer within ``timeout_s`` ends the
episode with :class:`OpenEnvServerError` (a :class:`~agentgym.core.sandbox.SandboxError`:
finish reason ``sandbox_error``); nothing waits without a bound.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import dataclasses
import functools
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

import gymnasium

from agentgym.core.env import AgentEnv, SetupTimeoutError
from agentgym.core.env_info import ResetInfo, ResetOptions, StepInfo
from agentgym.core.episode import Episode, Message, Submitted
from agentgym.core.errors import (
    AgentGymError,
    EnvStateError,
    InvalidArgumentError,
    MissingResourceError,
    UnknownIdError,
)
from agentgym.core.parsers import value_depth
from agentgym.core.registry import has
from agentgym.core.reward import RewardResult
from agentgym.core.sandbox import SandboxError
from agentgym.core.serving import is_loopback
from agentgym.core.task import Task, TaskList, TaskSource
from agentgym.core.tools import BoundTool, Tool, ToolError
from agentgym.core.waiting import wait_within

# The AgentGym* classes subclass openenv-core's, so they are defined on first use
# (the module's __getattr__).
__all__ = ["AgentGymAction", "AgentGymEnvironment", "AgentGymObservation",  # noqa: F822
           "AgentGymState", "GenericServer", "OpenEnvEnv", "OpenEnvEpisodeError",
           "OpenEnvServerError", "action_parameters", "openenv_app", "render_observation"]

#: Where the served env's task list is (the adapter reads it).
TASKS_ROUTE = "/agentgym/tasks"
#: Sessions a server holds at once unless told.
DEFAULT_MAX_SESSIONS = 8
#: Nesting of an action dict the adapter sends: deeper than any parser accepts (64), and
#: well short of what the server's JSON decoder and pydantic recurse through.
MAX_SENT_DEPTH = 100
#: Bytes of one action the adapter sends; uvicorn closes a WebSocket whose message is over
#: 16 MiB, which would end the episode for what the model wrote.
MAX_SENT_BYTES = 8 * 1024 * 1024
#: The episode's resources: its session, its tools' schemas, and the server's grade.
SESSION, TOOLS, GRADE = "openenv", "openenv_tools", "openenv_grade"
#: A generic episode's resources: the reset's observation and each step's reward.
OPENING, REWARDS = "openenv_opening", "openenv_rewards"
#: The one tool an episode of an OpenEnv server not started by agentgym offers.
STEP_TOOL = "step"
#: Tasks (seeds) and turn limit of such a server unless told.
DEFAULT_NUM_TASKS, DEFAULT_MAX_TURNS = 100, 30
#: How the episode's reward comes from its steps' (``episode_reward=``).
EPISODE_REWARDS = ("sum", "last")


class OpenEnvServerError(SandboxError):
    """The OpenEnv server is unreachable, broke the connection, refused a request, did not
    answer in time, or reported that the episode's sandbox failed: the episode cannot go on
    and ends with this reason (finish reason ``sandbox_error``), never the batch."""


class OpenEnvEpisodeError(AgentGymError):
    """The served env's episode failed with an error other than its sandbox's (finish
    reason ``error``); the message is the server's."""


def _require_openenv() -> None:
    try:
        import openenv.core  # noqa: F401
    except ImportError as missing:
        raise MissingResourceError(
            f"OpenEnv servers and clients need openenv-core ({missing})",
            "install agentgym's extra from its source folder: pip install -e '.[openenv]'"
        ) from None


# ---- serving: agentgym env -> OpenEnv server ---------------------------------------------


def __getattr__(name: str) -> Any:
    """The OpenEnv model classes, defined on first use (they subclass openenv-core's)."""
    if name in _SERVER_CLASSES:
        return _server_classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_SERVER_CLASSES = ("AgentGymAction", "AgentGymObservation", "AgentGymState",
                   "AgentGymEnvironment")


@functools.cache
def _server_classes() -> dict[str, type]:
    """Define the OpenEnv action, observation, state and environment classes (once)."""
    _require_openenv()
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
    from pydantic import Field, model_validator
    from pydantic_core import PydanticCustomError

    import agentgym

    class AgentGymAction(Action):
        """One assistant turn, or the end of the episode from outside: exactly one of
        ``text``, ``message`` and ``end``."""

        text: str | None = Field(
            default=None, description="The turn as the model wrote it; the env's tool-call"
            " parser reads its calls.")
        message: dict[str, Any] | None = Field(
            default=None, description="The turn as an OpenAI assistant message (content,"
            " tool_calls).")
        end: str | None = Field(
            default=None, description="End the running episode from outside for this"
            " reason (e.g. context_limit, wall_time), as truncated, and grade it.")

        @model_validator(mode="after")
        def _exactly_one(self) -> AgentGymAction:
            given = [n for n in ("text", "message", "end") if getattr(self, n) is not None]
            if len(given) != 1:
                # A custom error, not a ValueError: OpenEnv's server sends the validation
                # errors back as JSON, and a ValueError in them cannot be written.
                raise PydanticCustomError(
                    "one_of_text_message_end",
                    "an action has exactly one of text, message and end; got {given}: send"
                    " {{'text': MODEL_OUTPUT}}, {{'message': ASSISTANT_MESSAGE}} or {{'end':"
                    " REASON}}", {"given": ", ".join(given) or "none"})
            return self

    class AgentGymObservation(Observation):
        """What a reset or step returns: the new messages, the tools, and how the episode
        stands (module docstring)."""

        messages: list[dict[str, Any]] = Field(
            default_factory=list, description="The new chat messages (OpenAI format): at"
            " reset the opening ones, then tool results and error messages.")
        tools: list[dict[str, Any]] = Field(
            default_factory=list, description="The episode's tools as OpenAI function"
            " schemas.")
        task_id: str = Field(default="", description="The task being played.")
        task: dict[str, Any] | None = Field(
            default=None, description="At reset: the task (Task.to_dict), its solution in"
            " the env's tool-call format; for the driver, not the model.")
        terminated: bool = Field(default=False, description="The agent finished.")
        truncated: bool = Field(default=False, description="A limit ended the episode.")
        finish_reason: str | None = Field(
            default=None, description="Why the episode ended (submitted, max_turns,"
            " sandbox_error, error, or an end action's reason).")
        error: str | None = Field(
            default=None, description="Why the episode failed, when finish_reason is"
            " sandbox_error or error.")
        info: dict[str, Any] = Field(
            default_factory=dict, description="The reset's or step's info as JSON"
            " (assistant_message, tool_calls, tool_errors, errors, reward_metrics, ...).")

    class AgentGymState(State):
        """A session's state: which env and task, how far, and whether and why the episode
        ended."""

        env_id: str = Field(description="The agentgym env served.")
        task_id: str | None = Field(default=None, description="The task being played.")
        turn: int = Field(default=0, ge=0, description="Assistant turns played.")
        done: bool = Field(default=False, description="Whether the episode ended.")
        finish_reason: str | None = Field(default=None, description="Why it ended.")

    class AgentGymEnvironment(Environment[AgentGymAction, AgentGymObservation, AgentGymState]):
        """One OpenEnv session's environment: an agentgym env of its own, made at the first
        reset (OpenEnv also builds one per ``/metadata`` request, which needs none).

        Args:
            env_id: the registered env served.
            env_kwargs: its keyword arguments.
        """

        # Each session has its own agentgym env (and sandboxes): nothing is shared.
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self, env_id: str, env_kwargs: dict[str, Any] | None = None,
                     reveal_solutions: bool = False):
            super().__init__()
            self.env_id = env_id
            self.env_kwargs = dict(env_kwargs or {})
            self.reveal_solutions = reveal_solutions
            self._env: AgentEnv | None = None
            self._state = AgentGymState(env_id=env_id)
            self._tools: list[dict[str, Any]] = []

        def reset(self, seed: int | None = None, episode_id: str | None = None,
                  task_id: str | None = None, **unknown: Any) -> AgentGymObservation:
            """Start an episode (of ``task_id``, else one drawn with ``seed``)."""
            if unknown:
                raise InvalidArgumentError(
                    f"reset got {', '.join(sorted(unknown))}: an agentgym env's reset takes"
                    " seed, episode_id and task_id")
            env = self._made()
            options: ResetOptions = {} if task_id is None else {"task_id": str(task_id)}
            self._state = AgentGymState(env_id=self.env_id,
                                        episode_id=episode_id or uuid.uuid4().hex)
            messages, info = env.reset(seed=seed, options=options)
            self._tools = info["tools"]
            self._state.task_id = info["task_id"]
            return AgentGymObservation(
                messages=_jsonable(messages), tools=_jsonable(self._tools),
                task_id=info["task_id"], reward=None,
                task=_jsonable(shown_task(info["task"].to_dict(), self.reveal_solutions)),
                info=_jsonable({k: v for k, v in info.items()
                                if k not in ("task", "tools", "task_id")}))

        def step(self, action: AgentGymAction, timeout_s: float | None = None,
                 **kwargs: Any) -> AgentGymObservation:
            """Play one turn, or end the episode (``action.end``)."""
            env = self._env
            if env is None or self._state.task_id is None:
                raise EnvStateError("step before reset: send a reset first")
            if self._state.done:
                raise EnvStateError(f"the episode already ended ({self._state.finish_reason});"
                                    " send a reset to start another")
            self._state.step_count += 1
            if action.end is not None:
                return self._end(env, action.end)
            turn = action.text if action.text is not None else action.message
            try:
                messages, reward, terminated, truncated, info = env.step(turn)
            except EnvStateError:
                raise
            except Exception as error:  # the episode's to report, as the rollout loop does
                return self._failed(env, error)
            self._state.turn = int(info.get("turn", self._state.turn + 1))
            done = terminated or truncated
            if done:
                self._state.done, self._state.finish_reason = True, info.get("finish_reason")
            return AgentGymObservation(
                messages=_jsonable(messages), tools=_jsonable(self._tools),
                task_id=self._state.task_id, terminated=terminated, truncated=truncated,
                finish_reason=info.get("finish_reason"), info=_jsonable(info),
                reward=float(reward), done=done)

        def _end(self, env: AgentEnv, reason: str) -> AgentGymObservation:
            try:
                env.run_coroutine(env.aend(reason))
                reward, metrics = env.run_coroutine(env.agrade())
            except EnvStateError:
                raise
            except Exception as error:
                return self._failed(env, error)
            self._state.done, self._state.finish_reason = True, reason
            return AgentGymObservation(
                tools=_jsonable(self._tools), task_id=self._state.task_id or "",
                truncated=True, finish_reason=reason,
                info=_jsonable({"finish_reason": reason, "reward_metrics": metrics}),
                reward=float(reward), done=True)

        def _failed(self, env: AgentEnv, error: Exception) -> AgentGymObservation:
            reason = "sandbox_error" if isinstance(error, SandboxError) else "error"
            self._state.done, self._state.finish_reason = True, reason
            with contextlib.suppress(Exception):  # free its sandbox now; it failed already
                env.run_coroutine(env.arelease())
            return AgentGymObservation(
                tools=_jsonable(self._tools), task_id=self._state.task_id or "",
                truncated=True, finish_reason=reason,
                error=_jsonable(f"{type(error).__name__}: {error}"),
                info={"finish_reason": reason}, reward=0.0, done=True)

        @property
        def state(self) -> AgentGymState:
            """The session's state (read on the server's event loop: no env call)."""
            return self._state.model_copy()

        def get_metadata(self) -> EnvironmentMetadata:
            """The env's id and registered description, and agentgym's version."""
            from agentgym.core.registry import get

            return EnvironmentMetadata(
                name=self.env_id, description=get("envs", self.env_id).description,
                version=agentgym.__version__)

        def close(self) -> None:
            """Close the session's env (its episode's sandbox included)."""
            if self._env is not None:
                self._env.close()

        def _made(self) -> AgentEnv:
            if self._env is None:
                self._env = _make_agent_env(self.env_id, self.env_kwargs)
            return self._env

    return {"AgentGymAction": AgentGymAction, "AgentGymObservation": AgentGymObservation,
            "AgentGymState": AgentGymState, "AgentGymEnvironment": AgentGymEnvironment}


def _make_agent_env(env_id: str, env_kwargs: dict[str, Any]) -> AgentEnv:
    import agentgym

    env = agentgym.make(env_id, **env_kwargs).unwrapped
    if not isinstance(env, AgentEnv):
        env_type = type(env).__name__
        with contextlib.suppress(Exception):
            env.close()
        raise InvalidArgumentError(
            f"env {env_id!r} is a {env_type}, not an AgentEnv: only AgentEnv envs (every"
            " built-in one) can be served over OpenEnv, since its tasks are listed from"
            " env.tasks")
    return env


def openenv_app(env_id: str, env_kwargs: dict[str, Any] | None = None, *,
                max_sessions: int = DEFAULT_MAX_SESSIONS, reveal_solutions: bool = False
                ) -> Any:
    """The FastAPI app that serves ``env_id`` (made with ``env_kwargs``) as an OpenEnv
    environment server, up to ``max_sessions`` WebSocket sessions at once (module
    docstring). Tasks are shown without what grades them (:func:`shown_task`) unless
    ``reveal_solutions``. Run it with :class:`~agentgym.core.serving.LocalServer` (what ``agentgym
    openenv serve`` does) or any ASGI server.

    The env is made once here, so that an unknown id or a bad keyword argument fails before
    a port opens; that instance answers the task routes and plays no episode.
    """
    if not isinstance(max_sessions, int) or max_sessions < 1:
        raise InvalidArgumentError(
            f"max_sessions must be a number of sessions >= 1, got {max_sessions!r}")
    kwargs = dict(env_kwargs or {})
    catalog = _make_agent_env(env_id, kwargs)  # before openenv-core's seconds of importing
    try:
        return _app(env_id, kwargs, catalog, max_sessions, reveal_solutions)
    except BaseException:
        catalog.close()
        raise


def _app(env_id: str, kwargs: dict[str, Any], catalog: AgentEnv, max_sessions: int,
         reveal_solutions: bool) -> Any:
    _require_openenv()
    from fastapi import FastAPI, HTTPException
    from openenv.core.env_server.http_server import HTTPEnvServer
    from openenv.core.env_server.types import ServerMode

    import agentgym

    classes = _server_classes()
    app = FastAPI(title=f"agentgym {env_id} (OpenEnv)", version=agentgym.__version__,
                  description=f"The agentgym env {env_id!r} as an OpenEnv environment: one"
                              " session per WebSocket connection at /ws.")
    # A partial of the class (not a function): OpenEnv then reads its concurrency flag
    # from the class instead of building a throw-away env to ask it.
    server = HTTPEnvServer(
        functools.partial(classes["AgentGymEnvironment"], env_id, kwargs, reveal_solutions),
        classes["AgentGymAction"], classes["AgentGymObservation"],
        max_concurrent_envs=max_sessions)
    server.register_routes(app, mode=ServerMode.PRODUCTION)
    app.add_middleware(_QuietDisconnect)
    parser = getattr(catalog.parser, "name", "") or type(catalog.parser).__name__

    @app.get(TASKS_ROUTE, tags=["agentgym"], summary="The served env's task ids")
    def task_list() -> dict[str, Any]:
        return {"env": env_id, "task_ids": catalog.task_ids(), "parser": parser,
                "max_turns": catalog.max_turns}

    @app.get(TASKS_ROUTE + "/{task_id:path}", tags=["agentgym"],
             summary="One task, its solution in the env's tool-call format")
    def task_of(task_id: str) -> dict[str, Any]:
        try:
            task = catalog.tasks.get(task_id)
        except UnknownIdError as unknown:
            raise HTTPException(status_code=404, detail=str(unknown)) from None
        return _jsonable(shown_task(task.rendered(catalog.parser).to_dict(), reveal_solutions))

    app.state.agentgym_env = catalog  # lives as long as the app
    return app


def shown_task(task: dict[str, Any], reveal_solutions: bool = False) -> dict[str, Any]:
    """A task (:meth:`Task.to_dict <agentgym.core.task.Task.to_dict>`) as the server shows
    it: without its solution and its metadata (the expected answer and whatever else the
    grader reads, known-wrong solutions included) unless ``reveal_solutions``. Whoever
    connects may be the policy being trained, and a driver that puts the observation in
    the prompt would hand it the answer; serve with ``--reveal-solutions`` only to play
    reference solutions (``validate``, the ``oracle`` policy) through the server."""
    if reveal_solutions:
        return task
    return {**{k: v for k, v in task.items() if k != "solution"}, "metadata": {}}


class _QuietDisconnect:
    """ASGI middleware: a WebSocket session whose client has already closed it ends
    quietly. openenv-core 0.3 closes the socket again after the client's close message and
    lets the resulting ``WebSocketDisconnect`` out, which uvicorn logs as an application
    error at the end of every session; nothing was lost."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        from starlette.websockets import WebSocketDisconnect

        try:
            await self.app(scope, receive, send)
        except WebSocketDisconnect:
            if scope["type"] != "websocket":
                raise


def _jsonable(value: Any) -> Any:
    """``value`` as JSON data: bytes as base64 text, a Task as its dict, text that is not
    valid Unicode (lone surrogates, which a model's output may decode to) with those
    characters escaped, anything else unknown as its text."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Task):
        return value.to_dict()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars in a reward's metrics
        return _jsonable(value.item())
    return str(value)


# ---- playing: OpenEnv server -> agentgym env ------------------------------------------------


def _base_url(url: str, allow_remote: bool) -> str:
    """``url`` checked and written as ``http(s)://host:port``."""
    parts = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    if scheme not in ("http", "https") or not parts.hostname:
        raise InvalidArgumentError(
            f"url={url!r} is not the address of an OpenEnv server; give its HTTP(S) or"
            " WebSocket base URL, e.g. url='http://127.0.0.1:8001'")
    if not is_loopback(parts.hostname) and not allow_remote:
        raise InvalidArgumentError(
            f"url={url!r} names {parts.hostname!r}, not a loopback address: the openenv env"
            " plays servers on this machine unless told; pass allow_remote=True"
            " (-e allow_remote=true) to play one there")
    return urllib.parse.urlunsplit((scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


class RemoteTasks(TaskSource):
    """The task list of an env served by ``agentgym openenv serve`` (``listing``, what
    ``GET /agentgym/tasks`` answered): each task fetched when first asked for (``GET
    /agentgym/tasks/{id}``) and kept."""

    def __init__(self, url: str, timeout_s: float, listing: dict[str, Any]):
        self.url, self.timeout_s = url, timeout_s
        self.env_id: str = str(listing.get("env", ""))
        self.parser: str = str(listing.get("parser", ""))
        self.max_turns: int = int(listing.get("max_turns") or 1)
        self._ids = {str(t): i for i, t in enumerate(listing.get("task_ids") or [])}
        self._order = list(self._ids)
        self._fetched: dict[str, Task] = {}
        if not self._order:
            raise MissingResourceError(f"the env served at {url} lists no tasks",
                                       "serve an env with tasks (check its -e options)")

    def __len__(self) -> int:
        return len(self._order)

    def __getitem__(self, index: int) -> Task:  # type: ignore[override]
        return self.get(self._order[index])

    def ids(self) -> list[str]:
        return list(self._order)

    def get(self, task_id: str) -> Task:
        """The task ``task_id``, fetched from the server the first time."""
        if task_id not in self._ids:
            raise UnknownIdError("task", task_id, self._order,
                                 f"curl {self.url}{TASKS_ROUTE}")
        if task_id not in self._fetched:
            quoted = urllib.parse.quote(task_id, safe="")
            route = f"{TASKS_ROUTE}/{quoted}"
            found = _get_json(self.url, route, self.timeout_s)
            if found is None:
                raise MissingResourceError(
                    f"GET {self.url}{route} failed: HTTP 404 Not Found",
                    f"check the server's log; the task id must be one of GET"
                    f" {self.url}{TASKS_ROUTE}")
            self._fetched[task_id] = Task.from_dict(found)
        return self._fetched[task_id]


def _get_json(url: str, route: str, timeout_s: float) -> Any:
    """What ``GET url+route`` answers, as JSON; None when the server has no such route
    (404). A server that cannot be reached, or that answers otherwise, is a
    :class:`MissingResourceError` that says so."""
    address = url + route
    # Loopback requests skip any proxy the environment names; others may need it.
    host = urllib.parse.urlsplit(url).hostname or ""
    opener = (urllib.request.build_opener(urllib.request.ProxyHandler({}))
              if is_loopback(host) else urllib.request.build_opener())
    try:
        with opener.open(address, timeout=timeout_s) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as refused:
        if refused.code == 404:
            return None
        raise MissingResourceError(f"GET {address} failed: HTTP {refused.code} {refused.reason}",
                                   "check the server's log") from None
    except (urllib.error.URLError, OSError, ValueError) as down:
        reason = getattr(down, "reason", down)
        raise MissingResourceError(
            f"no OpenEnv server answers at {url} ({reason})",
            "start one (`agentgym openenv serve ENV_ID --port PORT`, or any OpenEnv"
            " environment's server) and pass its address, e.g."
            " agentgym.make('openenv', url='http://127.0.0.1:PORT') or"
            " -e url=http://127.0.0.1:PORT") from None


class _Session:
    """One WebSocket session of OpenEnv's own client, each call bounded in time and each
    failure an :class:`OpenEnvServerError` that says what happened."""

    def __init__(self, url: str, connect_timeout_s: float, timeout_s: float):
        from openenv.core.generic_client import GenericEnvClient

        self.url, self.timeout_s = url, timeout_s
        #: Closed after any failure: the client would otherwise reconnect to a new session.
        self.closed = False
        self._client = GenericEnvClient(base_url=url, connect_timeout_s=connect_timeout_s,
                                        message_timeout_s=timeout_s)
        self._connect_timeout_s = connect_timeout_s

    async def reset(self, **data: Any) -> dict[str, Any]:
        """The reset observation: ``{observation fields..., "reward", "done"}``."""
        await self._call("connect", self._client.connect(), self._connect_timeout_s)
        result = await self._call("reset", self._client.reset(**data), self.timeout_s)
        return {**result.observation, "reward": result.reward, "done": result.done}

    async def step(self, action: dict[str, Any]) -> dict[str, Any]:
        """The step observation, as :meth:`reset` returns it."""
        result = await self._call("step", self._client.step(action), self.timeout_s)
        return {**result.observation, "reward": result.reward, "done": result.done}

    async def try_step(self, action: dict[str, Any]
                       ) -> tuple[dict[str, Any] | None, str | None]:
        """One step of a server not started by agentgym: ``(observation, None)`` as
        :meth:`step` returns it, or ``(None, why)`` when the server refused the action
        (its validation errors) or its env raised on it; the session goes on either way."""
        return await self._call("step", self._try_step(action), self.timeout_s)

    async def _try_step(self, action: dict[str, Any]
                        ) -> tuple[dict[str, Any] | None, str | None]:
        # EnvClient.step raises a RuntimeError with the error's message only ("Invalid
        # message"), without which field was wrong and why: the step goes through the
        # client's own _send and _receive (openenv-core 0.3) to read the whole error.
        client = self._client
        await client._send({"type": "step", "data": action})
        response = await client._receive()
        data = response.get("data") or {}
        if response.get("type") == "error":
            code = str(data.get("code", "UNKNOWN"))
            if code in ("VALIDATION_ERROR", "EXECUTION_ERROR"):
                return None, _refusal(data)
            raise RuntimeError(f"Server error: {data.get('message', 'Unknown error')}"
                               f" (code: {code})")
        observation = data.get("observation")
        return {**(observation if isinstance(observation, dict) else {}),
                "reward": data.get("reward"), "done": bool(data.get("done"))}, None

    async def close(self) -> None:
        """Close the session (the server then closes its env); bounded, errors ignored."""
        self.closed = True
        with contextlib.suppress(Exception):
            await wait_within(self._part(), 5.0)

    async def _part(self) -> None:
        connection = self._client._ws  # EnvClient's connection (openenv-core 0.3)
        if connection is not None:
            # The server closes first: openenv-core 0.3's closes the socket again after the
            # client's close message, and logs an error at the end of every session when
            # the client's close frame came first (as EnvClient.close sends it).
            with contextlib.suppress(Exception):
                await connection.send(json.dumps({"type": "close"}))
                await wait_within(connection.wait_closed(), 1.0)
        await self._client.close()

    async def _call(self, what: str, work: Any, timeout_s: float) -> Any:
        if self.closed:
            work.close()  # never awaited
            raise OpenEnvServerError(f"the session with the OpenEnv server at {self.url} is"
                                     f" closed (it failed earlier); cannot {what}")
        try:
            # The client bounds each receive; this bounds the send and connect as well.
            return await wait_within(work, timeout_s + 5.0)
        except asyncio.CancelledError:
            raise
        except (asyncio.TimeoutError, TimeoutError):
            problem = f"did not answer the {what} within {timeout_s:g} s (timeout_s)"
        except ConnectionError as down:
            problem = f"cannot be reached ({down.__cause__ or down})"
        except RuntimeError as refused:  # the client's "Server error: ... (code: ...)"
            problem = f"refused the {what}: {refused}"
        except Exception as broken:  # a closed connection, a protocol error
            from websockets.exceptions import ConnectionClosed

            words = await self._parting_words()
            if words:
                problem = f"refused the {what}: {words}"
            elif isinstance(broken, ConnectionClosed):
                problem = (f"closed the connection during the {what} ({broken}): it stopped,"
                           " restarted or crashed")
            else:
                problem = (f"broke the session during the {what} ({type(broken).__name__}:"
                           f" {broken})")
        if "CAPACITY_REACHED" in problem:
            problem += ("; serve with more sessions (`agentgym openenv serve --max-sessions N`;"
                        " an OpenEnv app's max_concurrent_envs), or play fewer episodes at"
                        " once (`agentgym eval --concurrency N`; `--mode sync --concurrency 1`"
                        " for a server of one session)")
        await self.close()
        raise OpenEnvServerError(f"the OpenEnv server at {self.url} {problem}")

    async def _parting_words(self) -> str | None:
        """The error the server sent before it closed the connection, if one is waiting
        unread. OpenEnv's server refuses a session (at capacity, its env failing to build)
        that way, at once: the refusal can arrive before the first request, whose send then
        fails on the closed connection."""
        connection = self._client._ws  # EnvClient's connection (openenv-core 0.3)
        if connection is None:
            return None
        with contextlib.suppress(Exception):
            data = json.loads(await wait_within(connection.recv(), 1.0)).get("data") or {}
            if data.get("message"):
                return f"{data['message']} (code: {data.get('code', 'UNKNOWN')})"
        return None


async def _opened_session(url: str, connect_timeout_s: float, timeout_s: float,
                          capacity_wait_s: float, **reset: Any
                          ) -> tuple[_Session, dict[str, Any]]:
    """A new session and its reset's observation. A server at capacity is asked again,
    backing off, for up to ``capacity_wait_s``: the session of an episode that just ended
    closes a moment after the next one asks (a server of one session refused every other
    episode of a pipeline, even one at a time)."""
    deadline = time.monotonic() + capacity_wait_s
    pause = 0.05
    while True:
        session = _Session(url, connect_timeout_s, timeout_s)
        try:
            return session, await session.reset(**reset)
        except OpenEnvServerError as refused:
            await session.close()
            if "CAPACITY_REACHED" not in str(refused) or time.monotonic() + pause > deadline:
                raise
        except BaseException:  # cancelled (setup_timeout_s) or broken: nothing left open
            await session.close()
            raise
        await asyncio.sleep(pause)
        pause = min(2 * pause, 1.0)


def _wire_action(action: Any) -> tuple[dict[str, Any], str | None]:
    """``action`` as the OpenEnv action sent, and why it had to be replaced (None when it
    is sent as it is): a turn that is not text or a dict, or that JSON cannot carry,
    travels as an empty turn, the reason reported to the agent by the adapter."""
    if isinstance(action, str):
        wire: dict[str, Any] = {"text": action}
    elif isinstance(action, dict):
        if value_depth(action, MAX_SENT_DEPTH) > MAX_SENT_DEPTH:
            return {"text": ""}, (f"the turn nests over {MAX_SENT_DEPTH} levels of lists and"
                                  " objects; write plain tool calls")
        wire = {"message": action}
    else:
        return {"text": ""}, (f"a turn must be text (or an assistant message dict), got"
                              f" {type(action).__name__}")
    try:
        size = len(json.dumps(wire))
    except (TypeError, ValueError, RecursionError) as unsendable:
        return {"text": ""}, f"the turn cannot be written as JSON ({unsendable})"
    if size > MAX_SENT_BYTES:
        return {"text": ""}, (f"the turn is {size} characters of JSON, over the"
                              f" {MAX_SENT_BYTES} sent to the env's server")
    return wire, None


# ---- playing any OpenEnv server ---------------------------------------------------------


def _refusal(data: dict[str, Any]) -> str:
    """The server's error for a step it refused, as the agent reads it: each validation
    error's field, message and the value given, or the message of its env's exception."""
    lines = []
    for error in data.get("errors") or []:
        if not isinstance(error, dict):
            continue
        where = ".".join(str(part) for part in error.get("loc") or ()) or "the action"
        line = f"{where}: {error.get('msg', 'invalid')}"
        if "input" in error and error.get("type") != "missing":
            line += f" (got {json.dumps(error['input'], default=str)[:200]})"
        lines.append(line)
    if lines:
        return "invalid arguments: " + "; ".join(lines)
    return str(data.get("message") or "the environment refused the action")


#: Keys of a JSON schema whose values are data, not schemas: left as they are.
_SCHEMA_DATA = ("default", "examples", "const", "enum")
#: Keys of a JSON schema whose values map names to schemas (a name may be "title").
_SCHEMA_MAPS = ("properties", "patternProperties")


def action_parameters(action_schema: dict[str, Any]) -> dict[str, Any]:
    """The parameters of the ``step`` tool: an OpenEnv server's action schema (``GET
    /schema``'s ``action``, pydantic's JSON schema) made self-contained, as OpenAI function
    schemas are: each ``$ref`` replaced by its ``$defs`` entry (a model met again inside
    itself is a plain ``{"type": "object"}`` there), pydantic's ``title`` keys dropped,
    and the fields the agent has nothing to choose in left out: OpenEnv's own
    ``metadata`` (every action has it) and a field fixed to one value with a default
    (a discriminator such as MCP actions' ``type``)."""
    defs = {**(action_schema.get("definitions") or {}), **(action_schema.get("$defs") or {})}

    def inline(node: Any, visiting: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [inline(item, visiting) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if name not in defs or name in visiting:
                target: dict[str, Any] = {"type": "object"}
            else:
                target = inline(defs[name], (*visiting, name))
            return {**target, **inline(siblings, visiting)}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("$defs", "definitions", "title"):
                continue
            if key in _SCHEMA_DATA:
                out[key] = value
            elif key in _SCHEMA_MAPS and isinstance(value, dict):
                out[key] = {name: inline(sub, visiting) for name, sub in value.items()}
            else:
                out[key] = inline(value, visiting)
        return out

    resolved = inline(action_schema, ())
    properties = dict(resolved.get("properties") or {})
    required = [name for name in resolved.get("required") or [] if name in properties]

    def fixed(schema: dict[str, Any]) -> bool:
        one = "const" in schema or len(schema.get("enum") or ()) == 1
        return one and "default" in schema

    for name in list(properties):
        if name not in required and (name == "metadata" or fixed(properties[name])):
            del properties[name]
    parameters: dict[str, Any] = {"type": "object", "properties": properties,
                                  "required": required}
    if resolved.get("additionalProperties") is False:
        parameters["additionalProperties"] = False
    return parameters


#: Characters of one observation the agent reads; the rest is cut, with a note.
MAX_OBSERVATION_CHARS = 32_000


def render_observation(observation: dict[str, Any]) -> str:
    """An OpenEnv observation as the agent reads it: its fields other than ``reward``,
    ``done`` and ``metadata`` (what OpenEnv itself adds), as compact JSON, or, when the
    observation has one field and it is text, that text as it is. Cut at
    :data:`MAX_OBSERVATION_CHARS`."""
    shown = {k: v for k, v in observation.items() if k not in ("reward", "done", "metadata")}
    values = list(shown.values())
    if len(values) == 1 and isinstance(values[0], str):
        text = values[0]
    else:
        text = json.dumps(_jsonable(shown), ensure_ascii=False)
    if len(text) > MAX_OBSERVATION_CHARS:
        cut = len(text) - MAX_OBSERVATION_CHARS
        text = text[:MAX_OBSERVATION_CHARS] + f"\n[... {cut} more characters cut]"
    return text


@dataclasses.dataclass(frozen=True)
class GenericServer:
    """What an OpenEnv server not started by agentgym says about itself: its name and
    description (``GET /metadata``) and the parameters of the ``step`` tool, from its
    action schema (``GET /schema``; :func:`action_parameters`)."""

    name: str
    description: str
    action_description: str
    parameters: dict[str, Any]

    @classmethod
    def read(cls, url: str, timeout_s: float) -> GenericServer:
        """Read them from the server at ``url``."""
        schemas = _get_json(url, "/schema", timeout_s)
        if not isinstance(schemas, dict) or not isinstance(schemas.get("action"), dict):
            raise MissingResourceError(
                f"{url} answers HTTP but is not an OpenEnv environment server: it has neither"
                f" GET {TASKS_ROUTE} (agentgym's) nor GET /schema with an action schema"
                " (every OpenEnv server's)",
                "point url= at an OpenEnv server (`agentgym openenv serve ENV_ID`, or an"
                " OpenEnv environment's own server)")
        try:  # OpenEnv builds an env to answer /metadata; a server may fail to: not needed
            metadata = _get_json(url, "/metadata", timeout_s) or {}
        except MissingResourceError:
            metadata = {}
        metadata = metadata if isinstance(metadata, dict) else {}
        action = schemas["action"]
        return cls(name=str(metadata.get("name") or "") or url,
                   description=str(metadata.get("description") or "").strip(),
                   action_description=str(action.get("description") or "").strip(),
                   parameters=action_parameters(action))


class _StepTool(Tool):
    """The one tool of an episode of a server not started by agentgym: its arguments are
    one action; a call is one OpenEnv step, its answer the observation."""

    def __init__(self, server: GenericServer):
        self.fn = None  # type: ignore[assignment]
        self.name = STEP_TOOL
        about = " ".join(part for part in (server.description, server.action_description)
                         if part)
        self.description = (f"Act in the environment {server.name}: one call is one step,"
                            " its arguments the action; returns what the environment"
                            " shows next." + (f" {about}" if about else ""))
        self.parameters = copy.deepcopy(server.parameters)
        self.is_method = True

    async def call(self, arguments: Any, instance: Any = None) -> str:
        if not isinstance(arguments, dict):
            raise ToolError(f"the arguments of {self.name!r} must be a JSON object (the"
                            f" action's fields), got {type(arguments).__name__}")
        assert isinstance(instance, OpenEnvEnv)
        required = self.parameters["required"]
        # An explicit null for an optional field means "not given" (strict-mode function
        # calling sends every property), as for any agentgym tool.
        action = {k: v for k, v in arguments.items() if v is not None or k in required}
        return await instance._play_step(action)


class OpenEnvEnv(AgentEnv):
    """Play an OpenEnv environment server (here or, with ``allow_remote``, on another
    machine) as an agentgym env: one started by ``agentgym openenv serve``, or any other.

    Each episode is a WebSocket session of OpenEnv's own client. The server is told apart
    by ``GET /agentgym/tasks``:

    * **served by agentgym**: the server's env plays the turns (its parser, tools, limits
      and grader), and its observations, rewards and ends come back as this env's. The
      task is drawn here (seeded) from the server's task list and named to the server, so
      seeded resets reproduce. ``defer_grading`` is kept here: the server grades on the
      last step and :meth:`agrade` returns that grade; an episode ended from outside
      (``aend``) is graded by the server when :meth:`agrade` asks.
    * **any other OpenEnv server** (no such route): the agent gets one tool, ``step``,
      whose parameters are the server's action schema (``GET /schema``, made
      self-contained: :func:`action_parameters`); each call is one OpenEnv step, and its
      answer the observation (:func:`render_observation`). An action the server refuses
      (its validation errors) or its env raises on is a tool error the agent reads; the
      episode goes on. The reset's observation follows ``instructions`` in the opening
      user message. A step whose observation is ``done`` ends the episode (terminated,
      finish reason ``submitted``); ``max_turns`` truncates it. Tasks ``seed-0`` ...
      ``seed-{num_tasks-1}`` reset the server with that seed; they have no reference
      solutions (the ``oracle`` policy cannot play them). The episode's reward is the sum
      of its steps' rewards (the return), or the last step's (``episode_reward="last"``,
      for servers whose reward is a running score); the grade's metrics hold ``steps``,
      ``reward_sum`` and ``reward_last``.

    ``overlap_setup`` has no effect (the server's reset returns once set up).

    Args:
        url: the server's base URL (``http://127.0.0.1:PORT``; ``ws://`` works too).
        allow_remote: let ``url`` name a host other than this machine.
        connect_timeout_s: seconds to connect (and to read the task list or schemas).
        timeout_s: seconds one reset or step may take on the server (a turn's tools and
            the grading included) before the episode ends with :class:`OpenEnvServerError`.
        capacity_wait_s: how long a reset asks again, backing off, while the server is at
            capacity (``CAPACITY_REACHED``: the session of an episode that just ended still
            closing, a server of one session) before the episode fails; 0 asks once.
        instructions: (another OpenEnv server) what the task is, the opening user message
            before the reset's observation; default: a line naming the environment and the
            ``step`` tool.
        num_tasks: (another OpenEnv server) how many seeded tasks (default 100).
        episode_reward: (another OpenEnv server) ``"sum"`` (default) or ``"last"``.
        max_turns: (another OpenEnv server) assistant turns before the episode is
            truncated (default 30). A server of agentgym's keeps its env's limit.
        parser: (another OpenEnv server) the tool-call format of model text (default
            ``hermes``). A server of agentgym's uses its env's.
        render_mode: ``None`` or ``"ansi"``.
    """

    # A generic episode's opening message shows the reset's observation.
    setup_before_prompt = True

    def __init__(self, url: str | None = None, *, allow_remote: bool = False,
                 connect_timeout_s: float = 10.0, timeout_s: float = 900.0,
                 capacity_wait_s: float = 30.0, instructions: str | None = None,
                 num_tasks: int | None = None, episode_reward: str | None = None,
                 max_turns: int | None = None,
                 parser: str | None = None, render_mode: str | None = None):
        if url is None:
            raise MissingResourceError(
                "the openenv env plays a running OpenEnv server, and no url= names one",
                "start one (`agentgym openenv serve ENV_ID --port PORT`, or any OpenEnv"
                " environment's server) and pass url='http://127.0.0.1:PORT'"
                " (-e url=http://127.0.0.1:PORT)")
        for name, value in (("connect_timeout_s", connect_timeout_s), ("timeout_s", timeout_s)):
            if not value > 0:
                raise InvalidArgumentError(f"{name} must be > 0 seconds, got {value!r}")
        if not capacity_wait_s >= 0:
            raise InvalidArgumentError(f"capacity_wait_s must be >= 0 seconds, got"
                                       f" {capacity_wait_s!r}")
        self.capacity_wait_s = capacity_wait_s
        if episode_reward is not None and episode_reward not in EPISODE_REWARDS:
            raise InvalidArgumentError(
                f"episode_reward must be one of {', '.join(EPISODE_REWARDS)}, got"
                f" {episode_reward!r}: sum adds the steps' rewards, last keeps the last's")
        if num_tasks is not None and not (isinstance(num_tasks, int) and num_tasks >= 1):
            raise InvalidArgumentError(f"num_tasks must be a number of tasks >= 1, got"
                                       f" {num_tasks!r}")
        self.url = _base_url(url, allow_remote)
        _require_openenv()
        self.connect_timeout_s, self.timeout_s = connect_timeout_s, timeout_s
        listing = _get_json(self.url, TASKS_ROUTE, connect_timeout_s)
        generic_only = {"instructions": instructions, "num_tasks": num_tasks,
                        "episode_reward": episode_reward, "max_turns": max_turns,
                        "parser": parser}
        #: What a server not started by agentgym says about itself; None for agentgym's.
        self.server: GenericServer | None = None
        #: The env an agentgym server plays (``agentgym openenv serve ENV_ID``); None for
        #: any other server.
        self.served_env_id: str | None = None
        self.episode_reward = episode_reward or "sum"
        if isinstance(listing, dict):
            given = sorted(name for name, value in generic_only.items() if value is not None)
            if given:
                raise InvalidArgumentError(
                    f"{', '.join(given)} apply to OpenEnv servers not started by agentgym;"
                    f" {self.url} serves the agentgym env {listing.get('env')!r}, which keeps"
                    " its own prompt, tasks, tool-call parser, reward and turn limit: pass"
                    " them to the served env (`agentgym openenv serve ENV_ID -e KEY=VALUE`)")
            tasks = RemoteTasks(self.url, connect_timeout_s, listing)
            self.served_env_id = tasks.env_id
            # The server's parser and turn limit: what its solutions are written in, and
            # when it truncates; this env parses nothing itself.
            served_parser = tasks.parser if has("parsers", tasks.parser) else "hermes"
            super().__init__(tasks, parser=served_parser, max_turns=max(1, tasks.max_turns),
                             turn_timeout_s=None, render_mode=render_mode)
            return
        self.server = GenericServer.read(self.url, connect_timeout_s)
        self._step_tool = _StepTool(self.server)
        prompt = instructions or (
            f"You act in the environment {self.server.name} (an OpenEnv environment) by"
            f" calling the tool `{STEP_TOOL}`: each call is one step of the environment,"
            " its arguments the action, and it returns what the environment shows next."
            " Keep acting until the environment ends the episode.")
        count = num_tasks or DEFAULT_NUM_TASKS
        seeded = TaskList([Task(f"seed-{k}", prompt, {"seed": k}) for k in range(count)])
        # The server's env runs the step: a turn's time is bounded by timeout_s per call.
        super().__init__(seeded, parser=parser or "hermes",
                         max_turns=max_turns or DEFAULT_MAX_TURNS, turn_timeout_s=None,
                         render_mode=render_mode)

    def tools(self) -> list[Any]:
        """A generic server's one tool, ``step`` (the class docstring); none for a server
        of agentgym's, whose tools are its env's (:meth:`tool_schemas`)."""
        return [] if self.server is None else [BoundTool(self._step_tool, self)]

    async def setup_episode(self, task: Task) -> None:
        """(A generic server.) Open the episode's session and reset the server with the
        task's seed; its observation opens the conversation."""
        episode = self.episode
        assert episode is not None
        session, opening = await _opened_session(
            self.url, self.connect_timeout_s, self.timeout_s, self.capacity_wait_s,
            seed=int(task.metadata["seed"]))
        await episode.keep(SESSION, session, session.close)
        episode.resources[OPENING] = opening
        episode.resources[REWARDS] = []

    def initial_messages(self, task: Task) -> list[Message]:
        """(A generic server.) The instructions, then the reset's observation."""
        assert self.episode is not None
        opening = render_observation(self.episode.resources[OPENING])
        return [{"role": "user", "content": f"{task.prompt}\n\nThe environment shows:"
                                            f"\n{opening}"}]

    async def _play_step(self, action: dict[str, Any]) -> str:
        """One step of a generic server with ``action``: the observation as the agent
        reads it. Raises :class:`ToolError` when the server refused the action and
        :class:`Submitted` when the step ended the episode."""
        episode = self._require_episode()
        try:
            size = len(json.dumps(action))
        except (TypeError, ValueError, RecursionError) as unsendable:
            raise ToolError(f"the action cannot be written as JSON ({unsendable})") from None
        if size > MAX_SENT_BYTES:
            raise ToolError(f"the action is {size} characters of JSON, over the"
                            f" {MAX_SENT_BYTES} sent to the environment's server")
        observation, refused = await episode.resources[SESSION].try_step(action)
        if observation is None:
            raise ToolError(f"the environment refused the action: {refused}")
        reward = observation.get("reward")
        episode.resources[REWARDS].append(float(reward) if isinstance(reward, int | float)
                                          else 0.0)
        text = render_observation(observation)
        if observation["done"]:
            raise Submitted(answer=observation, message=text)
        return text

    async def grade(self, episode: Episode) -> RewardResult:
        """The server's grade: the one it returned with the last step, or, for an episode
        ended from outside, the one it gives when told to end it. For a generic server,
        the sum or the last of the steps' rewards (``episode_reward``)."""
        if self.server is not None:
            rewards: list[float] = episode.resources.get(REWARDS, [])
            total, last = float(sum(rewards)), (rewards[-1] if rewards else 0.0)
            return RewardResult(total if self.episode_reward == "sum" else last,
                                {"steps": len(rewards), "reward_sum": total,
                                 "reward_last": last})
        if GRADE not in episode.resources:
            session: _Session = episode.resources[SESSION]
            observation = await session.step({"end": episode.finish_reason or "ended"})
            self._check_failure(observation)
            episode.resources[GRADE] = (float(observation.get("reward") or 0.0),
                                        dict(observation.get("info", {}).get("reward_metrics")
                                             or {}))
        reward, metrics = episode.resources[GRADE]
        return RewardResult(reward, copy.deepcopy(metrics))

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The running episode's tools as the server lists them (for a generic server,
        the ``step`` tool)."""
        if self.server is not None:
            return super().tool_schemas()
        episode = self.episode
        return copy.deepcopy(episode.resources.get(TOOLS, [])) if episode else []

    async def areset(self, *, seed: int | None = None, options: ResetOptions | None = None
                     ) -> tuple[list[Message], ResetInfo]:
        """Start an episode: a new session on the server, reset to ``task_id`` (drawn here
        with the seeded generator unless given); ``setup_timeout_s`` bounds the server's
        reset. Returns the server's opening messages and the reset info. A generic
        server's episode starts as any AgentEnv's (:meth:`setup_episode`)."""
        if self.server is not None:
            return await super().areset(seed=seed, options=options)
        self._check_open()
        gymnasium.Env.reset(self, seed=seed)
        await self._end_episode()
        options = options or {}
        ids = self.tasks.ids()
        if "task_id" in options:
            task_id = str(options["task_id"])
            if task_id not in ids:
                raise UnknownIdError("task", task_id, ids, f"curl {self.url}{TASKS_ROUTE}")
        else:
            task_id = ids[int(self.np_random.integers(len(ids)))]
        opening = _opened_session(self.url, self.connect_timeout_s, self.timeout_s,
                                  self.capacity_wait_s, seed=seed, task_id=task_id)
        limit = options.get("setup_timeout_s")
        try:
            session, observation = await (opening if limit is None
                                          else wait_within(opening, float(limit)))
        except asyncio.TimeoutError:
            raise SetupTimeoutError(
                f"the server's reset did not finish within {float(limit):g} s"
                " (setup_timeout_s) and was cancelled") from None
        try:
            task = Task.from_dict(observation["task"])
        except BaseException:
            await session.close()
            raise
        episode = Episode(task=task, attempt=int(options.get("attempt", 0)),
                          group=int(options.get("group", 0)))
        self.episode = episode
        self._defer_grading = bool(options.get("defer_grading", False))
        await episode.keep(SESSION, session, session.close)
        episode.resources[TOOLS] = list(observation.get("tools") or [])
        episode.messages = list(observation.get("messages") or [])
        served = {k: v for k, v in (observation.get("info") or {}).items()
                  if k not in ("attempt", "group")}  # the server's episode is always 0, 0
        info: ResetInfo = {**_extra(served), "task_id": task.id, "tools": self.tool_schemas(),
                           "task": task, "attempt": episode.attempt, "group": episode.group}
        return copy.deepcopy(episode.messages), info

    async def astep(self, action: str | Message
                    ) -> tuple[list[Message], float, bool, bool, StepInfo]:
        """Send one assistant turn to the server; returns what it answered, as
        :meth:`AgentEnv.astep <agentgym.core.env.AgentEnv.astep>` does. Raises
        :class:`OpenEnvServerError` when the server fails (module docstring). A generic
        server's turn is played as any AgentEnv's, each ``step`` call one OpenEnv step."""
        if self.server is not None:
            return await super().astep(action)
        episode = self._require_episode()
        wire, unsent = _wire_action(action)
        try:
            observation = await episode.resources[SESSION].step(wire)
            self._check_failure(observation)
        except AgentGymError as failed:  # the episode cannot go on
            episode.finish_reason = ("sandbox_error" if isinstance(failed, SandboxError)
                                     else "error")
            raise
        info: StepInfo = _extra(observation.get("info") or {})  # type: ignore[assignment]
        messages: list[Message] = list(observation.get("messages") or [])
        if unsent is not None:  # the agent learns why its turn arrived empty
            info["errors"] = [unsent, *info.get("errors", [])]
            info["tool_errors"] = info.get("tool_errors", 0) + 1
            messages.insert(0, {"role": "user",
                                "content": f"Your turn could not be read: {unsent}."})
        terminated = bool(observation.get("terminated"))
        truncated = bool(observation.get("truncated")) or (
            bool(observation.get("done")) and not terminated)
        episode.turn = int(info.get("turn", episode.turn + 1))
        assistant = info.get("assistant_message") or {"role": "assistant", "content": ""}
        episode.messages += [assistant, *messages]
        episode.tool_calls += len(info.get("tool_calls", []))
        episode.tool_errors += int(info.get("tool_errors", 0))
        reward = 0.0
        if terminated or truncated:
            episode.submitted = terminated
            episode.finish_reason = info.get("finish_reason") or (
                "submitted" if terminated else "max_turns")
            info["finish_reason"] = episode.finish_reason
            episode.resources[GRADE] = (float(observation.get("reward") or 0.0),
                                        dict(info.pop("reward_metrics", None) or {}))
            if self._defer_grading:
                info["grading_deferred"] = True
            else:
                reward, info["reward_metrics"] = await self.agrade()
        return copy.deepcopy(messages), reward, terminated, truncated, info

    def _check_failure(self, observation: dict[str, Any]) -> None:
        """Raise the server's report of an episode that failed there."""
        reason = observation.get("finish_reason")
        if reason in ("sandbox_error", "error") and observation.get("error"):
            message = f"the env served at {self.url} failed: {observation['error']}"
            raise (OpenEnvServerError(message) if reason == "sandbox_error"
                   else OpenEnvEpisodeError(message))


def _extra(info: dict[str, Any]) -> dict[str, Any]:
    """The server's info as this env's: a screenshot back to PNG bytes."""
    info = dict(info)
    if isinstance(info.get("screenshot"), str):
        info["screenshot"] = base64.b64decode(info["screenshot"])
    return info
