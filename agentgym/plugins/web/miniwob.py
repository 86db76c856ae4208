"""MiniWoB++ in real Chromium: the task pages the ``miniwob`` package ships, graded by the
page's own reward.

One env id per task family (``miniwob-click-button``, ...) and ``miniwob`` over all of
them. A task is a family and a seed (``click-button/17``): the page is served by a static
file server on 127.0.0.1 (:func:`miniwob_server`), seeded with ``Math.seedrandom(seed)`` and
started with ``core.startEpisodeReal()``, so the same task id always shows the same
problem. The goal is the page's utterance (``core.getUtterance()``). Pages run on virtual
time: before the problem starts, Playwright's fake clock is installed and paused at
:data:`CLOCK_START_MS`; each action advances it by :data:`TICK_MS` (``noop(wait_ms)`` by
its wait too), so timers and dates (moving prices, a blinking caret) depend on the seed and
the actions only, and seeded episodes replay exactly. MiniWoB's 10-second episode timer
is set to an hour (agents think slower than the scripted policies it was made for) and
its reward display is hidden.

The episode ends when the page sets ``WOB_DONE_GLOBAL`` (the action that finished it
returns the page's message), when the agent calls ``send_msg_to_user``, or at
``max_turns``. **Reward**: the page's raw reward (``WOB_RAW_REWARD_GLOBAL``, without
MiniWoB's time decay) clipped at 0: 1.0 for success, partial credit where the page gives
it, 0.0 for a failure (MiniWoB's -1) or an unfinished page. ``info["reward_metrics"]``
keeps the raw value and the page's reason.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgym.core.episode import Episode
from agentgym.core.errors import InvalidArgumentError, MissingResourceError
from agentgym.core.reward import RewardResult
from agentgym.core.serving import LocalServer
from agentgym.core.task import GeneratedTasks, Task
from agentgym.plugins.web.browser import BrowserSession
from agentgym.plugins.web.env import WebEnv, episode_page

if TYPE_CHECKING:
    from starlette.responses import Response

#: Seeds per family: ``family/0`` .. ``family/SEEDS-1``.
SEEDS = 1000
#: The pages' virtual clock starts at this instant (2024-01-01T12:00:00Z) ...
CLOCK_START_MS = 1_704_110_400_000
#: ... and each action moves it on by this many ms (``noop(wait_ms)`` by its wait too).
TICK_MS = 1000.0
#: The name the agent sees for the process's MiniWoB++ server (``.test``: a name reserved
#: for tests, RFC 2606, which resolves nowhere).
SHOWN_ORIGIN = "http://miniwob.test"
#: Hidden on every page: MiniWoB's reward display and click visualizer.
_HIDE_CSS = "#reward-display, #click-canvas, #sync-task-cover { display: none !important; }"
_START = """([family, seed, css]) => {
  window.AGENTGYM_TASK = {family, seed};  // what _STATE trusts: set here, on this page only
  const style = document.createElement('style');
  style.textContent = css;
  document.head.appendChild(style);
  core.startEpisode();  // the display and the start cover, which onload would make
  core.EPISODE_MAX_TIME = 3600 * 1000;
  Math.seedrandom(seed);
  core.startEpisodeReal();
  return WOB_TASK_READY;
}"""
#: Pages whose own check pays what the task does not ask for, by family: a script run
#: after _START that corrects it (a red team was paid 1.0 by each before its fix).
#: terminal: "delete a file ending with .tar.gz" checked only that the name ends with the
#: extension's letters, or is one letter shorter than the extension and lacks it
#: (``indexOf`` is -1): `rm alloy` paid; now the name must end with "." and the extension.
PAGE_FIXES = {
    "terminal": r"""() => {
  const pageCheck = window.removeContents;
  window.removeContents = function (input, expectedDel) {
    const name = input.split(/\s/g)[1];
    const index = currentFiles.indexOf(name);
    const right = name !== undefined && (expectedDel === '' ? name.indexOf('.') === -1
                                                           : name.endsWith('.' + expectedDel));
    if (name === undefined || input.indexOf('*') !== -1 || index === -1 || right)
      return pageCheck(input, expectedDel);
    currentFiles.splice(index, 1);  // another kind of file deleted, as the page would
    generateTerminalOutput('');
    core.endEpisode(-1);
  };
}""",
}

#: The page's state: done, raw reward, reason. Only the page this episode started counts:
#: every MiniWoB++ page sets the same globals, so a goto to another family's page (an
#: easier one), a reload, or the same family's page opened anew (an unseeded problem) is
#: "the task page was left", never done; those documents lack the mark _START set.
_STATE = """() => {
  const task = window.AGENTGYM_TASK;
  if (!task || typeof WOB_DONE_GLOBAL === 'undefined'
      || location.pathname !== '/miniwob/' + task.family + '.html')
    return [false, 0, 'the task page was left'];
  return [WOB_DONE_GLOBAL, WOB_RAW_REWARD_GLOBAL, WOB_REWARD_REASON];
}"""
_READY = "() => typeof core !== 'undefined' && typeof genProblem === 'function'"


def miniwob_root() -> Path:
    """The folder of MiniWoB++'s html (``miniwob/html``), or an error saying how to get it."""
    try:
        import miniwob
    except ImportError as error:
        raise MissingResourceError(
            "the miniwob package (MiniWoB++'s task pages) is not installed",
            "install the web extra from agentgym's source: pip install -e '.[web]'") from error
    root = Path(miniwob.__file__).parent / "html"
    if not (root / "miniwob").is_dir():
        raise MissingResourceError(f"the miniwob package at {root} has no html/miniwob pages",
                                   "reinstall it: pip install --force-reinstall miniwob")
    return root


