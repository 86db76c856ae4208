"""Wall time per GRPO step: agentgym's trainer against TRL's own ``environment_factory``.

    python bench/train_step.py [--episodes 8] [--steps 5] [--remote-latency 2] [--json]

Both runs are real TRL ``GRPOTrainer`` s training the same model on the same tasks with
the same ``GRPOConfig`` (agentgym's :func:`~agentgym.trainers.grpo.grpo_config` over the
same arguments: seed, episodes per step, ``num_generations``, token budget, turn limit,
learning rate). The model is the tiny local model of
``agentgym.testing.build_tiny_model``, first warmed up by SFT on the ``oracle`` policy's
demonstrations (collected with :func:`agentgym.rollout.evaluate.rollout`, trained with
:func:`agentgym.trainers.sft.train_sft`) so that it plays multi-turn episodes.

1. ``agentgym``: :func:`~agentgym.trainers.grpo.train_grpo`: TRL's ``rollout_func`` fed by
   the rollout pipeline (default ``pipeline`` mode), the next step's episodes prepared
   during the optimizer step (prefetch). Dynamic sampling is off, so that both runs play
   exactly ``episodes`` episodes per step.
2. ``trl_environment_factory``: ``GRPOTrainer(environment_factory=...)`` with a plain class
   (:class:`TRLEnvironment`) whose ``reset()`` sets up the same env and whose public
   methods are the same tools. TRL resets the batch's environments one after another, then
   runs its tool loop; the reward function gets the ``environments`` and grades each one.

The env, ``bench-train-step``, is registered through ``agentgym.register_plugin``. Each
episode's setup is bench/pipeline.py's: the stated remote-start latency (default 2 s),
then a real local sandbox over a copy of the installed ``click`` package and a real
command in it. A task asks how many lines of one of click's modules contain ``def ``; the
agent has ``run`` (a shell command in the sandbox) and ``submit``. The reward is 1 when
the submitted answer is what ``grep -c`` prints in the sandbox at grading. Each task's
reference solution (run the count, submit the number) is what the oracle replays.

Measured: the wall time of each training step, from one step's end to the next (all the
trainer does between steps counts), reported as the median of steps 2..N: step 1 also
warms up, and agentgym's prefetch has nothing to prepare before it. Also, per run, the
mean assistant turns and tool calls per episode (both runs are multi-turn) and the mean
reward. Setup costs outside the steps (model loading, the warm-up) are not measured.

Settings that differ in meaning between the two paths, set to the same numbers:

* Token budget: TRL's ``max_completion_length`` caps the whole multi-turn completion in
  the ``environment_factory`` path; in the ``rollout_func`` path the rollout's per-turn
  ``max_tokens`` (which ``grpo_config`` also passes as ``max_completion_length``) caps
  each turn. The warmed-up model's episodes stay far below either.
* Turn limit: the env's ``max_turns``; TRL's ``max_tool_calling_iterations`` is
  ``max_turns - 1`` (its first generation is no iteration).
* Episode end: an agentgym episode ends on ``submit`` or at the turn limit, and a turn
  whose tool call cannot be parsed gets an error message and another turn; TRL's loop
  ends an episode at the first turn without a parsed tool call, and has no "submitted"
  signal (after ``submit`` the model may go on calling tools).
* Torch runs one intra-op thread (``--torch-threads``) in both runs. On a shared 2-core
  machine two threads made forward/backward passes several times slower under load: the
  warm-up SFT, and so the bench, took twice as long, while the step-time ratio stayed
  the same (5.16x with two threads, 5.11x with one, in runs side by side).

Tool schemas: transformers' ``get_json_schema`` (how TRL describes an environment's
methods) adds a ``"return"`` field for a return annotation, which agentgym's ``@tool``
schemas do not have. The demonstrations' prompts are rendered from agentgym's schemas, so
:class:`TRLEnvironment`'s tools carry no return annotation; with one, TRL's prompts
differed from everything the warmed-up model had seen and it wrote unparseable calls
(one turn, no tool call per episode). The bench checks that both paths render the same
prompt tokens before it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# bench/pipeline.py, beside this script (a script's folder is on sys.path)
from pipeline import Constants as PipelineConstants
from pipeline import SandboxedBenchEnv, _copy_repo

import agentgym
from agentgym.core import EnvRegistration, RewardResult, Submitted, Task, TaskList, hookimpl, tool
from agentgym.core.parsers import ToolCall
from agentgym.core.policies import Sampling
from agentgym.core.task import SolutionTurn
from agentgym.rollout.loop import RolloutConfig
from agentgym.rollout.pipeline import PipelineConfig

ENV_ID = "bench-train-step"
RUNS = ("agentgym", "trl_environment_factory")
COUNT_COMMAND = "grep -c 'def ' {path}"


@dataclass
class Constants:
    """Every setting of the bench (printed with the results)."""

    episodes: int = 8  # per GRPO step (per_device_train_batch_size)
    steps: int = 5  # GRPO steps per run; step 1 is left out of the median
    num_generations: int = 4
    max_tokens: int = 256  # per turn (agentgym) / per completion (TRL): see the docstring
    max_turns: int = 4
    learning_rate: float = 1e-5  # small: the warmed-up behaviour stays the same in both runs
    remote_latency_s: float = PipelineConstants.remote_latency_s
    tool_timeout_s: float = 10.0
    seed: int = 0
    torch_threads: int = 1
    demonstrations: int = 64  # oracle episodes over the tasks (in order, cycling)
    sft_steps: int = 200
    sft_batch_size: int = 8
    sft_learning_rate: float = 5e-3
    template: str = ""  # the sandboxes' repository: a copy of the click package


# ---- the env ----------------------------------------------------------------------------------

#: One ``{"turns", "tool_calls", "reward"}`` per episode graded (both runs grade in this
#: process): :func:`measure` reads and clears it around each run.
GRADED: list[dict[str, float]] = []


def count_defs(text: str) -> int:
    """What ``grep -c 'def '`` prints for a file holding ``text``."""
    return sum("def " in line for line in text.splitlines())


def make_tasks(template: str) -> TaskList:
    """One task per module of the template's ``click`` package, with its oracle solution."""
    tasks = []
    for module in sorted((Path(template) / "click").glob("*.py")):
        path = f"click/{module.name}"
        answer = str(count_defs(module.read_text(encoding="utf-8")))
        solution = [
            SolutionTurn([ToolCall("run", {"command": COUNT_COMMAND.format(path=path)})]),
            SolutionTurn([ToolCall("submit", {"answer": answer})]),
        ]
        prompt = f"How many lines of {path} contain 'def '? Count them, then submit the number."
        tasks.append(Task(f"defs-{module.stem}", prompt, {"path": path}, solution))
    return TaskList(tasks)


