"""What a web agent sees: the page's accessibility tree as text, each element with a bid.

Elements that handle clicks without a role of their own (a ``<span onclick>``) are shown
as ``generic`` with their bid, so that they can be clicked.

**Bids** follow BrowserGym's convention: every element of the page carries a ``bid``
attribute, a number given in document order when the element is first seen
(:data:`MARK_BIDS`); an element keeps its bid while it lives, so the ids an agent read stay
valid after it acts, and the same page gives the same bids on every load. Actions name
elements by bid (:mod:`agentgym.plugins.web.actions`).

**The tree** is Chromium's own accessibility tree (CDP ``Accessibility.getFullAXTree``),
one node a line, indented by depth::

    RootWebArea 'Checkout', focused, url='http://127.0.0.1:8000/checkout'
      [12] heading 'Shipping address', level=2
      [15] textbox 'Full name', required
      [18] combobox 'Shipping method', value='Standard'
        [19] option 'Standard', selected=True
      [23] button 'Place order'
      StaticText 'Total: $12.00'

Ignored nodes and nameless ``generic``/``none`` wrappers are left out (their children are
kept); a StaticText that repeats its parent's name is dropped. The text is cut at
``max_chars`` with a marker saying how many lines were left out.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

#: Give every element without a bid the next one, in document order.
MARK_BIDS = """() => {
  let next = window.__agentgymNextBid || 0;
  for (const el of document.querySelectorAll('*')) {
    if (!el.hasAttribute('bid')) el.setAttribute('bid', String(next++));
  }
  window.__agentgymNextBid = next;
  return next;
}"""
#: Roles left out when they have no name (their children are kept).
_WRAPPERS = {"none", "generic", "LabelText", "InlineTextBox", "LineBreak", "paragraph",
             "group", "Section", "sectionheader", "sectionfooter", "MenuListPopup"}
#: Roles never shown.
_HIDDEN = {"InlineTextBox"}
#: AX properties shown, in this order (boolean ones only when true, except checked/selected).
_PROPERTIES = ("focused", "checked", "selected", "pressed", "expanded", "disabled", "required",
               "readonly", "level", "valuemin", "valuemax", "url")
_VALUE_ROLES = {"textbox", "searchbox", "combobox", "spinbutton", "slider", "ListBox",
                "listbox", "textarea", "progressbar", "scrollbar"}


@dataclass
class Observation:
    """A page as the agent sees it: the tree text, the URL, the tabs' titles."""

    tree: str
    url: str
    title: str
    tabs: list[str]
    active_tab: int


async def accessibility_tree(page: Any, cdp: Any | None = None, max_chars: int = 20_000
                             ) -> str:
    """``page``'s accessibility tree as text (module docstring), bids marked first."""
    own_session = cdp is None
    if own_session:
        cdp = await page.context.new_cdp_session(page)
    try:
        for attempt in range(2):
            try:
                marked, tree, snapshot = await _capture(cdp)
                break
            except Exception:
                if attempt:  # a document replaced mid-capture twice: give up
                    raise
                with contextlib.suppress(Exception):  # let the new one load, once
                    await page.wait_for_load_state("domcontentloaded", timeout=5000)
    finally:
        if own_session:
            await cdp.detach()
    if marked.get("exceptionDetails"):  # a page that broke querySelectorAll: say so
        raise RuntimeError("could not mark the page's elements with bids: "
                           f"{marked['exceptionDetails'].get('text', 'script error')}")
    bids, clickable = _bids_by_node(snapshot)
    return render_tree(tree["nodes"], bids, max_chars, clickable)


async def _capture(cdp: Any) -> tuple[dict, dict, dict]:
    """Mark bids, then take the AX tree and a DOM snapshot. One CDP session handles its
    commands in order, so the three go out together: one round trip, not three, and the
    tree and the snapshot see the bids just marked."""
    return await asyncio.gather(
        cdp.send("Runtime.evaluate", {"expression": f"({MARK_BIDS})()", "returnByValue": True}),
        cdp.send("Accessibility.getFullAXTree"),
        cdp.send("DOMSnapshot.captureSnapshot", {"computedStyles": []}))


