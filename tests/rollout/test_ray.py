"""The Ray executor runs episodes with envs living in Ray actors."""

import asyncio
import os

import pytest

from agentgym.core import OraclePolicy
from agentgym.rollout.evaluate import evaluate

ray = pytest.importorskip("ray", reason="ray is not installed: pip install -e '.[ray]'")


@pytest.fixture(scope="module")
def local_ray():
    from agentgym.rollout.ray_executor import connect

    connect("local", num_cpus=2)
    yield
    ray.shutdown()


def test_episodes_run_in_ray_actors(local_ray):
    from agentgym.rollout.ray_executor import remote_env_factory

    make = remote_env_factory("calculator", {"num_tasks": 4})

    async def main():
        report = await evaluate("calculator", OraclePolicy(), 6, make_env=make)
        probe = await make()
        where = await probe.where()
        await probe.aclose()
        return report, where

    report, where = asyncio.run(main())
    assert report.mean_reward == 1.0 and report.n == 6
    assert report.trajectories[0].messages[1]["role"] == "user"
    assert where["pid"] != os.getpid()
