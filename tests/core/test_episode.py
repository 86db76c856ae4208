"""An episode is the one home of its resources: it releases what it keeps, once, last
kept first, never while it is in use, and takes nothing once released."""

from __future__ import annotations

import asyncio

import pytest

from agentgym.core.episode import Episode
from agentgym.core.errors import EnvStateError
from agentgym.core.task import Task


class Resource:
    """A resource that records when it is released."""

    def __init__(self, name: str, log: list[str], fail: bool = False):
        self.name, self.log, self.fail, self.released = name, log, fail, 0

    async def release(self) -> None:
        self.released += 1
        self.log.append(self.name)
        if self.fail:
            raise RuntimeError(f"{self.name} would not close")


def test_an_episode_releases_what_it_keeps_last_kept_first_and_once():
    log: list[str] = []

    async def play() -> Episode:
        episode = Episode(task=Task("t", "p"))
        for name in ("sandbox", "page"):
            resource = Resource(name, log)
            assert await episode.keep(name, resource, resource.release) is resource
        episode.toolsets = ["bound"]
        await episode.release()
        await episode.release()
        return episode

    episode = asyncio.run(play())
    assert log == ["page", "sandbox"]
    assert episode.toolsets is None
    assert [r.released for r in episode.resources.values()] == [1, 1]


def test_every_release_runs_even_when_one_fails():
    log: list[str] = []

    async def play() -> None:
        episode = Episode(task=Task("t", "p"))
        for name, fail in (("first", False), ("second", True)):
            resource = Resource(name, log, fail)
            await episode.keep(name, resource, resource.release)
        await episode.release()

    with pytest.raises(RuntimeError, match="second would not close"):
        asyncio.run(play())
    assert log == ["second", "first"]


def test_a_released_episode_takes_nothing_and_releases_it_at_once():
    log: list[str] = []

    async def play() -> None:
        episode = Episode(task=Task("late", "p"))
        await episode.release()
        late = Resource("sandbox", log)
        with pytest.raises(EnvStateError, match="'late' ended before its 'sandbox'"):
            await episode.keep("sandbox", late, late.release)
        assert "sandbox" not in episode.resources

    asyncio.run(play())
    assert log == ["sandbox"]


def test_an_episode_in_use_is_released_when_its_last_use_ends():
    log: list[str] = []

    async def play() -> None:
        episode = Episode(task=Task("t", "p"))
        resource = Resource("sandbox", log)
        await episode.keep("sandbox", resource, resource.release)
        async with episode.in_use():
            async with episode.in_use():
                await episode.release()  # asked while a grader reads it: deferred
                assert log == []
            assert log == []
        assert log == ["sandbox"]
        with pytest.raises(EnvStateError, match="was released"):
            async with episode.in_use():
                pass

    asyncio.run(play())
