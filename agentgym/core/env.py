"""The env protocol the rollout loop drives, and ``AgentEnv``, the base class that keeps it.

**The protocol** (:class:`EnvProtocol`). An episode is a conversation. The rollout loop,
the pipeline and the Ray executor drive an env only through these calls, and never set or
read its attributes; any object with them can be played, trained on and run in a Ray actor:

* ``await areset(seed=None, options=None) -> (messages, info)`` starts an episode.
  ``options`` may hold ``task_id`` (which task; otherwise drawn with the seeded generator),
  ``overlap_setup`` (return the opening messages at once and finish the episode's setup,
  such as starting its sandbox, before the first ``astep`` needs it) and
  ``defer_grading`` (the step that ends the episode returns reward 0.0 with
  ``info["grading_deferred"]`` and ``agrade`` scores it later, so that grading does not
  hold a generation slot), ``attempt`` and ``group`` (which attempt of its task this
  episode is, and its group of attempts: k attempts for pass@k, a GRPO group) and
  ``setup_timeout_s`` (a setup still running after it is cancelled, and the episode
  ends with a :class:`SetupTimeoutError`). ``info``
  carries ``task_id``, ``tools`` (the tools' OpenAI schemas), ``task`` (the
  :class:`~agentgym.core.task.Task`, its solution rendered in the env's tool-call format:
  what text-level policies such as ``oracle`` read), ``attempt`` and ``group``.
* ``await astep(action) -> (messages, reward, terminated, truncated, info)`` plays one
  assistant turn: ``action`` is the model's raw text (or an assistant message). It returns
  the new messages (tool results, error messages); ``terminated`` when the agent finished,
  ``truncated`` when a limit ended the episode first. ``info`` carries
  ``assistant_message`` (the turn as the env recorded it, its tool calls in OpenAI format
  with ids), ``tool_calls``, ``tool_errors`` (a count), ``errors``, ``no_tool_call``, and
  on the last step ``finish_reason`` (and ``reward_metrics`` unless grading is deferred).
  An env that bounds the agent's context adds ``context_start`` (the window's first
  message; :mod:`agentgym.core.context`), and ``context_replies_only`` when the window
  shows none of the agent's own messages. ``astep`` never raises for what the model wrote.
* ``await agrade() -> (reward, metrics)`` scores the episode that just ended (by the agent,
  a limit of the env, or ``aend``). Calling it again returns the same result.
* ``await aend(reason)`` ends the running episode from outside, as truncated, for a limit
  the loop keeps (``context_limit``, ``wall_time``), so that ``agrade`` can score what the
  agent did so far.
* ``await arelease()`` ends the episode and releases what it held (its sandbox or
  browser) while keeping the env usable: pools of envs call it between episodes.
* ``await aclose()`` releases everything; idempotent.
* ``task_ids() -> list[str]`` lists the ids ``options["task_id"]`` accepts, in order.

**AgentEnv** subclasses ``gymnasium.Env`` and implements the protocol for multi-turn,
tool-using tasks. The episode ends when a tool raises
:class:`~agentgym.core.episode.Submitted` (*terminated*) or when the turn limit is reached
(*truncated*, as Gymnasium defines it: a limit, not an outcome of the task). The reward is
computed when the episode ends and returned by that final ``step``; earlier steps return 0.
``reset``, ``step`` and ``close`` run the async forms on one long-lived event-loop thread
owned by the env (see :mod:`agentgym.core.loop_thread`). Given the same seed and actions,
observations and infos are identical (tool-call ids included): timings belong to the
rollout loop, not to ``info``.

To write an env, subclass and provide tasks, tools and a reward::

    class Echo(AgentEnv):
        system_prompt = "Repeat the word, then submit it."
        reward = "exact_match"  # a registered reward id, or a Reward object

        @tool
        def submit(self, answer: str) -> str:
            '''Submit your final answer.

            Args:
                answer: The answer.
            '''
            raise Submitted(answer)

Subclasses may override ``setup_episode`` (acquire what the episode needs, a sandbox or a
browser page, hand it to the episode with :meth:`Episode.keep
<agentgym.core.episode.Episode.keep>`, and bind the :attr:`toolsets` to it),
``initial_messages``, ``grade`` (an env that grades itself, e.g. by running tests in a
fresh sandbox, overrides ``grade`` and needs no reward; it reads the resources of the
episode it is given) and ``extra_info`` (keys of its own for the info of ``reset`` and
every ``step``, such as a screenshot); ``areset`` and ``astep`` stay the base class's. The
options and info keys are declared in :mod:`agentgym.core.env_info`. The episode is the one
home of its resources: they are released when the env ends it, and an env keeps none of
them on itself (``SandboxedEnv``, in the shared toolkits, does all of this for a sandbox).
"""

