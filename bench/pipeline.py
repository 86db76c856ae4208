"""The rollout pipeline against lock-step and async batching, on a SWE-shaped workload,
and across sandbox start-up times.

    python bench/pipeline.py [--episodes 128] [--concurrency 16] [--remote-latency 2] [--json]
        [--latencies 0.5,2,20,heavy] [--sweep-modes sync,async_batch,pipeline,unbounded]
        [--scale 0.25] [--sweep-only]

Two parts. The first (issue 4) is described here; the second, the setup-latency sweep
(issue 21), is :class:`Sweep`'s docstring and :func:`sweep_bound`'s: the same simulated GPU
and policy on remote sandboxes modelled in time, for each start-up time and each mode
(``unbounded``: every episode admitted at once), its makespan against the least any
schedule could reach within the mode's limits, its peak live sandboxes, sandbox-seconds
and idle sandbox-seconds. JSON: ``"sweep": {"<latency>": {"<mode>": {"makespan_s",
"bound_s", "peak_live", "sandbox_s", "idle_sandbox_s", ...}}}`` beside the first part's
keys. Targets (issue 21): the pipeline within 10% of its bound on every row, with peak
live <= 2x concurrency and idle sandbox-seconds < 25% of sandbox-seconds.

Workload (every constant is printed with the results):

* Setup per episode: a real local sandbox whose workspace is a copy-on-write view of a
  real repository (the installed ``click`` package's source), a real command in it
  (byte-compiling the package), plus a stated start-up latency that models a remote
  sandbox provider (default 2 s; SkyRL-Agent reports ~20 s per container start under load).
* Turns: each is a generation on a simulated GPU, then a real tool command in the sandbox.
* Grading: a real test command in the sandbox.
* The simulated GPU batches continuously: a decode step lasts ``a + c*b`` seconds for the
  ``b`` sequences active in it (at most ``batch_cap``); each request needs its sampled number
  of tokens. Defaults model a 7-8B model on one H100 in vLLM (~10 ms per decode step plus
  ~0.5 ms per sequence in the memory-bound regime), scaled so that an episode's generation
  and its setup are of the same order, as in SWE training.

Same episodes, same seed, all three modes in one run, each with the same generation
concurrency; the pipeline prepares at most ``concurrency`` further sandboxes ahead.

Reported: makespan and ``gpu_busy`` (share of the makespan with >= 1 active sequence) per
mode; ``lower_bound_s`` = max(GPU time for all tokens at the batch cap, measured CPU work
/ cores, the longest episode's critical path); ``overhead_ms_per_step`` = the loop's own
cost per turn with a zero-latency policy and tools that do nothing. Targets (issue 4):
pipeline >= 1.55x async_batch and >= 2x sync, gpu_busy >= 0.90, makespan within 15% of the
lower bound, overhead < 1 ms per turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agentgym
from agentgym.core import (
    AgentEnv,
    EnvRegistration,
    RewardResult,
    Submitted,
    Task,
    TaskList,
    hookimpl,
    tool,
)
from agentgym.core.policies import Generation, Sampling
from agentgym.core.registry import open_sandbox
from agentgym.core.sandbox import SandboxLimits
from agentgym.rollout.evaluate import rollout
from agentgym.rollout.loop import RolloutConfig
from agentgym.rollout.pipeline import MODES, PipelineConfig
from agentgym.rollout.tiny_model import build_tiny_model


@dataclass
class Constants:
    episodes: int = 128
    concurrency: int = 8
    turns: int = 4
    tokens_min: int = 30
    tokens_max: int = 60
    step_base_s: float = 0.010  # a: fixed cost of one decode step
    step_per_seq_s: float = 0.0005  # c: added cost per active sequence
    batch_cap: int = 8
    remote_latency_s: float = 2.0
    seed: int = 0
    template: str = ""
    setup_command: str = "python3 -m py_compile click/core.py"
    tool_command: str = "grep -rn 'def ' click | wc -l"
    grade_command: str = ("test -s click/__pycache__/core.cpython-311.pyc"
                          " && grep -q 'class Group' click/core.py")
    sources: dict[str, str] = field(default_factory=lambda: {
        "step_base_s, step_per_seq_s": "assumed: a vLLM decode step of a 7-8B model on one"
                                       " H100 in the memory-bound regime (~14 ms at batch 8,"
                                       " ~70 tokens/s per sequence)",
        "remote_latency_s": "issue 4's default; SkyRL-Agent reports ~20 s per container start"
                            " under load",
        "tokens_min, tokens_max, turns": "an episode's generation (~2.5 s at the batch cap)"
                                         " of the same order as its setup (~2 s), as in SWE"
                                         " training where both are tens of seconds",
        "episodes, concurrency, batch_cap": "16 waves of the batch: enough that the first"
                                            " setup (unavoidable idle time) is a small part",
        "commands": "real but light: the modelled sandboxes are remote, so the GPU node's"
                    " CPUs do little of their work; this machine has 2 cores",
        "template": "a real repository: a copy of the installed click package's source",
    })


class SimulatedGPU:
    """Continuous batching: sequences join at step boundaries, up to ``cap`` at once."""

    def __init__(self, base_s: float, per_seq_s: float, cap: int):
        self.base_s, self.per_seq_s, self.cap = base_s, per_seq_s, cap
        self.waiting: list[tuple[int, asyncio.Future]] = []
        self.active: list[list[Any]] = []
        self.busy_s = 0.0  # closed busy periods; busy_seconds() adds the open one
        self.busy_since: float | None = None
        self.tokens = self.steps = 0
        self._wake: asyncio.Event | None = None
        self._clock: float | None = None
        self._task: asyncio.Task | None = None

    async def decode(self, tokens: int) -> None:
        """Return once ``tokens`` decode steps of this sequence have run."""
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.ensure_future(self._engine())
        future = asyncio.get_running_loop().create_future()
        self.waiting.append((tokens, future))
        self._wake.set()
        await future

    def busy_seconds(self) -> float:
        """Seconds with at least one sequence decoding, up to now."""
        since = self.busy_since
        return self.busy_s + (time.perf_counter() - since if since is not None else 0.0)

    async def _engine(self) -> None:
        while True:
            while self.waiting and len(self.active) < self.cap:
                tokens, future = self.waiting.pop(0)
                self.active.append([tokens, future])
            if not self.active:
                if self.busy_since is not None:
                    self.busy_s += time.perf_counter() - self.busy_since
                    self.busy_since = self._clock = None
                self._wake.clear()
                await self._wake.wait()
                continue
            now = time.perf_counter()
            self.busy_since = now if self.busy_since is None else self.busy_since
            # Steps run back to back on a nominal clock, so event-loop lateness in one step
            # is made up in the next instead of accumulating (a GPU does not drift).
            duration = self.base_s + self.per_seq_s * len(self.active)
            start = now if self._clock is None or self._clock < now - duration else self._clock
            self._clock = start + duration
            await asyncio.sleep(max(0.0, self._clock - now))
            self.tokens += len(self.active)
            self.steps += 1
            for sequence in self.active:
                sequence[0] -= 1
            for sequence in [s for s in self.active if s[0] <= 0]:
                self.active.remove(sequence)
                sequence[1].set_result(None)

    def stop(self) -> None:
        """Stop decoding (from any thread)."""
        if self._task:
            self._task.get_loop().call_soon_threadsafe(self._task.cancel)


class SimulatedPolicy:
    """A token policy whose sampling time is the simulated GPU's; it always answers with
    a call of the env's ``run`` tool (then ``submit`` on the last turn)."""

    def __init__(self, tokenizer: Any, gpu: SimulatedGPU | None, constants: Constants):
        self.tokenizer, self.gpu, self.constants = tokenizer, gpu, constants
        eos = tokenizer.eos_token
        self.turns = {
            name: tokenizer.encode(
                f'<tool_call>\n{{"name": "{name}", "arguments": {{}}}}\n</tool_call>{eos}',
                add_special_tokens=False)
            for name in ("run", "submit")
        }
        self.tool_response = tokenizer.convert_tokens_to_ids("<tool_response>")
        self.filler = tokenizer.encode(" think", add_special_tokens=False)

    async def generate(self, prompt_ids: list[int], sampling: Sampling) -> Generation:
        # Deterministic in the sequence so far: the same episodes cost the same in every mode.
        rng = random.Random(f"{len(prompt_ids)}:{prompt_ids[-64:]}")
        tokens = rng.randint(self.constants.tokens_min, self.constants.tokens_max)
        if self.gpu is not None:
            await self.gpu.decode(tokens)
        done = prompt_ids.count(self.tool_response) >= self.constants.turns
        call = self.turns["submit" if done else "run"]
        # As many tokens as were "sampled": reasoning filler, then the tool call.
        ids = self.filler * max(0, (tokens - len(call)) // len(self.filler)) + call
        return Generation(ids, [0.0] * len(ids), "stop")


class SandboxedBenchEnv(AgentEnv):
    """The workload's env: real sandbox setup, tools and grading, stated remote latency."""

    def __init__(self, constants: Constants | None = None, real: bool = True, **kwargs: Any):
        self.constants = constants or Constants()
        tasks = TaskList([Task(f"bench-{i}", f"Fix bug {i}.") for i in range(64)])
        super().__init__(tasks, max_turns=self.constants.turns + 2, **kwargs)
        self.real, self.box, self.cpu_s = real, None, 0.0

    async def _timed_exec(self, command: str) -> Any:
        start = time.perf_counter()
        result = await self.box.exec(command, timeout=60)
        self.cpu_s += time.perf_counter() - start
        return result

    async def setup_episode(self, task: Task) -> None:
        if not self.real:
            return
        await asyncio.sleep(self.constants.remote_latency_s)
        start = time.perf_counter()
        self.box = await open_sandbox("local", template=self.constants.template,
                                      limits=SandboxLimits(timeout_s=60))
        self.cpu_s += time.perf_counter() - start
        await self._timed_exec(self.constants.setup_command)

    async def teardown_episode(self) -> None:
        if self.box is not None:
            await self.box.close()
            self.box = None

    async def grade(self, episode: Any) -> RewardResult:
        if self.real:
            ok = (await self._timed_exec(self.constants.grade_command)).exit_code == 0
            return RewardResult(float(ok and episode.submitted))
        return RewardResult(float(episode.submitted))

    @tool
    async def run(self) -> str:
        """Run the workload's tool command."""
        if not self.real:
            return ""
        return (await self._timed_exec(self.constants.tool_command)).output

    @tool
    def submit(self) -> str:
        """Finish."""
        raise Submitted(True)


@hookimpl
def agentgym_envs() -> list[EnvRegistration]:
    return [EnvRegistration("bench-sandbox", SandboxedBenchEnv, "bench/pipeline.py's workload")]


async def run_mode(mode: str, constants: Constants, tokenizer: Any) -> dict[str, Any]:
    gpu = SimulatedGPU(constants.step_base_s, constants.step_per_seq_s, constants.batch_cap)
    policy = SimulatedPolicy(tokenizer, gpu, constants)
    start = time.perf_counter()
    trajectories = await rollout(
        "bench-sandbox", policy, constants.episodes,
        make_env=lambda: SandboxedBenchEnv(constants),
        pipeline=PipelineConfig(mode=mode, concurrency=constants.concurrency),
        config=RolloutConfig(Sampling(max_tokens=constants.tokens_max), seed=constants.seed))
    makespan = time.perf_counter() - start
    gpu.stop()
    return {
        "makespan_s": makespan,
        "gpu_busy": gpu.busy_s / makespan,
        "tokens": gpu.tokens,
        "episode_tokens": [sum(t.loss_mask) for t in trajectories],
        "mean_reward": sum(t.reward for t in trajectories) / len(trajectories),
        "errors": sum(t.error is not None for t in trajectories),
    }


async def real_work_per_episode(constants: Constants, episodes: int = 3) -> float:
    """Seconds of real sandbox work in one episode (create, setup, tools, grade, close),
    measured alone on an idle machine: the CPU work the lower bound counts."""
    start = time.perf_counter()
    for _ in range(episodes):
        box = await open_sandbox("local", template=constants.template)
        for command in ([constants.setup_command] + [constants.tool_command] * constants.turns
                        + [constants.grade_command]):
            assert (await box.exec(command)).exit_code == 0, command
        await box.close()
    return (time.perf_counter() - start) / episodes


async def loop_overhead(tokenizer: Any, constants: Constants) -> float:
    """Milliseconds per turn of the loop itself: zero-latency policy, do-nothing tools."""
    quick = Constants(**{**constants.__dict__, "turns": 10})
    policy = SimulatedPolicy(tokenizer, None, quick)
    episodes = 100
    start = time.perf_counter()
    trajectories = await rollout(
        "bench-sandbox", policy, episodes, make_env=lambda: SandboxedBenchEnv(quick, real=False),
        pipeline=PipelineConfig(mode="pipeline", concurrency=16))
    elapsed = time.perf_counter() - start
    return elapsed / sum(t.turns for t in trajectories) * 1000


# ---- the setup-latency sweep (issue 21) ------------------------------------------------


@dataclass
class Sweep:
    """The sweep's workload: an agent task on remote sandboxes, modelled in time only.

    Latencies are the model's seconds; ``scale`` multiplies every one of them (GPU steps
    included) so the sweep runs faster; results are reported in the model's seconds
    (measured seconds / ``scale``)."""

    episodes: int = 64
    concurrency: int = 16
    turns: int = 6
    tokens_min: int = 200
    tokens_max: int = 400
    step_base_s: float = 0.010
    step_per_seq_s: float = 0.0005
    tool_s: float = 0.5
    grade_s: float = 2.0
    latencies: tuple[str, ...] = ("0.5", "2", "20", "heavy")
    heavy_median_s: float = 2.0
    heavy_share: float = 0.10
    heavy_factor: float = 10.0
    scale: float = 0.25
    seed: int = 0
    sources: dict[str, str] = field(default_factory=lambda: {
        "episodes, turns, concurrency": "issue 21's simulated agent workload",
        "tokens_min, tokens_max": "an agent turn of 100-200 tokens (a thought and a"
                                  " command), ~2.7 s at the batch cap",
        "tool_s, grade_s": "a command in a remote sandbox, a test run",
        "latencies": "sandbox start-up: 0.5 s (a warm local sandbox), 2 s, 20 s"
                     " (SkyRL-Agent's container start under load), and 'heavy': 10% of"
                     " starts take 10x the 2 s median",
    })

    def setup_s(self, latency: str, task_id: str) -> float:
        """The start-up seconds of ``task_id``'s sandbox in row ``latency`` (seeded)."""
        if latency != "heavy":
            return float(latency)
        slow = random.Random(f"{self.seed}:{task_id}").random() < self.heavy_share
        return self.heavy_median_s * (self.heavy_factor if slow else 1.0)


class RemoteSandboxEnv(AgentEnv):
    """The sweep's env: a sandbox that takes its row's start-up time, tools and grading
    that take theirs (sleeps: the sandbox is remote)."""

    def __init__(self, sweep: Sweep, latency: str, **kwargs: Any):
        self.sweep, self.latency = sweep, latency
        tasks = TaskList([Task(f"t{i}", f"Fix bug {i}.") for i in range(sweep.episodes)])
        super().__init__(tasks, max_turns=sweep.turns + 2, **kwargs)

    async def setup_episode(self, task: Task) -> None:
        await asyncio.sleep(self.sweep.setup_s(self.latency, task.id) * self.sweep.scale)

    async def grade(self, episode: Any) -> RewardResult:
        await asyncio.sleep(self.sweep.grade_s * self.sweep.scale)
        return RewardResult(float(episode.submitted))

    @tool
    async def run(self) -> str:
        """Run a command."""
        await asyncio.sleep(self.sweep.tool_s * self.sweep.scale)
        return "ok"

    @tool
    def submit(self) -> str:
        """Finish."""
        raise Submitted(True)


SWEEP_MODES = (*MODES, "unbounded")


def sweep_config(mode: str, sweep: Sweep) -> PipelineConfig:
    """``unbounded`` admits every episode at once (the simplest async peers); the rest
    are the pipeline's modes as configured by default."""
    if mode == "unbounded":
        return PipelineConfig(mode="pipeline", concurrency=sweep.concurrency,
                              prefetch=sweep.episodes, max_live_sandboxes=sweep.episodes)
    return PipelineConfig(mode=mode, concurrency=sweep.concurrency)


async def sweep_row(mode: str, latency: str, sweep: Sweep, tokenizer: Any) -> dict[str, Any]:
    """One mode on one latency: what it took, and the least any schedule could take."""
    scale = sweep.scale
    steps = Constants(turns=sweep.turns, tokens_min=sweep.tokens_min,
                      tokens_max=sweep.tokens_max)
    gpu = SimulatedGPU(sweep.step_base_s * scale, sweep.step_per_seq_s * scale,
                       sweep.concurrency)
    config = sweep_config(mode, sweep)
    stats: list[Any] = []
    start = time.perf_counter()
    trajectories = await rollout(
        None, SimulatedPolicy(tokenizer, gpu, steps), sweep.episodes,
        make_env=lambda: RemoteSandboxEnv(sweep, latency),
        pipeline=config, config=RolloutConfig(Sampling(max_tokens=sweep.tokens_max)),
        on_stage=lambda counts: stats[:] or stats.append(counts.stats))
    makespan = (time.perf_counter() - start) / scale
    gpu.stop()
    cost = stats[0] if stats else None
    errors = sum(t.error is not None for t in trajectories)
    return {
        "makespan_s": makespan,
        "bound_s": sweep_bound(sweep, latency, trajectories, config.live_cap),
        "per_slot": len(trajectories) / makespan / sweep.concurrency,
        "peak_live": cost.peak_live if cost else 0,
        "sandbox_s": cost.sandbox_s / scale if cost else 0.0,
        "idle_sandbox_s": cost.idle_sandbox_s / scale if cost else 0.0,
        "mean_batch": gpu.tokens / max(gpu.steps, 1),
        "mean_reward": sum(t.reward for t in trajectories) / len(trajectories),
        "errors": errors,
    }


def sweep_bound(sweep: Sweep, latency: str, trajectories: list[Any], live_cap: int) -> float:
    """The least makespan any schedule could reach with ``concurrency`` generation slots
    and ``live_cap`` live sandboxes, in the model's seconds. The largest of:

    * the GPU: every sampled token at the batch cap; and, as no episode plays its second
      turn before the fastest setup ends, and only ``live_cap`` episodes can have
      started by then, every token but the ``live_cap`` largest first turns after it;
    * the longest episode alone: its setup, its turns' generation at batch 1 (the first
      turn hidden in the setup), its tools and its grading;
    * the live cap: each episode holds a sandbox at least that long; ``live_cap`` at once.
    """
    full_step = sweep.step_base_s + sweep.step_per_seq_s * sweep.concurrency
    alone_step = sweep.step_base_s + sweep.step_per_seq_s
    tokens = [sum(t.loss_mask) for t in trajectories]
    first = [_first_turn_tokens(t.loss_mask) for t in trajectories]
    fastest = min(sweep.setup_s(latency, t.task_id) for t in trajectories)
    early = sum(sorted(first, reverse=True)[:live_cap])
    gpu = max(sum(tokens) / sweep.concurrency * full_step,
              fastest + (sum(tokens) - early) / sweep.concurrency * full_step)
    held = [sweep.setup_s(latency, t.task_id) + (n - n1) * alone_step
            + t.turns * sweep.tool_s + sweep.grade_s
            for t, n, n1 in zip(trajectories, tokens, first, strict=True)]
    return max(gpu, max(held), sum(held) / live_cap)


def _first_turn_tokens(loss_mask: list[int]) -> int:
    """Tokens the model sampled in its first turn: the completion's leading 1s."""
    for i, bit in enumerate(loss_mask):
        if not bit:
            return i
    return len(loss_mask)


def run_sweep(sweep: Sweep, tokenizer: Any, modes: list[str]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for latency in sweep.latencies:
        rows[latency] = {mode: asyncio.run(sweep_row(mode, latency, sweep, tokenizer))
                         for mode in modes}
    return rows


def print_sweep(rows: dict[str, dict[str, Any]], sweep: Sweep) -> None:
    print(f"\nsetup-latency sweep: {sweep.episodes} episodes, {sweep.turns} turns,"
          f" generation concurrency {sweep.concurrency} (model seconds)")
    print(f"{'setup':<7}{'mode':<12}{'makespan':>10}{'bound':>8}{'vs bound':>10}"
          f"{'per slot':>10}{'peak live':>11}{'sandbox_s':>11}{'idle':>7}")
    for latency, modes in rows.items():
        for mode, row in modes.items():
            idle = row["idle_sandbox_s"] / row["sandbox_s"] if row["sandbox_s"] else 0.0
            print(f"{latency:<7}{mode:<12}{row['makespan_s']:>10.1f}{row['bound_s']:>8.1f}"
                  f"{row['makespan_s'] / row['bound_s']:>9.2f}x{row['per_slot']:>10.3f}"
                  f"{row['peak_live']:>11}{row['sandbox_s']:>11.0f}{idle:>7.0%}")



def main() -> None:
    defaults = Constants()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=defaults.episodes)
    parser.add_argument("--concurrency", type=int, default=defaults.concurrency)
    parser.add_argument("--remote-latency", type=float, default=defaults.remote_latency_s)
    parser.add_argument("--modes", default=",".join(MODES))
    sweep = Sweep()
    parser.add_argument("--latencies", default=",".join(sweep.latencies),
                        help="the sweep's setup latencies (seconds, or 'heavy'); '' skips it")
    parser.add_argument("--sweep-modes", default=",".join(SWEEP_MODES))
    parser.add_argument("--sweep-episodes", type=int, default=sweep.episodes)
    parser.add_argument("--scale", type=float, default=sweep.scale,
                        help="multiply the sweep's latencies by this to run it faster")
    parser.add_argument("--sweep-only", action="store_true",
                        help="run only the sweep (its JSON has only the 'sweep' key)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    import click as click_package

    constants = Constants(episodes=args.episodes, concurrency=args.concurrency,
                          batch_cap=args.concurrency, remote_latency_s=args.remote_latency)
    constants.template = _copy_repo(Path(click_package.__file__).parent)
    agentgym.register_plugin(sys.modules[__name__], "bench")

    from transformers import AutoTokenizer

    model_dir = Path(os.environ.get("AGENTGYM_BENCH_MODEL", tempfile.gettempdir()))
    tokenizer = AutoTokenizer.from_pretrained(build_tiny_model(model_dir / "agentgym-tiny"))

    sweep = Sweep(latencies=tuple(x for x in args.latencies.split(",") if x),
                  scale=args.scale, episodes=args.sweep_episodes)
    rows = run_sweep(sweep, tokenizer, args.sweep_modes.split(","))
    if args.sweep_only:
        if args.json:
            print(json.dumps({"sweep": rows, "sweep_constants": dict(sweep.__dict__)}))
        else:
            print_sweep(rows, sweep)
        return

    work = asyncio.run(real_work_per_episode(constants))
    modes = {}
    for mode in args.modes.split(","):
        modes[mode] = asyncio.run(run_mode(mode, constants, tokenizer))
    reference = next(iter(modes.values()))
    full_step = constants.step_base_s + constants.step_per_seq_s * constants.batch_cap
    gpu_time = reference["tokens"] / constants.batch_cap * full_step
    cpu_time = work * constants.episodes / (os.cpu_count() or 1)
    alone_step = constants.step_base_s + constants.step_per_seq_s
    critical = constants.remote_latency_s + work + max(reference["episode_tokens"]) * alone_step
    lower_bound = max(gpu_time, cpu_time, critical)
    overhead = asyncio.run(loop_overhead(tokenizer, constants))
    result = {
        "modes": {m: {"makespan_s": v["makespan_s"], "gpu_busy": v["gpu_busy"]}
                  for m, v in modes.items()},
        "lower_bound_s": lower_bound,
        "overhead_ms_per_step": overhead,
        "constants": dict(constants.__dict__),
        "lower_bound_parts_s": {"gpu_at_batch_cap": gpu_time, "cpu_work_per_core": cpu_time,
                                "longest_critical_path": critical},
        "real_work_per_episode_s": work,
        "mean_reward": {m: v["mean_reward"] for m, v in modes.items()},
        "errors": {m: v["errors"] for m, v in modes.items()},
        "sweep": rows,
        "sweep_constants": dict(sweep.__dict__),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"{'mode':<12}{'makespan_s':>12}{'gpu_busy':>10}{'vs pipeline':>13}{'reward':>8}")
    pipeline = modes.get("pipeline", {}).get("makespan_s")
    for mode, row in modes.items():
        ratio = f"{row['makespan_s'] / pipeline:.2f}x" if pipeline else "-"
        print(f"{mode:<12}{row['makespan_s']:>12.2f}{row['gpu_busy']:>10.2f}{ratio:>13}"
              f"{row['mean_reward']:>8.2f}")
    print(f"lower bound {lower_bound:.2f} s: GPU at the batch cap {gpu_time:.2f} s, CPU work"
          f" {work * constants.episodes:.2f} s / {os.cpu_count()} cores = {cpu_time:.2f} s,"
          f" longest critical path {critical:.2f} s")
    for mode, row in modes.items():
        print(f"  {mode}: {row['makespan_s'] / lower_bound:.2f}x the lower bound")
    print(f"loop overhead {overhead:.3f} ms per turn")
    print("constants:", json.dumps(constants.__dict__, indent=1))
    if rows:
        print_sweep(rows, sweep)


def _copy_repo(package: Path) -> str:
    """A repository folder holding a copy of ``package`` (the sandbox template)."""
    import atexit
    import shutil

    repo = Path(tempfile.mkdtemp(prefix="agentgym-bench-repo-"))
    atexit.register(shutil.rmtree, repo, ignore_errors=True)
    shutil.copytree(package, repo / package.name,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return str(repo)


if __name__ == "__main__":
    main()