def _bids_by_node(snapshot: dict[str, Any]) -> tuple[dict[int, str], set[int]]:
    """backendNodeId -> bid, and the backendNodeIds of elements with a click handler, from a
    DOMSnapshot of the main document."""
    strings = snapshot["strings"]
    bids: dict[int, str] = {}
    document = snapshot["documents"][0]["nodes"]
    ids = document["backendNodeId"]
    clickable = {ids[i] for i in document.get("isClickable", {}).get("index", [])}
    for backend_id, attributes in zip(document["backendNodeId"], document["attributes"],
                                      strict=False):
        for i in range(0, len(attributes) - 1, 2):
            if strings[attributes[i]] == "bid":
                bids[backend_id] = strings[attributes[i + 1]]
                break
    return bids, clickable


def render_tree(nodes: list[dict[str, Any]], bids: dict[int, str], max_chars: int,
                clickable: set[int] = frozenset()) -> str:
    """The lines of an AX tree (CDP nodes) with bids, bounded by ``max_chars``. A nameless
    wrapper that handles clicks (``clickable``: a span with an onclick) is kept."""
    by_id = {node["nodeId"]: node for node in nodes}
    roots = [node for node in nodes if not node.get("parentId")]
    lines: list[str] = []

    def visit(node: dict[str, Any], depth: int, parent_name: str) -> None:
        role = _value(node.get("role")) or ""
        name = (_value(node.get("name")) or "").strip()
        shown = not node.get("ignored") and role not in _HIDDEN
        if shown and role in _WRAPPERS and not name and \
                node.get("backendDOMNodeId") not in clickable:
            shown = False
        if shown and role == "StaticText" and (not name or name == parent_name):
            shown = False
        if shown:
            bid = bids.get(node.get("backendDOMNodeId") or -1)
            head = f"[{bid}] " if bid is not None and role != "StaticText" else ""
            text = f"{head}{role} {_quote(name)}"
            details = _details(node, role)
            lines.append("  " * depth + text + (", " + ", ".join(details) if details else ""))
        for child_id in node.get("childIds") or ():
            child = by_id.get(child_id)
            if child is not None:
                visit(child, depth + 1 if shown else depth, name if shown else parent_name)

    for root in roots:
        visit(root, 0, "")
    return _bounded(lines, max_chars)


def _details(node: dict[str, Any], role: str) -> list[str]:
    properties = {p["name"]: _value(p.get("value")) for p in node.get("properties") or ()}
    details = []
    value = _value(node.get("value"))
    if role in _VALUE_ROLES and value not in (None, ""):
        details.append(f"value={_quote(str(value))}")
    for key in _PROPERTIES:
        if key not in properties:
            continue
        found = properties[key]
        if key in ("checked", "pressed"):
            details.append(f"{key}={str(found).lower()}")
        elif key == "selected":
            if role in ("option", "tab", "row", "gridcell", "treeitem"):
                details.append(f"selected={found in (True, 'true')}")
        elif key == "url":
            if role == "link" or role == "RootWebArea":
                details.append(f"url={_quote(str(found))}")
        elif found is True or found == "true":
            details.append(key)
        elif key in ("level", "valuemin", "valuemax") and found is not None:
            details.append(f"{key}={found}")
    return details


def _value(holder: Any) -> Any:
    return holder.get("value") if isinstance(holder, dict) else None


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", " ") + "'"


def _bounded(lines: list[str], max_chars: int) -> str:
    """``lines`` joined, cut at ``max_chars`` with a marker of what was left out."""
    out: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        if used + len(line) + 1 > max_chars:
            out.append(f"... [{len(lines) - i} more lines not shown: the tree is cut at"
                       f" {max_chars} characters]")
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)
