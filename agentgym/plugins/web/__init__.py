"""The ``web`` plugin: tasks done in a real headless Chromium.

Contributes ``web-shop`` and ``web-forum`` (WebArena-style tasks on agentgym's own
SQLite-backed sites, graded by database state and answers:
:mod:`agentgym.plugins.web.sites_env`), ``miniwob`` and one ``miniwob-<family>`` per
MiniWoB++ task family (the ``miniwob`` package's pages, graded by the page:
:mod:`agentgym.plugins.web.miniwob`), and ``webarena`` (WebArena's task files, for users
who run its servers: :mod:`agentgym.plugins.web.webarena`). The browser, observation and
actions are shared: :mod:`agentgym.plugins.web.env`. Its exploit probes (answer
stuffing, reach) are in :mod:`agentgym.plugins.web.probes`.
"""

from __future__ import annotations

from agentgym.core.hookspecs import hookimpl
from agentgym.core.probes import ExploitProbe
from agentgym.core.registry import EnvRegistration, Spec

_SITES = {
    "shop": "an online shop with a customer side (catalog, cart, checkout, orders, account)"
            " and an admin panel",
    "forum": "a discussion forum (forums, posts, comments, votes, messages, settings)",
}


@hookimpl
def agentgym_envs() -> list[EnvRegistration]:
    from agentgym.plugins.web.miniwob import families

    envs = [EnvRegistration(f"web-{site}", "agentgym.plugins.web.sites_env:SiteEnv",
                            f"Browser tasks on {about}, graded by its database and the"
                            " answer (real Chromium, local).", kwargs={"site": site})
            for site, about in _SITES.items()]
    envs.append(EnvRegistration(
        "miniwob", "agentgym.plugins.web.miniwob:MiniWoBEnv",
        "MiniWoB++: every task family of the miniwob package, graded by the page (real"
        " Chromium, local)."))
    envs += [EnvRegistration(f"miniwob-{family}", "agentgym.plugins.web.miniwob:MiniWoBEnv",
                             f"MiniWoB++ task family {family}, graded by the page.",
                             kwargs={"family": family})
             for family in families()]
    envs.append(EnvRegistration(
        "webarena", "agentgym.plugins.web.webarena:WebArenaEnv",
        "WebArena's task files (webarena-verified) against WebArena servers you run; base"
        " URLs from base_urls= or WEBARENA_<SITE> variables."))
    return envs


@hookimpl
def agentgym_policies() -> list[Spec]:
    return [Spec("miniwob-solver", "agentgym.testing.miniwob_solvers:solver_policy",
                 "Plays MiniWoB++ tasks with their family's scripted solver (16 families):"
                 " correct demonstrations for SFT on miniwob envs.")]


@hookimpl
def agentgym_exploit_probes() -> list[ExploitProbe]:
    """The web probes (:mod:`agentgym.plugins.web.probes`): answer stuffing and reach."""
    from agentgym.plugins.web.probes import PROBES

    return PROBES
