"""Scripted solvers of MiniWoB++ task families, written from the observation text alone.

Each solver is a policy function ``f(messages, task) -> turn`` for
:class:`~agentgym.core.policies.ScriptedPolicy`: it reads the latest observation in
``messages`` (the goal line and the accessibility tree, one element a line with its bid),
decides the next action, and returns an assistant turn calling one of the web tools
(:mod:`agentgym.plugins.web.actions`). A solver plays a whole episode, a turn at a time,
until the page ends it::

    import asyncio

    from agentgym.rollout.evaluate import evaluate
    from agentgym.testing import ScriptedPolicy
    from agentgym.testing.miniwob_solvers import SOLVERS

    policy = ScriptedPolicy(SOLVERS["click-checkboxes"])
    report = asyncio.run(evaluate("miniwob-click-checkboxes", policy, n=10))
    print(report.mean_reward)  # 1.0

They are two things at once:

* **a demonstration** that the observation and the actions suffice: nothing here runs
  JavaScript in the page or reads its hidden state (the expected answer lives only in the
  page's script); each solver works from what an agent is shown, as a model would;
* **a test fixture**: ``tests/plugins/web/test_miniwob.py`` plays them on seeded tasks
  and expects the page's own reward, which checks the whole chain (page start, seeding,
  observation, bids, tools, done flag, grading) end to end.

As a registered policy, ``miniwob-solver`` (:func:`solver_policy`) plays each task with
its family's solver: demonstrations for supervised fine-tuning on the ``miniwob`` env over
several families (``sft: {demonstrations: {policy: miniwob-solver, episodes: 256}}``).

Families whose targets have no bid in the observation (``click-link``, ``click-tab-2*``:
their links are ``<span>`` elements without an ARIA role, shown as bid-less StaticText)
are not here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from agentgym.core.errors import InvalidArgumentError
from agentgym.core.policies import ScriptedPolicy
from agentgym.core.task import Task

Turn = dict[str, Any]
Solver = Callable[[list[dict], Task], Turn]

# ---- reading observations -------------------------------------------------------------------

#: One tree line: indent, optional ``[bid]``, role, quoted name, then ``, ``-separated props.
_LINE = re.compile(r"^(?P<indent> *)(?:\[(?P<bid>[^\]]+)\] )?(?P<role>\S+) "
                   r"'(?P<name>(?:[^'\\]|\\.)*)'(?:, (?P<props>.*))?$")
#: One property: ``key`` (a flag) or ``key=value`` (a quoted string or a bare word).
_PROP = re.compile(r"(?P<key>\w+)(?:=(?P<value>'(?:[^'\\]|\\.)*'|[^,]*))?(?:, |$)")
_ORDINAL = re.compile(r"\b(\d+)(?:st|nd|rd|th)\b")


class Node(NamedTuple):
    """One line of the accessibility tree."""

    depth: int
    bid: str | None
    role: str
    name: str
    props: dict[str, str | bool]


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def parse_line(line: str) -> Node | None:
    """A tree line as a :class:`Node` (depth is the indent in steps of two spaces), or None
    for a line that is not an element (a header, a cut marker)."""
    match = _LINE.match(line)
    if match is None:
        return None
    props: dict[str, str | bool] = {}
    for prop in _PROP.finditer(match["props"] or ""):
        value = prop["value"]
        if value is None:
            props[prop["key"]] = True
        else:
            props[prop["key"]] = _unquote(value[1:-1]) if value.startswith("'") else value
    return Node(len(match["indent"]) // 2, match["bid"], match["role"],
                _unquote(match["name"]), props)


def parse_observation(text: str) -> tuple[str, list[Node]]:
    """The goal and the tree nodes of an observation (a tool error's text before the
    observation is skipped)."""
    goal = ""
    nodes: list[Node] = []
    in_tree = False
    for line in text.splitlines():
        if line.startswith("Goal: "):
            goal, nodes, in_tree = line[len("Goal: "):], [], False
        elif line.startswith("RootWebArea "):
            in_tree = True
        if in_tree:
            node = parse_line(line)
            if node is not None:
                nodes.append(node)
    return goal, nodes


def latest_observation(messages: list[dict]) -> str:
    """The text of the newest observation: the last user or tool message that shows one."""
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") in ("user", "tool") and isinstance(content, str) \
                and "Goal: " in content:
            return content
    return ""


def actions_taken(messages: list[dict], *, succeeded: bool = False) -> list[tuple[str, dict]]:
    """The tool calls of the assistant's turns so far, in order: (name, arguments). With
    ``succeeded``, only those whose tool result is not an error (``Error: ...``)."""
    results: dict[str, str] = {}
    unnamed: list[str] = []
    for message in messages:
        if message.get("role") == "tool":
            content = str(message.get("content") or "")
            if message.get("tool_call_id"):
                results[message["tool_call_id"]] = content
            else:
                unnamed.append(content)
    taken = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            function = call.get("function", call)
            arguments = function.get("arguments") or {}
            if isinstance(arguments, str):
                arguments = json.loads(arguments or "{}")
            result = results.get(call.get("id") or "")
            if result is None and unnamed:
                result = unnamed.pop(0)
            if not (succeeded and (result or "").startswith("Error:")):
                taken.append((function.get("name", ""), arguments))
    return taken


def find(nodes: Iterable[Node], role: str | None = None, name: str | None = None,
         ) -> list[Node]:
    """The nodes with a bid, of ``role`` and exactly ``name`` where given."""
    return [n for n in nodes if n.bid is not None and (role is None or n.role == role)
            and (name is None or n.name == name)]


def quoted(goal: str) -> list[str]:
    """The double-quoted strings of a goal, in order."""
    return re.findall(r'"([^"]*)"', goal)


def children(nodes: list[Node], parent: Node) -> list[Node]:
    """The nodes under ``parent`` (its subtree, in order)."""
    start = nodes.index(parent) + 1
    out = []
    for node in nodes[start:]:
        if node.depth <= parent.depth:
            break
        out.append(node)
    return out


# ---- writing turns ---------------------------------------------------------------------------


def call(tool: str, **arguments: Any) -> Turn:
    """An assistant turn calling ``tool`` once."""
    return calls([(tool, arguments)])


def calls(tool_calls: Iterable[tuple[str, dict]]) -> Turn:
    """An assistant turn making several tool calls, in order."""
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": tool, "arguments": json.dumps(arguments)}}
        for tool, arguments in tool_calls]}


def give_up(reason: str) -> Turn:
    """A turn that ends the episode (unsolved): the solver found nothing to do."""
    return call("send_msg_to_user", text=f"cannot solve: {reason}")


#: What a solver's parsing raises on a page it does not expect (a missing element or goal
#: part): the solver then gives up instead of failing the rollout.
_UNEXPECTED = (LookupError, TypeError, ValueError, StopIteration)


def _stepwise(solve: Solver) -> Solver:
    """A solver that decides each turn from the latest observation, giving up (rather than
    raising) on a page it does not expect."""
    def guarded(messages: list[dict], task: Task) -> Turn:
        try:
            return solve(messages, task)
        except _UNEXPECTED as error:
            return give_up(f"the page is not as expected ({type(error).__name__}: {error})")

    guarded.__name__ = solve.__name__
    guarded.__doc__ = solve.__doc__
    return guarded


def _state(messages: list[dict]) -> tuple[str, list[Node]]:
    return parse_observation(latest_observation(messages))


def _planned(plan: Callable[[str, list[Node]], list[Turn]]) -> Solver:
    """A solver that plans all its turns from the first observation (a page that does not
    change until it is submitted) and plays them in order. An action the page refused (a
    tool error) is played again, except a click, which is done with the keyboard instead
    (Enter on the element): a click at an element's centre fails where another element
    covers it (click-button-sequence places its buttons at random, overlapping)."""
    def solve(messages: list[dict], task: Task) -> Turn:
        first = next((m["content"] for m in messages if m.get("role") == "user"), "")
        goal, nodes = parse_observation(first)
        try:
            turns = plan(goal, nodes)
        except _UNEXPECTED as error:
            return give_up(f"the page is not as expected ({type(error).__name__}: {error})")
        done = len(actions_taken(messages, succeeded=True))
        if done >= len(turns):
            return give_up("the plan ran out")
        tried = actions_taken(messages)
        if len(tried) > done and tried[-1][0] == "click" and _failed(messages):
            return call("press", key="Enter", bid=tried[-1][1]["bid"])
        return turns[done]

    solve.__name__ = plan.__name__
    solve.__doc__ = plan.__doc__
    return solve


def _failed(messages: list[dict]) -> bool:
    """Whether the latest tool result is an error."""
    last = next((m for m in reversed(messages) if m.get("role") == "tool"), None)
    return last is not None and str(last.get("content", "")).startswith("Error:")


def _fill_and_submit(fields: list[tuple[Node, str]], submit: Node) -> list[Turn]:
    return [*(call("fill", bid=f.bid, value=v) for f, v in fields), call("click", bid=submit.bid)]


def _button(nodes: list[Node], name: str) -> Node:
    found = find(nodes, "button", name)
    if not found:
        raise LookupError(f"no button {name!r}")
    return found[0]


# ---- the solvers -----------------------------------------------------------------------------


@_planned
def click_button(goal: str, nodes: list[Node]) -> list[Turn]:
    """Click on the "X" button."""
    return [call("click", bid=_button(nodes, quoted(goal)[0]).bid)]


@_planned
def click_button_sequence(goal: str, nodes: list[Node]) -> list[Turn]:
    """Click button ONE, then click button TWO."""
    return [call("click", bid=_button(nodes, name).bid)
            for name in re.findall(r"button (\w+)", goal)]


@_planned
def click_dialog_2(goal: str, nodes: list[Node]) -> list[Turn]:
    """Click the button in the dialog box labeled "Cancel" (or "OK", or "x": Close)."""
    label = quoted(goal)[0]
    dialog = find(nodes, "dialog")[0]
    name = "Close" if label == "x" else label
    return [call("click", bid=find(children(nodes, dialog), "button", name)[0].bid)]


@_planned
def focus_text_2(goal: str, nodes: list[Node]) -> list[Turn]:
    """Focus into the 3rd input textbox."""
    index = int(_ORDINAL.search(goal)[1]) - 1
    return [call("click", bid=find(nodes, "textbox")[index].bid)]


@_planned
def enter_text_2(goal: str, nodes: list[Node]) -> list[Turn]:
    """Type "X" in all upper (lower) case letters in the text input and press Submit."""
    text = quoted(goal)[0]
    text = text.upper() if "upper case" in goal else text.lower()
    return _fill_and_submit([(find(nodes, "textbox")[0], text)], _button(nodes, "Submit"))


@_planned
def login_user(goal: str, nodes: list[Node]) -> list[Turn]:
    """Enter the username "U" and the password "P" into the text fields and press login."""
    username, password = quoted(goal)[:2]
    user_box, password_box = find(nodes, "textbox")[:2]
    return _fill_and_submit([(user_box, username), (password_box, password)],
                            _button(nodes, "Login"))


@_planned
def click_checkboxes(goal: str, nodes: list[Node]) -> list[Turn]:
    """Select A, B, C and click Submit (or: Select nothing and click Submit)."""
    listed = re.match(r"Select (.*) and click Submit\.", goal)[1]
    wanted = set() if listed == "nothing" else set(listed.split(", "))
    turns = [call("click", bid=box.bid) for box in find(nodes, "checkbox")
             if (box.name in wanted) != (box.props.get("checked") == "true")]
    return [*turns, call("click", bid=_button(nodes, "Submit").bid)]


@_planned
def click_option(goal: str, nodes: list[Node]) -> list[Turn]:
    """Select X and click Submit (radio buttons)."""
    name = re.match(r"Select (.*) and click Submit\.", goal)[1]
    return [call("click", bid=find(nodes, "radio", name)[0].bid),
            call("click", bid=_button(nodes, "Submit").bid)]


@_planned
def choose_list(goal: str, nodes: list[Node]) -> list[Turn]:
    """Select X from the list and click Submit."""
    name = re.match(r"Select (.*) from the list", goal)[1]
    select = next(n for n in find(nodes, "combobox") + find(nodes, "listbox")
                  if find(children(nodes, n), "option", name))
    return [call("select_option", bid=select.bid, options=name),
            call("click", bid=_button(nodes, "Submit").bid)]


@_planned
def click_tab(goal: str, nodes: list[Node]) -> list[Turn]:
    """Click on Tab #N."""
    name = re.search(r"(Tab #\d+)", goal)[1]
    tab = find(nodes, "tab", name)[0]
    target = find(children(nodes, tab), "link", name) or [tab]
    return [call("click", bid=target[0].bid)]


