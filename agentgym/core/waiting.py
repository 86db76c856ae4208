"""``wait_within``: ``asyncio.wait_for`` without its cancellation race.

On Python 3.10 and 3.11, ``asyncio.wait_for`` swallows a cancellation of the waiting task
that lands as the awaited work finishes (CPython gh-86296, fixed in 3.12): the caller goes
on as if never cancelled, so an episode told to stop plays another turn, and whoever waits
for it to stop may wait for good. The episode's awaits with a time limit (tool calls
within a turn's budget, setups within theirs) go through :func:`wait_within`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")

__all__ = ["wait_within"]


async def wait_within(work: Awaitable[T], timeout: float) -> T:
    """``await work``, cancelled after ``timeout`` seconds (then ``TimeoutError``, as
    ``asyncio.wait_for`` raises); a cancellation of the caller always propagates."""
    if sys.version_info >= (3, 12):
        return await asyncio.wait_for(work, timeout)
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise asyncio.TimeoutError
    return task.result()