@functools.cache
def families() -> tuple[str, ...]:
    """The task families: one per page in ``miniwob/html/miniwob``, sorted. Empty when the
    package is missing (the envs then say how to install it)."""
    try:
        root = miniwob_root()
    except MissingResourceError:
        return ()
    return tuple(sorted(p.stem for p in (root / "miniwob").glob("*.html")))


@functools.cache
def miniwob_server() -> str:
    """The base URL of the process's server of MiniWoB++'s html (a Starlette app of static
    files on :class:`~agentgym.core.serving.LocalServer`, 127.0.0.1), started on first use."""
    # Imported here: every `import agentgym` loads this module, few processes serve pages.
    from starlette.applications import Starlette
    from starlette.routing import Mount
    from starlette.staticfiles import StaticFiles

    class CachedFiles(StaticFiles):
        """The files, kept by the browser for an hour: every episode's page loads the same
        scripts and styles, which then cost no request. Each page comes with its
        :func:`content_security_policy`."""

        def file_response(self, full_path: Any, *args: Any, **kwargs: Any) -> Response:
            response = super().file_response(full_path, *args, **kwargs)
            response.headers["Cache-Control"] = "max-age=3600"
            if str(full_path).endswith(".html"):
                page = "/" + Path(full_path).relative_to(miniwob_root()).as_posix()
                response.headers["Content-Security-Policy"] = content_security_policy(
                    str(full_path), miniwob_server() + page)
            return response

    app = Starlette(routes=[Mount("/", CachedFiles(directory=miniwob_root()))])
    return LocalServer(app, name="agentgym-miniwob").start().url


#: A page's inline scripts (not those with a ``src``), as the browser hashes them.
_INLINE_SCRIPT = re.compile(r"<script\b(?![^>]*\bsrc\s*=)[^>]*>(.*?)</script\s*>",
                            re.IGNORECASE | re.DOTALL)
