"""Envs as Ray actors, so sandboxes and browsers can live on other nodes.

The rollout loop stays where the policy is (the GPU); each env lives in an
:class:`EnvActor` anywhere in the cluster and is driven through a :class:`RemoteEnv`,
which offers the env methods the loop uses (``areset``, ``astep``, ``agrade``,
``end_episode``, ``arelease``, ``aclose``) and mirrors the episode state it reads. Actors
find envs through agentgym's entry points like any process, so plugin envs work in Ray
workers without being registered by hand.

``agentgym rollout ENV ... --ray-address ADDRESS`` uses it (``local`` starts a local Ray).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from agentgym.core.errors import AgentGymError


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise AgentGymError(
            "the Ray executor needs ray: pip install 'agentgym[ray]' (from agentgym's source)"
        ) from e
    return ray


def connect(address: str | None = "local", **init_kwargs: Any) -> None:
    """Connect to Ray (``local``: start one here with the machine's CPUs), once."""
    ray = _ray()
    if ray.is_initialized():
        return
    if address in (None, "", "local"):
        # A Ray started here for this process only listens on loopback; token auth adds
        # nothing there and needs setup, so it is off unless the user set it.
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(include_dashboard=False, **init_kwargs)
    else:
        ray.init(address=address, **init_kwargs)


class EnvActor:
    """Holds one env in a Ray worker and runs its async methods there."""

    def __init__(self, env_id: str, kwargs: dict[str, Any]):
        import agentgym

        self.env = agentgym.make(env_id, **kwargs).unwrapped

    def _state(self) -> dict[str, Any] | None:
        episode = self.env.episode
        if episode is None:
            return None
        return {"messages": episode.messages, "task": episode.task, "turn": episode.turn,
                "tool_errors": episode.tool_errors, "finish_reason": episode.finish_reason}

    async def areset(self, seed: int | None, options: dict | None, defer_grading: bool,
                     overlap_setup: bool = False):
        self.env.defer_grading = defer_grading
        self.env.overlap_setup = overlap_setup
        result = await self.env.areset(seed=seed, options=options)
        return result, self._state()

    async def astep(self, action: Any):
        return await self.env.astep(action), self._state()

    async def agrade(self):
        return await self.env.agrade(), self._state()

    def end_episode(self, reason: str):
        self.env.end_episode(reason)
        return self._state()

    async def arelease(self) -> None:
        await self.env.arelease()

    async def aclose(self) -> None:
        await self.env.aclose()

    def task_ids(self) -> list[str]:
        return self.env.tasks.ids()

    def where(self) -> dict[str, Any]:
        """Where this actor runs: its process id and Ray node."""
        return {"pid": os.getpid(), "node": _ray().get_runtime_context().get_node_id()}


class RemoteEnv:
    """The env-side API of the rollout loop, forwarded to an :class:`EnvActor`."""

    def __init__(self, actor: Any):
        self.actor = actor
        self.defer_grading = False
        self.overlap_setup = False
        self.episode: Any = None

    def _mirror(self, state: dict[str, Any] | None) -> None:
        self.episode = None if state is None else SimpleNamespace(**state)

    async def areset(self, *, seed: int | None = None, options: dict | None = None):
        result, state = await self.actor.areset.remote(seed, options, self.defer_grading,
                                                       self.overlap_setup)
        self._mirror(state)
        return result

    async def astep(self, action: Any):
        result, state = await self.actor.astep.remote(action)
        self._mirror(state)
        return result

    async def agrade(self):
        result, state = await self.actor.agrade.remote()
        self._mirror(state)
        return result

    async def end_episode(self, reason: str) -> None:
        self._mirror(await self.actor.end_episode.remote(reason))

    async def arelease(self) -> None:
        await self.actor.arelease.remote()
        self.episode = None

    async def aclose(self) -> None:
        try:
            await self.actor.aclose.remote()
        finally:
            _ray().kill(self.actor)

    async def task_ids(self) -> list[str]:
        return await self.actor.task_ids.remote()

    async def where(self) -> dict[str, Any]:
        return await self.actor.where.remote()


def remote_env_factory(env_id: str, kwargs: dict[str, Any] | None = None, *,
                       address: str | None = "local",
                       actor_options: dict[str, Any] | None = None) -> Callable[[], Any]:
    """A ``make_env`` for the pipeline whose envs are Ray actors (``num_cpus`` 0.1 each by
    default, so many sandboxes share a node's cores)."""
    ray = _ray()
    connect(address)
    actor_class = ray.remote(EnvActor).options(**({"num_cpus": 0.1} | (actor_options or {})))

    async def make() -> RemoteEnv:
        return RemoteEnv(actor_class.remote(env_id, dict(kwargs or {})))

    return make
