"""``EchoEnv``: the smallest env that keeps the env protocol without ``AgentEnv``.

It is written only against :class:`~agentgym.core.env.EnvProtocol` (the calls documented
in :mod:`agentgym.core.env`), as an env wrapping another framework's would be. The rollout
loop, every pipeline mode and the Ray executor play it like any agentgym env; the tests
use it to prove that they need nothing else. It also shows what each call must honour:

* a task asks the agent to say a word; a turn containing it ends the episode
  (terminated), ``max_turns`` turns without it truncate the episode;
* ``setup_s`` of simulated setup (a sandbox starting) run in the background when reset
  with ``overlap_setup``, and awaited by the first step;
* the reward 1.0 when the word was said, computed on the last step, or by ``agrade``
  when reset with ``defer_grading``;
* ``aend``, ``arelease``, ``aclose`` and ``task_ids``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentgym.core.task import Task

WORDS = ("apple", "river", "stone", "cloud", "ember", "maple", "orbit", "prism")


class EchoEnv:
    """Say the word the task names (see the module docstring).

    Args:
        num_tasks: tasks ``echo-0`` ... (their words cycle through :data:`WORDS`).
        max_turns: turns before the episode is truncated.
        setup_s: seconds each episode's setup takes.
    """

    def __init__(self, num_tasks: int = 4, max_turns: int = 3, setup_s: float = 0.0):
        self.tasks = {f"echo-{i}": WORDS[i % len(WORDS)] for i in range(num_tasks)}
        self.max_turns, self.setup_s = max_turns, setup_s
        self.closed = False
        self._episode: dict[str, Any] | None = None
        self._setup: asyncio.Task | None = None
        #: Episodes whose setup is running or done and not yet released (tests read it).
        self.live = 0

    def task_ids(self) -> list[str]:
        return list(self.tasks)

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
                     ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        await self.arelease()
        options = options or {}
        ids = self.task_ids()
        task_id = str(options.get("task_id", ids[(seed or 0) % len(ids)]))
        word = self.tasks[task_id]
        self._episode = {"word": word, "turn": 0, "said": False, "done": None,
                         "defer": bool(options.get("defer_grading"))}
        self.live += 1
        self._setup = asyncio.ensure_future(asyncio.sleep(self.setup_s))
        if not options.get("overlap_setup"):
            await self._setup
        messages = [{"role": "user", "content": f"Say the word {word!r}."}]
        task = Task(task_id, messages[0]["content"], {"word": word}, solution=[word])
        return messages, {"task_id": task_id, "tools": [], "task": task}

    async def astep(self, action: Any
                    ) -> tuple[list[dict[str, Any]], float, bool, bool, dict[str, Any]]:
        episode = self._require_running()
        await self._setup  # the first step waits for an overlapped setup
        text = action if isinstance(action, str) else str((action or {}).get("content", ""))
        episode["turn"] += 1
        episode["said"] = episode["word"] in text.lower()
        terminated = episode["said"]
        truncated = not terminated and episode["turn"] >= self.max_turns
        info: dict[str, Any] = {"assistant_message": {"role": "assistant", "content": text},
                                "tool_errors": 0}
        reward = 0.0
        if terminated or truncated:
            episode["done"] = info["finish_reason"] = "said" if terminated else "max_turns"
            if episode["defer"]:
                info["grading_deferred"] = True
            else:
                reward, info["reward_metrics"] = await self.agrade()
        new = [] if terminated else [{"role": "user", "content": "That is not the word."}]
        return new, reward, terminated, truncated, info

    async def agrade(self) -> tuple[float, dict[str, Any]]:
        episode = self._episode
        if episode is None or episode["done"] is None:
            raise RuntimeError("agrade() needs an episode that has ended")
        return float(episode["said"]), {"turns": episode["turn"]}

    async def aend(self, reason: str) -> None:
        self._require_running()["done"] = reason

    async def arelease(self) -> None:
        if self._episode is not None:
            self._episode = None
            if self._setup is not None:
                await asyncio.gather(self._setup, return_exceptions=True)
            self.live -= 1

    async def aclose(self) -> None:
        await self.arelease()
        self.closed = True

    def _require_running(self) -> dict[str, Any]:
        if self.closed or self._episode is None or self._episode["done"] is not None:
            raise RuntimeError("no episode is running: reset first")
        return self._episode
