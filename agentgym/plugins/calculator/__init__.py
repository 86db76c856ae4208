"""The ``calculator`` plugin: agentgym's reference env, shipped as an ordinary plugin.

Arithmetic tasks from a seeded generator; the agent calls ``calculator(expression)`` and
then ``submit(answer)``. See :mod:`agentgym.plugins.calculator.env`.
"""

from __future__ import annotations

from agentgym.core.hookspecs import hookimpl
from agentgym.core.registry import EnvRegistration, Spec


@hookimpl
def agentgym_envs() -> list[EnvRegistration]:
    return [
        EnvRegistration(
            "calculator",
            "agentgym.plugins.calculator.env:CalculatorEnv",
            "Arithmetic with a calculator tool; the reference env (seeded, offline).",
        )
    ]


@hookimpl
def agentgym_tools() -> list:
    from agentgym.plugins.calculator.env import calculator

    return [calculator]


@hookimpl
def agentgym_rewards() -> list[Spec]:
    return [
        Spec(
            "numeric_answer",
            "agentgym.plugins.calculator.env:NumericAnswer",
            "1.0 when the submitted number equals task.metadata['answer'].",
        )
    ]


@hookimpl
def agentgym_task_sources() -> list[Spec]:
    return [
        Spec(
            "calculator-arithmetic",
            "agentgym.plugins.calculator.env:arithmetic_tasks",
            "Seeded arithmetic tasks (split train|test, num_tasks, seed) with solutions.",
        )
    ]