class TrainStepEnv(SandboxedBenchEnv):
    """The bench's env: bench/pipeline.py's episode setup (remote latency, then a local
    sandbox over the click repository and a setup command in it), with this bench's
    tasks, tools and grader.

    Args:
        template: the repository folder the sandboxes' workspaces start from.
        remote_latency_s: stated remote-start latency added to each episode's setup.
        tool_timeout_s: wall-time limit of one ``run`` command.
        max_turns: assistant turns before the episode is truncated.
    """

    def __init__(self, template: str, remote_latency_s: float, tool_timeout_s: float = 10.0,
                 max_turns: int = 4, **kwargs: Any):
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        constants = PipelineConstants(template=template, remote_latency_s=remote_latency_s)
        super().__init__(constants, **kwargs)
        self.tasks = make_tasks(template)
        self.max_turns, self.tool_timeout_s = max_turns, tool_timeout_s

    @tool
    async def run(self, command: str) -> str:
        """Run a shell command in the repository and return its output.

        Args:
            command: The command, e.g. "ls click".
        """
        return (await self.box.exec(command, timeout=self.tool_timeout_s)).output

    @tool
    def submit(self, answer: str) -> str:
        """Submit your final answer. This ends the episode.

        Args:
            answer: Your final answer.
        """
        raise Submitted(answer)

    async def check(self, answer: str | None) -> float:
        """1.0 when ``answer`` is what the task's count prints in the sandbox now."""
        path = shlex.quote(self.task.metadata["path"])
        result = await self.box.exec(COUNT_COMMAND.format(path=path), timeout=60)
        return float(answer is not None and str(answer).strip() == result.output.strip())

    async def grade(self, episode: Any) -> RewardResult:
        reward = await self.check(episode.submission if episode.submitted else None)
        GRADED.append({"turns": episode.turn, "tool_calls": episode.tool_calls,
                       "reward": reward})
        return RewardResult(reward)


