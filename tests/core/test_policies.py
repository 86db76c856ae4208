"""Policies by name: ``ID`` or ``ID:ARG`` looked up among the plugins' policies and built."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentgym.core.errors import UnknownIdError
from agentgym.core.plugins import PluginHost, set_plugin_host
from agentgym.core.policies import (
    NoopPolicy,
    OraclePolicy,
    ScriptedPolicy,
    TextPolicy,
    WrongSolutionPolicy,
    build_policy,
    lookup_policy,
)

#: A plugin whose ``echo`` policy keeps the argument it was built with.
ECHO = """
from agentgym import hookimpl
from agentgym.core.policies import NoopPolicy
from agentgym.core.registry import Spec

class Echo(NoopPolicy):
    def __init__(self, argument):
        self.argument = argument

@hookimpl
def agentgym_policies():
    return [Spec("echo", Echo, "Keeps its argument.")]
"""


def test_an_id_alone_builds_its_policy():
    assert isinstance(build_policy("oracle"), OraclePolicy)
    assert isinstance(build_policy("noop"), NoopPolicy)


def test_wrong_replays_a_known_wrong_solution_and_names_a_missing_one():
    from agentgym.core.errors import AgentGymError
    from agentgym.core.task import WRONG_SOLUTIONS, Task

    task = Task("t", "2 + 2?", {WRONG_SOLUTIONS: [["five"], ["three", "again"]]})
    first, second = build_policy("wrong"), build_policy("wrong:2")
    assert isinstance(first, WrongSolutionPolicy) and first.act([], task) == "five"
    assistant = {"role": "assistant", "content": "three"}
    assert [second.act(m, task) for m in ([], [assistant])] == ["three", "again"]
    with pytest.raises(AgentGymError, match=r"has 2 known-wrong solution.*#3"):
        build_policy("wrong:3").act([], task)
    with pytest.raises(AgentGymError, match="has 0 known-wrong"):
        build_policy("wrong").act([], Task("bare", "?"))
    for bad in ("0", "x"):
        with pytest.raises(AgentGymError, match=f"wrong:{bad}: K must be a whole number >= 1"):
            build_policy(f"wrong:{bad}")


def test_the_argument_is_everything_after_the_first_colon(fake_plugin):
    fake_plugin("echo", ECHO)
    assert build_policy("echo:http://127.0.0.1:8000/v1").argument == "http://127.0.0.1:8000/v1"
    assert build_policy("echo:a:b:").argument == "a:b:"
    assert build_policy("echo").argument is None
    assert build_policy("echo:").argument is None  # an empty argument is no argument


#: A plugin whose policy class takes no argument: its factory cannot be called as one.
NO_ARGUMENT = """
from agentgym import hookimpl
from agentgym.core.policies import NoopPolicy
from agentgym.core.registry import Spec

class Solver(NoopPolicy):
    def __init__(self):
        pass

@hookimpl
def agentgym_policies():
    return [Spec("solver", Solver, "Takes no argument.")]
"""


def test_a_factory_that_takes_no_argument_is_told_the_contract(fake_plugin):
    from agentgym.core.policies import PolicyContractError

    fake_plugin("solver", NO_ARGUMENT)
    with pytest.raises(PolicyContractError,
                       match=r"policy 'solver': its factory 'Solver' cannot be called with one"
                             r" argument .*__init__\(self, arg=None\)"):
        build_policy("solver")


def test_a_file_argument_reaches_the_factory(tmp_path: Path):
    turns = tmp_path / "turns.json"
    turns.write_text(json.dumps(["first", "second"]))
    policy = build_policy(f"scripted:{turns}")
    assert isinstance(policy, ScriptedPolicy) and isinstance(policy, TextPolicy)
    assert policy.turns == ["first", "second"]


def test_the_token_backends_are_registered_by_their_own_plugin():
    host = PluginHost()
    entries = host.entries("policies")
    assert {entries[i].plugin for i in ("hf", "openai", "vllm")} == {"policies"}
    assert {entries[i].plugin for i in ("oracle", "noop", "scripted")} == {"core"}
    old = set_plugin_host(host)
    try:
        spec, argument = lookup_policy("openai:http://127.0.0.1:8000/v1")  # nothing is built
    finally:
        set_plugin_host(old)
    assert spec.id == "openai" and argument == "http://127.0.0.1:8000/v1"


def test_an_unknown_id_names_the_closest_and_the_list_command():
    with pytest.raises(UnknownIdError) as caught:
        build_policy("oracel:x:y")
    message = str(caught.value)
    assert "Unknown policy 'oracel'" in message and "Did you mean 'oracle'?" in message
    assert "agentgym list policies" in message


def test_a_restricted_plugin_list_keeps_the_token_backends(fake_plugin):
    fake_plugin("echo", ECHO)
    host = PluginHost(environ={"AGENTGYM_PLUGINS": "echo",
                               "AGENTGYM_DISABLE_PLUGINS": "policies,core"})
    assert {"echo", "oracle", "hf", "openai", "vllm"} <= set(host.entries("policies"))
    statuses = {i.name: i.status for i in host.plugin_infos()}
    assert statuses["policies"] == statuses["core"] == "loaded"
    assert statuses["calculator"] == "disabled"


def test_an_unknown_id_names_the_plugins_left_out():
    host = PluginHost(environ={"AGENTGYM_DISABLE_PLUGINS": "calculator"})
    with pytest.raises(UnknownIdError, match=r"Not loaded \(AGENTGYM_PLUGINS / AGENTGYM_"
                                             r"DISABLE_PLUGINS\): calculator; one of them"):
        host.get("envs", "calculator")


# ---- the declared contract -------------------------------------------------------------------


class Plain(TextPolicy):
    """A third-party text policy written from the docs: act, and the defaults."""

    def act(self, messages, task):
        return "hello"


class ActOnly:
    """A policy that declares nothing: before contracts were declared, the loop guessed."""

    def act(self, messages, task):
        return "hello"


class Tokens:
    def __init__(self):
        self.tokenizer = object()

    async def generate(self, prompt_ids, sampling):
        raise NotImplementedError


def test_every_built_in_policy_declares_its_level():
    from agentgym.core.policies import policy_level

    for name in ("oracle", "noop", "wrong"):
        assert policy_level(build_policy(name)) == "text", name
    assert build_policy("oracle").whole_conversation and not build_policy("noop").whole_conversation
    assert not any(build_policy(n).takes_attempt for n in ("oracle", "noop", "wrong"))


def test_a_subclass_gets_the_defaults_and_a_token_policy_needs_no_base():
    from agentgym.core.policies import TokenPolicy, policy_level

    assert policy_level(Plain()) == "text"
    assert (Plain.whole_conversation, Plain.takes_attempt) == (False, False)
    assert policy_level(Tokens()) == "token" and isinstance(Tokens(), TokenPolicy)


def test_a_policy_that_declares_nothing_is_told_what_it_lacks_and_the_fix():
    from agentgym.core.policies import PolicyContractError, policy_level

    with pytest.raises(PolicyContractError) as caught:
        policy_level(ActOnly())
    message = str(caught.value)
    assert "ActOnly is not a policy: as a text policy it lacks whole_conversation," \
           " takes_attempt; as a token policy, tokenizer, generate" in message
    assert "Subclass agentgym.core.policies.TextPolicy" in message
