"""The local sites' tasks in real Chromium: every task valid under its real grader (oracle
1.0, noop 0.0), and episodes that never see each other's database."""

from __future__ import annotations

import asyncio
import collections
import re

import pytest

from agentgym.core import OraclePolicy
from agentgym.plugins.web.sites_env import TASKS_DIR, SiteEnv, read_task_file
from agentgym.rollout.loop import play_episode
from agentgym.testing import assert_valid

pytestmark = pytest.mark.usefixtures("chromium")
ORDER_TASK = "shop-checkout-skillet-towels"
NEW_ORDERS = "SELECT count(*) FROM orders o JOIN users u ON u.id = o.user_id" \
             " WHERE u.username = 'carol' AND o.id > 1016"


def test_the_sites_ship_enough_tasks_of_every_kind() -> None:
    rows = [row for site in ("shop", "forum") for row in read_task_file(TASKS_DIR / f"{site}.json")]
    assert len(rows) >= 40
    kinds = collections.Counter(row["category"] for row in rows)
    for kind in ("navigate", "search", "form", "settings", "multi-page", "answer"):
        assert kinds[kind] >= 3, kinds
    assert all(row.get("solution") for row in rows), "run python -m agentgym.plugins.web.author"
    assert sum(bool(row["grade"].get("db")) for row in rows) >= 20
    assert sum(bool(row["grade"].get("answer")) for row in rows) >= 10


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["web-shop", "web-forum"])
def test_every_task_is_valid_under_its_grader(env_id, sample) -> None:
    """oracle 1.0 and noop 0.0, in Chromium, graded by the site's database: on 8 tasks a run,
    every task under ``AGENTGYM_TEST_FULL=1`` (the exploit probes play on a sample:
    tests/plugins/web/test_load.py)."""
    site = env_id.removeprefix("web-")
    ids = [row["id"] for row in read_task_file(TASKS_DIR / f"{site}.json")]
    assert len(ids) >= 20
    chosen = sample(ids, 8)
    report = assert_valid(env_id, task_ids=chosen, require_solutions=True, concurrency=4,
                          probes=False)
    assert report.task_ids == chosen


def test_concurrent_episodes_never_see_each_others_orders() -> None:
    """One episode places an order while another, on the same site at the same time, finds
    none: each has its own copy of the database."""
    buyer, watcher = SiteEnv("shop"), SiteEnv("shop")
    try:
        watcher.reset(seed=0, options={"task_id": ORDER_TASK})
        token = watcher.episode.resources["site"].token  # the watcher's own database

        async def both():
            order = asyncio.wrap_future(buyer._loop.submit(
                play_episode(buyer, OraclePolicy(), ORDER_TASK)))
            counts = []
            while not order.done():
                counts.append(watcher.server.query(token, NEW_ORDERS)[0][0])
                await asyncio.sleep(0.05)
            return await order, counts

        result, counts = asyncio.run(both())
        assert result.reward == 1.0, result.metrics
        assert counts and set(counts) == {0}
        assert watcher.server.query(token, NEW_ORDERS) == [(0,)]
        page = watcher.step({"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "goto",
                                              "arguments": '{"url": "/orders"}'}}]})
        text = page[0][0]["content"]
        numbers = [int(n) for n in re.findall(r"link 'Order #(\d+)'", text)]
        assert numbers and max(numbers) <= 1016, text
    finally:
        buyer.close()
        watcher.close()


def test_the_sites_database_lives_on_the_episode_and_ends_with_it() -> None:
    """The episode keeps its visit (server, database token, entry URL); its grader reads the
    episode's database after the env has moved on, and the database closes once the grader
    is done with it."""
    env = SiteEnv("shop")
    try:
        env.reset(seed=0, options={"task_id": ORDER_TASK})
        first = env.episode
        visit = first.resources["site"]
        assert visit.entry.startswith(visit.server.base_url)
        assert visit.server.query(visit.token, NEW_ORDERS) == [(0,)]

        async def grade_after_the_next_reset():
            async with first.in_use():
                await env.areset(seed=1, options={"task_id": ORDER_TASK})
                assert env.episode.resources["site"].token != visit.token
                return await env.grade(first)

        result = env._loop.submit(grade_after_the_next_reset()).result(timeout=120)
        assert result.value == 0.0 and result.metrics["failed"], result.metrics
        with pytest.raises(KeyError, match="no open episode"):
            visit.server.query(visit.token, NEW_ORDERS)
    finally:
        env.close()