@hookimpl
def agentgym_envs() -> list[EnvRegistration]:
    return [EnvRegistration(ENV_ID, TrainStepEnv, "bench/train_step.py's env")]


class TRLEnvironment:
    """TRL's ``environment_factory`` view of the same env.

    ``reset`` sets up an episode synchronously (latency, sandbox, setup command: TRL calls
    the batch's resets one after another) and returns the task's text, which TRL appends
    to the prompt's user message; the public methods are the same tools, run on the env's
    own event-loop thread. They carry no return annotation (see the module docstring).
    """

    def __init__(self, env_kwargs: dict[str, Any]):
        self.env = TrainStepEnv(**env_kwargs)
        self.answer: str | None = None

    def reset(self, task_id: str, **_: Any) -> str:
        self.answer = None
        messages, _info = self.env.reset(options={"task_id": task_id})
        return messages[-1]["content"]

    def run(self, command: str):
        """Run a shell command in the repository and return its output.

        Args:
            command: The command, e.g. "ls click".
        """
        return self.env.run_coroutine(self.env.run.call({"command": command}))

    def submit(self, answer: str):
        """Submit your final answer. This ends the episode.

        Args:
            answer: Your final answer.
        """
        if self.answer is not None:
            return "Not run: the episode already ended with a submission."
        self.answer = answer
        return "Submitted."

    def _grade(self) -> float:
        return self.env.run_coroutine(self.env.check(self.answer))


def trl_reward(completions: list[list[dict]], environments: list[TRLEnvironment],
               **_: Any) -> list[float]:
    """TRL's reward function: grades each rollout's environment in its sandbox."""
    rewards = []
    for completion, environment in zip(completions, environments, strict=True):
        reward = environment._grade()
        turns = [m for m in completion if m["role"] == "assistant"]
        GRADED.append({"turns": len(turns), "reward": reward,
                       "tool_calls": sum(len(m.get("tool_calls") or []) for m in turns)})
        rewards.append(reward)
    return rewards


# ---- the runs ---------------------------------------------------------------------------------


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def step_timer() -> tuple[Any, list[float]]:
    """A ``TrainerCallback`` and the list it fills with each step's wall time."""
    from transformers import TrainerCallback

    times: list[float] = []
    last = [0.0]

    class StepTimer(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            last[0] = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            now = time.perf_counter()
            times.append(now - last[0])
            last[0] = now
            log(f"  step {len(times)}: {times[-1]:.2f} s")

    return StepTimer(), times


def env_kwargs(constants: Constants, remote_latency_s: float | None = None) -> dict[str, Any]:
    latency = constants.remote_latency_s if remote_latency_s is None else remote_latency_s
    return {"template": constants.template, "remote_latency_s": latency,
            "tool_timeout_s": constants.tool_timeout_s, "max_turns": constants.max_turns}


def rollout_config(constants: Constants) -> RolloutConfig:
    return RolloutConfig(Sampling(max_tokens=constants.max_tokens, temperature=1.0),
                         max_total_tokens=4096, seed=constants.seed)


def grpo_args(constants: Constants) -> dict[str, Any]:
    """The ``GRPOConfig`` fields both runs share (over agentgym's DAPO defaults)."""
    return {
        "max_steps": constants.steps,
        "per_device_train_batch_size": constants.episodes,
        "num_generations": constants.num_generations,
        "max_completion_length": constants.max_tokens,
        "max_tool_calling_iterations": constants.max_turns - 1,
        "learning_rate": constants.learning_rate,
        "seed": constants.seed,
        "logging_steps": 1,
        "save_strategy": "no",
        "disable_tqdm": True,
    }


def warm_up(constants: Constants, model_dir: Path, work: Path) -> Path:
    """The tiny model after SFT on the oracle's demonstrations, collected without the
    remote latency (not what this bench measures). Returns the trained model's folder."""
    from transformers import AutoTokenizer

    from agentgym.core.plugins import plugin_host
    from agentgym.rollout.evaluate import rollout
    from agentgym.trainers.sft import train_sft, trajectory_dataset

    oracle = plugin_host().get("policies", "oracle").build(None)
    demonstrations = asyncio.run(rollout(
        ENV_ID, oracle, constants.demonstrations, env_kwargs=env_kwargs(constants, 0.0),
        policy_name="oracle", pipeline=PipelineConfig(concurrency=8)))
    failed = [t.error for t in demonstrations if t.error]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(demonstrations)} oracle episodes failed"
                           f" (the local sandbox needs root and bubblewrap); the first:"
                           f" {failed[0]}")
    passed = sum(t.reward >= 1.0 for t in demonstrations)
    if passed != len(demonstrations):
        raise RuntimeError(f"the oracle passed {passed} of {len(demonstrations)} episodes:"
                           " the bench env's tasks or grader are broken")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    train_sft(str(model_dir), trajectory_dataset(demonstrations, tokenizer),
              output_dir=work / "sft", tokenizer=tokenizer, args={
                  "max_steps": constants.sft_steps,
                  "per_device_train_batch_size": constants.sft_batch_size,
                  "learning_rate": constants.sft_learning_rate,
                  "lr_scheduler_type": "cosine", "warmup_steps": 5, "logging_steps": 50,
                  "save_strategy": "no", "seed": constants.seed, "disable_tqdm": True})
    return work / "sft" / "final"