from __future__ import annotations

import asyncio
import copy
import os
import time
import weakref
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import gymnasium

from agentgym.core.env_info import ExtraInfo, ResetInfo, ResetOptions, StepInfo
from agentgym.core.episode import SANDBOX, Episode, Message, Submitted, _turn_deadline
from agentgym.core.errors import (
    AgentGymError,
    DefinitionError,
    EnvStateError,
    InvalidArgumentError,
    MissingFileError,
)
from agentgym.core.harbor import HarborTask, NotExportableError
from agentgym.core.loop_thread import LoopThread
from agentgym.core.parsers import ParsedTurn, ToolCall, ToolCallParser
from agentgym.core.registry import build, has
from agentgym.core.reward import Reward, RewardResult
from agentgym.core.sandbox import Sandbox, SandboxError, extra_mounts
from agentgym.core.spaces import MessagesSpace, TextActionSpace
from agentgym.core.task import Task, TaskList, TaskSource, load_tasks
from agentgym.core.tools import (
    BoundTool,
    Tool,
    ToolError,
    Toolset,
    ToolsetFactory,
    describe,
    toolset_class,
)
from agentgym.core.waiting import wait_within

AnyTool = Tool | BoundTool
T = TypeVar("T")


@runtime_checkable
class EnvProtocol(Protocol):
    """What the rollout loop, the pipeline and the Ray executor call on an env; the module
    docstring specifies each call. :class:`AgentEnv` implements it; so may any object."""

    async def areset(self, *, seed: int | None = None, options: ResetOptions | None = None
                     ) -> tuple[list[Message], ResetInfo]:
        """Start an episode: ``(messages, info)``."""
        ...

    async def astep(self, action: Any
                    ) -> tuple[list[Message], float, bool, bool, StepInfo]:
        """Play one assistant turn: ``(messages, reward, terminated, truncated, info)``."""
        ...

    async def agrade(self) -> tuple[float, dict[str, Any]]:
        """Score the episode that just ended: ``(reward, metrics)``."""
        ...

    async def aend(self, reason: str) -> None:
        """End the running episode as truncated, for a limit kept by the caller."""
        ...

    async def arelease(self) -> None:
        """End the episode and release its resources; the env stays usable."""
        ...

    async def aclose(self) -> None:
        """Release everything. Idempotent."""
        ...

    def task_ids(self) -> list[str]:
        """The task ids ``options["task_id"]`` accepts, in order."""
        ...


@runtime_checkable
class SandboxAccess(Protocol):
    """An env that hands out its running episode's sandbox: what a harness needs to start
    an agent program in it (:mod:`agentgym.core.harness`). :class:`AgentEnv` has it."""

    async def asandbox(self) -> Sandbox | None:
        """The running episode's sandbox once its setup is done; None when its episodes
        have none."""
        ...


