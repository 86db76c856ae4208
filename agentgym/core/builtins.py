"""The ``core`` plugin: built-in tool-call parsers, text-level policies and the generic
answer-stuffing probe.

Registered through the entry point ``core`` like any third-party plugin. The token-level
backends (``hf``, ``openai``, ``vllm``) live with the rollout package and register through
their own entry point, ``policies``.
"""

from __future__ import annotations

from agentgym.core.errors import InvalidArgumentError
from agentgym.core.hookspecs import hookimpl
from agentgym.core.parsers import (
    HermesParser,
    Llama3JSONParser,
    MistralParser,
    OpenAIParser,
    XMLParser,
)
from agentgym.core.policies import NoopPolicy, OraclePolicy, ScriptedPolicy, WrongSolutionPolicy
from agentgym.core.probes import ExploitProbe
from agentgym.core.registry import Spec
from agentgym.core.stuffing import STUFF_ANSWER


def _no_argument(cls: type, name: str):
    def factory(argument: str | None = None):
        if argument:
            raise InvalidArgumentError(
                f"the {name!r} policy takes no argument; got {name}:{argument}")
        return cls()

    return factory


@hookimpl
def agentgym_tool_call_parsers() -> list[Spec]:
    return [
        Spec(p.name, p, (p.__doc__ or "").strip().splitlines()[0])
        for p in (HermesParser, XMLParser, Llama3JSONParser, MistralParser, OpenAIParser)
    ]


@hookimpl
def agentgym_policies() -> list[Spec]:
    return [
        Spec(
            "oracle",
            _no_argument(OraclePolicy, "oracle"),
            "Replays each task's reference solution (scores 1.0 on a sound env).",
        ),
        Spec(
            "noop",
            _no_argument(NoopPolicy, "noop"),
            "Calls no tool and submits nothing (scores 0.0 on a sound grader).",
        ),
        Spec(
            "wrong",
            WrongSolutionPolicy.from_argument,
            "wrong[:K] replays each task's (K-th) known-wrong solution (scores < 1.0).",
        ),
        Spec(
            "scripted", ScriptedPolicy.from_file, "scripted:FILE.json replays a JSON list of turns."
        ),
    ]


@hookimpl
def agentgym_exploit_probes() -> list[ExploitProbe]:
    return [STUFF_ANSWER]
