"""``check_env``: Gymnasium's checker plus the multi-turn contract of ``AgentEnv``.

Run it in a plugin's own tests (``agentgym plugin new`` writes such a test)::

    from agentgym.testing import check_env
    check_env(agentgym.make("my-env"))

It raises :class:`EnvCheckError` naming the first broken rule. Gymnasium's warnings count
as failures too, except the notice that render modes cannot be re-made for an env built
without ``make`` (it has no spec).
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import gymnasium
from gymnasium.utils.env_checker import check_env as gymnasium_check_env
from gymnasium.utils.env_checker import data_equivalence

from agentgym.core.env import AgentEnv
from agentgym.core.errors import AgentGymError
from agentgym.core.policies import NoopPolicy, OraclePolicy
from agentgym.core.spaces import is_message
from agentgym.rollout.loop import play_episode
from agentgym.testing.fuzz import HOSTILE_ACTIONS


class EnvCheckError(AgentGymError, AssertionError):
    """An env breaks the Gymnasium or the agentgym multi-turn contract."""


def _require(condition: Any, message: str) -> None:
    if not condition:
        raise EnvCheckError(message)


def _check_gymnasium(env: gymnasium.Env) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            gymnasium_check_env(env)
        except AssertionError as e:
            raise EnvCheckError(f"Gymnasium's check_env failed: {e}") from e
    problems = [
        str(w.message)
        for w in caught
        if "not having a spec" not in str(w.message)
        and issubclass(w.category, UserWarning)
        and "gymnasium" in str(w.filename).replace("\\", "/")
    ]
    _require(not problems, "Gymnasium's check_env warned: " + " | ".join(problems))


def _check_multi_turn(env: AgentEnv) -> None:
    messages, info = env.reset(seed=7)
    _require(
        messages and all(is_message(m) for m in messages),
        f"reset() must return a non-empty list of chat messages, got {messages!r}",
    )
    _require(isinstance(info.get("task_id"), str), "reset() info must carry 'task_id'")
    ids = env.task_ids()  # what eval, validate and task_id options go by
    _require(isinstance(ids, list) and all(isinstance(i, str) for i in ids),
             f"task_ids() must return a list of str, got {type(ids).__name__}")
    _require(info["task_id"] in ids,
             f"reset() played task {info['task_id']!r}, which task_ids() does not list")
    task = info.get("task")
    _require(getattr(task, "id", None) == info["task_id"],
             f"reset() info must carry 'task', the Task whose id is task_id; got {task!r}")
    tools = info.get("tools")
    _require(isinstance(tools, list) and tools, "reset() info must carry the tools' schemas")
    for schema in tools:
        function = schema.get("function", {}) if isinstance(schema, dict) else {}
        _require(
            schema.get("type") == "function"
            and function.get("name")
            and function.get("parameters", {}).get("type") == "object",
            f"a tool schema is not an OpenAI function schema: {schema!r}",
        )
    names = [s["function"]["name"] for s in tools]

    bad_turns = {
        "malformed tool call": {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "x",
                    "type": "function",
                    "function": {"name": names[0], "arguments": "{not json"},
                }
            ],
        },
        "unknown tool": {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "x",
                    "type": "function",
                    "function": {"name": "no_such_tool_xyz", "arguments": "{}"},
                }
            ],
        },
        "bad arguments": {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "x",
                    "type": "function",
                    "function": {"name": names[0], "arguments": '{"no_such_argument_xyz": 1}'},
                }
            ],
        },
    }
    for what, action in bad_turns.items():
        env.reset(seed=7)
        try:
            new, _, terminated, _, step_info = env.step(action)
        except Exception as e:
            raise EnvCheckError(
                f"step() raised on a {what} instead of telling the agent: {type(e).__name__}: {e}"
            ) from e
        _require(
            step_info.get("tool_errors", 0) >= 1 and step_info.get("errors"),
            f"step() on a {what} must count it in info['tool_errors']; info={step_info}",
        )
        _require(
            new and any(m["content"] for m in new),
            f"step() on a {what} must answer with an error message, got {new!r}",
        )
        _require(not terminated, f"a {what} must not end the episode")

    # Hostile output (JSON nested 10,000 deep, huge numbers, megabytes, non-text values):
    # played in one episode, which only grows by error messages.
    over = True
    for what, build in HOSTILE_ACTIONS.items():
        if over:
            env.reset(seed=7)
        try:
            _, _, terminated, truncated, _ = env.step(build())
            over = terminated or truncated
        except Exception as e:
            raise EnvCheckError(
                f"step() raised on hostile model output ({what}) instead of telling the agent:"
                f" {type(e).__name__}: {str(e)[:300]}"
            ) from e

    env.reset(seed=7)
    new, *_, step_info = env.step("A turn with no tool call in it.")
    _require(
        new and any(m["content"] for m in new),
        "step() on a turn without a tool call must tell the agent how to call one",
    )
    recorded = step_info.get("assistant_message")
    _require(is_message(recorded) and recorded["role"] == "assistant",
             f"step() info must carry 'assistant_message', the turn as recorded; got"
             f" {recorded!r}")

    first = env.reset(seed=11)
    again = env.reset(seed=11)
    _require(
        data_equivalence(first, again, exact=True),
        "reset(seed=11) twice gave different messages or info: seeding is not reproducible",
    )

    env.close()
    env.close()


def _check_reference_policies(make_env: Any, env: AgentEnv) -> None:
    task_id = env.tasks[0].id
    if not env.tasks[0].solution:
        return
    for policy, expected in ((OraclePolicy(), 1.0), (NoopPolicy(), 0.0)):
        fresh = make_env()
        try:
            result = fresh.unwrapped.run_coroutine(play_episode(fresh.unwrapped, policy, task_id))
        finally:
            fresh.close()
        name = type(policy).__name__
        _require(result.error is None, f"{name} crashed on {task_id!r}: {result.error}")
        _require(
            result.reward == expected,
            f"{name} scored {result.reward} on {task_id!r}, expected {expected}"
            f" (finish_reason={result.finish_reason}, metrics={result.metrics})",
        )


def check_env(env: gymnasium.Env, *, reference_policies: bool = True) -> None:
    """Check ``env`` against Gymnasium's API and agentgym's multi-turn contract.

    Checks: Gymnasium's ``check_env`` (determinism included; the env is not declared
    nondeterministic), reset returns chat messages with ``task_id`` (one of
    ``task_ids()``) and tool schemas, a malformed call, an unknown tool and bad arguments
    each yield an error message counted in ``info`` without raising, so does every hostile
    action of :data:`~agentgym.testing.fuzz.HOSTILE_ACTIONS`, seeded resets are
    reproducible, ``close`` is idempotent, and, when the first task has a reference
    solution, ``oracle`` scores 1.0 and ``noop`` 0.0. ``env`` is closed at the end.
    """
    raw = env.unwrapped
    _require(isinstance(raw, AgentEnv), f"expected an AgentEnv, got {type(raw).__name__}")
    spec = copy.deepcopy(raw.spec)

    def make_env() -> gymnasium.Env:
        if spec is not None:
            return spec.make()
        raise EnvCheckError("reference policy checks need an env made with agentgym.make")

    try:
        _check_gymnasium(raw)
        _check_multi_turn(raw)
        if reference_policies and spec is not None:
            _check_reference_policies(make_env, raw)
    finally:
        env.close()
