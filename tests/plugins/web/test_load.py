"""Local-site oracles hold under CPU load: actions wait for what they started, and the next
observation is taken from the settled page, so a loaded machine pays correct work 1.0.
Plus every web probe on a sample of each web env id CI can run."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from agentgym.plugins.web.miniwob import families
from agentgym.plugins.web.sites_env import TASKS_DIR, read_task_file
from agentgym.testing import assert_valid

pytestmark = pytest.mark.usefixtures("chromium")

#: Ten local-site tasks, the multi-page ones that failed under load among them.
UNDER_LOAD = {
    "web-shop": ["shop-checkout-wishlist", "shop-new-address-checkout",
                 "shop-checkout-skillet-towels", "shop-answer-top-customer",
                 "shop-admin-ship-order"],
    "web-forum": ["forum-message-top-travel-author", "forum-ivan-latest-post",
                  "forum-crosspost-to-books", "forum-top-gardener-joined",
                  "forum-edit-japan-title"],
}


@pytest.fixture
def cpu_burners() -> Iterator[None]:
    """Two processes that keep two cores busy (the 2-core CI machine, fully loaded)."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


@pytest.mark.parametrize("env_id", sorted(UNDER_LOAD))
def test_oracles_hold_under_cpu_load(env_id: str, cpu_burners) -> None:
    """Each task's reference solution, 3 times, beside two CPU burners: 1.0 every time."""
    report = assert_valid(env_id, task_ids=UNDER_LOAD[env_id], repeat=3, probes=False)
    oracles = [r for r in report.results if r.check.startswith("oracle")]
    assert len(oracles) == 3 * len(UNDER_LOAD[env_id])
    assert all(r.reward == 1.0 for r in oracles)


def _sample(site: str, count: int = 5) -> list[str]:
    """``count`` tasks of a site spread over its categories, answer tasks first."""
    rows = read_task_file(TASKS_DIR / f"{site}.json")
    answered = [r["id"] for r in rows if r["grade"]["answer"]]
    others = [r["id"] for r in rows if not r["grade"]["answer"]]
    return answered[:3] + others[::max(1, len(others) // (count - 3))][:count - 3]


@pytest.mark.parametrize("env_id", ["web-shop", "web-forum", "miniwob-click-button",
                                    "miniwob-enter-text", "miniwob-click-checkboxes"])
def test_every_probe_on_a_sample(env_id: str) -> None:
    """Every registered probe that applies, on 5 tasks of each web env id: none is paid,
    oracle 1.0 and noop 0.0 still hold."""
    if env_id.startswith("miniwob-") and env_id.removeprefix("miniwob-") not in families():
        pytest.skip(f"{env_id}: the miniwob package's pages are not installed")
    tasks = _sample(env_id.removeprefix("web-")) if env_id.startswith("web-") else None
    report = assert_valid(env_id, n=5, task_ids=tasks, probes=True)
    played = report.probe_counts()
    assert "web.reach" in played and played["web.reach"]["played"] == 5, played
    if env_id.startswith("web-"):
        assert played["web.answer-stuffing"]["played"] >= 3, played
