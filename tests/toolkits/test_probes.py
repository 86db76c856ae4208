"""The generic shell probes: registered by the sandboxes plugin, applying to any env with a
shell tool (and to no other), each one shell turn then submit where the env offers it.
Whether a grader pays them is tested where a grader is (tests/plugins/terminal)."""

from __future__ import annotations

import json

import pytest

from agentgym.core.probes import ATTACKS, ProbeTarget
from agentgym.core.task import Task
from agentgym.rollout.validate import probes_for
from agentgym.toolkits.probes import PROBES, shell_probes

TASK = Task(id="t", prompt="do it")


def test_the_sandboxes_plugin_registers_every_shell_probe() -> None:
    registered = {probe.id: probe for probe in probes_for(True)}
    for probe in shell_probes():
        assert probe.id.startswith("shell.") and probe.id in registered
        assert registered[probe.id].attack == probe.attack
        assert probe.attack in ATTACKS
    assert {p.attack for p in shell_probes()} >= {"grader-files", "startup-hooks", "config",
                                                  "processes", "fake-output"}


@pytest.mark.parametrize("tools", [("bash", "submit"), ("terminal", "submit"),
                                   ("terminal", "bash", "submit")])
def test_a_probe_is_one_shell_turn_then_submit(tools) -> None:
    for probe in shell_probes():
        turns = probe.plan(ProbeTarget("any-env", TASK, tools))
        shell, submit = turns
        call = shell["tool_calls"][0]["function"]
        assert call["name"] == ("bash" if "bash" in tools else "terminal")
        assert json.loads(call["arguments"])  # the script, or the line typing it
        assert submit["tool_calls"][0]["function"]["name"] == "submit"


def test_without_submit_the_probe_only_runs_its_script() -> None:
    for probe in shell_probes():
        turns = probe.plan(ProbeTarget("any-env", TASK, ("bash",)))
        assert [t["tool_calls"][0]["function"]["name"] for t in turns] == ["bash"]


def test_a_probe_does_not_apply_without_a_shell() -> None:
    for probe in shell_probes():
        assert probe.plan(ProbeTarget("web", TASK, ("click", "submit"))) is None


def test_each_probe_plants_the_universal_forger() -> None:
    for name, _, _, script in PROBES:
        turns = shell_probes()[[p[0] for p in PROBES].index(name)].plan(
            ProbeTarget("any-env", TASK, ("bash",)))
        command = json.loads(turns[0]["tool_calls"][0]["function"]["arguments"])["command"]
        assert "forge.py" in command and "/logs/verifier/reward.txt" in command, name
        assert script in command
