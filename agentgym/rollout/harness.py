"""Harness episodes: an unmodified agent program plays a task in its sandbox, and its model
calls become the episode's training samples.

A :class:`HarnessRunner` holds what every episode of one harness shares: the harness's
installed environment (:func:`~agentgym.core.pyenv.build_python_env`, built once), and an
OpenAI-compatible server for a token policy (:func:`~agentgym.rollout.serve.openai_app`)
with a :class:`~agentgym.rollout.capture.CaptureStore`, listening on a Unix socket in a
folder of its own. :meth:`HarnessRunner.play` plays one episode of any env that hands out
its sandbox (:class:`~agentgym.core.env.SandboxAccess`; every sandboxed
:class:`~agentgym.core.env.AgentEnv`):

1. ``init``: the env resets to the task with the harness's environment and the bridge
   mounted (the ``sandbox_mounts`` reset option); the bridge's relay starts in the
   sandbox (:mod:`agentgym.sandboxes.bridge`: the server, and nothing else of the host,
   becomes ``http://127.0.0.1:PORT`` inside); the episode gets its capture key.
2. ``run``: the harness's command runs in the sandbox with the environment
   :mod:`agentgym.core.harness` lists, up to its time limit. Its exit ends the episode:
   ``finish_reason`` ``harness_exit`` (status 0), ``harness_error`` (another status; the
   output's tail is the trajectory's ``error``) or ``harness_timeout``.
3. ``grade``: the env's own grader scores the sandbox as it stands
   (``aend`` then ``agrade``: exactly as an episode of the built-in loop that a limit
   ended), and the env releases the episode (its sandbox is closed like any other).

The trajectory's tokens are the captured samples (:func:`~agentgym.rollout.capture.build_samples`):
the last sample in ``prompt_ids``/``completion_ids``/``loss_mask``/``logprobs``/``versions``
(split before its first sampled token), the earlier ones (a harness that rewrote its
history) in ``earlier_samples``; ``metrics`` gains ``capture/*`` counts and the
``harness`` block (exit status, seconds, output tail). A failure of the sandbox or the
bridge ends only its episode (``sandbox_error`` / ``error``), never the batch.

A **host harness** (``Harness.run``: an agent framework in agentgym's process) needs no
sandbox: the server listens on the host's loopback instead, ``init`` resets the env and opens
the key, ``run`` awaits the harness's function with a session whose tool calls are turns
of the env's own loop (``finish_reason`` as above; the env's own reason, ``submitted``
say, in ``metrics["harness"]["env_finish_reason"]``), and ``grade`` is the same.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgym.core.env import SandboxAccess
from agentgym.core.env_info import ResetOptions
from agentgym.core.errors import InvalidArgumentError
from agentgym.core.harness import HARNESS_MOUNT, EpisodeOver, Harness
from agentgym.core.policies import Generation, Sampling, TokenPolicy
from agentgym.core.pyenv import build_python_env
from agentgym.core.sandbox import SandboxError
from agentgym.core.serving import LocalServer
from agentgym.rollout.capture import CaptureStore, Samples, build_samples
from agentgym.rollout.serve import openai_app
from agentgym.rollout.trajectory import Trajectory
from agentgym.sandboxes.bridge import bridge_mounts, start_bridge

__all__ = ["HarnessEpisode", "HarnessRunner", "harness_by_id"]

#: Where the episode's instruction and the harness's script are written inside.
_FILES = "/tmp/agentgym-harness"
#: How much of the program's output the trajectory keeps.
_OUTPUT_TAIL = 4000


def harness_by_id(harness_id: str) -> Harness:
    """The registered harness ``harness_id`` (``agentgym list harnesses``)."""
    from agentgym.core.registry import get

    return get("harnesses", harness_id)


class HarnessRunner:
    """Plays episodes with one harness and one token policy (module docstring). Use it as
    a context manager, or call :meth:`start` and :meth:`close`.

    Args:
        harness: the harness, or a registered harness's id.
        policy: the token policy behind the server (an ``Engine``, ``hf:`` policy, a
            scripted one in tests).
        model_name: the model name the server answers to (``AGENTGYM_MODEL`` inside).
        tool_parser: how tool calls are read from the model's text: a parser id
            (``hermes``, ``xml``, ``llama3-json``, ``mistral``; ``agentgym list parsers``).
        sampling: what every call samples with, whatever the program asks (a trainer's
            temperature; its ``max_tokens`` caps the program's); None: as asked.
        log: where progress lines go (installing the harness the first time).
    """

    def __init__(self, harness: Harness | str, policy: TokenPolicy, *,
                 model_name: str = "agentgym", tool_parser: str = "hermes",
                 sampling: Sampling | None = None, log: Callable[[str], None] | None = None):
        self.harness = harness_by_id(harness) if isinstance(harness, str) else harness
        self.policy, self.model_name, self.log = policy, model_name, log
        self.store = CaptureStore()
        self._app = openai_app(_Current(self), model_name, tool_parser, capture=self.store,
                               sampling=sampling)
        self._server: LocalServer | None = None
        self._folder: Path | None = None
        self._mounts: dict[str, str] = {}
        self._host_run: Any = None  # a host harness's run, loaded at start

    def use_policy(self, policy: TokenPolicy) -> None:
        """Serve ``policy`` from the next call on (a trainer's, after its weights moved)."""
        self.policy = policy

    @property
    def socket_path(self) -> Path:
        if self._folder is None:
            raise InvalidArgumentError("HarnessRunner.start() has not run; use `with runner:`")
        return self._folder / "model.sock"

    def start(self) -> HarnessRunner:
        """Install the harness (once per machine) and start the server: on a Unix socket
        for programs in sandboxes (reached through the bridge), on the host's loopback for
        a host harness."""
        if self._server is not None:
            return self
        if self.harness.on_host:
            self._host_run = self.harness.load()  # a missing package is said now
            self._server = LocalServer(self._app).start()
            return self
        mounts: dict[str, str] = {}
        if self.harness.requirements:
            env = build_python_env(self.harness.requirements, HARNESS_MOUNT,
                                   name=f"harness-{self.harness.id}", log=self.log)
            mounts[HARNESS_MOUNT] = str(env)
        # The socket's folder is bound into every sandbox whole: it holds nothing else.
        self._folder = Path(tempfile.mkdtemp(prefix="agentgym-harness-", dir="/tmp"))
        self._folder.chmod(0o755)
        self._mounts = {**mounts, **bridge_mounts(self.socket_path)}
        self._server = LocalServer(self._app, uds=self.socket_path).start()
        return self

    def close(self) -> None:
        """Stop the server and remove its socket's folder. Idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        if self._folder is not None:  # a sandbox harness's socket folder
            for path in self._folder.iterdir():
                path.unlink(missing_ok=True)
            self._folder.rmdir()
            self._folder = None

    def __enter__(self) -> HarnessRunner:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def episode(self, env: Any, task_id: str, *, env_id: str = "", episode: int = 0,
                seed: int | None = None, attempt: int = 0, group: int = 0) -> HarnessEpisode:
        """One episode of ``task_id`` on ``env``, to play stage by stage (what the rollout
        pipeline does) or at once (:meth:`play`)."""
        if self._server is None:
            raise InvalidArgumentError("HarnessRunner needs to be started before it plays; use"
                                       " `with HarnessRunner(...) as runner:`")
        env = getattr(env, "unwrapped", env)
        if not self.harness.on_host and not isinstance(env, SandboxAccess):
            raise InvalidArgumentError(
                f"{type(env).__name__} does not hand out its episodes' sandbox (asandbox());"
                f" the harness {self.harness.id!r} runs in a task's sandbox: play an env whose"
                " episodes have one (an AgentEnv with a sandbox, e.g. a SandboxedEnv)")
        return HarnessEpisode(self, env, task_id, env_id=env_id, episode=episode, seed=seed,
                              attempt=attempt, group=group)

    async def write_inputs(self, box: Any, messages: list[dict[str, Any]], base_url: str,
                           key: str) -> None:
        """Write an episode's instruction (its user messages) and its script (the
        environment of :mod:`agentgym.core.harness`, then the harness's command) into
        ``box``. A script of its own, not a line in the session shell: the command may hold
        here-documents, and the variables stay out of the session."""
        instruction = _instruction(messages)
        environ = {**self.harness.env, "OPENAI_BASE_URL": base_url, "OPENAI_API_BASE": base_url,
                   "OPENAI_API_KEY": key, "AGENTGYM_MODEL": self.model_name,
                   "AGENTGYM_HARNESS": HARNESS_MOUNT, "AGENTGYM_INSTRUCTION": instruction,
                   "AGENTGYM_INSTRUCTION_FILE": f"{_FILES}/instruction.md"}
        await box.write_file(f"{_FILES}/instruction.md", instruction)
        await box.write_file(f"{_FILES}/run.sh", "".join(
            f"export {name}={shlex.quote(value)}\n" for name, value in environ.items())
            + self.harness.command + "\n")

    async def play(self, env: Any, task_id: str, **options: Any) -> Trajectory:
        """Play ``task_id`` of ``env`` with the harness (``options``: as :meth:`episode`'s):
        the episode's trajectory, graded, its env released. Never raises for what the
        program, its sandbox or the bridge did."""
        played = self.episode(env, task_id, **options)
        try:
            await played.init()
            await played.run()
            await played.grade()
        finally:
            await played.env.arelease()
        return played.trajectory()


class _Current(TokenPolicy):
    """The runner's policy at the time of each call (:meth:`HarnessRunner.use_policy`)."""

    def __init__(self, runner: HarnessRunner):
        self.runner = runner

    @property
    def tokenizer(self) -> Any:
        return self.runner.policy.tokenizer

    async def generate(self, prompt_ids: list[int], sampling: Sampling) -> Generation:
        return await self.runner.policy.generate(prompt_ids, sampling)


class HarnessEpisode:
    """One harness episode in the rollout loop's three stages (module docstring): ``init``,
    ``run`` (``turn`` is the same: the program's whole run is one step), ``grade``; then
    :meth:`trajectory`. Made by :meth:`HarnessRunner.episode`; the caller releases the env
    after ``grade`` (as for an :class:`~agentgym.rollout.loop.EpisodeRunner`)."""

    def __init__(self, runner: HarnessRunner, env: Any, task_id: str, *, env_id: str,
                 episode: int, seed: int | None, attempt: int, group: int):
        self.runner, self.env = runner, env
        self.seed, self.attempt, self.group = seed, attempt, group
        self.record = Trajectory(env=env_id or type(env).__name__, task_id=task_id,
                                 episode=episode, policy=f"harness:{runner.harness.id}")
        self.failed = False
        self._box: Any = None
        self._key: str | None = None
        self._calls: list[Any] | None = None
        self._session: _HostSession | None = None

    async def init(self) -> None:
        """Reset the env with the harness and the bridge mounted; start the relay; open the
        episode's key and write its instruction and script."""
        if self.failed:
            return
        started = time.perf_counter()
        runner = self.runner
        try:
            options: ResetOptions = {"task_id": self.record.task_id, "attempt": self.attempt,
                                     "group": self.group}
            if runner.harness.on_host:
                messages, info = await self.env.areset(seed=self.seed, options=options)
                self._key = runner.store.open()
                assert runner._server is not None
                self._session = _HostSession(
                    self.env, _instruction(messages), f"{runner._server.url}/episodes/"
                    f"{self._key}/v1", self._key, runner.model_name, list(info["tools"]))
                return
            messages, _ = await self.env.areset(seed=self.seed, options={
                **options, "sandbox_mounts": runner._mounts})
            self._box = await self.env.asandbox()
            if self._box is None:
                raise InvalidArgumentError(
                    f"{self.record.env}'s episodes have no sandbox (asandbox() gave None): the"
                    f" harness {self.runner.harness.id!r} needs one to run in")
            url = await start_bridge(self._box, self.runner.socket_path)
            self._key = self.runner.store.open()
            await self.runner.write_inputs(self._box, messages,
                                            f"{url}/episodes/{self._key}/v1", self._key)
        except Exception as error:  # this episode's alone: the batch goes on
            self._fail(error)
        finally:
            self.record.timings["init"] = time.perf_counter() - started

    async def turn(self, gate: Any = None, on_timing: Any = None) -> bool:
        """The program's whole run (the pipeline's first step); True: the episode is over."""
        await self.run()
        return True

    async def run(self, gate: Any = None, on_timing: Any = None) -> None:
        """Run the harness's command to its exit or time limit, then end the episode."""
        if self.failed or self.record.finish_reason:
            return
        harness, record = self.runner.harness, self.record
        if harness.on_host:
            return await self._run_on_host()
        started = time.perf_counter()
        try:
            ran = await self._box.exec(f"bash {_FILES}/run.sh", timeout=harness.time_limit_s)
            record.timings["generate"] = time.perf_counter() - started
            record.finish_reason = ("harness_timeout" if ran.timed_out else
                                    "harness_exit" if ran.exit_code == 0 else "harness_error")
            if record.finish_reason == "harness_error":
                record.error = (f"the harness {harness.id!r} exited with status"
                                f" {ran.exit_code}: {ran.output[-_OUTPUT_TAIL:]}")
            record.metrics["harness"] = {
                "exit_code": ran.exit_code, "timed_out": ran.timed_out,
                "seconds": round(record.timings["generate"], 3),
                "output_tail": ran.output[-_OUTPUT_TAIL:]}
        except Exception as error:
            self._fail(error)
        await self._end(ended_by_env=False)

    async def _run_on_host(self) -> None:
        """A host harness's ``run``, to its return, the env's end of the episode or the
        time limit."""
        harness, record, session = self.runner.harness, self.record, self._session
        started = time.perf_counter()
        try:
            await asyncio.wait_for(self.runner._host_run(session), harness.time_limit_s)
            record.finish_reason = "harness_exit"
        except EpisodeOver:
            record.finish_reason = "harness_exit"
        except asyncio.TimeoutError:
            record.finish_reason = "harness_timeout"
        except Exception as error:
            if session.over:  # it failed on the episode's end: the episode is whole
                record.finish_reason = "harness_exit"
            else:
                record.finish_reason = "harness_error"
                record.error = (f"the harness {harness.id!r} raised: "
                                + "".join(traceback.format_exception_only(type(error), error))
                                .strip()[-_OUTPUT_TAIL:])
        record.timings["generate"] = time.perf_counter() - started
        record.metrics["harness"] = {"seconds": round(record.timings["generate"], 3),
                                     "tool_calls": session.calls,
                                     "env_finish_reason": session.finish_reason}
        await self._end(ended_by_env=session.over)

    async def _end(self, ended_by_env: bool) -> None:
        """End the episode in the env for its grader (unless the env ended it, or it
        failed), and close its key: no call is recorded after the program."""
        try:
            if not (ended_by_env or self.failed):
                await self.env.aend(self.record.finish_reason)
        except Exception as error:
            self._fail(error)
        finally:
            self._close_key()

    async def grade(self) -> None:
        """Score the sandbox with the env's own grader."""
        if not self.failed:
            started = time.perf_counter()
            try:
                reward, metrics = await self.env.agrade()
                self.record.reward = reward
                self.record.metrics = {**metrics, **self.record.metrics}
            except Exception as error:
                self._fail(error)
            self.record.timings["grade"] = time.perf_counter() - started
        self._close_key()

    def trajectory(self) -> Trajectory:
        """The record with the episode's samples, complete once ``grade`` ran."""
        self._close_key()
        if self._calls is not None:
            calls, self._calls = self._calls, None
            _take_samples(self.record, build_samples(calls), calls)
        return self.record

    def _close_key(self) -> None:
        if self._key is not None:
            key, self._key = self._key, None
            self._calls = self.runner.store.close(key)

    def _fail(self, error: BaseException) -> None:
        self.failed = True
        self.record.finish_reason = ("sandbox_error" if isinstance(error, SandboxError)
                                     else "error")
        self.record.error = "".join(traceback.format_exception_only(type(error), error)).strip()
        self.record.reward = 0.0


class _HostSession:
    """A host harness's :class:`~agentgym.core.harness.HostSession`: its tool calls are
    assistant turns of the env's own loop."""

    def __init__(self, env: Any, instruction: str, base_url: str, api_key: str, model: str,
                 tools: list[dict[str, Any]]):
        self.env, self.instruction, self.base_url = env, instruction, base_url
        self.api_key, self.model, self.tools = api_key, model, tools
        self.over, self.calls = False, 0
        self.finish_reason: str | None = None

    async def call_tool(self, name: str, arguments: str | dict[str, Any]) -> str:
        if self.over:
            raise EpisodeOver(f"the episode is over ({self.finish_reason}): {name} was not run")
        self.calls += 1
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        messages, _, terminated, truncated, info = await self.env.astep({
            "role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{self.calls}", "type": "function",
                "function": {"name": name, "arguments": text}}]})
        if terminated or truncated:
            self.over, self.finish_reason = True, info.get("finish_reason")
        return "\n".join(str(m.get("content") or "") for m in messages)


def _instruction(messages: list[dict[str, Any]]) -> str:
    """The task as the env states it to the agent: its user messages' text (the system
    prompt is about agentgym's own tool-call format, which the harness does not use)."""
    texts = []
    for message in messages:
        content = message.get("content")
        if message.get("role") != "user" or not content:
            continue
        if isinstance(content, list):  # OpenAI content parts
            content = "\n".join(part.get("text", "") for part in content
                                if isinstance(part, dict))
        texts.append(str(content))
    return "\n\n".join(texts)


def _take_samples(record: Trajectory, samples: Samples, calls: list[Any]) -> None:
    """Put the episode's samples into ``record`` (module docstring)."""
    record.metrics.update(samples.metrics)
    record.turns = len(calls)
    if calls and calls[-1].messages is not None:
        record.messages = [*calls[-1].messages,
                           {"role": "assistant", "content": calls[-1].text or ""}]
    if not samples.samples:
        return
    *earlier, last = samples.samples
    cut = last.prompt_length
    record.prompt_ids, record.completion_ids = last.token_ids[:cut], last.token_ids[cut:]
    record.loss_mask = last.loss_mask[cut:]
    record.logprobs = list(last.logprobs[cut:]) if last.logprobs is not None else []
    record.versions = last.versions[cut:]
    record.earlier_samples = [
        {"token_ids": s.token_ids, "loss_mask": s.loss_mask, "logprobs": s.logprobs,
         "versions": s.versions, "calls": s.calls} for s in earlier]
