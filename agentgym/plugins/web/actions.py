"""The browser actions an agent calls, as tools (BrowserGym's action set, by bid).

:class:`WebTools` is bound to one episode's :class:`PageEpisode` (its browser session and
goal). Each action runs in the real page, then **waits for what it started**: a navigation
it asked for (to begin, commit and load), the document to be complete, and the requests
it set off to be answered (:meth:`~agentgym.plugins.web.browser.PageWatch.settle`), within
``settle_timeout_s``; the next observation is taken from that settled page, so its bids
are those of the whole document, however loaded the machine is. Finding and acting on an
element has its own bound (``action_timeout_s``), so a click on an element that is not
there fails fast while a slow page load does not fail the click; an element that is there
but hidden fails at once (a pointer cannot reach it, and waiting could only help a page
that is still changing), so the bound is what a busy machine needs. A bound that runs out
says what was still pending (in the error, or as a ``Still loading`` line of the
observation); a page whose navigation its server has not answered yet has no tree to show
(:data:`NOT_ANSWERED` stands in for it).

The observation (:func:`PageEpisode.observe`) is the goal, the tabs, the URL, blocked
requests, and the accessibility tree with bids. A server the env started for itself on a
port of its own shows under a fixed name instead (``shown_origins``: MiniWoB++'s server on
127.0.0.1 is ``http://miniwob.test``), so the same task gives the same text in every
process, and a port number does not put digits into the page that mean nothing; the agent
may use that name in ``goto``. An unknown bid or an action the page refuses (a hidden
element, a select without that option, a timeout) is a
:class:`~agentgym.core.tools.ToolError` whose message says what failed, followed by the
observation, so the agent sees the page it must work from.

``send_msg_to_user(text)`` is the agent's answer and ends the episode (WebArena's
``stop [answer]``); a page that ends the episode itself (MiniWoB++'s done flag) ends it
after the action that finished it (:attr:`PageEpisode.page_done`).
"""

from __future__ import annotations

import asyncio
import re
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agentgym.core.episode import Submitted
from agentgym.core.tools import ToolError, Toolset, tool
from agentgym.plugins.web.browser import BrowserSession
from agentgym.plugins.web.observation import accessibility_tree

#: The tree of a page whose navigation has not been answered yet.
NOT_ANSWERED = ("(the page has not answered yet: call noop to wait for it, or go_back /"
                " goto to leave it)")

#: Keys ``press`` names in its description (any Playwright key name works).
KEY_EXAMPLES = "Enter, Tab, Escape, Backspace, ArrowDown, PageDown, Control+a"