@_planned
def simple_arithmetic(goal: str, nodes: list[Node]) -> list[Turn]:
    """Solve the math problem (``A op B =`` on the page) and type the answer."""
    for node in nodes:
        problem = re.fullmatch(r"\s*(-?\d+)\s*([-+x*])\s*(-?\d+)\s*=\s*", node.name)
        if node.role == "StaticText" and problem:
            a, op, b = int(problem[1]), problem[2], int(problem[3])
            answer = a + b if op == "+" else a - b if op == "-" else a * b
            return _fill_and_submit([(find(nodes, "textbox")[0], str(answer))],
                                    _button(nodes, "Submit"))
    return [give_up("no arithmetic problem on the page")]


@_planned
def read_table(goal: str, nodes: list[Node]) -> list[Turn]:
    """Enter the value of KEY (from the table) into the text field and press Submit."""
    key = re.match(r"Enter the value of (.*) into the text field", goal)[1]
    for row in find(nodes, "row"):
        cells = [n for n in children(nodes, row) if n.role in ("cell", "gridcell")]
        if len(cells) >= 2 and cells[0].name == key:
            return _fill_and_submit([(find(nodes, "textbox")[0], cells[1].name)],
                                    _button(nodes, "Submit"))
    return [give_up(f"no row {key!r} in the table")]


