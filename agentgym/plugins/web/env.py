"""``WebEnv``: the base of every browser env: a leased Chromium context per episode, the
page's accessibility tree as the observation, BrowserGym's actions as tools.

An episode (:meth:`WebEnv.setup_episode`) leases a browser from the process's pool
(:mod:`agentgym.plugins.web.browser`), which the episode keeps as its ``"page"`` (a
:class:`~agentgym.plugins.web.actions.PageEpisode`, :func:`episode_page`; released when
the env ends the episode), lets the subclass open the task's page
(:meth:`WebEnv.open_page`), and shows the agent the task's goal followed by the first
observation (:mod:`agentgym.plugins.web.observation`). Every action tool
(:class:`~agentgym.plugins.web.actions.WebTools`) returns the next observation; the
episode ends when the agent calls ``send_msg_to_user``, when the page says it is done
(MiniWoB++), or at ``max_turns``. A browser that dies or hangs ends only its episode, with
finish reason ``sandbox_error``.

Subclasses provide the tasks, :meth:`lease_options` (the origins the episode may reach:
nothing else is reachable; cookies), :meth:`open_page` (navigate, set cookies, start the
task) and :meth:`grade`; optionally :meth:`page_done`, and :meth:`shown_origins` (a
server the env started on a port of its own, shown to the agent under a fixed name).
What an episode takes beyond its page (a site's per-episode database) is kept on the
episode with :meth:`~agentgym.core.episode.Episode.keep` in :meth:`lease_options`, so
that it is released with the episode and its grader reads it there.

``screenshot=True`` adds ``info["screenshot"]`` (PNG bytes of the active tab) to ``reset``
and to every ``step`` that leaves the episode running, for multimodal policies.
"""

from __future__ import annotations

import functools
from typing import Any

from agentgym.core.env import AgentEnv
from agentgym.core.env_info import ExtraInfo
from agentgym.core.episode import Episode, Message
from agentgym.core.errors import InvalidArgumentError
from agentgym.core.task import Task, TaskSource
from agentgym.plugins.web.actions import PageEpisode, WebTools
from agentgym.plugins.web.browser import BrowserSession, browser_pool

SYSTEM_PROMPT = """\
You are using a web browser to do a task for the user. Each observation shows the goal, \
the open tabs, the page's URL and its accessibility tree, one element a line; elements \
you can act on carry a bid in brackets, e.g. [12] button 'Save'. Act with the tools, \
naming elements by bid. When the task is done, or to give the answer it asks for, call \
send_msg_to_user with the answer (or a short note that it is done): that ends the task."""

#: The name of an episode's page in ``episode.resources``.
PAGE = "page"


def episode_page(episode: Episode) -> PageEpisode | None:
    """``episode``'s page; None when its setup never leased a browser."""
    return episode.resources.get(PAGE)