#: The script files a page names.
_SCRIPT_FILE = re.compile(r"<script\b[^>]*\bsrc\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
#: Script files the pages' own scripts load (core.js's demonstration recorder).
_LOADED_BY_CORE = ("/core/record.js",)


@functools.cache
def content_security_policy(path: str, url: str) -> str:
    """The policy the MiniWoB++ page in file ``path``, served at ``url``, comes with: its
    own scripts run (the files it names, by their exact URLs, and its inline scripts, by
    their hashes), and nothing the agent types does. Some pages echo what the agent typed
    with ``innerHTML`` (the terminal's command line): ``<img src=x
    onerror=core.endEpisode(1)>`` ran there as the page's own code and was paid 1.0, and so
    did a frame of the server's other scripts (``<iframe srcdoc>`` loading jscolor, which
    evaluates an attribute it finds): inline event handlers, ``javascript:`` URLs, script
    files the page does not name, frames, plugins and a new ``<base>`` are refused.
    ``eval`` stays allowed (d3 and jscolor use it; it needs a script already running)."""
    text = Path(path).read_text(encoding="utf-8", errors="surrogateescape")
    hashes = sorted({"'sha256-" + base64.b64encode(hashlib.sha256(
        body.encode("utf-8", "surrogateescape")).digest()).decode() + "'"
        for body in _INLINE_SCRIPT.findall(text)})
    files = sorted({urllib.parse.urljoin(url, src) for src in _SCRIPT_FILE.findall(text)}
                   | {urllib.parse.urljoin(url, src) for src in _LOADED_BY_CORE})
    return (f"script-src {' '.join(files)} 'unsafe-eval' {' '.join(hashes)};"
            " object-src 'none'; base-uri 'none'; frame-src 'none'; child-src 'none'")


def _task(family: str, seed: int) -> Task:
    return Task(id=f"{family}/{seed}", prompt="", metadata={"family": family, "seed": seed})


class MiniWoBEnv(WebEnv):
    """MiniWoB++ tasks in Chromium (module docstring).

    Args:
        family: one task family (``click-button``), a list of them, or None for all of
            them; tasks take the families in turn (``a/0``, ``b/0``, ``a/1``, ...).
        seeds: seeds per family: task ids ``family/first_seed`` ..
            ``family/first_seed+seeds-1``.
        first_seed: the first seed: ``seeds=800`` to train on and ``first_seed=800,
            seeds=200`` to evaluate on hold different problems of the same families.
        max_turns: turns before truncation.
        reuse_tabs: a family's next episode reloads the last one's tab, wiped, instead
            of opening a new context (browser.py, "Reused pages": about ten times less
            Chromium time an episode, the same problems and grades); False gives every
            episode a new context.
        Other arguments: see :class:`~agentgym.plugins.web.env.WebEnv`.
    """

    def __init__(self, family: str | list[str] | None = None, *, seeds: int = SEEDS,
                 first_seed: int = 0, max_turns: int = 10, reuse_tabs: bool = True,
                 **kwargs: Any):
        known = families()
        if not known:
            miniwob_root()  # raises with the fix
        chosen = ([family] if isinstance(family, str) else list(family) if family is not None
                  else list(known))
        if not chosen:
            raise InvalidArgumentError(
                "family=[] names no task family: give one (click-button), a list, or None"
                " for all of them")
        for name in chosen:
            if name not in known:
                import difflib

                close = difflib.get_close_matches(str(name), known, n=3)
                if isinstance(name, str) and "," in name:  # -e family=a,b: one string
                    listed = ", ".join(f'"{part.strip()}"' for part in name.split(","))
                    raise InvalidArgumentError(
                        f"family={name!r} is not a MiniWoB++ task: several families are a"
                        f" list, -e 'family=[{listed}]' on the command line (a YAML list"
                        " in a config)")
                raise InvalidArgumentError(
                    f"family={name!r} is not a MiniWoB++ task"
                    + (f"; did you mean {', '.join(map(repr, close))}?" if close else "")
                    + f" ({len(known)} families: `agentgym list envs` shows them as"
                    " miniwob-*)")
        if seeds < 1:
            raise InvalidArgumentError(f"seeds={seeds} must be >= 1")
        if first_seed < 0:
            raise InvalidArgumentError(f"first_seed={first_seed} must be >= 0")
        # Families interleaved (task i is family i % F), so the first n tasks, what an
        # eval of n episodes plays, cover every family evenly.
        count = len(chosen)
        source = GeneratedTasks(
            count * seeds, lambda i: _task(chosen[i % count], first_seed + i // count),
            lambda i: f"{chosen[i % count]}/{first_seed + i // count}")
        self.family = family if isinstance(family, str) else None
        self.families = tuple(chosen)
        self.tick_ms = TICK_MS
        self.reuse_tabs = reuse_tabs
        self._utterance = ""
        super().__init__(source, max_turns=max_turns, **kwargs)

    def goal(self, task: Task) -> str:
        return self._utterance

    async def open_page(self, task: Task, session: BrowserSession) -> None:
        page = session.page
        url = self._url(task)
        if page.url != url:  # not preloaded by the pool
            await page.goto(url, wait_until="commit", timeout=self.settle_timeout_s * 1000)
        # Pages set themselves up in window.onload (drag-cube makes its cube there): start
        # the problem only after the load event.
        await page.wait_for_load_state("load", timeout=self.settle_timeout_s * 1000)
        if not await page.evaluate(_READY):
            await page.wait_for_function(_READY)
        # Virtual time from here on: the problem's timers (prices that move, a caret that
        # blinks, a delayed focus) and its Date run on a paused clock that only actions
        # advance, so a seed always gives the same pages.
        await page.clock.install(time=CLOCK_START_MS)
        await page.clock.pause_at(CLOCK_START_MS + 60_000)
        await page.evaluate(_START, [task.metadata["family"], task.metadata["seed"], _HIDE_CSS])
        if task.metadata["family"] in PAGE_FIXES:
            await page.evaluate(PAGE_FIXES[task.metadata["family"]])
        for _ in range(100):  # some pages load their data asynchronously
            if await page.evaluate("() => WOB_TASK_READY"):
                break
            await page.clock.run_for(20)
            await page.wait_for_timeout(20)
        self._utterance = await page.evaluate("() => core.getUtterance()")

    def _url(self, task: Task) -> str:
        return f"{miniwob_server()}/miniwob/{task.metadata['family']}.html"

    async def lease_options(self, task: Task) -> dict[str, Any]:
        # The pages are static files whose problem lives in the page, so a tab can be
        # reloaded for the next episode (browser.py, "Reused pages").
        return {"preload": self._url(task), "origins": (miniwob_server(),),
                "reuse": self.reuse_tabs}

    def shown_origins(self, task: Task) -> dict[str, str]:
        return {miniwob_server(): SHOWN_ORIGIN}

    async def page_done(self, session: BrowserSession) -> str | None:
        done, raw, reason = await session.page.evaluate(_STATE)
        if not done:
            return None
        why = f": {reason}" if reason else ""
        return f"The page ended the task (reward {raw:g}{why})."

    async def grade(self, episode: Episode) -> RewardResult:
        page = episode_page(episode)
        if page is None:
            return RewardResult(0.0, {"reason": "the episode's browser never started"})
        done, raw, reason = await page.session.run(
            lambda s: s.page.evaluate(_STATE), page.deadline_s)
        return RewardResult(max(0.0, float(raw)) if done else 0.0,
                            {"raw_reward": float(raw), "done": bool(done),
                             "reason": reason or ("unfinished" if not done else "")})
