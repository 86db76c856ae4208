"""An episode's resources live on the episode, not the env: episodes that overlap on one env
(a setup still running when the next reset comes, a grade still running while the next
episode starts) each keep, use and release their own, and nothing leaks."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentgym.core import EnvStateError, Submitted, TaskList
from agentgym.core.env import AgentEnv
from agentgym.core.episode import Episode
from agentgym.core.reward import RewardResult
from agentgym.core.task import Task
from agentgym.core.tools import Toolset, tool


class Room:
    """A stand-in for a sandbox: named after its episode's task, closed once."""

    def __init__(self, name: str):
        self.name, self.closed = name, False

    async def close(self) -> None:
        assert not self.closed, f"{self.name} closed twice"
        self.closed = True


class RoomTools(Toolset):
    def __init__(self, room: Room):
        self.room = room

    @tool
    def where(self) -> str:
        """Say which room the tools work in."""
        return self.room.name


class RoomEnv(AgentEnv):
    """Each episode gets a room after ``setup_s``; the grader reads the graded episode's
    room after ``grade_s``."""

    toolsets = (RoomTools,)

    def __init__(self, setup_s: float = 0.0, grade_s: float = 0.0):
        super().__init__(TaskList([Task(f"t{i}", f"Task {i}.") for i in range(3)]))
        self.setup_s, self.grade_s = setup_s, grade_s
        self.rooms: list[Room] = []

    async def setup_episode(self, task: Task) -> None:
        episode = self.episode
        assert episode is not None
        await asyncio.sleep(self.setup_s)
        room = Room(task.id)
        self.rooms.append(room)
        await episode.keep("room", room, room.close)
        assert self.episode is episode  # still this episode's env while it sets up
        self.bind_toolsets(room)

    async def grade(self, episode: Episode) -> RewardResult:
        await asyncio.sleep(self.grade_s)
        room = episode.resources["room"]
        return RewardResult(float(room.name == episode.task.id and not room.closed),
                            {"room": room.name, "closed": room.closed})

    @tool
    def finish(self) -> str:
        """Finish."""
        raise Submitted(None)


def call(name: str) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": {}}) + "</tool_call>"


def test_a_setup_the_next_reset_overtakes_keeps_its_room_on_its_own_episode():
    async def play() -> None:
        env = RoomEnv(setup_s=0.05)
        try:
            await env.areset(options={"task_id": "t0", "overlap_setup": True})
            first = env.episode
            assert first is not None and first.toolsets is None  # still setting up
            await env.areset(options={"task_id": "t1"})
            assert first.resources["room"].closed and first.toolsets is None
            second = env.episode
            assert second is not None and not second.resources["room"].closed
            new, *_ = await env.astep(call("where"))
            assert new[0]["content"] == "t1"
        finally:
            await env.aclose()
        assert [(r.name, r.closed) for r in env.rooms] == [("t0", True), ("t1", True)]

    asyncio.run(play())


def test_a_grade_reads_its_own_episode_while_the_next_one_starts():
    async def play() -> None:
        env = RoomEnv(grade_s=0.1)
        try:
            await env.areset(options={"task_id": "t0", "defer_grading": True})
            first = env.episode
            assert first is not None
            await env.astep(call("finish"))
            grading = asyncio.ensure_future(env.agrade())
            await asyncio.sleep(0)  # the grade has started
            await env.areset(options={"task_id": "t1"})  # the next episode starts
            assert not first.resources["room"].closed  # kept for the running grade
            assert await grading == (1.0, {"room": "t0", "closed": False})
            assert first.resources["room"].closed  # released once graded
            assert env.episode is not None and env.episode.task.id == "t1"
            assert not env.episode.resources["room"].closed
            new, *_ = await env.astep(call("where"))
            assert new[0]["content"] == "t1"
        finally:
            await env.aclose()

    asyncio.run(play())


def test_ending_the_env_during_a_setup_leaks_nothing():
    async def play() -> None:
        env = RoomEnv(setup_s=0.05)
        # Overlapped: closing waits for the setup, then releases what it kept.
        await env.areset(options={"overlap_setup": True})
        await asyncio.gather(env.aclose(), env.aclose())
        assert [r.closed for r in env.rooms] == [True]
        # Not overlapped: the setup is inside a reset that a release interrupts; what the
        # setup opens once its episode was released is released at once.
        env = RoomEnv(setup_s=0.05)
        resetting = asyncio.ensure_future(env.areset())
        await asyncio.sleep(0.01)
        await env.arelease()
        with pytest.raises(EnvStateError, match="ended before its 'room' was ready"):
            await resetting
        assert [r.closed for r in env.rooms] == [True] and env.episode is None
        await env.aclose()

    asyncio.run(play())


def test_a_setup_cancelled_with_the_step_that_waited_for_it_ends_quietly():
    async def play() -> None:
        env = RoomEnv(setup_s=10)
        try:
            await env.areset(options={"task_id": "t0", "overlap_setup": True,
                                      "defer_grading": True})
            with pytest.raises(asyncio.TimeoutError):  # a caller's limit cancels the step
                await asyncio.wait_for(env.astep(call("where")), 0.05)
            await env.aend("wall_time")
            with pytest.raises(KeyError, match="room"):  # graded without its room
                await env.agrade()
            env.setup_s = 0
            await env.areset(options={"task_id": "t1"})  # the next episode is unharmed
            new, *_ = await env.astep(call("where"))
            assert new[0]["content"] == "t1"
        finally:
            await env.aclose()
        assert [(r.name, r.closed) for r in env.rooms] == [("t1", True)]

    asyncio.run(play())
