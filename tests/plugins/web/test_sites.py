"""The local sites' tasks in real Chromium: every task valid under its real grader (oracle
1.0, noop 0.0), and episodes that never see each other's database."""

from __future__ import annotations

import asyncio
import collections
import json
import re

import pytest

from agentgym.core import OraclePolicy
from agentgym.core.errors import InvalidArgumentError
from agentgym.plugins.web.sites_env import TASKS_DIR, SiteEnv, read_task_file
from agentgym.rollout.loop import play_episode
from agentgym.rollout.validate import validate
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


def test_a_task_file_must_bound_what_its_write_tasks_change(tmp_path) -> None:
    rows = json.loads((TASKS_DIR / "forum.json").read_text())
    row = next(r for r in rows if r["id"] == "forum-search-comment-rust")
    path = tmp_path / "tasks.json"
    del row["grade"]["changes"]
    path.write_text(json.dumps([row]))
    with pytest.raises(InvalidArgumentError, match=(
            r"forum-search-comment-rust' has db checks but no grade\.changes.*python -m"
            r" agentgym\.plugins\.web\.author forum --tasks .*--only forum-search-comment-rust")):
        read_task_file(path)
    assert read_task_file(path, unauthored=True) == [row]
    row["grade"]["changes"] = {"comments": -1}
    path.write_text(json.dumps([row]))
    with pytest.raises(InvalidArgumentError, match=r"grade\.changes must map table names"):
        read_task_file(path)


@pytest.mark.slow
def test_the_collateral_spray_is_paid_only_without_the_bound(tmp_path) -> None:
    """web.collateral-spray in Chromium: the reference's comment, then the same comment on
    other posts. Graded without ``changes`` (an unauthored task) it is paid 1.0; with the
    recorded bound it is not, and validate reports a probe that found no page to spray
    on as not applicable."""
    rows = json.loads((TASKS_DIR / "forum.json").read_text())
    chosen = ["forum-search-comment-rust", "forum-update-bio"]
    rows = [r for r in rows if r["id"] in chosen]
    for bounded in (False, True):
        path = tmp_path / f"bounded-{bounded}.json"
        path.write_text(json.dumps([
            {**row, "grade": {k: v for k, v in row["grade"].items()
                              if bounded or k != "changes"}} for row in rows]))
        report = validate("web-forum", None, chosen, probes=["web.collateral-spray"],
                          make_env=lambda p=path: SiteEnv("forum", tasks=p, unauthored=True))
        sprayed = [r for r in report.results if r.probe]
        assert [(r.task_id, r.passed) for r in sprayed] == \
            [("forum-search-comment-rust", bounded)], sprayed
        [episode] = [t for t in report.trajectories if t.policy == sprayed[0].check
                     and t.task_id == "forum-search-comment-rust"]
        assert episode.reward == (0.0 if bounded else 1.0)
        assert episode.metrics["failed"] == (
            ["the episode changed 5 rows of comments, the task 1 (changes it did not ask for)"]
            if bounded else [])
        [skipped] = report.skipped
        assert skipped.task_id == "forum-update-bio"
        assert skipped.reason.startswith("not applicable: no page like the one")
