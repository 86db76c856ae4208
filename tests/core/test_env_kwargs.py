"""An env's keyword arguments are read from its factory, following **kwargs, and user
values are checked and converted before the env is built."""

from pathlib import Path
from typing import Literal

import pytest

from agentgym.core.env import AgentEnv
from agentgym.core.env_kwargs import (
    EnvKwargsError,
    EnvParameter,
    check_env_kwargs,
    env_signature,
)
from agentgym.core.hookspecs import hookimpl
from agentgym.core.plugins import PluginHost, set_plugin_host
from agentgym.core.registry import EnvRegistration
from agentgym.core.sandbox import SandboxLimits
from agentgym.core.task import GeneratedTasks
from agentgym.plugins.calculator.env import CalculatorEnv, NumericAnswer, make_task


class Forwarding(AgentEnv):
    """Takes ``level`` and passes everything else on to ``AgentEnv.__init__``."""

    reward = NumericAnswer()

    def __init__(self, level: int = 1, *, scale: float | None = None, **kwargs):
        self.level, self.scale = level, scale
        super().__init__(GeneratedTasks(3, make_task), **kwargs)


class Keeping(AgentEnv):
    """Keeps its ``**options`` instead of passing them on: any name goes."""

    reward = NumericAnswer()

    def __init__(self, mode: Literal["fast", "slow"] = "fast", **options):
        self.options = options
        super().__init__(GeneratedTasks(3, make_task))


def make_calculator(**kwargs) -> CalculatorEnv:
    return CalculatorEnv(**kwargs)


class WithLimits(Forwarding):
    def __init__(self, limits: SandboxLimits | None = None, root: Path = Path("."),
                 flags: list[int] | None = None, **kwargs):
        self.limits, self.root, self.flags = limits, root, flags
        super().__init__(**kwargs)


class Plugin:
    @staticmethod
    @hookimpl
    def agentgym_envs():
        return [
            EnvRegistration("forwarding", Forwarding),
            EnvRegistration("keeping", Keeping, kwargs={"preset": 1}),
            EnvRegistration("via-function", make_calculator),
            EnvRegistration("limits", WithLimits),
        ]


@pytest.fixture
def host():
    old = set_plugin_host(PluginHost(plugins=[("test-envs", Plugin)]))
    yield
    set_plugin_host(old)


def test_the_calculator_signature_has_types_and_defaults():
    signature = env_signature("calculator")
    assert not signature.open
    assert list(signature.parameters) == ["split", "num_tasks", "seed", "operands", "tasks",
                                          "max_turns", "parser", "turn_timeout_s",
                                          "render_mode"]
    assert signature.parameters["num_tasks"] == EnvParameter("num_tasks", int, 1000)
    assert signature.parameters["split"].annotation == Literal["train", "test"]


def test_kwargs_are_followed_into_the_base_init(host):
    signature = env_signature("forwarding")
    assert not signature.open
    # AgentEnv's `tasks` is filled positionally by Forwarding itself, so it is not offered.
    assert list(signature.parameters) == ["level", "scale", "reward", "parser", "max_turns",
                                          "turn_timeout_s", "render_mode"]
    assert signature.parameters["max_turns"] == EnvParameter("max_turns", int, 10)
    converted = check_env_kwargs("forwarding", {"level": "2", "max_turns": "3",
                                                "scale": "null"}, text=True)
    assert converted == {"level": 2, "max_turns": 3, "scale": None}
    env = Forwarding(**converted)
    assert (env.level, env.max_turns) == (2, 3)
    env.close()


def test_a_function_factory_is_followed_into_the_class_it_calls(host):
    signature = env_signature("via-function")
    assert "split" in signature.parameters and not signature.open
    with pytest.raises(EnvKwargsError, match="did you mean 'num_tasks'"):
        check_env_kwargs("via-function", {"num_task": 3})


def test_kwargs_kept_by_the_env_accept_any_name(host):
    signature = env_signature("keeping")
    assert signature.open
    assert "preset" in signature.parameters  # the spec's preset kwargs count too
    converted = check_env_kwargs("keeping", {"anything": "[1, 2]", "mode": "slow"}, text=True)
    assert converted == {"anything": [1, 2], "mode": "slow"}
    with pytest.raises(EnvKwargsError, match="'fsat' is not allowed; did you mean 'fast'"):
        check_env_kwargs("keeping", {"mode": "fsat"}, text=True)


def test_text_is_converted_by_annotation(host):
    converted = check_env_kwargs(
        "limits",
        {"limits": '{"memory_mb": 512}', "root": "~/work", "flags": "[1, 2]", "scale": "0.5",
         "render_mode": "ansi"},
        text=True,
    )
    assert converted["limits"] == SandboxLimits(memory_mb=512)
    assert converted["root"] == Path("~/work").expanduser()
    assert converted["flags"] == [1, 2] and converted["scale"] == 0.5
    assert converted["render_mode"] == "ansi"


def test_every_problem_is_named_with_its_fix(host):
    with pytest.raises(EnvKwargsError) as caught:
        check_env_kwargs("limits", {"levl": "2", "level": "two", "flags": '["a"]',
                                    "limits": '{"memory": 1}'}, text=True)
    issues = dict(caught.value.issues)
    assert "takes no argument 'levl'; did you mean 'level'?" in issues["levl"]
    assert "(it takes: limits, root, flags, level, scale," in issues["levl"]
    assert issues["level"] == "expected an integer, got 'two'"
    assert issues["flags"].startswith("item 0: expected an integer")
    assert "no field 'memory'; did you mean 'memory_mb'?" in issues["limits"]
    assert str(caught.value).splitlines()[0].startswith("levl: the env 'limits'")


def test_typed_values_as_from_yaml():
    converted = check_env_kwargs("calculator", {"max_turns": 3, "split": "test"})
    assert converted == {"max_turns": 3, "split": "test"}
    with pytest.raises(EnvKwargsError, match="expected an integer, got '3' \\(str\\)"):
        check_env_kwargs("calculator", {"max_turns": "3"})


def test_an_unknown_env_id_suggests_the_closest():
    with pytest.raises(KeyError, match="Did you mean 'calculator'"):
        env_signature("calculater")
