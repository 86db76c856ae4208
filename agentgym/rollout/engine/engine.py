"""``Engine``: continuous batching for a transformers causal LM, as a token policy.

A fixed pool of sequence slots over a static KV cache (:class:`SlotCache`). A request joins
a free slot as soon as there is one and leaves the moment it stops, so a multi-turn
episode's next turn starts while the others keep decoding; there are no batches to wait
for. One thread runs the engine's steps; each step

1. admits waiting requests into free slots, preferring the slot that already holds the
   longest prefix of the prompt (an episode's previous turn: its KV is reused, only the new
   tokens are prefilled);
2. prefills up to ``prefill_chunk`` prompt tokens (long prompts take several steps, so
   running requests are never stalled for long);
3. decodes one token for every running request in one forward pass over the slots in use,
   sampling on the device (:mod:`~agentgym.rollout.engine.sampling`), and reads back only
   the sampled tokens and their log-probabilities.

On a GPU the decode steps overlap with the host (``overlap``): step ``n + 1`` is sent to
the device, its inputs being the tokens step ``n`` sampled there, before the host reads
step ``n``'s tokens back and does its bookkeeping, so the GPU does not wait on Python
between steps. A request that stopped at step ``n`` rides along in step ``n + 1`` (its
row's output is dropped); the KV that row writes is its own last token's, past what its
slot is known to hold. Host-to-device copies come from pinned memory without waiting, so
nothing but the read-back waits on the device.

On a GPU, prefill and decode passes are replayed from CUDA graphs
(:mod:`~agentgym.rollout.engine.graphs`): one launch instead of over a thousand, which is
what bounds a small model's steps there.

Outputs match :class:`~agentgym.rollout.policies.hf.HFPolicy` at temperature 0 (same
logits, up to float rounding), with the same :class:`Generation` contract: tokens up to and
including the first stop token, else ``max_tokens`` of them; processed log-probabilities.

A request that cannot fit (its prompt plus ``max_tokens`` over a slot's length, a token
outside the vocabulary) is refused alone; an out-of-memory error ends the requests of the
step it hit with a clear error, and the engine goes on with half as many running at once.
New weights (:meth:`Engine.update_weights`, or a trainer's in-place update of the shared
model) land between steps. The engine counts weight updates (:attr:`Engine.version`), and
each sampled token records the version that sampled it (:attr:`Generation.versions`), so
a request that spans an update (asynchronous training) says which tokens are older.

Models: any transformers causal LM whose attention layers take a cache object and a
prepared mask, with the ``sdpa`` or ``eager`` attention implementation, of full or
sliding-window attention layers (Llama, Qwen2/3 and their MoEs, Mistral, Mixtral, Gemma
1-3, Phi, Phi-3, GPT-2, GPT-NeoX, Falcon, DeepSeek-V3, OLMo, Granite...:
tests/rollout/test_engine_architectures.py). Building an engine checks that its slot cache
reproduces the model's own next-token distributions on a short prompt, and refuses a model
it would get wrong (recurrent or linear-attention layers, ALiBi) with an
:class:`UnsupportedModelError` that names the static-batch loop, which leaves the cache to
transformers; :func:`transformers_policy` (what ``hf:PATH`` and the trainers build) falls
back to that loop for such a model.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
import warnings
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym.core.errors import AgentGymError, InvalidArgumentError
from agentgym.core.policies import Generation, Sampling, TokenPolicy
from agentgym.rollout.engine.graphs import GraphStepError, StepGraphs
from agentgym.rollout.engine.model import LocalModel
from agentgym.rollout.engine.sampling import sample_tokens
from agentgym.rollout.engine.slots import SlotCache

__all__ = ["Engine", "EngineError", "UnsupportedModelError", "hf_engine", "transformers_policy"]

#: Seconds without work after which the engine's thread ends (the next request starts one).
IDLE_EXIT_S = 30.0
#: On a GPU, windows (positions attended over) are rounded up to a multiple of this, so that
#: shapes repeat from step to step; on a CPU a window is what the rows reach.
WINDOW_STEP = 64


class EngineError(AgentGymError, RuntimeError):
    """The engine could not finish a request (out of memory, a model that failed)."""


class UnsupportedModelError(InvalidArgumentError):
    """The engine cannot drive this model's attention (:func:`transformers_policy` then
    samples with the static-batch loop)."""


@dataclass(eq=False)
class _Request:
    prompt: list[int]
    sampling: Sampling
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    generator: Any
    arrived: float = field(default_factory=time.perf_counter)
    slot: int = -1
    filled: int = 0  # prompt tokens whose KV is in the slot
    reused: int = 0  # of them, how many were already there (a previous turn's)
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    finishes: bool = False  # its last launched step samples its last token (max_tokens)

    @property
    def position(self) -> int:
        """Where the next token's KV goes: after the prompt and all but the last sampled
        token (whose KV the next decode step writes)."""
        return len(self.prompt) + len(self.tokens) - 1


@dataclass(eq=False)
class _Sampled:
    """The tokens a step sampled for ``requests`` (one row each), on their way to the host:
    ``picked`` on the device (what the next step may read as its inputs), ``results``
    (tokens, log-probabilities, usable flags: ``[3, rows]``) on the host once ``ready``
    (a CUDA event; None: already there)."""

    requests: list[_Request]
    picked: Any
    results: Any
    ready: Any
    version: int
    decode: bool  # a decode step's (else a prefill's first tokens)


@dataclass(eq=False)
class _Update:
    """New weights (None: the shared model changed in place) and the version they are."""

    weights: Any
    version: int | None
    applied: threading.Event = field(default_factory=threading.Event)
    error: Exception | None = None


class Engine(TokenPolicy):
    """Samples completions from a transformers causal LM with continuous batching.

    Args:
        model_or_path: a folder saved with ``save_pretrained`` (or a hub id in the local
            cache), or a loaded ``PreTrainedModel``, which is shared, not copied.
        tokenizer: the tokenizer (object or path); default: the model folder's.
        device: where to run; default: a given model's device, else ``cuda`` when there
            is one, else ``cpu``.
        dtype: weights' dtype when loading from a path; the KV cache takes the model's.
        slots: sequences decoded at once (the KV cache holds this many).
        max_len: positions per slot: a request's prompt plus ``max_tokens`` must fit in
            ``max_len - 1``. Default: the model's ``max_position_embeddings``, at most 4096.
        prefill_chunk: prompt tokens prefilled per step at most (between decode steps).
        stop_token_ids: tokens that end a completion; default: the tokenizer's eos token
            and the model's ``generation_config.eos_token_id``.
        cuda_graphs: replay steps from CUDA graphs; default: on a CUDA device.
        overlap: send each decode step to the device before reading the last one's tokens
            back (see above); default: on a CUDA device (on a CPU a step runs as it is
            sent, and overlap would only add the stopped requests' extra rows).
        compile: run the decode passes through ``torch.compile`` (dynamic shapes, one
            graph), which fuses the many small elementwise kernels of a small model's
            layers; the first steps then wait for the compilation (tens of seconds to
            minutes: once for one row, once for more). Off by default (experimental:
            docs/training.md).

    Attributes:
        steps_run: decode steps run so far.
        decode_tokens: tokens sampled by decode steps so far (``decode_tokens /
            steps_run`` is how many requests a decode step ran on average).
        busy_s: seconds the engine's thread spent in steps (prefill and decode, sampling
            and reading back included): against a run's wall time, how busy the engine
            was (on a GPU, time it was not busy is time the GPU had nothing to do).
        requests_served: completions returned so far.
        tokens_generated: tokens sampled so far.
        prefill_tokens: prompt tokens prefilled so far.
        reused_tokens: prompt tokens whose KV a slot already held (not prefilled again).
        max_running: requests decoded at once at most (``slots``, halved after each
            out-of-memory error).
        version: the weights' version: 0 at the start, then what each update set (by
            default one more than before).
        graphs: the steps' CUDA graphs (:class:`StepGraphs`; None until the first step,
            and without ``cuda_graphs``); ``graphs.captures`` counts them,
            ``graphs.error`` says why capturing was turned off.
    """

    def __init__(self, model_or_path: Any, tokenizer: Any = None, device: Any = None,
                 dtype: Any = None, slots: int = 32, max_len: int | None = None,
                 prefill_chunk: int = 2048, stop_token_ids: Iterable[int] | None = None,
                 cuda_graphs: bool | None = None, overlap: bool | None = None,
                 compile: bool = False):
        if slots < 1:
            raise InvalidArgumentError(f"slots={slots} must be >= 1")
        if prefill_chunk < 1:
            raise InvalidArgumentError(f"prefill_chunk={prefill_chunk} must be >= 1")
        self.local = LocalModel.load(model_or_path, tokenizer, device, dtype, stop_token_ids,
                                     who="Engine")
        config = self.local.model.config
        implementation = getattr(config, "_attn_implementation", None) or "eager"
        if implementation not in ("sdpa", "eager"):
            raise UnsupportedModelError(
                f"the engine drives the 'sdpa' and 'eager' attention implementations, not"
                f" {implementation!r}: load the model with attn_implementation='sdpa', or use"
                " HFPolicy (agentgym.rollout.policies.hf)")
        longest = int(getattr(config, "max_position_embeddings", 0) or 4096)
        self.max_len = int(max_len if max_len is not None else min(longest, 4096))
        if self.max_len < 2:
            raise InvalidArgumentError(f"max_len={self.max_len} must be >= 2")
        self.slots, self.prefill_chunk = slots, prefill_chunk
        self.tokenizer = self.local.tokenizer
        self.steps_run = self.requests_served = self.tokens_generated = 0
        self.decode_tokens, self.busy_s = 0, 0.0
        self.prefill_tokens = self.reused_tokens = 0
        self.max_running = slots
        self.version = 0
        on_cuda = self.local.device.type == "cuda"
        if cuda_graphs and not on_cuda:
            raise InvalidArgumentError(
                f"cuda_graphs=True needs a CUDA device, and the engine runs on"
                f" {self.local.device}: leave cuda_graphs unset")
        self.cuda_graphs = on_cuda if cuda_graphs is None else bool(cuda_graphs)
        self.overlap = on_cuda if overlap is None else bool(overlap)
        self._launched: _Sampled | None = None  # a decode step whose tokens are not read yet
        self.graphs: StepGraphs | None = None
        self._boolean_mask = implementation == "sdpa"
        self._layer_kinds, self._window_of = _attention_kinds(config)
        forward = inspect.signature(self.local.model.forward).parameters
        # transformers 5.24 renamed past_key_values to cache (the old name goes in 5.40)
        self._cache_arg = "cache" if "cache" in forward else "past_key_values"
        self._cache: SlotCache | None = None
        self._dtype = next(self.local.model.parameters()).dtype
        self._held: list[list[int]] = [[] for _ in range(slots)]  # tokens whose KV a slot has
        self._running: list[_Request | None] = [None] * slots
        self._waiting: deque[_Request] = deque()
        self._wake = threading.Condition()
        self._step_lock = threading.Lock()  # a step, or a weight update, at a time
        # Weight updates for the engine's thread to apply before its next step: a lock
        # alone is not fair, and a busy thread could take it again and again first.
        self._updates: deque[_Update] = deque()
        self._thread: threading.Thread | None = None
        self._closed = False
        # The model as the steps call it: compiled after the check (which needs no speed).
        self._call_model: Any = self.local.model
        self._check_model()
        if compile:
            import torch

            self._call_model = torch.compile(self.local.model, dynamic=True, fullgraph=True)

    def __repr__(self) -> str:
        return (f"Engine({self.local.name!r}, device={str(self.local.device)!r},"
                f" slots={self.slots}, max_len={self.max_len})")

    @property
    def model(self) -> Any:
        """The model sampled from (shared with whoever passed it)."""
        return self.local.model

    # ---- the TokenPolicy contract ----------------------------------------------------------

    async def generate(self, prompt_ids: Sequence[int], sampling: Sampling) -> Generation:
        """Sample one completion of ``prompt_ids``; it joins the running ones at once when
        a slot is free."""
        prompt = [int(t) for t in prompt_ids]
        self.local.check_prompt(prompt)
        if len(prompt) + sampling.max_tokens > self.max_len - 1:
            raise InvalidArgumentError(
                f"a prompt of {len(prompt)} tokens plus max_tokens={sampling.max_tokens} does"
                f" not fit in the engine's {self.max_len - 1} positions per slot: lower"
                " max_tokens, shorten the prompt, or build the engine with a larger max_len")
        if self._closed:
            raise EngineError("the engine is closed")
        loop = asyncio.get_running_loop()
        generator = None
        if sampling.seed is not None:
            import torch

            generator = torch.Generator(device=self.local.device).manual_seed(sampling.seed)
        request = _Request(prompt, sampling, loop.create_future(), loop, generator)
        with self._wake:
            self._waiting.append(request)
            self._start()
            self._wake.notify()
        return await request.future

    def update_weights(self, state_dict_or_model: Any = None, version: int | None = None
                       ) -> None:
        """Load new weights (a state dict, or a model whose state dict to copy; None: the
        shared model was updated in place); they take effect from the next step, as
        ``version`` (default: the current one plus one)."""
        update = _Update(state_dict_or_model, version)
        with self._wake:
            self._updates.append(update)
            self._wake.notify()
        while not update.applied.wait(0.05):
            thread = self._thread
            if thread is None or not thread.is_alive():  # no engine thread: apply it here
                self._apply_updates()
        if update.error is not None:
            raise update.error

    def _apply_updates(self) -> bool:
        """Apply the weight updates asked for, in order (between two steps); an update
        that fails is the error of the caller that asked for it. Whether there were any."""
        applied = False
        with self._step_lock:
            while True:
                with self._wake:
                    if not self._updates:
                        return applied
                    update = self._updates.popleft()
                applied = True
                try:
                    if update.weights is not None:
                        self.local.load_weights(update.weights)
                    self.version = (self.version + 1 if update.version is None
                                    else int(update.version))
                except Exception as e:
                    update.error = e
                finally:
                    update.applied.set()

    def close(self) -> None:
        """Stop the engine's thread; requests still waiting or running get an error. The KV
        cache and the CUDA graphs are let go (device memory), the model is not."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)
        if thread is None or not thread.is_alive():
            with self._step_lock:
                self.graphs = self._cache = None

    def _check_model(self) -> None:
        """Refuse a model whose attention the slot cache cannot drive (a recurrent state it
        does not keep, a bias it does not know): the logits of a short prompt, prefilled
        and then decoded token by token through the slots, must be the model's own
        (one forward pass without a cache). A model the engine got wrong would otherwise
        sample tokens from the wrong distribution, and nothing would say so."""
        import torch

        length = min(12, self.max_len - 1)  # the slot's last position is the scratch one
        if length < 2:
            return
        prefilled = max(1, length - 4)
        ids = torch.tensor([[(7919 * i + 13) % self.local.vocab_size for i in range(length)]],
                           device=self.local.device)
        positions = torch.arange(length, device=self.local.device)[None]
        eval_mode = _EvalMode(self.local.model)
        eval_mode.refresh()
        # A cache of one short slot: the check allocates next to nothing (the engine's own
        # cache is allocated by its first step).
        self._cache = SlotCache(self.local.model.config, 1, min(self.max_len, WINDOW_STEP),
                                self.local.device, self._dtype)
        try:
            with self._step_lock, torch.inference_mode(), eval_mode():
                expected = self.local.model(input_ids=ids, use_cache=False).logits[
                    0, prefilled - 1:]
                got = [self._forward(ids[:, :prefilled], positions[:, :prefilled], [0],
                                     prefilled)]
                for t in range(prefilled, length):
                    got.append(self._forward(ids[:, t:t + 1], positions[:, t:t + 1], [0],
                                             t + 1))
        except torch.OutOfMemoryError:
            raise
        except Exception as e:
            raise UnsupportedModelError(
                f"the engine cannot run {type(self.local.model).__name__} through its slot"
                f" cache ({type(e).__name__}: {e}): use HFPolicy (the hf-static: policy)"
                " for this model") from e
        finally:
            self._cache = None
        # Total variation between the next-token distributions: rounding moves it by 1e-5
        # in float32 (1e-2 with TF32 matmuls), by 0.05 in bfloat16 (SmolLM2-135M: the same
        # as transformers' own cache); a mask or a state gone wrong moves it much more.
        expected = expected.float().softmax(-1)
        distance = float((torch.cat(got).float().softmax(-1) - expected).abs().sum(-1).max()) / 2
        tolerance = 0.02 if self._dtype in (torch.float32, torch.float64) else 0.2
        if not distance <= tolerance:
            raise UnsupportedModelError(
                f"the engine's slot cache does not reproduce {type(self.local.model).__name__}"
                f"'s own next-token distributions ({distance:.3g} apart in total variation,"
                f" over {tolerance}): its attention does something the engine does not model"
                " (a recurrent state, a positional bias); use HFPolicy (the hf-static:"
                " policy) for this model")

    # ---- the engine's thread ---------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._serve, name="agentgym-engine",
                                            daemon=True)
            self._thread.start()

    def _serve(self) -> None:
        import torch

        eval_mode = _EvalMode(self.local.model)
        idle = True
        while True:
            with self._wake:
                while (not self._closed and not self._waiting and not self._updates
                       and not any(self._running)):
                    idle = True
                    if not self._wake.wait(IDLE_EXIT_S):  # idle: the thread ends, so a
                        self._thread = None  # forgotten engine can be collected; the
                        return  # next request starts another
                if self._closed:
                    break
            if self._updates and self._launched is not None:
                with self._step_lock, torch.inference_mode():  # new weights for whole steps
                    self._collect(self._launched)
                    self._launched = None
            updated = self._apply_updates()
            if idle:  # a trainer may have added modules (adapters) since the last steps
                eval_mode.refresh()
            if (idle or updated) and self.graphs is not None:
                self.graphs.check_weights()  # tensors that moved: capture again
            idle = False
            started = time.perf_counter()
            try:
                with self._step_lock, torch.inference_mode(), eval_mode():
                    self._step()
            except torch.OutOfMemoryError as e:
                self._launched = None
                running = [r for r in self._running if r is not None]
                self.max_running = max(1, len(running) // 2)
                self._fail(running, EngineError(
                    f"out of memory with {len(running)} sequences running ({e}); the engine"
                    f" now runs at most {self.max_running} at once (build it with fewer"
                    " slots or a smaller max_len to avoid this)"))
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
            except GraphStepError as e:  # raised before the step changed anything: run
                self.cuda_graphs = False  # it again, without graphs, in case they failed
                warnings.warn(f"a step replayed from CUDA graphs failed ({e}); the engine"
                              " runs without graphs from now on (slower)", stacklevel=1)
            except Exception as e:  # a model that fails: its requests end, the engine lives
                self._launched = None
                self._fail([r for r in self._running if r is not None],
                           EngineError(f"the model failed: {type(e).__name__}: {e}"))
            self.busy_s += time.perf_counter() - started
        self._launched = None
        self._fail([*self._waiting, *(r for r in self._running if r is not None)],
                   EngineError("the engine was closed"))

    def _step(self) -> None:
        ahead = self._launched  # the last decode step, when its tokens are not read yet
        self._drop_cancelled()
        self._admit()
        self._prefill()
        self._compact()
        decoding = [r for r in self._running
                    if r is not None and r.tokens and not (r.finishes and ahead is not None)]
        launched = self._launch(decoding, ahead) if decoding else None
        if ahead is not None:
            self._collect(ahead, written=launched)
        self._launched = None
        if launched is not None:
            if self.overlap and any(self._running[r.slot] is r for r in launched.requests):
                self._launched = launched  # read back next step, after the next launch
            else:
                self._collect(launched)

    def _compact(self) -> None:
        """Move running requests from the highest slots into free lower ones (copying
        their KV), so that a decode step's rows are the first slots, with no idle slot
        among them to compute for nothing. The old slot keeps its copy for prefix reuse.
        (A step still in flight writes within what the slot holds: the copy, queued after
        it on the device, has its write.)"""
        while True:
            free = next((s for s, r in enumerate(self._running) if r is None), None)
            top = next((s for s in range(self.slots - 1, -1, -1)
                        if self._running[s] is not None), None)
            if free is None or top is None or free > top:
                return
            request = self._running[top]
            assert request is not None and self._cache is not None
            self._cache.copy_slot(top, free, len(self._held[top]))
            self._held[free] = list(self._held[top])
            self._running[free], self._running[top] = request, None
            request.slot = free

    def _drop_cancelled(self) -> None:
        for slot, request in enumerate(self._running):
            if request is not None and request.future.done():
                self._running[slot] = None
        with self._wake:
            self._waiting = deque(r for r in self._waiting if not r.future.done())

    def _admit(self) -> None:
        """Give waiting requests free slots, the one holding most of the prompt first."""
        while True:
            free = [s for s, r in enumerate(self._running) if r is None]
            if not free or self.slots - len(free) >= self.max_running:
                return
            with self._wake:
                if not self._waiting:
                    return
                request = self._waiting.popleft()
            shared = [_common_prefix(self._held[s], request.prompt) for s in free]
            best = max(range(len(free)), key=lambda i: (shared[i], -free[i]))
            slot = free[best]
            # At least the prompt's last token is prefilled: its logits give the first token.
            request.slot, request.filled = slot, min(shared[best], len(request.prompt) - 1)
            request.reused = request.filled
            del self._held[slot][request.filled:]
            self._running[slot] = request

    def _prefill(self) -> None:
        """Prefill up to ``prefill_chunk`` prompt tokens, oldest requests first, in one
        forward pass (rows left-padded, so each row's last token is its own); a request
        whose whole prompt is then in samples its first token."""

        budget, batch = self.prefill_chunk, []
        for request in sorted((r for r in self._running if r is not None and not r.tokens),
                              key=lambda r: r.arrived):
            if budget <= 0:
                break
            chunk = request.prompt[request.filled:request.filled + budget]
            budget -= len(chunk)
            batch.append((request, chunk))
        if not batch:
            return
        reach = max(r.filled + len(c) for r, c in batch)
        graphs = self._graphs()
        logits = None if graphs is None else graphs.prefill(
            [r.slot for r, _ in batch], [c for _, c in batch], [r.filled for r, _ in batch],
            reach)
        if logits is None:
            width = max(len(chunk) for _, chunk in batch)
            scratch = self.max_len - 1
            tokens = [[self.local.pad_token_id] * (width - len(c)) + c for _, c in batch]
            positions = [[scratch] * (width - len(c)) + list(range(r.filled, r.filled + len(c)))
                         for r, c in batch]
            logits = self._forward(self._to_device(tokens), self._to_device(positions),
                                   [r.slot for r, _ in batch], reach)
        done, rows = [], []
        for row, (request, chunk) in enumerate(batch):
            self._held[request.slot].extend(chunk)
            request.filled += len(chunk)
            self.prefill_tokens += len(chunk)
            if request.filled == len(request.prompt):
                self.reused_tokens += request.reused
                done.append(request)
                rows.append(row)
        if done:
            picked = logits[self._to_device(rows)] if len(rows) < len(batch) else logits
            self._collect(self._sample(done, picked, decode=False))

    def _launch(self, requests: list[_Request], ahead: _Sampled | None) -> _Sampled:
        """Send the device one token for every request, in one forward pass over the slots
        in use (slots between them that run nothing ride along at the scratch position,
        their output unused), and the sampling of the next; nothing is read back. A request
        in ``ahead`` (a step not read back yet) decodes the token that step sampled, read
        from the device, one position further."""

        rows_of = {id(r): row for row, r in enumerate(ahead.requests)} if ahead else {}
        last = max(r.slot for r in requests) + 1
        tokens = [self.local.pad_token_id] * last
        positions = [self.max_len - 1] * last
        known, from_device, ahead_rows = [], [], []
        for r in requests:
            row = rows_of.get(id(r))
            if row is None:  # its last token is on the host
                tokens[r.slot], positions[r.slot] = r.tokens[-1], r.position
                known.append(r)
            else:
                positions[r.slot] = r.position + 1
                from_device.append(r.slot)
                ahead_rows.append(row)
            r.finishes = len(r.tokens) + (row is not None) + 1 >= r.sampling.max_tokens
        overrides = None
        if from_device:
            assert ahead is not None
            overrides = (self._to_device(from_device),
                         ahead.picked[self._to_device(ahead_rows)])
        reach = max(positions[r.slot] for r in requests) + 1
        graphs = self._graphs()
        if graphs is not None:
            logits = graphs.decode(tokens, positions, reach, overrides)
        else:
            ids = self._to_device(tokens)[:, None]
            if overrides is not None:
                ids[overrides[0], 0] = overrides[1]
            logits = self._forward(ids, self._to_device(positions)[:, None], range(last),
                                   reach)
        for r in known:  # the KV of the others' inputs: when their tokens are read back
            self._held[r.slot].append(r.tokens[-1])
        if len(requests) < last:
            logits = logits[self._to_device([r.slot for r in requests])]
        self.steps_run += 1
        return self._sample(requests, logits, decode=True)

    def _to_device(self, values: list[Any], dtype: Any = None) -> Any:
        """``values`` as a tensor on the engine's device, copied from pinned memory without
        waiting (a plain copy to a GPU waits for everything queued before it, a step in
        flight too)."""
        import torch

        host = torch.tensor(values, dtype=dtype)
        if self.local.device.type != "cuda":
            return host.to(self.local.device)
        return host.pin_memory().to(self.local.device, non_blocking=True)

    def _forward(self, input_ids: Any, positions: Any, rows: Sequence[int],
                 reach: int) -> Any:
        """Run the model on slots ``rows``: ``input_ids`` and ``positions`` are
        ``[rows, new_tokens]``, and no row's sequence reaches past position ``reach - 1``;
        returns the logits of each row's last new token (``[rows, vocab]``)."""
        self._ensure_cache()
        step = WINDOW_STEP if self.local.device.type == "cuda" else 1
        return self._run(input_ids, positions, rows, min(self.max_len, -(-reach // step) * step))

    def _graphs(self) -> StepGraphs | None:
        """The steps' CUDA graphs (made on first use), or None without them."""
        if not self.cuda_graphs:
            return None
        if self.graphs is None:
            self._ensure_cache()
            self.graphs = StepGraphs(self._run, self.local.model, self.slots, self.max_len,
                                     self.local.pad_token_id, self.local.device)
        return self.graphs

    def _ensure_cache(self) -> None:
        if self._cache is None:
            model = self.local.model
            self._cache = SlotCache(model.config, self.slots, self.max_len, self.local.device,
                                    next(model.parameters()).dtype)

    def _run(self, input_ids: Any, positions: Any, rows: Sequence[int] | int | Any,
             window: int) -> Any:
        """The forward pass of :meth:`_forward` over positions ``0..window-1``; ``rows``
        as an int is slots ``0..rows-1``, as a tensor the slot ids on the device. With
        either it allocates nothing from host data, so the step graphs
        (:class:`StepGraphs`) capture it."""
        import torch

        assert self._cache is not None
        self._cache.target(range(rows) if isinstance(rows, int) else rows, positions, window)
        keys = torch.arange(window, device=positions.device)[None, None, :]
        query = positions[:, :, None]
        masks = {}
        for kind in self._layer_kinds:
            visible = keys <= query  # causal: up to each token's own position
            if self._window_of[kind]:
                visible &= keys > query - self._window_of[kind]
            # A row (or a padding token) that runs nothing sits at the scratch position
            # max_len - 1: it sees the whole window, and its output is not used.
            visible = visible[:, None]  # [rows, 1, new_tokens, window]
            if not self._boolean_mask:
                visible = torch.zeros(visible.shape, dtype=self._dtype, device=visible.device) \
                    .masked_fill(~visible, torch.finfo(self._dtype).min)
            masks[kind] = visible
        # One kind of layer: the mask itself, which every model takes as prepared (a dict
        # of masks per kind is what only the models with several kinds read).
        mask = masks if len(masks) > 1 else masks[self._layer_kinds[0]]
        # Only decode passes are compiled (each kind of pass is compiled apart, and decode
        # is most of the passes); the first pass, which allocates the cache's layers, is
        # eager (a compiled model would be compiled once more for the allocated cache).
        decode = input_ids.shape[1] == 1 and self._cache.allocated
        model = self._call_model if decode else self.local.model
        out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                    use_cache=True, logits_to_keep=1, **{self._cache_arg: self._cache})
        return out.logits[:, -1]

    def _sample(self, requests: list[_Request], logits: Any, decode: bool) -> _Sampled:
        """Sample each request's next token from its row of ``logits``, on the device; the
        copy of the tokens to the host is queued, not waited for."""
        import torch

        samplings = [r.sampling for r in requests]
        temperature = self._to_device([s.temperature for s in samplings], torch.float32)
        top_p = self._to_device([s.top_p for s in samplings], torch.float32)
        picked, logprobs, usable = sample_tokens(logits.float(), temperature, top_p,
                                                 samplings, [r.generator for r in requests])
        # One read-back a step (float64 holds every token id exactly).
        results, ready = torch.stack([picked.double(), logprobs.double(), usable.double()]), None
        if results.device.type == "cuda":
            host = torch.empty(results.shape, dtype=results.dtype, pin_memory=True)
            results = host.copy_(results, non_blocking=True)
            ready = torch.cuda.Event()
            ready.record()
        return _Sampled(requests, picked, results, ready, self.version, decode)

    def _collect(self, sampled: _Sampled, written: _Sampled | None = None) -> None:
        """Read a step's tokens back (waiting for it) and give them to their requests;
        finish those that stop. A request that left since (stopped at the step before,
        cancelled, failed) is skipped. ``written``: the step launched since, whose rows
        wrote the KV of these tokens (the slots now hold them)."""
        if sampled.ready is not None:
            sampled.ready.synchronize()
        rows = sampled.results.tolist()
        wrote = {id(r) for r in written.requests} if written is not None else set()
        for r, token, logprob, fine in zip(sampled.requests, *rows, strict=True):
            if self._running[r.slot] is not r:
                continue
            if not fine:
                self._fail([r], EngineError(
                    f"the model's logits for this request were not usable (NaN, +inf, or all"
                    f" -inf) at its token {len(r.tokens) + 1}, with weights version"
                    f" {sampled.version}: the model's weights or this prompt went bad (a NaN"
                    " gradient step, an overflow in a low precision)"))
                continue
            token = int(token)
            if id(r) in wrote:
                self._held[r.slot].append(token)
            r.tokens.append(token)
            r.logprobs.append(logprob)
            r.versions.append(sampled.version)
            self.tokens_generated += 1
            self.decode_tokens += sampled.decode
            stopped = token in self.local.stop_token_ids
            if stopped or len(r.tokens) >= r.sampling.max_tokens:
                self._running[r.slot] = None
                self.requests_served += 1
                _settle(r, Generation(r.tokens, r.logprobs, "stop" if stopped else "length",
                                      metrics={"reused_tokens": r.reused,
                                               "seconds": time.perf_counter() - r.arrived},
                                      versions=r.versions))

    def _fail(self, requests: Iterable[_Request], error: Exception) -> None:
        for r in requests:
            if r.slot >= 0 and self._running[r.slot] is r:
                self._running[r.slot] = None
                self._held[r.slot].clear()  # what it wrote there is not to be trusted
            _settle(r, error)
        with self._wake:
            self._waiting = deque(r for r in self._waiting if not r.future.done())


def _attention_kinds(config: Any) -> tuple[list[str], dict[str, int | None]]:
    """The kinds of attention layer the model has (the keys of the masks it reads), and
    each kind's sliding window (None: it sees every earlier position)."""
    window = getattr(config, "sliding_window", None)
    kinds = getattr(config, "layer_types", None)
    if not kinds:
        # No per-layer kinds: every layer slides when the config sets a window (Mistral,
        # Phi-3, Starcoder2 build their one mask that way), else none does.
        kind = "sliding_attention" if window else "full_attention"
        return [kind], {kind: window or None}
    unknown = sorted(set(kinds) - {"full_attention", "sliding_attention"})
    if unknown:
        raise UnsupportedModelError(
            f"the engine drives full and sliding-window attention layers, and this model also"
            f" has {unknown} layers (state its slot cache does not keep): use HFPolicy (the"
            " hf-static: policy), which leaves the cache to transformers, or vLLM (vllm:,"
            " openai:)")
    return sorted(set(kinds)), {kind: window if kind == "sliding_attention" else None
                                for kind in set(kinds)}


def transformers_policy(model_or_path: Any, tokenizer: Any = None, device: Any = None,
                        slots: int = 32, max_len: int | None = None) -> TokenPolicy:
    """The engine over a transformers model; for a model whose attention it cannot drive
    (:class:`UnsupportedModelError`), the static-batch loop
    (:class:`~agentgym.rollout.policies.hf.HFPolicy`, batches of ``slots``), with a warning
    that says why."""
    try:
        return Engine(model_or_path, tokenizer=tokenizer, device=device, slots=slots,
                      max_len=max_len)
    except UnsupportedModelError as e:
        from agentgym.rollout.policies.hf import HFPolicy

        warnings.warn(f"{e}. Sampling with the static-batch loop instead (slower)",
                      stacklevel=2)
        return HFPolicy(model_or_path, tokenizer=tokenizer, device=device,
                        max_batch_size=slots)


def hf_engine(argument: str | None) -> TokenPolicy:
    """``hf:PATH``: the engine over the transformers model saved in folder ``PATH`` (the
    static-batch loop for a model the engine cannot drive)."""
    if not argument:
        raise AgentGymError(
            "the hf policy needs a model folder: --policy hf:PATH (a folder saved with"
            " save_pretrained, e.g. one built by agentgym.testing.build_tiny_model)")
    return transformers_policy(argument)


def _settle(request: _Request, outcome: Generation | Exception) -> None:
    """Resolve ``request``'s future on its own loop, unless it was cancelled."""

    def settle() -> None:
        if request.future.done():
            return
        if isinstance(outcome, Exception):
            request.future.set_exception(outcome)
        else:
            request.future.set_result(outcome)

    with contextlib.suppress(RuntimeError):  # the request's loop is closed: nobody waits
        request.loop.call_soon_threadsafe(settle)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle
    return low


class _EvalMode:
    """Eval mode for one step (no dropout; gradient checkpointing, train mode only, would
    turn the cache off); a trainer's model gets its mode back after it.

    ``Module.eval()`` and ``train()`` walk the module tree, which took 13% of a decode step
    of the tiny model on a CPU (twice a step); so the modules are listed when a busy period
    starts (:meth:`refresh`) and their ``training`` flags set directly, unless a module's
    class has a ``train`` that does more (then ``eval()`` and ``train()`` are called)."""

    def __init__(self, model: Any):
        self.model = model
        self.modules: list[Any] = []
        self.plain = True

    def refresh(self) -> None:
        from torch.nn import Module
        from transformers import PreTrainedModel

        def plain(module: Any) -> bool:  # its train() only sets flags, as Module's does
            train = type(module).train
            return train is Module.train or (  # transformers' adds a kernels reload only
                train is PreTrainedModel.train and not getattr(module, "use_kernels", False))

        self.modules = list(self.model.modules())
        self.plain = all(plain(m) for m in self.modules)

    @contextlib.contextmanager
    def __call__(self):
        if not self.plain:
            training = self.model.training
            self.model.eval()
            try:
                yield
            finally:
                self.model.train(training)
            return
        switched = [m for m in self.modules if m.training]
        for module in switched:
            module.__dict__["training"] = False  # what Module.train sets, without the walk
        try:
            yield
        finally:
            for module in switched:
                module.__dict__["training"] = True
