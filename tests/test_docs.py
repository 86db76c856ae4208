"""docs/hooks.md documents every hookspec with its exact signature."""

import inspect
from pathlib import Path

import pluggy

from agentgym.core import hookspecs

DOC = (Path(__file__).parents[1] / "docs" / "hooks.md").read_text()


def hookspec_signatures() -> dict[str, str]:
    marker = pluggy.HookspecMarker(hookspecs.PROJECT).project_name + "_spec"
    specs = {}
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        if hasattr(fn, marker):
            params = ", ".join(inspect.signature(fn).parameters)
            specs[name] = f"def {name}({params}) -> {fn.__annotations__['return']}"
    return specs


def test_there_is_a_hookspec_per_contribution_kind():
    assert set(hookspec_signatures()) == {
        "agentgym_envs",
        "agentgym_tools",
        "agentgym_rewards",
        "agentgym_task_sources",
        "agentgym_sandboxes",
        "agentgym_policies",
        "agentgym_tool_call_parsers",
        "agentgym_statement_writers",
        "agentgym_exploit_probes",
        "agentgym_cli_commands",
    }


def test_every_hookspec_and_its_signature_is_in_the_docs():
    missing = [sig for sig in hookspec_signatures().values() if sig not in DOC]
    assert not missing, f"docs/hooks.md lacks: {missing}"


def test_every_hookspec_has_a_docstring():
    for name in hookspec_signatures():
        assert inspect.getdoc(getattr(hookspecs, name)), name
