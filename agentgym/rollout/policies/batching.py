"""Batching of concurrent ``generate`` calls, shared by the token-level policies that decode
a whole batch in one call (transformers, a trainer's vLLM engine).

Many episodes call ``generate`` at once. A batcher (one per event loop) waits up to
``batch_wait_ms`` for more requests once one arrives, takes up to ``max_batch_size`` of
them and hands them to :meth:`BatchedPolicy._run_batch` in a worker thread
(``asyncio.to_thread``), so the event loop keeps serving sandboxes and tools meanwhile.
Requests that arrive during a batch form the next one (static batching). One batch runs
at a time per policy. A subclass implements ``_run_batch`` and may check prompts in
``_check_prompt``.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

from agentgym.core.errors import InvalidArgumentError
from agentgym.core.policies import Generation, Sampling, TokenPolicy


@dataclass
class _Request:
    prompt_ids: list[int]
    sampling: Sampling
    future: asyncio.Future[Generation]


class BatchedPolicy(TokenPolicy):
    """Base of token-level policies that batch concurrent requests.

    Args:
        max_batch_size: the most requests decoded together.
        batch_wait_ms: how long the batcher waits for more requests once one arrives.

    Attributes:
        batches_run: batches decoded so far.
        requests_served: completions returned so far.
    """

    def __init__(self, max_batch_size: int = 32, batch_wait_ms: float = 2.0):
        if max_batch_size < 1:
            raise InvalidArgumentError(f"max_batch_size must be >= 1, got {max_batch_size}")
        if batch_wait_ms < 0:
            raise InvalidArgumentError(f"batch_wait_ms must be >= 0, got {batch_wait_ms}")
        self.max_batch_size, self.batch_wait_ms = max_batch_size, batch_wait_ms
        self.batches_run = 0
        self.requests_served = 0
        self._run_lock = threading.Lock()  # one batch at a time, whatever loop asked
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[_Request]] = (
            weakref.WeakKeyDictionary()
        )
        self._batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task] = (
            weakref.WeakKeyDictionary()
        )

    # ---- what subclasses provide -----------------------------------------------------------

    def _check_prompt(self, prompt_ids: list[int]) -> None:
        """Raise ValueError for a prompt the backend cannot take. Default: accept."""

    def _decode_batch(self, requests: list[tuple[list[int], Sampling]]) -> list[Generation]:
        """Decode one batch (in a worker thread); one Generation per request, in order."""
        raise NotImplementedError

    # ---- the TokenPolicy contract ----------------------------------------------------------

    async def generate(self, prompt_ids: Sequence[int], sampling: Sampling) -> Generation:
        """Sample one completion of ``prompt_ids`` (batched with concurrent calls)."""
        prompt = [int(t) for t in prompt_ids]
        if not prompt:
            raise InvalidArgumentError(
                "prompt_ids is empty: a completion needs at least one prompt token")
        self._check_prompt(prompt)
        loop = asyncio.get_running_loop()
        request = _Request(prompt, sampling, loop.create_future())
        self._queues.setdefault(loop, []).append(request)
        batcher = self._batchers.get(loop)
        if batcher is None or batcher.done():
            self._batchers[loop] = loop.create_task(self._serve(loop), name="policy batcher")
        return await request.future

    # ---- batching --------------------------------------------------------------------------

    async def _serve(self, loop: asyncio.AbstractEventLoop) -> None:
        queue = self._queues[loop]
        while queue:
            if len(queue) < self.max_batch_size and self.batch_wait_ms > 0:
                await asyncio.sleep(self.batch_wait_ms / 1000)
            batch = [r for r in queue[: self.max_batch_size] if not r.future.done()]
            del queue[: self.max_batch_size]
            if not batch:
                continue
            try:
                results = await asyncio.to_thread(
                    self._run_batch, [(r.prompt_ids, r.sampling) for r in batch]
                )
            except asyncio.CancelledError:
                for r in batch:
                    r.future.cancel()
                raise
            except Exception as e:  # every request of the batch gets the error
                for r in batch:
                    if not r.future.done():
                        r.future.set_exception(e)
                continue
            for r, result in zip(batch, results, strict=True):
                if not r.future.done():
                    r.future.set_result(result)

    def _run_batch(self, requests: list[tuple[list[int], Sampling]]) -> list[Generation]:
        with self._run_lock:
            results = self._decode_batch(requests)
            self.batches_run += 1
            self.requests_served += len(requests)
            return results
