"""wait_within: a timeout like asyncio.wait_for's, and a cancellation that always reaches
the caller, even when it lands as the awaited work finishes (asyncio.wait_for on Python
3.11 goes on in that case, every time in the second test's pattern)."""

from __future__ import annotations

import asyncio

import pytest

from agentgym.core.waiting import wait_within


def test_it_returns_the_result_or_times_out_and_cancels_the_work() -> None:
    cancelled = []

    async def slow() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main() -> int:
        with pytest.raises(asyncio.TimeoutError):
            await wait_within(slow(), 0.05)
        return await wait_within(asyncio.sleep(0, result=7), 1)

    assert asyncio.run(main()) == 7
    assert cancelled == [True]


def test_a_cancellation_as_the_work_finishes_is_never_swallowed() -> None:
    async def caller(done: asyncio.Future) -> str:
        await wait_within(done, 5)
        await asyncio.sleep(0)  # a swallowed cancellation would get past this
        return "went on"

    async def main() -> list[bool]:
        outcomes = []
        for _ in range(200):
            done = asyncio.get_running_loop().create_future()
            task = asyncio.ensure_future(caller(done))
            await asyncio.sleep(0)  # the caller now waits
            done.set_result(None)  # the work finishes, and the caller is cancelled
            task.cancel()
            try:
                await task
                outcomes.append(False)
            except asyncio.CancelledError:
                outcomes.append(True)
        return outcomes

    assert all(asyncio.run(main()))
