"""Envs as Ray actors, so sandboxes and browsers can live on other nodes.

The rollout loop stays where the policy is (the GPU); each env lives in an
:class:`EnvActor` anywhere in the cluster and is driven through a :class:`RemoteEnv`,
which implements the env protocol (:class:`~agentgym.core.env.EnvProtocol`) by forwarding
each call: nothing of the env's state is mirrored, since the loop reads none. Actors find
envs through agentgym's entry points like any process, so plugin envs work in Ray workers
without being registered by hand; any other env is built by a factory Ray can ship
(a class or function importable in the workers).

``agentgym rollout ENV ... --ray-address ADDRESS`` uses it (``local`` starts a local Ray).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
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


def make_registered(env_id: str, **kwargs: Any) -> Any:
    """``agentgym.make(env_id, **kwargs)``, unwrapped: the default env factory of actors."""
    import agentgym

    env = agentgym.make(env_id, **kwargs)
    return getattr(env, "unwrapped", env)


class EnvActor:
    """Holds one env in a Ray worker and runs its protocol calls there."""

    def __init__(self, make_env: Callable[[], Any]):
        env = make_env()
        self.env = getattr(env, "unwrapped", env)

    async def areset(self, seed: int | None, options: dict | None):
        return await self.env.areset(seed=seed, options=options)

    async def astep(self, action: Any):
        return await self.env.astep(action)

    async def agrade(self):
        return await self.env.agrade()

    async def aend(self, reason: str) -> None:
        await self.env.aend(reason)

    async def arelease(self) -> None:
        await self.env.arelease()

    async def aclose(self) -> None:
        await self.env.aclose()

    def task_ids(self) -> list[str]:
        return list(self.env.task_ids())

    def where(self) -> dict[str, Any]:
        """Where this actor runs: its process id and Ray node."""
        return {"pid": os.getpid(), "node": _ray().get_runtime_context().get_node_id()}


class RemoteEnv:
    """The env protocol, forwarded to an :class:`EnvActor`. Build it with
    :meth:`create` (or :func:`remote_env_factory`)."""

    def __init__(self, actor: Any, task_ids: list[str]):
        self.actor = actor
        self._task_ids = list(task_ids)

    @classmethod
    async def create(cls, actor: Any) -> RemoteEnv:
        """Wrap ``actor``, fetching its task ids once (they do not change)."""
        return cls(actor, await actor.task_ids.remote())

    async def areset(self, *, seed: int | None = None, options: dict | None = None):
        return await self.actor.areset.remote(seed, options)

    async def astep(self, action: Any):
        return await self.actor.astep.remote(action)

    async def agrade(self):
        return await self.actor.agrade.remote()

    async def aend(self, reason: str) -> None:
        await self.actor.aend.remote(reason)

    async def arelease(self) -> None:
        await self.actor.arelease.remote()

    async def aclose(self) -> None:
        try:
            await self.actor.aclose.remote()
        finally:
            _ray().kill(self.actor)

    def task_ids(self) -> list[str]:
        return list(self._task_ids)

    async def where(self) -> dict[str, Any]:
        return await self.actor.where.remote()


def remote_env_factory(env: str | Callable[[], Any], kwargs: dict[str, Any] | None = None,
                       *, address: str | None = "local",
                       actor_options: dict[str, Any] | None = None) -> Callable[[], Any]:
    """A ``make_env`` for the pipeline whose envs are Ray actors (``num_cpus`` 0.1 each by
    default, so many sandboxes share a node's cores).

    ``env`` is a registered env id (made with ``kwargs`` as ``agentgym.make`` would) or a
    factory of an env that keeps the env protocol, called in the actor with ``kwargs``.
    """
    ray = _ray()
    connect(address)
    actor_class = ray.remote(EnvActor).options(**({"num_cpus": 0.1} | (actor_options or {})))
    base = functools.partial(make_registered, env) if isinstance(env, str) else env
    make_env = functools.partial(base, **dict(kwargs or {}))

    async def make() -> RemoteEnv:
        return await RemoteEnv.create(actor_class.remote(make_env))

    return make
