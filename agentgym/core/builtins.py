"""The ``core`` plugin: built-in tool-call parsers and text-level policies.

Registered through the entry point ``core`` like any third-party plugin.
"""

from __future__ import annotations

from agentgym.core.hookspecs import hookimpl
from agentgym.core.parsers import HermesParser, OpenAIParser, XMLParser
from agentgym.core.policies import NoopPolicy, OraclePolicy, ScriptedPolicy
from agentgym.core.registry import Spec


def _no_argument(cls: type, name: str):
    def factory(argument: str | None = None):
        if argument:
            raise ValueError(f"the {name!r} policy takes no argument; got {name}:{argument}")
        return cls()

    return factory


@hookimpl
def agentgym_tool_call_parsers() -> list[Spec]:
    return [
        Spec(p.name, p, (p.__doc__ or "").strip().splitlines()[0])
        for p in (HermesParser, XMLParser, OpenAIParser)
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
            "scripted", ScriptedPolicy.from_file, "scripted:FILE.json replays a JSON list of turns."
        ),
        Spec("hf", "agentgym.rollout.policies.hf:hf_policy",
             "hf:PATH samples from a transformers model folder (CPU or GPU), batching"
             " concurrent episodes."),
        Spec("openai", "agentgym.rollout.policies.openai:openai_policy",
             "openai:URL samples token ids from an OpenAI-compatible server (vLLM's too)."),
        Spec("vllm", "agentgym.rollout.policies.vllm:vllm_policy",
             "vllm:MODEL runs an in-process vLLM engine (needs a GPU and agentgym[vllm])."),
    ]
