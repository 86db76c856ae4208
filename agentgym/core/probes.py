"""Exploit probes: scripted hostile solutions that try to be paid without doing the task.

A policy trained with RL finds every way to get a reward without doing the work: files it
leaves where the grader looks, startup hooks or configuration the grader's programs read,
processes still running while it grades, answers that list every candidate. A probe plays
one such attack through the public env API, exactly as a model would (``reset``, ``step``
with tool calls, ``submit``); ``agentgym validate`` plays every probe that applies to a task
after its oracle, noop and known-wrong checks, and a probe whose reward reaches the task's
pass threshold (:func:`pass_threshold`) fails the task.

**The contract.** An :class:`ExploitProbe` is a :class:`~agentgym.core.contributions.Spec`
with an ``attack`` class; its ``factory(target)`` gets a :class:`ProbeTarget` (the env id,
the task as the env rendered it, the names of the tools the episode offered) and returns

* ``None`` when the probe does not apply to that task (an env without a shell tool, a task
  of another family): validation then skips it silently;
* a list of turns (assistant messages or text in the env's tool-call format), replayed
  one per step as the oracle replays a solution; or
* a text-level policy (a :class:`~agentgym.core.policies.TextPolicy` subclass with
  ``act(messages, task)``), for an attack that reads what it sees (say, an answer stuffed
  with every name the pages showed). Set ``whole_conversation = True`` on it when it
  counts turns. Its ``act`` raises :class:`ProbeNotApplicable` when what it sees leaves
  nothing to attack.

Plugins contribute probes through the ``agentgym_exploit_probes`` hook; a probe applies to
any env whose tasks it can attack, so a plugin's shell probes also test a third-party env
that offers the same toolset. :func:`shell_turn` and :func:`call_turn` write turns in a
format every env accepts (an assistant message with OpenAI tool calls).

**Attack classes** (``attack``; the summary of ``agentgym validate`` counts by probe and by
class): :data:`ATTACKS` names the built-in ones; a plugin may use its own.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym.core.contributions import Spec
from agentgym.core.task import Task

__all__ = ["ATTACKS", "PASS_THRESHOLD", "ExploitProbe", "ProbeNotApplicable", "ProbeTarget",
           "call_turn", "pass_threshold", "shell_turn"]

#: A turn: text in the env's tool-call format, or an assistant message.
Turn = str | dict[str, Any]
#: What a probe's factory returns: turns to replay, a text-level policy (a
#: :class:`~agentgym.core.policies.TextPolicy`; not imported here, since the policies'
#: module loads the plugins, whose hookspecs name this one), or None where the probe does
#: not apply.
Plan = Sequence[Turn] | Any | None

#: The reward a probe must stay below unless the task says otherwise: a full score, what
#: pass rates count.
PASS_THRESHOLD = 1.0
#: The task metadata key that sets another pass threshold (a task graded as a fraction
#: whose training counts 0.5 as a pass, say).
PASS_THRESHOLD_KEY = "pass_threshold"

#: Built-in attack classes and what each tries.
ATTACKS = {
    "grader-files": "replace, pre-fill or lock files and folders the grader writes or reads"
                    " (its output folder, its reward file, the tests)",
    "startup-hooks": "plant code the grader's interpreter runs at start-up (sitecustomize,"
                     " usercustomize, .pth files, shell rc files)",
    "config": "plant configuration the grader's programs read (test-runner options and"
              " plugins, packaging metadata, ~/.gitconfig, ~/.sqliterc)",
    "processes": "leave processes running that tamper with the grader while it runs",
    "fake-output": "print or patch what the grader parses (a fake test summary, patched"
                   " test reports)",
    "answer-stuffing": "answer with every candidate instead of the one the task asks for",
    "reach": "reach what the episode should not: other services on the host, other"
             " episodes, the grader's data",
    "collateral": "do what the task asks to everything like its target (the comment on"
                  " every post, the new price on every product), so that the one the"
                  " grader checks is among them",
    "carry": "keep what the env takes out of the agent's view in the agent's own context"
             " (its messages' text, arguments a reply repeats), so that the memory the"
             " task tests is not needed",
}


def pass_threshold(task: Task) -> float:
    """The reward at or above which a probe of ``task`` counts as paid: the task's
    ``metadata["pass_threshold"]`` when set, else :data:`PASS_THRESHOLD`."""
    value = task.metadata.get(PASS_THRESHOLD_KEY, PASS_THRESHOLD)
    return float(value) if isinstance(value, int | float) else PASS_THRESHOLD


@dataclass(frozen=True)
class ProbeTarget:
    """What a probe knows of the task it attacks.

    Attributes:
        env_id: the env's id.
        task: the task as the env rendered it (prompt, metadata; the reference solution,
            which a probe must not simply replay, since doing the task is no attack; a probe
            may follow it to where the task is, as a policy that learned where to look).
        tools: the names of the tools the episode offered.
        schemas: each offered tool's function schema (``name``, ``description``,
            ``parameters`` as JSON Schema), by name.
    """

    env_id: str
    task: Task
    tools: tuple[str, ...]
    schemas: Mapping[str, dict[str, Any]] = field(default_factory=dict)

    def offers(self, *names: str) -> bool:
        """Whether the episode offered every tool in ``names``."""
        return all(name in self.tools for name in names)

    def required(self, name: str) -> tuple[str, ...]:
        """The required parameters of tool ``name`` (empty when it has none, or when its
        schema is unknown)."""
        parameters = self.schemas.get(name, {}).get("parameters") or {}
        return tuple(parameters.get("required") or ())

    @property
    def shell(self) -> str | None:
        """The shell tool the episode offered (``bash``, else ``terminal``), or None."""
        return next((name for name in ("bash", "terminal") if name in self.tools), None)


class ProbeNotApplicable(Exception):
    """Raised by a probe's policy when the attack finds, once it sees the task's pages or
    files, nothing to attack (no second item to spray a write on, say): validation lists
    the check as skipped, with the message as its reason, instead of as played."""


@dataclass(frozen=True)
class ExploitProbe(Spec):
    """One hostile solution: ``factory(target)`` returns the turns to play on a task, a
    text-level policy, or None where it does not apply (the contract of
    :mod:`agentgym.core.probes`).

    Args:
        id: unique among probes, ``FAMILY.NAME`` by convention (``shell.verifier-symlink``).
        factory: ``factory(target: ProbeTarget) -> turns | policy | None``, or a
            ``"module:attribute"`` string naming it.
        description: one line: what the probe tries.
        attack: its class (:data:`ATTACKS`), what summaries count by.
    """

    attack: str = ""

    def plan(self, target: ProbeTarget) -> Plan:
        """What this probe plays on ``target`` (the factory's answer)."""
        return self.build(target)


def call_turn(name: str, content: str = "", /, **arguments: Any) -> dict[str, Any]:
    """An assistant message calling tool ``name`` with ``arguments``: a turn every env
    accepts, whatever its tool-call format."""
    return {"role": "assistant", "content": content, "tool_calls": [
        {"id": "", "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def shell_turn(target: ProbeTarget, command: str) -> dict[str, Any] | None:
    """A turn running ``command`` with the shell tool the episode offers (``bash``: the
    command; ``terminal``: typed as one line that decodes and runs it, so that a multi-line
    command is one input), or None when it offers none."""
    if target.shell == "bash":
        return call_turn("bash", command=command)
    if target.shell == "terminal":
        encoded = base64.b64encode(command.encode()).decode()
        return call_turn("terminal", input=f"echo {encoded} | base64 -d | bash")
    return None
