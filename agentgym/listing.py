"""What ``agentgym list`` shows: the rows of each kind of contribution, the filters that
narrow them, and the summary rows that keep a long family of ids from burying the rest.

Every kind gives rows ``{"id", "plugin", "description"}`` (``--json`` prints them as they
are); ``plugins`` gives one row per plugin found (its module, distribution, version, status,
error and skipped contributions), and ``tools`` one row per tool and the ``toolset`` it
comes from, with the ``envs`` that offer it: the reusable tools of the ``agentgym_tools``
hook, and every tool an env's episodes offer
(:meth:`~agentgym.core.env.AgentEnv.offered_tools`); an env tool's ``plugin`` names the
plugins of those envs (``"swe, terminal"``).
"""

from __future__ import annotations

import re
from typing import Any

from agentgym.core.env import AgentEnv
from agentgym.core.errors import UnknownIdError
from agentgym.core.plugins import KINDS as CORE_KINDS
from agentgym.core.plugins import plugin_host

#: The kinds core declares that ``agentgym list`` shows, in its order; the kinds plugins
#: add (``agentgym_addhooks``) follow them (:func:`kinds`).
KINDS = ["envs", "tools", "rewards", "plugins", "sandboxes", "policies", "parsers",
         "task_sources", "probes", "harnesses"]
#: A family of more ids than this sharing a prefix (``miniwob-*``) is one summary row.
FAMILY_ROWS = 12
#: The ``toolset`` of the tools plugins offer for any env to use (``agentgym_tools``).
REUSABLE = "reusable tools"


def kinds() -> list[str]:
    """Every kind ``agentgym list`` shows: :data:`KINDS`, then those the loaded plugins
    added."""
    return [*KINDS, *(k for k in plugin_host().kinds if k not in CORE_KINDS)]


def rows(kind: str) -> list[dict[str, Any]]:
    """Every row of ``kind`` (one of :func:`kinds`), sorted by id."""
    host = plugin_host()
    if kind == "plugins":
        return [{"id": i.name, "module": i.module, "distribution": i.distribution,
                 "version": i.version, "status": i.status, "error": i.error,
                 "skipped": [s.to_dict() for s in i.skipped]} for i in host.plugin_infos()]
    if kind == "tools":
        return _tool_rows()
    return [{"id": e.id, "plugin": e.plugin, "description": e.description}
            for e in sorted(host.entries(kind).values(), key=lambda e: e.id)]


def _tool_rows() -> list[dict[str, Any]]:
    """A row per (toolset, tool): the reusable tools first, then the envs' tools by
    toolset (an env's own ``@tool`` methods under its class's name)."""
    host = plugin_host()
    found = {(REUSABLE, e.id): {"id": e.id, "plugin": e.plugin, "description": e.description,
                                "toolset": REUSABLE, "envs": []}
             for e in sorted(host.entries("tools").values(), key=lambda e: e.id)}
    offered: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in sorted(host.entries("envs").values(), key=lambda e: e.id):
        try:
            factory = entry.item.load()
        except Exception:  # an env whose module cannot load offers nothing to list
            continue
        if not (isinstance(factory, type) and issubclass(factory, AgentEnv)):
            continue  # a factory function: its tools are known only once it is called
        for toolset, tool in factory.offered_tools():
            row = offered.setdefault((toolset, tool.name), {
                "id": tool.name, "plugin": "", "description": _first_paragraph(tool.description),
                "toolset": toolset, "envs": []})
            row["envs"].append(entry.id)
            plugins = set(filter(None, row["plugin"].split(", "))) | {entry.plugin}
            row["plugin"] = ", ".join(sorted(plugins))
    return [*found.values(), *(offered[key] for key in sorted(offered))]


def _first_paragraph(text: str) -> str:
    return " ".join(text.split("\n\n")[0].split())


def check_plugin(name: str) -> None:
    """:class:`UnknownIdError` (with the closest names) for a plugin that was not found."""
    names = [info.name for info in plugin_host().plugin_infos()]
    if name not in names:
        raise UnknownIdError("plugin", name, names, "agentgym list plugins")


#: The fields of a row that are prose, not names.
PROSE = ("description", "error", "skipped")


def select(kind: str, table: list[dict[str, Any]], text: str | None = None,
           plugin: str | None = None) -> list[dict[str, Any]]:
    """The rows of ``table`` (of ``kind``) from ``plugin`` (for ``plugins``: that plugin)
    that hold ``text``, case-insensitively: anywhere in a name (id, plugin, module, the
    envs that offer a tool), from the start of a word in prose (the description)."""
    if plugin is not None:
        field = "id" if kind == "plugins" else "plugin"
        table = [row for row in table if plugin in str(row[field]).split(", ")]
    if text:
        # Names hold TEXT anywhere (miniwob-click-b); prose only from a word's start, so
        # "swe" does not find "answer".
        needle = text.casefold()
        word = re.compile(rf"(?<![^\W_]){re.escape(needle)}")
        table = [row for row in table if any(
            word.search(_text(value).casefold()) if key in PROSE
            else needle in _text(value).casefold() for key, value in row.items())]
    return table


def _text(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(map(_text, value))
    if isinstance(value, dict):
        return " ".join(map(_text, value.values()))
    return "" if value is None else str(value)


def families(ids: list[str], least: int = FAMILY_ROWS) -> dict[str, list[str]]:
    """The prefixes (``"miniwob-"``) shared by more than ``least`` of ``ids``, each with
    its ids: what a listing shows as one row."""
    groups: dict[str, list[str]] = {}
    for item in ids:
        head, dash, rest = item.partition("-")
        if dash and rest:
            groups.setdefault(head + dash, []).append(item)
    return {prefix: members for prefix, members in groups.items() if len(members) > least}


def summarise(kind: str, table: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``table`` with each family of ids (:func:`families`) as one row in place of its
    first member: ``miniwob-*``, what its descriptions share, how many there are and the
    command that lists them; a tool's envs likewise, in their cell."""
    if kind == "tools":
        return [{**row, "envs": summarise_ids(row["envs"])} for row in table]
    if kind == "plugins":
        return table
    grouped = families([row["id"] for row in table])
    out, placed = [], set()
    for row in table:
        prefix = next((p for p, members in grouped.items() if row["id"] in members), None)
        if prefix is None:
            out.append(row)
            continue
        if prefix in placed:
            continue
        placed.add(prefix)
        members = [r for r in table if r["id"] in grouped[prefix]]
        shared = " ".join(_common_words([r["description"] for r in members])).rstrip(",:;")
        out.append({**row, "id": f"{prefix}*", "description":
                    f"{shared + ': ' if shared else ''}{len(members)} {kind}"
                    f" ({members[0]['id']}, {members[1]['id']}, ...);"
                    f" `agentgym list {kind} {prefix}` lists them"})
    return out


def _common_words(texts: list[str]) -> list[str]:
    """The words every one of ``texts`` starts with."""
    common: list[str] = []
    for words in zip(*(text.split() for text in texts), strict=False):
        if len(set(words)) > 1:
            break
        common.append(words[0])
    return common


def summarise_ids(ids: list[str]) -> list[str]:
    """``ids`` with each family (:func:`families`) as ``prefix-* (N)``."""
    grouped = families(ids)
    out = [i for i in ids if not any(i in members for members in grouped.values())]
    return sorted(out + [f"{prefix}* ({len(members)})" for prefix, members in grouped.items()])