class AgentEnv(gymnasium.Env[list[Message], Any]):
    """Base class of every agentgym environment.

    Args:
        tasks: the tasks episodes draw from: a :class:`~agentgym.core.task.TaskSource`
            (:class:`~agentgym.core.task.TaskList`, or
            :class:`~agentgym.core.task.GeneratedTasks` for tasks made on demand), a
            non-empty list of :class:`~agentgym.core.task.Task` (held as a ``TaskList``), the
            id of a registered task source (``agentgym list task_sources``), or a task file
            (JSONL or JSON of :meth:`~agentgym.core.task.Task.to_dict` rows).
        reward: scores a finished episode: a :class:`~agentgym.core.reward.Reward` or a
            registered reward id (``agentgym list rewards``); may also be set as a class
            attribute. Not needed by an env that overrides :meth:`grade`.
        parser: the tool-call format of model text: a registered parser id (``hermes``,
            ``xml``, ``openai``) or a :class:`~agentgym.core.parsers.ToolCallParser`.
        max_turns: assistant turns before the episode is truncated.
        turn_timeout_s: the time budget of one turn, shared by all its tool calls (``None``
            for none). Tools that read :func:`~agentgym.core.episode.turn_time_left` stop
            their commands in time; any other still running :attr:`turn_grace_s` after
            the budget is cancelled. A call stopped or not run
            for it is a tool error with a message that says so.
        render_mode: ``None`` or ``"ansi"`` (``render()`` returns the transcript).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}
    #: Sent as the first message of every episode when not empty.
    system_prompt: str = ""
    reward: Reward | str | None = None
    #: Toolsets whose tools every episode offers besides the env's own ``@tool`` methods
    #: (a :class:`~agentgym.core.tools.Toolset` class, or a ``functools.partial`` of one
    #: with options). ``setup_episode`` binds them to the episode's resource with
    #: :meth:`bind_toolsets`, and the episode keeps them; until then their schemas come
    #: from the classes. A class attribute, or set per instance in ``__init__``.
    toolsets: Sequence[ToolsetFactory] = ()
    #: True for envs whose ``initial_messages`` read what ``setup_episode`` prepared: their
    #: setup runs before ``areset`` returns even when the caller asks to overlap it.
    setup_before_prompt: bool = False
    #: Seconds a tool still running when its turn's budget ends gets before it is cancelled
    #: (one that reads the budget has stopped its command by then and reports its output).
    turn_grace_s: float = 2.0
    #: Why this env's tasks cannot be written as Harbor task folders: what the default
    #: :meth:`harbor_task` raises, and what ``agentgym export-tasks`` reports for an env
    #: class that does not override it (without making the env). A family whose tasks
    #: cannot be expressed that way states its reason here.
    harbor_refusal: str = ("its class does not say how its tasks are written as Harbor task"
                           " folders (it does not override AgentEnv.harbor_task)")
    #: True for an env whose agent may not carry anything in its own context (a memory
    #: env, whose answers must come from its memory tools): every step's info says
    #: ``context_replies_only``, so the agent's window shows the env's replies and none of
    #: its own messages (:mod:`agentgym.core.context`); and the errors this class writes
    #: (unreadable calls, unknown tools, arguments that do not fit, crashed tools) name
    #: no value the agent wrote, so that no reply repeats it. The env's own tools must
    #: not repeat their arguments either; in case one does, a :class:`ToolError`'s text has
    #: every argument value it repeats cut out (``_unrepeated``).
    context_replies_only: bool = False

    def __init__(
        self,
        tasks: TaskSource | Sequence[Task] | str,
        *,
        reward: Reward | str | None = None,
        parser: str | ToolCallParser = "hermes",
        max_turns: int = 10,
        turn_timeout_s: float | None = 600.0,
        render_mode: str | None = None,
    ):
        if max_turns < 1:
            raise InvalidArgumentError(f"max_turns must be >= 1, got {max_turns}")
        if turn_timeout_s is not None and not turn_timeout_s > 0:
            raise InvalidArgumentError(
                f"turn_timeout_s must be > 0 seconds or None (no budget), got"
                f" {turn_timeout_s!r}")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise InvalidArgumentError(
                f"render_mode {render_mode!r} is not supported; use one of"
                f" {self.metadata['render_modes']} or None"
            )
        self.tasks = _task_source(tasks)
        reward = reward or self.reward
        self.reward = build("rewards", reward) if isinstance(reward, str) else reward
        if self.reward is None and type(self).grade is AgentEnv.grade:
            raise DefinitionError(f"{type(self).__name__} needs a reward (argument or class"
                            " attribute), or a grade() method of its own")
        if self.reward is not None and not isinstance(self.reward, Reward):
            # caught here, not at the first episode's end as a bare "not callable"
            raise DefinitionError(
                f"{type(self).__name__}'s reward {self.reward!r} is a"
                f" {type(self.reward).__name__}, not an agentgym.core.Reward: subclass"
                " Reward and write score(episode) -> RewardResult, or pass a registered"
                " reward id")
        self.parser = build("parsers", parser) if isinstance(parser, str) else parser
        self.max_turns = max_turns
        self.turn_timeout_s = turn_timeout_s
        self.render_mode = render_mode
        self.observation_space = MessagesSpace()
        self.action_space = TextActionSpace()
        self.episode: Episode | None = None
        self._setup: asyncio.Future | None = None
        self._defer_grading = False
        self._loop = LoopThread(f"agentgym-{type(self).__name__}")
        self._finalizer = weakref.finalize(self, self._loop.stop)
        self._closed = False

    # ---- what subclasses provide ------------------------------------------------------

    def tools(self) -> Sequence[AnyTool]:
        """The tools of the current episode. Default: the tools of :attr:`toolsets` (bound
        to the episode once :meth:`bind_toolsets` ran), then the class's ``@tool``
        methods."""
        bound = self.episode.toolsets if self.episode is not None else None
        if bound is not None:
            shared: list[AnyTool] = [t for ts in bound for t in ts.tools()]
        else:
            shared = [t for factory in self.toolsets for t in describe(factory)]
        found: dict[str, AnyTool] = {}
        for cls in reversed(type(self).__mro__):
            for name, value in vars(cls).items():
                if isinstance(value, Tool):
                    found[name] = getattr(self, name)
        return [*shared, *found.values()]

    @classmethod
    def offered_tools(cls) -> list[tuple[str, Tool]]:
        """Every tool an episode of this env class offers with its default options,
        unbound, and where each comes from: the name of its toolset's class, or this
        class's name for its own ``@tool`` methods. For listings (``agentgym list tools``,
        the reference pages): it reads the class attribute :attr:`toolsets`, so a class
        that sets them per instance declares its defaults there too."""
        shared = [(toolset_class(factory).__name__, t) for factory in cls.toolsets
                  for t in describe(factory)]
        own: dict[str, Tool] = {}
        for klass in reversed(cls.__mro__):
            own.update({name: value for name, value in vars(klass).items()
                        if isinstance(value, Tool)})
        return [*shared, *((cls.__name__, t) for t in own.values())]

    def bind_toolsets(self, resource: Any) -> list[Toolset]:
        """Build the episode's :attr:`toolsets`, each given ``resource`` (the episode's
        sandbox, browser page or store), and give them to the episode
        (``episode.toolsets``); call it from ``setup_episode``. They go when the episode
        is released. Returns them."""
        episode = self.episode
        if episode is None:
            raise EnvStateError("bind_toolsets() binds an episode's toolsets: call it from"
                                " setup_episode, while the episode is set up")
        episode.toolsets = [factory(resource) for factory in self.toolsets]
        return list(episode.toolsets)

    async def setup_episode(self, task: Task) -> None:
        """Prepare what the episode needs (a sandbox, a browser page). Default: nothing.

        ``self.episode`` is the episode being set up, even when the setup overlaps the
        first turn (the env ends an episode only after its overlapped setup finished); its
        ``attempt`` and ``group`` say which attempt of the task this is.
        Hand what must be released to it with ``await self.episode.keep(name, resource,
        release)`` and bind the toolsets with :meth:`bind_toolsets`."""

    async def teardown_episode(self) -> None:
        """Release what ``setup_episode`` keeps on the env itself (per-episode state that
        is not a resource of the episode's). Called once per episode, after the episode's
        own resources were released, even on error. Default: nothing."""

    def initial_messages(self, task: Task) -> list[Message]:
        """The opening messages: the system prompt (if any) and the task's prompt."""
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return system + task.prompt_messages()

    async def grade(self, episode: Episode) -> RewardResult:
        """Score the finished episode. Default: ``self.reward``. An env that grades
        itself (tests in a fresh sandbox, a page's own score) overrides this instead of
        setting a reward."""
        assert self.reward is not None
        return await self.reward(episode)

    async def extra_info(self, episode: Episode) -> ExtraInfo:
        """Keys this env adds to the info of ``reset`` (``episode.turn`` is 0) and of every
        ``step`` (after it ran and, unless deferred, was graded; ``episode.done`` once the
        episode ended): a screenshot, where the agent's context window starts
        (:class:`~agentgym.core.env_info.ExtraInfo`), or keys of the env's own. It may not
        replace a key the base class sets. At ``reset`` with ``overlap_setup`` the setup
        may still be running; an env that needs it there sets :attr:`setup_before_prompt`.
        Default: none."""
        return {}

    def harbor_task(self, task_id: str) -> HarborTask:
        """Task ``task_id`` as a Harbor task folder (:mod:`agentgym.core.harbor`), for
        ``agentgym export-tasks ENV_ID --format harbor``: its instruction, the image the
        agent works in, the tests that grade it (copied in only to grade), its reference
        and known-wrong solutions. The written folder, read back by the ``terminal``
        plugin, must pass ``agentgym validate`` as the task does here.

        Default: raises :class:`~agentgym.core.harbor.NotExportableError` with
        :attr:`harbor_refusal`. An env that overrides it raises that error for a task it
        cannot write, saying why."""
        raise NotExportableError(f"{type(self).__name__}: {self.harbor_refusal}")

    # ---- the Gymnasium API, async-native ------------------------------------------------

    @property
    def task(self) -> Task | None:
        """The current episode's task, its solution rendered in this env's format."""
        return self.episode.task if self.episode else None

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The OpenAI function schemas of the current tools (fresh copies)."""
        return [t.schema() for t in self.tools()]

    def task_ids(self) -> list[str]:
        """The ids of this env's tasks, in order (what ``options["task_id"]`` accepts)."""
        return self.tasks.ids()

    async def areset(
        self, *, seed: int | None = None, options: ResetOptions | None = None
    ) -> tuple[list[Message], ResetInfo]:
        """Start an episode. ``options``: ``task_id`` picks the task (otherwise it is drawn
        with the env's seeded generator); ``overlap_setup`` returns the opening messages at
        once and runs ``setup_episode`` in the background until the first ``astep`` (or
        ``agrade``) needs it, unless :attr:`setup_before_prompt`; ``defer_grading`` leaves
        the reward to :meth:`agrade`. Returns ``(messages, info)``: info has ``task_id``,
        ``tools`` (the tools' JSON schemas), ``task``, ``attempt``, ``group`` and what
        :meth:`extra_info` adds."""
        self._check_open()
        gymnasium.Env.reset(self, seed=seed)
        await self._end_episode()
        options = options or {}
        if "task_id" in options:
            task = self.tasks.get(str(options["task_id"]))
        else:
            task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        episode = Episode(task=task.rendered(self.parser),
                          attempt=int(options.get("attempt", 0)),
                          group=int(options.get("group", 0)))
        self.episode = episode  # setup_episode may read its attempt and group
        self._defer_grading = bool(options.get("defer_grading", False))
        # The setup's sandboxes get the option's mounts; an overlapped setup's task copies
        # the context (so the mounts) when it is made, inside the block.
        with extra_mounts(options.get("sandbox_mounts")):
            setup = _within(self.setup_episode(episode.task), options.get("setup_timeout_s"))
            if options.get("overlap_setup") and not self.setup_before_prompt:
                self._setup = asyncio.ensure_future(setup)  # ending the episode waits for it
            else:
                await setup
        episode.messages = self.initial_messages(episode.task)
        info: ResetInfo = copy.deepcopy({
            "task_id": task.id, "tools": self.tool_schemas(), "task": episode.task,
            "attempt": episode.attempt, "group": episode.group})
        await self._add_extra_info(episode, info)
        return copy.deepcopy(episode.messages), info

    async def astep(
        self, action: str | Message
    ) -> tuple[list[Message], float, bool, bool, StepInfo]:
        """Play one assistant turn. Returns ``(messages, reward, terminated, truncated,
        info)``:

        * ``messages``: the new messages (tool results and error messages).
        * ``reward``: the episode's reward on the step that ends it, else ``0.0``.
        * ``terminated``: the agent finished (a tool raised ``Submitted``).
        * ``truncated``: the turn limit was reached first.
        * ``info``: ``turn``, ``assistant_message`` (the turn as recorded: parsed, its
          calls with ids), ``tool_calls`` (parsed, with ids), ``tool_errors`` (count this
          turn), ``errors`` (their messages), ``no_tool_call``; at the end also
          ``finish_reason``, and ``reward_metrics`` (or ``grading_deferred``); and what
          :meth:`extra_info` adds.
        """
        episode = self._require_episode()
        await self._setup_finished()
        episode.turn += 1
        parsed = self.parser.parse_action(action)
        calls = [
            ToolCall(c.name, c.arguments, f"call_{episode.turn}_{i}")
            for i, c in enumerate(parsed.tool_calls)
        ]
        assistant = self._assistant_message(action, parsed, calls)
        episode.messages.append(assistant)
        new: list[Message] = []
        errors = list(parsed.errors)
        budget = self.turn_timeout_s
        deadline = time.monotonic() + budget if budget is not None else None
        for call in calls:
            if episode.submitted:
                result = "Not run: the episode already ended with a submission."
            elif deadline is not None and time.monotonic() >= deadline:
                error = f"{call.name} was not run: this turn's time budget ({budget:g} s) is spent"
                result = f"Error: {error}. Make fewer or quicker calls a turn."
                errors.append(error)
            else:
                result, error = await self._run_tool_in_time(episode, call, deadline)
                if error:
                    errors.append(error)
            new.append(
                {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": result}
            )
        if parsed.errors:
            new.append({"role": "user", "content": self._format_error_message(parsed.errors)
                        if not self.context_replies_only else
                        "Your tool call could not be read. Write each call in this format:"
                        f" {self.parser.example}"})
        elif not calls:
            names = ", ".join(t.name for t in self.tools())
            new.append(
                {
                    "role": "user",
                    "content": (
                        f"No tool call found. Call one of the tools ({names}) in this format:"
                        f" {self.parser.example}"
                    ),
                }
            )
        episode.tool_calls += len(calls)
        episode.tool_errors += len(errors)
        episode.messages.extend(new)
        info: StepInfo = {
            "turn": episode.turn,
            "assistant_message": copy.deepcopy(assistant),
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls],
            "tool_errors": len(errors),
            "errors": errors,
            "no_tool_call": not calls and not parsed.errors,
        }
        if self.context_replies_only:
            info["context_replies_only"] = True
        terminated = episode.submitted
        truncated = not terminated and episode.turn >= self.max_turns
        reward = 0.0
        if terminated or truncated:
            episode.finish_reason = "submitted" if terminated else "max_turns"
            info["finish_reason"] = episode.finish_reason
            if self._defer_grading:
                info["grading_deferred"] = True
            else:
                reward, info["reward_metrics"] = await self.agrade()
        await self._add_extra_info(episode, info)
        return copy.deepcopy(new), reward, terminated, truncated, info

    async def aend(self, reason: str) -> None:
        """End the current episode from outside as truncated (a token or time limit of the
        rollout loop), so that :meth:`agrade` can grade what the agent did so far."""
        episode = self._require_episode()
        episode.finish_reason = reason

    async def agrade(self) -> tuple[float, dict[str, Any]]:
        """Grade the episode that just ended: ``(reward, metrics)``. ``astep`` calls it on
        the final step unless the episode was reset with ``defer_grading``; the result is
        kept in ``episode.reward`` and ``episode.metrics``."""
        episode = self.episode
        if episode is None or not episode.done:
            raise EnvStateError("agrade() needs an episode that has ended; step it to the end")
        # The grader reads this episode's resources: a reset meanwhile (the env's next
        # episode starting) releases them only once the grade is done.
        async with episode.in_use():
            await self._setup_finished()
            if episode.reward is None:
                result = await self.grade(episode)
                episode.reward, episode.metrics = float(result.value), dict(result.metrics)
        return episode.reward, copy.deepcopy(episode.metrics)

    async def asandbox(self) -> Sandbox | None:
        """The running episode's sandbox (``episode.resources["sandbox"]``, the name every
        sandboxed env gives it), once its setup is done; None when it has none. A harness
        starts its program in it (:class:`SandboxAccess`)."""
        episode = self._require_episode()
        await self._setup_finished()
        return episode.resources.get(SANDBOX)

    async def arelease(self) -> None:
        """End the current episode and release its resources (its sandbox, browser) while
        keeping the env usable: the next ``areset`` starts afresh. Pools of envs use it."""
        await self._end_episode()

    async def aclose(self) -> None:
        """End the current episode and release its resources. Idempotent."""
        if not self._closed:
            self._closed = True
            await self._end_episode()

    # ---- sync wrappers --------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: ResetOptions | None = None
    ) -> tuple[list[Message], ResetInfo]:
        """Sync form of :meth:`areset`."""
        return self._loop.run(self.areset(seed=seed, options=options))

    def step(self, action: str | Message) -> tuple[list[Message], float, bool, bool, StepInfo]:
        """Sync form of :meth:`astep`."""
        return self._loop.run(self.astep(action))

    def close(self) -> None:
        """Sync form of :meth:`aclose`; also stops the env's loop thread. Idempotent."""
        if not self._closed:
            self._loop.run(self.aclose())
        self._loop.stop()

    def run_coroutine(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on this env's loop thread, where the sync methods run theirs.

        Use it to drive async code (an episode played with :meth:`areset` and
        :meth:`astep`) from sync code without creating a second event loop for the env's
        resources.
        """
        return self._loop.run(coro)

    def render(self) -> str | None:
        """With ``render_mode="ansi"``, the conversation so far as text."""
        if self.render_mode != "ansi":
            return None
        lines = []
        for m in self.episode.messages if self.episode else []:
            lines.append(f"[{m['role']}] {m.get('content') or ''}")
            lines += [
                f"  -> {c['function']['name']}({c['function']['arguments']})"
                for c in m.get("tool_calls", [])
            ]
        return "\n".join(lines)

    # ---- internals --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise EnvStateError(f"{type(self).__name__} is closed; make a new env")

    def _require_episode(self) -> Episode:
        self._check_open()
        if self.episode is None:
            raise EnvStateError("step() called before reset(); call reset() first")
        if self.episode.done:
            raise EnvStateError(
                f"the episode already ended ({self.episode.finish_reason}); call reset()"
            )
        return self.episode

    async def _add_extra_info(self, episode: Episode, info: ResetInfo | StepInfo) -> None:
        """Merge :meth:`extra_info` into ``info``; it adds keys, never replaces one."""
        extra = await self.extra_info(episode)
        clash = sorted(set(extra) & set(info))
        if clash:
            raise EnvStateError(
                f"{type(self).__name__}.extra_info returned {', '.join(clash)}, which the"
                " base class sets already: give the env's own info keys names of their own")
        info.update(copy.deepcopy(extra))  # the env keeps no handle on what it returned

    async def _setup_finished(self) -> None:
        """Wait for the episode's overlapped ``setup_episode``; its error ends the episode
        here (and at every later call: the episode cannot go on). A setup cancelled with
        the call that waited for it has left the episode without its resources: the
        grader says so."""
        setup = self._setup
        if setup is not None and not setup.cancelled():
            await setup

    async def _end_episode(self) -> None:
        episode = self.episode
        if episode is None:
            return
        setup = self._setup
        # An overlapped setup reads self.episode until it returns: detach the episode only
        # then (on the setup's own loop: a wait from another would never end). Its error
        # was the episode's to report; here it only has to have finished.
        if setup is not None and setup.get_loop() is asyncio.get_running_loop():
            await asyncio.wait([setup])
            if not setup.cancelled():
                setup.exception()  # retrieved: asyncio would log it otherwise
        if self.episode is not episode:
            return  # a concurrent call ended it
        self.episode, self._setup = None, None
        try:
            await episode.release()  # after its grade, if one is running
        finally:
            await self.teardown_episode()

    def _assistant_message(
        self, action: str | Message, parsed: ParsedTurn, calls: list[ToolCall]
    ) -> Message:
        if not calls:
            text = action if isinstance(action, str) else parsed.content
            return {"role": "assistant", "content": text}
        return {
            "role": "assistant",
            "content": parsed.content,
            "tool_calls": [c.to_openai() for c in calls],
        }

    def _format_error_message(self, errors: list[str]) -> str:
        return "Your tool call could not be read:\n" + "\n".join(f"- {e}" for e in errors)

    async def _run_tool_in_time(self, episode: Episode, call: ToolCall,
                                deadline: float | None) -> tuple[str, str | None]:
        """:meth:`_run_tool` within the turn's budget, which tools can read meanwhile."""
        if deadline is None:
            return await self._run_tool(episode, call)
        token = _turn_deadline.set(deadline)
        try:
            left = deadline - time.monotonic() + self.turn_grace_s
            return await wait_within(self._run_tool(episode, call), left)
        except asyncio.TimeoutError:
            error = (f"{call.name} was stopped: this turn's time budget"
                     f" ({self.turn_timeout_s:g} s) ran out")
            return f"Error: {error}. Make fewer or quicker calls a turn.", error
        finally:
            _turn_deadline.reset(token)

    async def _run_tool(self, episode: Episode, call: ToolCall) -> tuple[str, str | None]:
        """Run one call; returns (the tool message's content, error text or None)."""
        tools = {t.name: t for t in self.tools()}
        found = tools.get(call.name)
        if found is None:
            named = "" if self.context_replies_only else f" {call.name!r}"
            error = f"Unknown tool{named}. Available tools: {', '.join(tools)}."
            return f"Error: {error}", error
        try:
            if self.context_replies_only:
                _validate_quietly(found, call.arguments)
            return await found.call(call.arguments), None
        except Submitted as done:
            episode.submitted, episode.submission = True, done.answer
            return done.message, None
        except ToolError as e:
            said = str(e) if not self.context_replies_only else _unrepeated(str(e), call.arguments)
            error = f"{call.name}: {said}"
        except SandboxError:
            raise  # the episode cannot go on: its rollout ends it with this reason
        except Exception as e:  # a crashing tool is the agent's problem to see, not ours
            said = "" if self.context_replies_only else f": {e}"
            error = f"{call.name} failed: {type(e).__name__}{said}"
        return f"Error: {error}", error


#: Values shorter than this may stay in a tool's error (:func:`_unrepeated`): a few
#: characters a call carry too little to rebuild a history, and cutting every "1" or "to"
#: from an error would leave it unreadable.
MIN_REPEATED_CHARS = 3


def _unrepeated(text: str, arguments: Any) -> str:
    """A tool's error ``text`` with every value of ``arguments`` it repeats cut out, the
    numbers also in their normalised form (``"007"`` read as 7): under
    :attr:`AgentEnv.context_replies_only` an error that repeats an argument would carry
    the agent's text into its next window, whatever tool (a plugin's own) wrote it."""
    values: list[str] = []

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                collect(key)
                collect(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                collect(item)
        elif value is not None and not isinstance(value, bool):
            written = str(value).strip()
            values.append(written)
            if written.lstrip("+-").isdigit():
                values.append(str(int(written)))

    collect(arguments)
    for value in sorted(set(values), key=len, reverse=True):
        if len(value) >= MIN_REPEATED_CHARS:
            text = text.replace(value, "(your value)")
    return text


def _validate_quietly(tool: Any, arguments: Any) -> None:
    """Check a call's arguments, with an error that names the tool's parameters but no
    value the agent wrote (:attr:`AgentEnv.context_replies_only`)."""
    try:
        tool.validate(arguments)
    except ToolError:
        parameters = tool.schema()["function"].get("parameters") or {}
        required = parameters.get("required") or ()
        takes = ", ".join(f"{name}: {schema.get('type', 'any')}"
                          + ("" if name in required else " (optional)")
                          for name, schema in (parameters.get("properties") or {}).items())
        takes = takes or "no arguments"
        raise ToolError(f"the arguments do not fit its parameters ({takes})") from None


class SetupTimeoutError(AgentGymError, TimeoutError):
    """An episode's setup ran past the ``setup_timeout_s`` reset option; it was cancelled."""


async def _within(setup: Coroutine[Any, Any, None], timeout_s: Any) -> None:
    """Run ``setup``, cancelled after ``timeout_s`` seconds when one is given."""
    if timeout_s is None:
        return await setup
    try:
        await wait_within(setup, float(timeout_s))
    except asyncio.TimeoutError:
        raise SetupTimeoutError(
            f"the episode's setup did not finish within {float(timeout_s):g} s"
            " (setup_timeout_s) and was cancelled; a slow sandbox start may need a longer"
            " one") from None


def _task_source(tasks: TaskSource | Sequence[Task] | str | os.PathLike) -> TaskSource:
    """``tasks`` as a task source: one already, a list of tasks, a registered task source
    id, or a task file's path."""
    if isinstance(tasks, TaskSource):
        return tasks
    if isinstance(tasks, str) and has("task_sources", tasks):
        return build("task_sources", tasks)
    if isinstance(tasks, (str, os.PathLike)):
        if not Path(tasks).is_file():
            raise MissingFileError(
                f"tasks={str(tasks)!r} does not exist as a file and is not a registered task"
                " source",
                "pass tasks=ID, a task source from `agentgym list task_sources`, or"
                " tasks=PATH of an existing JSONL file of tasks (one Task.to_dict() row a"
                " line), e.g. agentgym.make(ENV, tasks='tasks.jsonl') or `-e tasks=tasks.jsonl`")
        return load_tasks(tasks)
    if isinstance(tasks, Sequence) and tasks and all(isinstance(t, Task) for t in tasks):
        return TaskList(tasks)
    raise InvalidArgumentError(
        f"tasks={_short(tasks)} ({type(tasks).__name__}) is not a task source: pass a"
        " TaskSource (agentgym.core.task.TaskList(tasks), GeneratedTasks(size, make)), a"
        " non-empty list of Task, the id of a registered task source (`agentgym list"
        " task_sources`), or the path of a task file")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
