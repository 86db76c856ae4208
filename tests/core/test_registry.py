"""agentgym.make and the Gymnasium bridge."""

import os
import subprocess
import sys

import gymnasium
import pytest

import agentgym
from agentgym.core import MissingResourceError, UnknownIdError
from agentgym.core.errors import FactoryImportError
from agentgym.core.registry import Spec


def test_unknown_env_suggests_close_ids_and_the_list_command():
    with pytest.raises(UnknownIdError) as error:
        agentgym.make("calculater")
    message = str(error.value)
    assert "Did you mean 'calculator'?" in message
    assert "agentgym list envs" in message


def test_make_accepts_gymnasium_module_prefix_and_kwargs():
    env = agentgym.make("agentgym:calculator", num_tasks=3, max_turns=2)
    assert len(env.unwrapped.tasks) == 3 and env.unwrapped.max_turns == 2
    env.close()


def test_gymnasium_make_with_module_prefix_works_without_importing_agentgym():
    code = (
        "import sys, gymnasium\n"
        "assert 'agentgym' not in sys.modules\n"
        "env = gymnasium.make('agentgym:calculator')\n"
        "messages, info = env.reset(seed=0)\n"
        "print(info['task_id'])\n"
        "env.close()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("calculator-train-")


def test_every_plugin_env_is_registered_with_gymnasium():
    for env_id in agentgym.core.registry.plugin_host().entries("envs"):
        assert env_id in gymnasium.registry


def test_missing_task_file_says_what_and_how(tmp_path):
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(MissingResourceError) as error:
        agentgym.make("calculator", tasks=str(missing))
    assert str(missing) in error.value.what
    assert "tasks=" in error.value.fix


def test_spec_factories_load_lazily_and_explain_bad_paths(tmp_path, monkeypatch):
    assert Spec("x", "json:dumps").build([1]) == "[1]"
    assert Spec("x", "os:path.join").load() is os.path.join  # dots reach inside
    with pytest.raises(FactoryImportError, match=r"'x'.*there is no module 'no_such_module_xyz'"):
        Spec("x", "no_such_module_xyz:f").load()
    # A misspelled attribute names the module, the part and the closest names.
    with pytest.raises(FactoryImportError,
                       match=r"'json' has no attribute 'dump_s'; did you mean 'dumps'"):
        Spec("x", "json:dump_s").load()
    with pytest.raises(FactoryImportError, match=r"'os:path' has no attribute 'jion'"):
        Spec("x", "os:path.jion").load()
    # A dependency the plugin's module imports is its own error, left as Python raised it.
    (tmp_path / "plugin_with_a_missing_dependency.py").write_text("import no_such_dep_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="no_such_dep_xyz") as raised:
        Spec("x", "plugin_with_a_missing_dependency:f").load()
    assert raised.type is ModuleNotFoundError