@dataclass
class PageEpisode:
    """One web episode's browser session and what its observations show.

    Args:
        session: the leased browser context.
        goal: the task as one line, repeated at the top of every observation.
        max_chars: bound of the accessibility-tree text.
        action_timeout_s: how long an action waits for its element to be there and
            actionable.
        page_done: called after every action; returns a message when the page itself
            ended the episode (MiniWoB++), else None.
        settle_timeout_s: how long an action waits for what it started (a navigation and
            its load, its requests) before the page is observed as it is.
        shown_origins: origins (``scheme://host:port``) shown to the agent under another
            name, ``{real: shown}`` (module docstring).
    """

    session: BrowserSession
    goal: str
    max_chars: int = 20_000
    action_timeout_s: float = 5.0
    page_done: Callable[[BrowserSession], Awaitable[str | None]] | None = None
    #: Virtual time: None when the page's clock is real; else the page runs on Playwright's
    #: paused fake clock (installed by the env), which each action advances by this many
    #: ms (and ``noop``'s wait by its own), so an episode's pages depend on its actions
    #: and seed only, never on how fast the machine is.
    tick_ms: float | None = None
    settle_timeout_s: float = 30.0
    shown_origins: dict[str, str] = field(default_factory=dict)
    #: Messages the agent sent to the user, in order (the last is its answer).
    messages: list[str] = field(default_factory=list)
    _blocked_seen: int = 0

    def shown(self, text: str) -> str:
        """``text`` as the agent sees it: each of :attr:`shown_origins` under its name."""
        for real, name in self.shown_origins.items():
            # Not inside a longer port: http://127.0.0.1:8000 is no prefix of ...:80001.
            text = re.sub(re.escape(real) + r"(?![0-9])", name, text)
        return text

    def actual(self, url: str) -> str:
        """The URL the browser opens for one the agent wrote with a shown name."""
        for real, name in self.shown_origins.items():
            if url == name or url.startswith((name + "/", name + "?", name + "#")):
                return real + url[len(name):]
        return url

    @property
    def deadline_s(self) -> float:
        """The most one browser call (an action, its settling and the observation; a
        ``goto`` that fails waits for the error page and goes back) may take before the
        browser counts as hung."""
        return self.action_timeout_s + 3 * self.settle_timeout_s + 20

    async def observe(self) -> str:
        """The observation text of the active page (module docstring)."""
        return await self.session.run(self.observation, self.deadline_s)

    async def observation(self, session: BrowserSession, since: float = 0.0,
                          pending: str | None = None) -> str:
        """:meth:`observe`, for work already running on the browsers' loop: the active
        page once settled (requests started before ``since``, the loop's clock, do not
        hold it up), or as it is when ``settle_timeout_s`` ran out, with what was
        pending (``pending``: the page was just settled, and this is what was left)."""
        page = session.page
        watch = await session.watch(page)
        if pending is None:
            pending = await watch.settle(self.settle_timeout_s, since)
        if pending and watch.held:
            # Its navigation is still waiting for the server: nothing is asked of the
            # document until it commits.
            tree = NOT_ANSWERED
            titles = await asyncio.gather(*(_title(tab) if tab is not page else _loading()
                                            for tab in session.pages))
        else:
            tree, titles = await asyncio.gather(
                accessibility_tree(page, watch.cdp, self.max_chars),
                asyncio.gather(*(_title(tab) for tab in session.pages)))
        tabs = [f"[{i}] {title or '(untitled)'}" + (" (active)" if i == session.active else "")
                for i, title in enumerate(titles)]
        lines = [f"Goal: {self.goal}", f"Tabs: {' | '.join(tabs)}", f"URL: {page.url}"]
        if pending:
            lines.append(f"Still loading after {self.settle_timeout_s:g} s: {pending}")
        blocked = session.blocked[self._blocked_seen:]
        self._blocked_seen = len(session.blocked)
        if blocked:
            shown = ", ".join(blocked[:5]) + (" ..." if len(blocked) > 5 else "")
            lines.append(f"Blocked (this episode can reach only {', '.join(session.origins)}):"
                         f" {shown}")
        return self.shown("\n".join(lines) + "\n\n" + tree)

    async def act(self, action: Callable[[BrowserSession], Awaitable[Any]]) -> str:
        """Run ``action`` on the page, wait for what it started (module docstring), and
        observe. A page that refuses it raises ToolError (with the observation); a page
        that ended the episode raises Submitted."""
        # One trip to the browser's loop for the action, its settling and the observation.
        async def run(session: BrowserSession) -> tuple[str | None, str | None, str]:
            error = None
            since = asyncio.get_running_loop().time()
            try:
                await action(session)
            except ToolError as refused:
                error = str(refused)
            except Exception as failed:
                if type(failed).__name__ not in ("Error", "TimeoutError"):
                    raise
                error = _first_line(failed)
                if not session.page.is_closed():  # say what the page was busy with
                    watch = await session.watch(session.page)
                    busy = watch.pending(await watch.ready_state())
                    if busy:
                        error += f" (the page was busy: {'; '.join(busy)})"
            # What the action started has finished before the page is asked anything.
            pending = "" if session.page.is_closed() else await (
                await session.watch(session.page)).settle(self.settle_timeout_s, since)
            if self.tick_ms is not None and not session.page.is_closed():
                await session.page.clock.run_for(self.tick_ms)
                pending = None  # the tick may have started something: settle again
            if self.page_done is not None:
                message = await self.page_done(session)
                if message is not None:
                    return error, message, ""
            return error, None, await self.observation(session, since, pending)

        error, done, observation = await self.session.run(run, self.deadline_s)
        if done is not None:
            raise Submitted(None, done)
        if error is not None:
            raise ToolError(self.shown(f"{error}\n\n{observation}"))
        return observation


async def _loading() -> str:
    return "(loading)"


async def _title(page: Any) -> str:
    return await page.title() if not page.is_closed() else "(closed)"


def _first_line(error: Exception) -> str:
    """Playwright's message without its call log, plus the log's line that says what
    covered the element, if one does."""
    message, _, log = str(error).strip().partition("\nCall log:")
    text = message.strip().splitlines()[0] if message.strip() else type(error).__name__
    covering = [line.strip(" -") for line in log.splitlines() if "intercepts pointer" in line]
    return f"{text} ({covering[-1]})" if covering else text


def _element(session: BrowserSession, bid: str) -> Any:
    return session.page.locator(f'[bid="{bid}"]')