@_planned
def find_word(goal: str, nodes: list[Node]) -> list[Turn]:
    """Find the Nth word in the paragraph, type that into the textbox and press Submit."""
    index = int(_ORDINAL.search(goal)[1]) - 1
    box = find(nodes, "textbox")[0]
    texts = [n.name for n in nodes[:nodes.index(box)] if n.role == "StaticText"]
    # The paragraph is the text after the goal's own (split) sentence.
    end = next(i for i, t in enumerate(texts) if "press" in t and "Submit" in t)
    words = " ".join(texts[end + 1:]).split()
    word = re.sub(r"[^a-zA-Z]", "", words[index])
    return _fill_and_submit([(box, word)], _button(nodes, "Submit"))


@_stepwise
def use_spinner(messages: list[dict], task: Task) -> Turn:
    """Select N with the spinner and hit Submit: step the spinbutton with the arrow keys
    (the page refuses typing), all the presses in one turn, then submit once the
    observation shows the value N."""
    goal, nodes = _state(messages)
    target = int(re.search(r"Select (-?\d+)", goal)[1])
    spinner = find(nodes, "spinbutton")[0]
    value = int(spinner.props.get("value") or 0)
    if value == target:
        return call("click", bid=_button(nodes, "Submit").bid)
    key = "ArrowUp" if value < target else "ArrowDown"
    return calls([("press", {"key": key, "bid": spinner.bid})] * abs(target - value))


