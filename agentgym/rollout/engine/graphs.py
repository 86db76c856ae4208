"""``StepGraphs``: the engine's forward passes replayed from CUDA graphs.

A forward pass of a small model on a GPU is bound by the host: a 30-layer model launches
over a thousand small kernels from Python (about 30 ms for SmolLM2-135M on an H200), and
the GPU waits on each launch. Captured once as a CUDA graph, the pass is one launch. A
graph fixes every shape and buffer address, so steps are bucketed, one graph per bucket
met, captured the first time it is met:

* decode steps (one new token per row, rows the first slots): by rows run (the slots in
  use, rounded up to a bucket) and window attended over (rounded up to a power of two);
* prefill steps (new prompt tokens of any slots): by rows, width (the longest chunk,
  rounded up to a power of two; rows are left-padded) and window. A prefill of more than
  :data:`MAX_GRAPH_TOKENS` padded tokens runs eagerly: its kernels are big enough that
  launching them is not what it waits on.

Rows and tokens added by the rounding ride along at the scratch position (the last of a
slot, never read as a real one), as padding does in any step; their output is not used.

The inputs live in static buffers (token ids, positions and, for prefill, slot ids) that
each step fills before it replays; the KV cache is the engine's static
:class:`~agentgym.rollout.engine.slots.SlotCache`; the weights are read where they are, so
an in-place update (an optimizer step, ``load_state_dict``) is seen by the next replay. A
model whose modules changed or whose tensors moved (new adapters, ``.to()``) has its graphs
dropped (:meth:`StepGraphs.check_weights`, which the engine calls when a busy period starts
and after a weight update) and captured again. A capture that fails (a model whose forward
pass cannot be captured) turns the graphs off with a warning; the engine then runs every
step eagerly, as on a CPU.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

#: Row counts steps are rounded up to (then capped at the engine's slots).
ROW_BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
#: The smallest window a graph attends over; larger ones double up to the slot length.
MIN_WINDOW = 128
#: The narrowest prefill width; wider ones double.
MIN_WIDTH = 16
#: Prefill steps of more padded tokens (rows x width) than this run eagerly.
MAX_GRAPH_TOKENS = 4096

class GraphStepError(RuntimeError):
    """A step run through :class:`StepGraphs` failed (its capture or its replay) before
    returning: nothing of the engine's state was changed by it, so the step can run again
    without graphs."""


#: ``forward(input_ids, positions, rows, window) -> logits``: the engine's forward pass,
#: ``input_ids`` and ``positions`` ``[rows, width]``; ``rows`` an int (slots ``0..rows-1``)
#: or a tensor of slot ids; the logits of each row's last token (``[rows, vocab]``).
Forward = Callable[[Any, Any, Any, int], Any]


class StepGraphs:
    """CUDA graphs of the engine's decode and prefill steps, one per bucket.

    Args:
        forward: the engine's forward pass (:data:`Forward`); it must allocate no tensor
            from host data (a capture cannot copy from the host).
        model: the model, whose tensors' addresses the graphs hold.
        slots: the engine's slots (the most rows a step runs).
        max_len: positions per slot; the last is the scratch position.
        pad_token_id: the token of padding.
        device: a CUDA device.
        capture: capture graphs (False runs the same bucketed steps eagerly: what tests do
            on a CPU, and what the engine falls back to after a failed capture).

    Attributes:
        captures: graphs captured so far (a recapture after weights moved counts again).
        error: why capturing was turned off, or None.
    """

    def __init__(self, forward: Forward, model: Any, slots: int, max_len: int,
                 pad_token_id: int, device: Any, capture: bool = True):
        import torch

        self.forward, self.model = forward, model
        self.slots, self.max_len, self.pad = slots, max_len, pad_token_id
        self.device, self.capture = device, capture
        self.captures = 0
        self.error: str | None = None
        self.slot_ids = torch.zeros(slots, dtype=torch.long, device=device)
        self._inputs: dict[int, tuple[Any, Any]] = {}  # width -> (ids, positions) buffers
        self._replays: dict[tuple[bool, int, int, int], Callable[[], Any]] = {}
        self._pool: Any = None
        self._weights = self._addresses()

    def rows_for(self, running: int) -> int:
        """The row bucket of a step of ``running`` rows."""
        return min(self.slots, next((b for b in ROW_BUCKETS if b >= running), running))

    def window_for(self, reach: int) -> int:
        """The window bucket of a step whose rows reach position ``reach - 1``."""
        return min(_power_of_two(reach, MIN_WINDOW), self.max_len)

    def decode(self, tokens: Sequence[int], positions: Sequence[int], reach: int,
               overrides: tuple[Any, Any] | None = None) -> Any:
        """One token for each of slots ``0..len(tokens)-1`` (its last token and that
        token's position); their logits (``[len(tokens), vocab]``), valid until the next
        step. ``overrides``: (slots, tokens), device tensors: those slots' tokens are read
        from the device instead (what a step still in flight sampled)."""
        rows = self.rows_for(len(tokens))
        return self._step(None, [[t] for t in tokens], [[p] for p in positions], rows, 1,
                          reach, overrides)

    def prefill(self, slots: Sequence[int], chunks: Sequence[Sequence[int]],
                starts: Sequence[int], reach: int) -> Any | None:
        """Prefill ``chunks[i]`` into slot ``slots[i]`` from position ``starts[i]``; the
        logits of each chunk's last token (``[len(chunks), vocab]``), valid until the next
        step; None when the step is too big for a graph (run it eagerly)."""
        rows = self.rows_for(len(chunks))
        width = _power_of_two(max(len(c) for c in chunks), MIN_WIDTH)
        if rows * width > MAX_GRAPH_TOKENS:
            return None
        scratch = self.max_len - 1
        ids = [[self.pad] * (width - len(c)) + list(c) for c in chunks]
        positions = [[scratch] * (width - len(c)) + list(range(s, s + len(c)))
                     for c, s in zip(chunks, starts, strict=True)]
        return self._step(list(slots), ids, positions, rows, width, reach)

    def check_weights(self) -> None:
        """Drop the graphs if the model's modules changed or its tensors moved since they
        were captured (they would replay the old computation on the old addresses); the
        next steps capture new ones."""
        addresses = self._addresses()
        if addresses != self._weights:
            self._replays.clear()
            self._pool = None
            self._weights = addresses

    def _addresses(self) -> tuple[int, ...]:
        """What a graph depends on: the modules (one added changes the computation) and
        where their tensors are."""
        return (*map(id, self.model.modules()),
                *(t.data_ptr() for t in (*self.model.parameters(), *self.model.buffers())))

    def _step(self, slots: list[int] | None, ids: list[list[int]],
              positions: list[list[int]], rows: int, width: int, reach: int,
              overrides: tuple[Any, Any] | None = None) -> Any:
        import torch

        count, window = len(ids), self.window_for(reach)
        scratch = self.max_len - 1
        ids = ids + [[self.pad] * width] * (rows - count)
        positions = positions + [[scratch] * width] * (rows - count)
        buffer_ids, buffer_positions = self._buffers(width)
        # From pinned memory, without waiting: a plain copy would wait for a step in flight.
        host = self._pinned([ids, positions])
        buffer_ids[:rows].copy_(host[0], non_blocking=True)
        buffer_positions[:rows].copy_(host[1], non_blocking=True)
        if overrides is not None:
            buffer_ids[overrides[0], 0] = overrides[1]
        if slots is not None:  # padding rows write slot 0's scratch position
            self.slot_ids[:rows].copy_(self._pinned(slots + [0] * (rows - count)),
                                       non_blocking=True)
        key = (slots is not None, rows, width, window)
        try:
            replay = self._replays.get(key)
            if replay is None:
                replay = self._replays[key] = self._capture(*key)
            return replay()[:count]
        except torch.OutOfMemoryError:
            raise
        except Exception as e:
            raise GraphStepError(f"{type(e).__name__}: {e}") from e

    def _pinned(self, values: list[Any]) -> Any:
        import torch

        host = torch.tensor(values, dtype=torch.long)
        return host.pin_memory() if torch.device(self.device).type == "cuda" else host

    def _buffers(self, width: int) -> tuple[Any, Any]:
        import torch

        if width not in self._inputs:
            self._inputs[width] = (
                torch.full((self.slots, width), self.pad, dtype=torch.long, device=self.device),
                torch.full((self.slots, width), self.max_len - 1, dtype=torch.long,
                           device=self.device))
        return self._inputs[width]

    def _capture(self, gathered: bool, rows: int, width: int, window: int
                 ) -> Callable[[], Any]:
        import torch

        buffer_ids, buffer_positions = self._buffers(width)
        ids, positions = buffer_ids[:rows], buffer_positions[:rows]
        which = self.slot_ids[:rows] if gathered else rows

        def step() -> Any:
            return self.forward(ids, positions, which, window)

        if not self.capture:
            return step
        try:
            # Warm-up on a side stream (lazy initialisation must not happen in a capture);
            # it writes the same keys and values the replay then writes again.
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                step()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            if self._pool is None:
                self._pool = torch.cuda.graph_pool_handle()
            # thread_local: a trainer on another thread may use the GPU meanwhile.
            with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
                logits = step()
        except torch.OutOfMemoryError:
            raise
        except Exception as e:  # a forward pass that cannot be captured: run eagerly
            self.capture = False
            self._replays.clear()
            self.error = f"{type(e).__name__}: {e}"
            warnings.warn(f"the engine could not capture its forward pass as a CUDA graph"
                          f" ({self.error}); it runs without graphs (slower)", stacklevel=2)
            return step
        self.captures += 1

        def replay() -> Any:
            graph.replay()
            return logits

        return replay


def _power_of_two(value: int, smallest: int) -> int:
    size = smallest
    while size < value:
        size *= 2
    return size
