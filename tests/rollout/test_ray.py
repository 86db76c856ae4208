"""The Ray executor runs episodes with envs living in Ray actors."""

import asyncio
import os

import pytest

from agentgym.core import NoopPolicy, OraclePolicy
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


def test_an_env_written_against_the_protocol_runs_in_ray_actors(local_ray):
    from agentgym.rollout.ray_executor import remote_env_factory
    from agentgym.testing.protocol_env import EchoEnv

    make = remote_env_factory(EchoEnv, {"num_tasks": 3, "setup_s": 0.05})
    for policy, expected in ((OraclePolicy(), 1.0), (NoopPolicy(), 0.0)):
        report = asyncio.run(evaluate("echo", policy, 4, make_env=make))
        assert report.n == 4 and report.mean_reward == expected
        assert all(t.error is None for t in report.trajectories)
