"""docs/hooks.md documents every hookspec with its exact signature: core's and those the
loaded plugins add (``agentgym_addhooks``); docs/plugins.md's example envs run as written,
and docs/terminal.md's test script stops leftovers as the shipped tasks' do."""

import inspect
import re
from pathlib import Path

import pytest

from agentgym.core import hookspecs
from agentgym.core.plugins import PluginHost

DOC = (Path(__file__).parents[1] / "docs" / "hooks.md").read_text()
PLUGINS_DOC = (Path(__file__).parents[1] / "docs" / "plugins.md").read_text()


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


def test_the_env_without_a_sandbox_in_the_plugins_guide_runs_as_written():
    from agentgym.core.probes import call_turn

    names = _guide_example("NotesEnv")
    env = names["NotesEnv"]()
    train, test = env.task_ids(), names["NotesEnv"]("test").task_ids()
    assert train and test and not set(train) & set(test)
    assert len(train) + len(test) == len(names["TASKS"])
    _, info = env.reset(seed=0)
    messages = env.step(call_turn("write", text="1+2"))[0]
    assert messages[-1]["content"] == "noted (1 so far)"
    answer = str(info["task"].metadata["answer"])
    assert env.step(call_turn("submit", answer=answer))[1:3] == (1.0, True)
    env.reset(seed=1)
    assert env.step(call_turn("submit", answer="-1"))[1] == 0.0
    env.close()


def _guide_example(class_name: str) -> dict:
    """The names the plugins guide's code block defining ``class_name`` makes."""
    blocks = re.findall(r"```python\n(.*?)```", PLUGINS_DOC, re.S)
    source = next(b for b in blocks if f"class {class_name}" in b)
    names: dict = {}
    exec(compile(source, "docs/plugins.md", "exec"), names)
    return names


def test_the_guides_envs_pass_check_env():
    from agentgym.testing import check_env

    check_env(_guide_example("NotesEnv")["NotesEnv"](render_mode="ansi"),
              reference_policies=False)


def test_the_guides_sandboxed_env_is_graded_where_the_agents_shell_cannot_answer():
    """docs/plugins.md's ScriptEnv: hello.py that prints the word is paid; a python3 of
    the agent's (a shell function, a script first on PATH) answering instead is not."""
    from agentgym.core.probes import call_turn
    from tests.conftest import backend_missing

    missing = backend_missing("local")
    if missing:
        pytest.skip(f"local sandbox unavailable: {missing}")
    env = _guide_example("ScriptEnv")["ScriptEnv"]()
    try:
        env.reset(seed=0, options={"task_id": "say/hola"})
        env.step(call_turn("bash", command="echo 'print(\"hola\")' > hello.py"))
        assert env.step(call_turn("submit"))[1] == 1.0
        env.reset(seed=0, options={"task_id": "say/hola"})
        env.step(call_turn("bash", command=(
            "python3() { echo hola; }; mkdir -p ~/bin; printf '#!/bin/sh\\necho hola\\n'"
            " > ~/bin/python3; chmod +x ~/bin/python3; export PATH=~/bin:$PATH;"
            " echo 'print(1)' > hello.py")))
        assert env.step(call_turn("submit"))[1] == 0.0
    finally:
        env.close()


def test_the_terminal_guides_test_script_stops_leftovers_as_the_shipped_tasks_do():
    from agentgym.plugins.terminal.sources import PROCESSES_BEFORE, STOP_LEFTOVERS

    guide = (Path(__file__).parents[1] / "docs" / "terminal.md").read_text()
    assert PROCESSES_BEFORE.format() in guide and STOP_LEFTOVERS.format() in guide


def test_the_terminal_guides_task_toml_is_read_as_it_says(tmp_path):
    import re

    from agentgym.plugins.terminal.formats import load_task

    guide = (Path(__file__).parents[1] / "docs" / "terminal.md").read_text()
    [toml] = re.findall(r"```toml\n(.*?)```", guide, re.S)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (tmp_path / "instruction.md").write_text("Do it.\n")
    (tmp_path / "task.toml").write_text(toml)
    task = load_task(tmp_path)
    assert task.metadata == {"difficulty": "medium", "category": "text-processing",
                             "tags": ["csv", "python"]}
    assert (task.agent_timeout_s, task.test_timeout_s, task.reward) == (300.0, 60.0, "binary")
    assert task.snapshot == "ls -la /app" and task.verifier_env == (("LC_ALL", "C"),)
    assert (task.image, task.cpus, task.memory_mb) == ("python:3.12-slim", 1.0, 1024)