class WebEnv(AgentEnv):
    """A browser env (module docstring).

    Args:
        tasks: the tasks (a task source).
        max_turns: turns before truncation.
        max_chars: the bound of each observation's accessibility tree, in characters.
        action_timeout_s: how long an action waits for its element to be there and
            actionable.
        settle_timeout_s: how long an action (and a reset) waits for what it started, a
            navigation and its load, its requests, before the page is observed as it is
            (:mod:`agentgym.plugins.web.actions`).
        screenshot: add PNG screenshots to ``info`` (module docstring).
        parser: tool-call format (``hermes``, ``xml``, ``openai`` or a parser object).
        turn_timeout_s: time budget of one turn's tool calls (see ``AgentEnv``).
    """

    system_prompt = SYSTEM_PROMPT
    toolsets = (WebTools,)
    setup_before_prompt = True  # the prompt shows the first observation
    harbor_refusal = (
        "the agent acts in a web browser (Chromium driven through playwright, with page"
        " snapshots, clicks and typing as its tools) and the page's own script or the"
        " site's database grades the episode; a Harbor task is a container the agent"
        " works in with a shell, graded by tests/test.sh inside it: no browser tools and"
        " no page to score it")
    #: Virtual time (see :attr:`PageEpisode.tick_ms`): None for a real clock. An env that
    #: sets it installs and pauses the page's clock in :meth:`open_page`.
    tick_ms: float | None = None

    def __init__(self, tasks: TaskSource, *, max_turns: int = 30, max_chars: int = 20_000,
                 action_timeout_s: float = 5.0, settle_timeout_s: float = 30.0,
                 screenshot: bool = False,
                 parser: Any = "hermes", turn_timeout_s: float | None = 300.0,
                 render_mode: str | None = None):
        if max_chars < 500:
            raise InvalidArgumentError(f"max_chars={max_chars}: observations need at least 500"
                                       " characters to show a page")
        if not action_timeout_s > 0:
            raise InvalidArgumentError(f"action_timeout_s={action_timeout_s!r} must be > 0")
        if not settle_timeout_s > 0:
            raise InvalidArgumentError(f"settle_timeout_s={settle_timeout_s!r} must be > 0")
        self.max_chars = max_chars
        self.action_timeout_s = action_timeout_s
        self.settle_timeout_s = settle_timeout_s
        self.screenshot = screenshot
        self._first_observation = ""
        super().__init__(tasks, parser=parser, max_turns=max_turns,
                         turn_timeout_s=turn_timeout_s, render_mode=render_mode)

    # ---- what subclasses provide ------------------------------------------------------

    def goal(self, task: Task) -> str:
        """The task's goal as one line (top of every observation). Default: its prompt."""
        return " ".join(str(task.prompt).split())

    async def lease_options(self, task: Task) -> dict[str, Any]:
        """Keyword arguments of :meth:`BrowserPool.lease` for ``task``: ``origins``, the
        only origins its pages may reach (none by default: name the site's base URLs),
        and optionally ``cookies`` and ``preload``."""
        return {}

    def shown_origins(self, task: Task) -> dict[str, str]:
        """Origins the agent sees under another name, ``{real: shown}``: a server the env
        started on a port of its own, whose number changes every run and means nothing
        to the task (MiniWoB++). The observations and errors show the name, ``goto``
        takes it. Default: none (a site's real address is part of its task)."""
        return {}

    async def open_page(self, task: Task, session: BrowserSession) -> None:
        """Open ``task``'s starting page in ``session.page`` (runs on the pool's loop)."""
        raise NotImplementedError

    async def page_done(self, session: BrowserSession) -> str | None:
        """After each action: a message when the page ended the episode, else None."""
        return None

    # ---- episodes ---------------------------------------------------------------------

    @property
    def page(self) -> PageEpisode | None:
        """The running episode's page (:func:`episode_page`); graders read the page of the
        episode they grade instead."""
        return episode_page(self.episode) if self.episode is not None else None

    async def setup_episode(self, task: Task) -> None:
        episode = self.episode
        assert episode is not None
        pool = browser_pool()
        options = await self.lease_options(task)
        page_done = self.page_done if type(self).page_done is not WebEnv.page_done else None

        async def start() -> str:  # on the browsers' loop: one trip there, not four
            session = await pool.lease(**options)
            page = PageEpisode(session, self.goal(task), self.max_chars, self.action_timeout_s,
                               page_done, tick_ms=self.tick_ms,
                               settle_timeout_s=self.settle_timeout_s,
                               shown_origins=self.shown_origins(task))
            # Kept before the page opens, so that a failed start releases the browser too.
            await episode.keep(PAGE, page, functools.partial(pool.release, session))

            async def first_page(session: BrowserSession) -> str:
                await self.open_page(task, session)
                page.goal = self.goal(task)  # a page may say its goal (MiniWoB's utterance)
                return await page.observation(session)

            observation = await session.run(first_page, page.deadline_s)
            await pool.prepare_next(session)
            return observation

        self._first_observation = await pool.call(start())
        self.bind_toolsets(episode_page(episode))

    def instructions(self, task: Task) -> str:
        """Text of the opening message before the first observation (which starts with the
        goal). Default: none."""
        return ""

    def initial_messages(self, task: Task) -> list[Message]:
        """The system prompt, then the first observation (the goal is its first line),
        after :meth:`instructions` if any."""
        intro = self.instructions(task)
        content = f"{intro}\n\n{self._first_observation}" if intro else self._first_observation
        return [{"role": "system", "content": self.system_prompt},
                {"role": "user", "content": content}]

    async def extra_info(self, episode: Episode) -> ExtraInfo:
        """With ``screenshot=True``, the page as PNG at reset and after every step that
        leaves the episode running (the browser is released once it ends)."""
        if not self.screenshot or episode.done:
            return {}
        return {"screenshot": await self._screenshot()}

    async def _screenshot(self) -> bytes:
        assert self.page is not None

        async def shoot(session: BrowserSession) -> bytes:
            return await session.page.screenshot(type="png")

        return await self.page.session.run(shoot, self.page.deadline_s)