async def _one(session: BrowserSession, bid: str) -> Any:
    """The element with ``bid`` on the active page, or a ToolError saying there is none."""
    bid = str(bid).strip().strip("[]'\"")
    locator = _element(session, bid)
    if await locator.count() == 0:
        raise ToolError(f"no element with bid {bid!r} on this page; use a bid from the"
                        " latest observation")
    return locator.first


async def _reachable(session: BrowserSession, bid: str) -> Any:
    """The element with ``bid``, which a pointer (or typing) can reach: an element that is
    hidden (or has no size) is a ToolError at once, where the action would wait out its
    whole bound for it to show, which only a page that is still changing could do."""
    element = await _one(session, bid)
    if not await element.is_visible():
        raise ToolError(f"the element with bid {str(bid).strip()!r} is hidden (or has no"
                        " size): a pointer cannot reach it; use a visible element")
    return element


class WebTools(Toolset):
    """Browser actions on one episode's page (module docstring)."""

    def __init__(self, episode: PageEpisode):
        self.episode = episode

    @property
    def _timeout_ms(self) -> float:
        return self.episode.action_timeout_s * 1000

    @tool
    async def click(self, bid: str, button: str = "left") -> str:
        """Click an element.

        Args:
            bid: The element's bid, the number in brackets in the observation.
            button: Which mouse button: left, middle or right.
        """
        if button not in ("left", "middle", "right"):
            raise ToolError(f"button={button!r}: use left, middle or right")

        async def action(session: BrowserSession) -> None:
            # The navigation a click starts is waited for by settling, not in the click's
            # own bound (which covers finding the element and clicking it).
            await (await _reachable(session, bid)).click(button=button, timeout=self._timeout_ms,
                                                   no_wait_after=True)

        return await self.episode.act(action)

    @tool
    async def dblclick(self, bid: str) -> str:
        """Double-click an element.

        Args:
            bid: The element's bid.
        """
        async def action(session: BrowserSession) -> None:
            await (await _reachable(session, bid)).dblclick(timeout=self._timeout_ms)

        return await self.episode.act(action)

    @tool
    async def hover(self, bid: str) -> str:
        """Move the mouse over an element.

        Args:
            bid: The element's bid.
        """
        async def action(session: BrowserSession) -> None:
            await (await _reachable(session, bid)).hover(timeout=self._timeout_ms)

        return await self.episode.act(action)

    @tool
    async def fill(self, bid: str, value: str) -> str:
        """Clear a text field and type a value into it.

        Args:
            bid: The text field's bid.
            value: The text to put in the field.
        """
        async def action(session: BrowserSession) -> None:
            await (await _reachable(session, bid)).fill(value, timeout=self._timeout_ms)

        return await self.episode.act(action)

    @tool
    async def select_option(self, bid: str, options: str | list[str]) -> str:
        """Choose option(s) of a select element (a combobox or listbox), by label or value.

        Args:
            bid: The select element's bid.
            options: The option's label (or a list of them for a multiple select).
        """
        wanted = [options] if isinstance(options, str) else list(options)

        async def action(session: BrowserSession) -> None:
            element = await _one(session, bid)
            labels = await element.evaluate(
                "el => el.options ? [...el.options].map(o => [o.label, o.value]) : null")
            if labels is None:
                raise ToolError(f"the element with bid {bid!r} is not a select element")
            chosen = []
            for option in wanted:
                match = next((value for label, value in labels if label == option), None)
                if match is None:
                    match = next((value for _, value in labels if value == option), None)
                if match is None:
                    known = ", ".join(repr(label) for label, _ in labels)
                    raise ToolError(f"no option {option!r} in the select with bid {bid!r};"
                                    f" its options are {known}")
                chosen.append(match)
            await element.select_option(value=chosen, timeout=self._timeout_ms)

        return await self.episode.act(action)

    @tool
    async def press(self, key: str, bid: str = "") -> str:
        """Press a key or key combination, in an element (focusing it first) or wherever
        the focus is.

        Args:
            key: A key name or combination, e.g. Enter, Tab, Escape, Backspace, ArrowDown,
                PageDown, Control+a.
            bid: The element to press it in (optional: the focused element otherwise).
        """
        async def action(session: BrowserSession) -> None:
            if bid:
                await (await _one(session, bid)).press(key, timeout=self._timeout_ms,
                                                       no_wait_after=True)
            else:
                await session.page.keyboard.press(key)

        return await self.episode.act(action)

    @tool
    async def scroll(self, dx: float = 0.0, dy: float = 0.0) -> str:
        """Scroll the page (or the element under the mouse) by pixels.

        Args:
            dx: Pixels to the right (negative: to the left).
            dy: Pixels down (negative: up).
        """
        async def action(session: BrowserSession) -> None:
            await session.page.mouse.wheel(dx, dy)

        return await self.episode.act(action)

    @tool
    async def goto(self, url: str) -> str:
        """Open a URL in the current tab (relative URLs are resolved against the page's).

        Args:
            url: The address to open.
        """
        target = urllib.parse.urljoin(self.episode.session.page.url,
                                      self.episode.actual(url.strip()))
        if urllib.parse.urlsplit(target).scheme not in ("http", "https"):
            raise ToolError(f"{url!r}: only http(s) pages can be opened")
        # Which hosts and ports are reachable is enforced where the browser routes its
        # requests, on the URL as Chromium parsed it (agentgym.plugins.web.reach).

        async def action(session: BrowserSession) -> None:
            before = session.page.url
            try:
                await session.page.goto(target, wait_until="commit",
                                        timeout=self.episode.settle_timeout_s * 1000)
            except Exception as error:
                # Back from Chromium's error page (once it is up) to the agent's page.
                await (await session.watch(session.page)).settle(self.episode.settle_timeout_s)
                if session.page.url != before:
                    await session.page.go_back(wait_until="commit",
                                               timeout=self.episode.settle_timeout_s * 1000)
                if "ERR_BLOCKED_BY_CLIENT" in str(error) or "ERR_PROXY" in str(error) or \
                        "ERR_SOCKS" in str(error) or "ERR_TUNNEL" in str(error):
                    raise ToolError(self.episode.shown(
                        f"{url!r} is blocked: this episode can reach only"
                        f" {', '.join(session.origins)}")) from None
                raise

        return await self.episode.act(action)

    @tool
    async def go_back(self) -> str:
        """Go back to the previous page of the current tab."""
        async def action(session: BrowserSession) -> None:
            await session.page.go_back(wait_until="commit",
                                       timeout=self.episode.settle_timeout_s * 1000)

        return await self.episode.act(action)

    @tool
    async def go_forward(self) -> str:
        """Go forward to the next page of the current tab's history."""
        async def action(session: BrowserSession) -> None:
            await session.page.go_forward(wait_until="commit",
                                          timeout=self.episode.settle_timeout_s * 1000)

        return await self.episode.act(action)

    @tool
    async def new_tab(self) -> str:
        """Open a new, empty tab and switch to it."""
        async def action(session: BrowserSession) -> None:
            await session.context.new_page()  # the context's "page" event adds it
            for _ in range(50):
                if len(session.pages) and session.pages[-1] is not session.page:
                    break
                await asyncio.sleep(0.01)
            session.active = len(session.pages) - 1

        return await self.episode.act(action)

    @tool
    async def tab_focus(self, index: int) -> str:
        """Switch to a tab.

        Args:
            index: The tab's number in the observation's tab list.
        """
        async def action(session: BrowserSession) -> None:
            open_tabs = [i for i, p in enumerate(session.pages) if not p.is_closed()]
            if index not in open_tabs:
                raise ToolError(f"no open tab {index}; open tabs: {open_tabs}")
            session.active = index
            await session.page.bring_to_front()

        return await self.episode.act(action)

    @tool
    async def tab_close(self) -> str:
        """Close the current tab and switch to the previous open one (the last tab
        cannot be closed)."""
        async def action(session: BrowserSession) -> None:
            open_tabs = [i for i, p in enumerate(session.pages) if not p.is_closed()]
            if len(open_tabs) <= 1:
                raise ToolError("the last open tab cannot be closed")
            await session.page.close()
            session.active = max(i for i in open_tabs if i != session.active)

        return await self.episode.act(action)

    @tool
    async def noop(self, wait_ms: float = 0.0) -> str:
        """Do nothing (optionally wait for the page to change), and observe again.

        Args:
            wait_ms: Milliseconds to wait first (at most 10000).
        """
        wait_ms = min(max(wait_ms, 0.0), 10_000.0)

        async def action(session: BrowserSession) -> None:
            if self.episode.tick_ms is None:
                await asyncio.sleep(wait_ms / 1000)
            elif wait_ms:  # the page's clock is virtual: advance it
                await session.page.clock.run_for(wait_ms)

        return await self.episode.act(action)

    @tool
    async def send_msg_to_user(self, text: str) -> str:
        """Send your answer (or a report that the task is done) to the user. This ends
        the episode.

        Args:
            text: The answer, or a short note that the task is done.
        """
        self.episode.messages.append(text)
        raise Submitted(text, "Message sent to the user; the episode is over.")
