"""Write the reference solutions of site tasks: replay each task's symbolic ``steps`` in
Chromium and record the bids they resolve to as its ``solution``.

People write a task's steps by what they see (``{"action": "click", "target": {"role":
"link", "name": "My account"}}``); an agent and the ``oracle`` act by bid. This tool plays
every step through the env's own ``step``, resolving each target on the live page
(Playwright's ``get_by_role(role, name=name, exact=True)``, or ``css``) to the bid the
agent would see, checks that the finished episode scores 1.0, and writes the calls into
the task file's ``solution`` and the rows the replay changed, per table, into its
``grade.changes`` (the bound on what an episode of the task may change; see
:mod:`agentgym.plugins.web.sites_env`). Run it after changing a site's pages or a task's steps::

    python -m agentgym.plugins.web.author shop [--tasks FILE] [--only TASK_ID ...]
    python -m agentgym.plugins.web.author mysite.app:SITE --tasks tasks.json   # your site

It exits non-zero, naming the task and step, when a target matches no element or several,
or when a replayed solution does not score 1.0 (the file is still written for the tasks
that passed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agentgym.core.contributions import import_target
from agentgym.plugins.web.browser import BrowserSession
from agentgym.plugins.web.observation import MARK_BIDS
from agentgym.plugins.web.sites.site import Site
from agentgym.plugins.web.sites_env import SITES, TASKS_DIR, VISIT, SiteEnv, read_task_file

#: Step fields that name an element, per action.
_TARGETED = {"click", "dblclick", "hover", "fill", "select_option", "press"}


async def resolve(session: BrowserSession, target: dict[str, Any]) -> str:
    """The bid of the one element ``target`` names on the active page."""
    page = session.page
    await page.evaluate(MARK_BIDS)
    if "css" in target:
        locator = page.locator(target["css"])
    else:
        locator = page.get_by_role(target["role"], name=target["name"], exact=True)
    count = await locator.count()
    if "nth" in target:
        if count <= target["nth"]:
            raise LookupError(f"{target} matches {count} elements")
        locator = locator.nth(target["nth"])
    elif count != 1:
        raise LookupError(f"{target} matches {count} elements on {page.url}")
    bid = await locator.get_attribute("bid")
    if bid is None:
        raise LookupError(f"{target} has no bid")
    return bid


def to_call(step: dict[str, Any], bid: str | None) -> dict[str, Any]:
    """A step as the tool call an agent makes."""
    action = step["action"]
    arguments: dict[str, Any] = {"bid": bid} if bid is not None else {}
    if action == "fill":
        arguments["value"] = step["text"]
    elif action == "select_option":
        arguments["options"] = step["value"]
    elif action == "press":
        arguments["key"] = step["key"]
        if bid is None:
            arguments.pop("bid", None)
    elif action == "goto":
        arguments["url"] = step["url"]
    elif action == "send_msg_to_user":
        arguments["text"] = step["text"]
    elif action == "scroll":
        arguments.update(dx=step.get("dx", 0), dy=step.get("dy", 0))
    return {"name": action, "arguments": arguments}


def author_task(env: SiteEnv, row: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Replay ``row``'s steps in ``env``; returns its solution (one call a turn) and sets
    ``row["grade"]["changes"]`` to the rows the replay changed."""
    env.reset(seed=0, options={"task_id": row["id"]})
    solution: list[list[dict[str, Any]]] = []
    reward, done = 0.0, False
    for number, step in enumerate(row["steps"], 1):
        if done:
            raise RuntimeError(f"step {number} comes after the episode ended")
        bid = None
        if step["action"] in _TARGETED and "target" in step:
            assert env.page is not None
            session = env.page.session
            try:
                bid = env.run_coroutine(session.run(lambda s, t=step["target"]: resolve(s, t)))
            except LookupError as error:
                raise RuntimeError(f"step {number} ({step['action']}): {error}") from None
        call = to_call(step, bid)
        _, reward, terminated, truncated, info = env.step(
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": call["name"],
                                                  "arguments": json.dumps(call["arguments"])}}]})
        if info["errors"]:
            raise RuntimeError(f"step {number} ({call}): {info['errors'][0][:300]}")
        solution.append([call])
        done = terminated or truncated
    if not done:
        raise RuntimeError("the steps end without send_msg_to_user")
    if reward != 1.0:
        raise RuntimeError(f"the replayed steps score {reward}: {info.get('reward_metrics')}")
    visit = env.episode.resources[VISIT] if env.episode is not None else None
    if visit is None:
        raise RuntimeError("the episode's site is closed before its changes were read")
    row["grade"]["changes"] = visit.server.changes(visit.token)
    return solution


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentgym.plugins.web.author",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("site", help="shop or forum, or module:attribute naming a Site of"
                                     " your own (with --tasks)")
    parser.add_argument("--tasks", type=Path, help="task file (default: the shipped one)")
    parser.add_argument("--only", nargs="*", help="author only these task ids")
    args = parser.parse_args(argv)
    site: str | Site = args.site
    if ":" in args.site:  # a site of the user's own
        site = import_target(args.site, "the site")
        if not isinstance(site, Site) or args.tasks is None:
            print(f"{args.site} must name a Site instance, and --tasks its task file")
            return 2
    path = args.tasks or TASKS_DIR / f"{args.site}.json"
    rows = read_task_file(path, None if isinstance(site, Site) else SITES, unauthored=True)
    chosen = [row for row in rows if not args.only or row["id"] in args.only]
    unknown = sorted(set(args.only or ()) - {row["id"] for row in rows})
    if unknown or not chosen:
        print(f"no such task in {path}: {', '.join(unknown) or '(none chosen)'}")
        return 2
    env = SiteEnv(site, tasks=path, max_turns=200, unauthored=True)
    failures = 0
    try:
        for row in chosen:
            try:
                row["solution"] = author_task(env, row)
                print(f"ok    {row['id']} ({len(row['solution'])} turns)")
            except Exception as error:
                failures += 1
                print(f"FAIL  {row['id']}: {error}")
    finally:
        env.close()
    path.write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(chosen) - failures} of {len(chosen)} tasks authored; {path} written")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
