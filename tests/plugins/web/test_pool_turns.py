"""The browser pool's turns (``max_busy``): no Chromium needed, only the pool's loop."""

from __future__ import annotations

import asyncio

import pytest

from agentgym.core.errors import InvalidArgumentError
from agentgym.plugins.web.browser import BrowserPool, default_max_busy


def test_at_most_max_busy_operations_run_at_once() -> None:
    pool = BrowserPool(executable="/bin/true", max_busy=2)
    running, peak, order = 0, 0, []

    async def operation(name: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1
        order.append(name)
        return name

    async def main() -> list[int]:
        return await asyncio.gather(*(pool.call(pool.in_turn(operation(i))) for i in range(7)))

    try:
        assert asyncio.run(main()) == list(range(7))
    finally:
        pool.close()
    assert peak == 2
    assert sorted(order) == list(range(7))


def test_max_busy_default_and_its_errors(monkeypatch) -> None:
    monkeypatch.delenv("AGENTGYM_BROWSER_BUSY", raising=False)
    assert default_max_busy() >= 2
    monkeypatch.setenv("AGENTGYM_BROWSER_BUSY", "5")
    assert default_max_busy() == 5
    for wrong in ("many", "0", "-3"):
        monkeypatch.setenv("AGENTGYM_BROWSER_BUSY", wrong)
        with pytest.raises(InvalidArgumentError, match=f"AGENTGYM_BROWSER_BUSY='{wrong}'"):
            default_max_busy()
    with pytest.raises(InvalidArgumentError, match="max_busy=0"):
        BrowserPool(executable="/bin/true", max_busy=0)