def check_same_prompt(constants: Constants, model: Path) -> None:
    """Raise unless TRL's prompt for a task (its dataset row, completed by ``reset``, with
    the environment's methods as tools) has the same tokens as agentgym's."""
    from transformers import AutoTokenizer

    from agentgym.rollout.chat import ChatTokens

    tokenizer = AutoTokenizer.from_pretrained(model)
    environment = TRLEnvironment(env_kwargs(constants, 0.0))
    try:
        task_id = environment.env.task_ids()[0]
        user = {"role": "user", "content": environment.reset(task_id)}
        tools = [getattr(environment, name) for name, _ in
                 inspect.getmembers(TRLEnvironment, predicate=inspect.isfunction)
                 if name != "reset" and not name.startswith("_")]
        trl_ids = tokenizer.apply_chat_template([user], tools=tools, tokenize=True,
                                                add_generation_prompt=True, return_dict=False)
        messages, info = environment.env.reset(options={"task_id": task_id})
        ours = ChatTokens(tokenizer, info["tools"]).prompt(messages)
    finally:
        environment.env.close()
    if list(trl_ids) != list(ours):
        raise RuntimeError(
            "TRL renders another prompt than agentgym for the same task:\n"
            f"TRL:      {tokenizer.decode(trl_ids)!r}\nagentgym: {tokenizer.decode(ours)!r}\n"
            "make TRLEnvironment's tools match TrainStepEnv's (names, docstrings, annotations)")


def run_agentgym(constants: Constants, model: Path, work: Path) -> list[float]:
    from agentgym.trainers.grpo import GRPOOptions, train_grpo

    callback, times = step_timer()
    train_grpo(str(model), ENV_ID, env_kwargs=env_kwargs(constants), output_dir=work / "agentgym",
               args=grpo_args(constants), options=GRPOOptions(dynamic_sampling=False),
               rollout=rollout_config(constants), callbacks=[callback])
    return times


