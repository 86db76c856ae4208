"""Policies are declared, never probed: what a policy is and what it can take live in
:mod:`agentgym.core.policies` (protocols checked with ``isinstance``, capability class
attributes), so no code in the package finds them out with ``hasattr``, ``getattr`` or
``inspect`` signatures. The files that drive policies ban those calls outright; everywhere
else a call whose object is a policy (``policy``, ``self.policy``, ``policy.act``, a
probe's ``plan``) fails the test. What the loop does instead: refuse, up front, a policy
that declares nothing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import agentgym
from agentgym.core.policies import PolicyContractError
from agentgym.rollout.loop import EpisodeRunner
from agentgym.testing.protocol_env import EchoEnv

PACKAGE = Path(agentgym.__file__).parent

#: The calls that find out what an object is or takes at run time.
PROBES = {"hasattr", "getattr", "inspect.signature", "inspect.getfullargspec",
          "inspect.getattr_static", "inspect.getmembers"}
#: Files that drive policies: no probing call at all, but for the uses listed.
STRICT = ("rollout/loop.py", "rollout/validate.py", "rollout/pipeline.py")
#: (file, the call's source): why each is no policy probing.
ALLOWED = {
    ("rollout/pipeline.py", 'getattr(env, "unwrapped", env)'):
        "gym.make wraps envs; the protocol's object is the unwrapped env, not a policy",
}
#: Names that hold a policy, and the members of the policy contracts.
POLICY_NAME = re.compile(r"(^|_)(polic(y|ies)|plan|agent)$")
MEMBERS = {"act", "generate", "tokenizer", "whole_conversation", "takes_attempt", "close"}


def _dotted(node: ast.expr) -> list[str]:
    """``a.b.c`` as ``["a", "b", "c"]``; [] for anything else (a call, a subscript)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return [*base, node.attr] if base else []
    return []


def _is_policy(node: ast.expr) -> bool:
    """``policy``, ``self.policy``, ``plan``, or a contract member of one (``policy.act``)."""
    names = _dotted(node)
    if not names:
        return False
    if POLICY_NAME.search(names[-1]):
        return True
    return len(names) > 1 and names[-1] in MEMBERS and bool(POLICY_NAME.search(names[-2]))


def probing_calls(source: str, strict: bool) -> list[tuple[int, str]]:
    """The probing calls in ``source``: every one when ``strict``, else those whose object
    is a policy. Each as (line, the call's source)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = ".".join(_dotted(node.func))
        if name in PROBES and (strict or _is_policy(node.args[0])):
            found.append((node.lineno, ast.get_source_segment(source, node) or name))
    return found


def test_the_scan_finds_probing():
    """The check can fail: each way of probing a policy is caught."""
    source = "\n".join([
        'hasattr(policy, "generate")',
        'getattr(self.policy, "whole_conversation", False)',
        "inspect.signature(self.policy.act)",
        'callable(getattr(plan, "act", None))',
        'getattr(policy.model.generation_config, "eos_token_id", None)',  # a model's config
        'getattr(tokenizer, "chat_template", None)',  # not a policy
    ])
    assert [line for line, _ in probing_calls(source, strict=False)] == [1, 2, 3, 4]
    assert len(probing_calls(source, strict=True)) == 6


def test_no_policy_is_probed():
    found, allowed_seen = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        for line, call in probing_calls(path.read_text(encoding="utf-8"), relative in STRICT):
            if (relative, call) in ALLOWED:
                allowed_seen.add((relative, call))
            else:
                found.append(f"agentgym/{relative}:{line}: {call}")
    # An allowance whose call is gone would let the same call back in unseen: drop it.
    assert allowed_seen == set(ALLOWED), f"stale allowances: {set(ALLOWED) - allowed_seen}"
    assert not found, (
        "policies are declared in agentgym/core/policies.py (isinstance on TextPolicy /"
        " TokenPolicy, policy_level, the capability attributes), not probed:\n"
        + "\n".join(found))


def test_the_loop_refuses_an_undeclared_policy_before_the_episode_starts():
    class ActOnly:  # written against the old docs: act alone, nothing declared
        def act(self, messages, task):
            return "hello"

    with pytest.raises(PolicyContractError, match=r"ActOnly is not a policy.*Subclass"):
        EpisodeRunner(EchoEnv(), ActOnly(), "echo-0", 0)