@_stepwise
def click_collapsible(messages: list[dict], task: Task) -> Turn:
    """Expand the section below and click submit: open the collapsed section, then submit."""
    _, nodes = _state(messages)
    for section in find(nodes, "tab"):
        if section.name.startswith("Section") and not section.props.get("expanded"):
            return call("click", bid=section.bid)
    return call("click", bid=_button(nodes, "Submit").bid)


@_stepwise
def navigate_tree(messages: list[dict], task: Task) -> Turn:
    """Find and click on the folder or file named "X": click it where the tree shows it,
    else open a closed folder. A folder is told from a file by its bids: a file's item is
    the ``li`` and its name's ``span`` (bids n, n+1), a folder's also holds its toggle and
    its list, so the next item's bid jumps further. The last item, whose gap cannot be
    seen, is tried last."""
    goal, nodes = _state(messages)
    name = quoted(goal)[0]
    items = find(nodes, "listitem")
    for item in items:
        label = next((n.name for n in children(nodes, item) if n.role == "StaticText"), "")
        if label == name:
            return call("click", bid=item.bid)
    clicked = {str(arguments.get("bid")) for tool, arguments in actions_taken(messages)
               if tool == "click"}
    bids = sorted(int(n.bid) for n in nodes if n.bid is not None and n.bid.isdigit())
    closed = [item for item in items if item.bid not in clicked and item.bid.isdigit()
              and not any(n.role == "listitem" for n in children(nodes, item))]
    for item in closed:
        later = [b for b in bids if b > int(item.bid)]
        if later and later[0] - int(item.bid) > 2:
            return call("click", bid=item.bid)
    unknown = [item for item in closed if not any(b > int(item.bid) for b in bids)]
    if unknown:
        return call("click", bid=unknown[0].bid)
    return give_up(f"{name!r} is not in the tree")


#: Family -> solver, for :class:`~agentgym.core.policies.ScriptedPolicy`.
SOLVERS: dict[str, Solver] = {
    "click-button": click_button,
    "click-button-sequence": click_button_sequence,
    "click-checkboxes": click_checkboxes,
    "click-collapsible": click_collapsible,
    "click-dialog-2": click_dialog_2,
    "click-option": click_option,
    "click-tab": click_tab,
    "choose-list": choose_list,
    "enter-text-2": enter_text_2,
    "find-word": find_word,
    "focus-text-2": focus_text_2,
    "login-user": login_user,
    "navigate-tree": navigate_tree,
    "read-table": read_table,
    "simple-arithmetic": simple_arithmetic,
    "use-spinner": use_spinner,
}


def solver_policy(argument: str | None = None) -> ScriptedPolicy:
    """``miniwob-solver``: each task played by its family's solver (:data:`SOLVERS`). A
    task of a family without one fails its episode with an error naming those that have
    one (a demonstration stage keeps only episodes that pass)."""
    if argument:
        raise InvalidArgumentError(
            f"the miniwob-solver policy takes no argument; got {argument!r}")

    def act(messages: list[dict], task: Task) -> Turn:
        family = task.metadata.get("family") or task.id.split("/")[0]
        solver = SOLVERS.get(family)
        if solver is None:
            raise InvalidArgumentError(
                f"miniwob-solver has no solver for the family {family!r} (task {task.id});"
                f" it solves {', '.join(sorted(SOLVERS))}")
        return solver(messages, task)

    return ScriptedPolicy(act)