def run_trl(constants: Constants, model: Path, work: Path) -> list[float]:
    from datasets import Dataset
    from trl import GRPOTrainer

    from agentgym.rollout.models import load_model_and_tokenizer
    from agentgym.trainers.grpo import grpo_config

    callback, times = step_timer()
    task_ids = make_tasks(constants.template).ids()
    # The rows of agentgym's task_dataset (so the seeded sampler draws the same tasks),
    # with a user message for reset() to complete with the task's text.
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": ""}]] * len(task_ids),
                                 "task_id": task_ids})
    loaded, tokenizer = load_model_and_tokenizer(str(model), padding_side="left")
    config = grpo_config(work / "trl", grpo_args(constants), rollout=rollout_config(constants))
    environments: list[TRLEnvironment] = []

    def factory() -> TRLEnvironment:
        environments.append(TRLEnvironment(env_kwargs(constants)))
        return environments[-1]

    trainer = GRPOTrainer(model=loaded, reward_funcs=[trl_reward], args=config,
                          train_dataset=dataset, processing_class=tokenizer,
                          environment_factory=factory, callbacks=[callback])
    try:
        trainer.train()
    finally:
        for environment in environments:
            environment.env.close()
    return times


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send all that is written to stdout (libraries' prints, child processes) to stderr,
    so that ``--json`` leaves exactly one JSON object on stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def measure(constants: Constants) -> dict[str, Any]:
    """Warm the model up, run both trainers, and return the results (``--json``'s object)."""
    import click as click_package
    import torch

    from agentgym.rollout.tiny_model import build_tiny_model

    started = time.perf_counter()
    torch.set_num_threads(constants.torch_threads)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    agentgym.register_plugin(sys.modules[__name__], "bench-train-step")
    constants.template = _copy_repo(Path(click_package.__file__).parent)
    work = Path(tempfile.mkdtemp(prefix="agentgym-bench-train-step-"))
    try:
        model_root = Path(os.environ.get("AGENTGYM_BENCH_MODEL", tempfile.gettempdir()))
        model = build_tiny_model(model_root / "agentgym-tiny")
        log(f"warm-up: {constants.demonstrations} oracle demonstrations, then"
            f" {constants.sft_steps} SFT steps")
        warm = warm_up(constants, model, work)
        check_same_prompt(constants, warm)
        times, episodes = {}, {}
        for name, run in zip(RUNS, (run_agentgym, run_trl), strict=True):
            log(f"{name}: {constants.steps} GRPO steps of {constants.episodes} episodes")
            GRADED.clear()
            times[name] = run(constants, warm, work)
            episodes[name] = list(GRADED)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(constants.template, ignore_errors=True)
    step_s = {name: statistics.median(times[name][1:]) for name in RUNS}

    def mean(name: str, key: str) -> float:
        return sum(e[key] for e in episodes[name]) / max(1, len(episodes[name]))

    return {
        "episodes": constants.episodes,
        "agentgym_step_s": step_s["agentgym"],
        "trl_environment_factory_step_s": step_s["trl_environment_factory"],
        "speedup": step_s["trl_environment_factory"] / step_s["agentgym"],
        "turns_per_episode": {name: mean(name, "turns") for name in RUNS},
        "tool_calls_per_episode": {name: mean(name, "tool_calls") for name in RUNS},
        "mean_reward": {name: mean(name, "reward") for name in RUNS},
        "episodes_graded": {name: len(episodes[name]) for name in RUNS},
        "step_times_s": times,
        "constants": {k: v for k, v in asdict(constants).items() if k != "template"},
        "bench_wall_s": time.perf_counter() - started,
    }


def main() -> None:
    defaults = Constants()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=defaults.episodes,
                        help="episodes per GRPO step (a multiple of --num-generations)")
    parser.add_argument("--steps", type=int, default=defaults.steps,
                        help="GRPO steps per run (>= 2: step 1 is left out of the median)")
    parser.add_argument("--num-generations", type=int, default=defaults.num_generations)
    parser.add_argument("--remote-latency", type=float, default=defaults.remote_latency_s,
                        help="stated remote-start latency of each episode's sandbox, seconds")
    parser.add_argument("--sft-steps", type=int, default=defaults.sft_steps,
                        help="warm-up SFT steps on the oracle's demonstrations")
    parser.add_argument("--torch-threads", type=int, default=defaults.torch_threads)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.num_generations < 2 or args.episodes % args.num_generations:
        parser.error(f"--episodes {args.episodes} must be a multiple of --num-generations"
                     f" {args.num_generations} (>= 2): GRPO compares episodes within a group")
    if args.steps < 2:
        parser.error(f"--steps {args.steps}: need >= 2, since step 1 is left out")
    constants = Constants(episodes=args.episodes, steps=args.steps,
                          num_generations=args.num_generations,
                          remote_latency_s=args.remote_latency, sft_steps=args.sft_steps,
                          torch_threads=args.torch_threads)
    with stdout_to_stderr():
        result = measure(constants)
    if args.json:
        print(json.dumps(result))
        return
    print(f"{'run':<25}{'step_s':>9}{'turns/episode':>15}{'tool calls/episode':>20}"
          f"{'reward':>8}")
    for name in RUNS:
        print(f"{name:<25}{result[f'{name}_step_s']:>9.2f}"
              f"{result['turns_per_episode'][name]:>15.2f}"
              f"{result['tool_calls_per_episode'][name]:>20.2f}"
              f"{result['mean_reward'][name]:>8.2f}")
    print(f"agentgym is {result['speedup']:.2f}x faster per GRPO step with {constants.episodes}"
          f" episodes per step (median of steps 2..{constants.steps}); the bench took"
          f" {result['bench_wall_s']:.0f} s")
    print("constants:", json.dumps(result["constants"], indent=1))


if __name__ == "__main__":
    main()
