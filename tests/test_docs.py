"""docs/hooks.md documents every hookspec with its exact signature: core's and those the
loaded plugins add (``agentgym_addhooks``)."""

import inspect
from pathlib import Path

from agentgym.core import hookspecs
from agentgym.core.plugins import PluginHost

DOC = (Path(__file__).parents[1] / "docs" / "hooks.md").read_text()


def hookspec_signatures(core_only: bool = True) -> dict[str, str]:
    """Each hookspec's signature, by name: core's, or every spec a loaded plugin added."""
    specs = {}
    for name, caller in vars(PluginHost().pm.hook).items():
        spec = getattr(caller, "spec", None)
        if spec is None or (core_only and spec.namespace is not hookspecs):
            continue
        params = ", ".join(inspect.signature(spec.function).parameters)
        specs[name] = f"def {name}({params}) -> {spec.function.__annotations__['return']}"
    return specs


def test_plugins_add_their_own_hookspecs():
    assert "agentgym_statement_writers" in set(hookspec_signatures(core_only=False))


def test_there_is_a_hookspec_per_contribution_kind():
    assert set(hookspec_signatures()) == {
        "agentgym_addhooks",
        "agentgym_envs",
        "agentgym_tools",
        "agentgym_rewards",
        "agentgym_task_sources",
        "agentgym_sandboxes",
        "agentgym_policies",
        "agentgym_tool_call_parsers",
        "agentgym_exploit_probes",
        "agentgym_harnesses",
        "agentgym_cli_commands",
    }


def test_every_hookspec_and_its_signature_is_in_the_docs():
    missing = [sig for sig in hookspec_signatures(core_only=False).values() if sig not in DOC]
    assert not missing, f"docs/hooks.md lacks: {missing}"


def test_every_hookspec_has_a_docstring():
    for name, caller in vars(PluginHost().pm.hook).items():
        spec = getattr(caller, "spec", None)
        if spec is not None:
            assert inspect.getdoc(spec.function), name
