"""Discovery through entry points, duplicate ids, broken plugins, allow/deny lists."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import agentgym
from agentgym.core.errors import DuplicateIdError, InvalidArgumentError, UnknownIdError
from agentgym.core.hookspecs import hookimpl
from agentgym.core.plugins import PluginHost, PluginLoadWarning
from agentgym.core.registry import EnvRegistration, Spec

DUPLICATE_CALCULATOR = """
from agentgym import hookimpl
from agentgym.core.registry import EnvRegistration

@hookimpl
def agentgym_envs():
    return [EnvRegistration("calculator", "agentgym.plugins.calculator.env:CalculatorEnv")]
"""

BROKEN = """
raise ImportError("this plugin needs a library that is not installed")
"""

EXTRA_ENV = """
from agentgym import hookimpl
from agentgym.core.registry import EnvRegistration

@hookimpl
def agentgym_envs():
    return [EnvRegistration("calculator-small", "agentgym.plugins.calculator.env:CalculatorEnv",
                    "A calculator env with 10 tasks.", kwargs={"num_tasks": 10})]
"""


def test_builtin_plugins_load_through_entry_points():
    host = PluginHost()
    infos = {i.name: i for i in host.plugin_infos()}
    assert infos["core"].status == "loaded" and infos["core"].distribution == "agentgym"
    assert infos["calculator"].module == "agentgym.plugins.calculator"
    entry = host.entries("envs")["calculator"]
    assert entry.plugin == "calculator"
    assert set(host.entries("policies")) >= {"oracle", "noop", "scripted"}
    assert set(host.entries("parsers")) >= {"hermes", "xml", "openai"}


def test_a_third_party_plugin_is_discovered_and_made(fake_plugin):
    fake_plugin("extra", EXTRA_ENV)
    import agentgym

    env = agentgym.make("calculator-small")
    assert len(env.unwrapped.tasks) == 10
    env.close()


def test_a_duplicate_id_is_skipped_with_a_warning_naming_both(fake_plugin):
    fake_plugin("copycat", DUPLICATE_CALCULATOR + EXTRA_ENV.replace("agentgym_envs", "more"))
    host = PluginHost()
    with pytest.warns(PluginLoadWarning) as caught:
        envs = host.entries("envs")
    message = " ".join(str(w.message) for w in caught)
    assert "'copycat'" in message and "'calculator' (agentgym)" in message
    assert "AGENTGYM_DISABLE_PLUGINS=copycat" in message
    assert envs["calculator"].plugin == "calculator"  # the built-in loaded first, and stays
    info = {i.name: i for i in host.plugin_infos()}["copycat"]
    assert info.status == "loaded"
    assert [(s.kind, s.id) for s in info.skipped] == [("env", "calculator")]
    assert "'calculator' (agentgym) registered it first" in info.skipped[0].reason


def test_duplicates_between_in_memory_plugins_keep_the_first():
    def plugin(env_ids):
        class Plugin:
            @staticmethod
            @hookimpl
            def agentgym_envs():
                return [EnvRegistration(env_id, "x:Y") for env_id in env_ids]

        return Plugin

    host = PluginHost(plugins=[("first", plugin(["same"])), ("second", plugin(["same", "own"]))],
                      entry_points=False)
    with pytest.warns(PluginLoadWarning, match="'second'.*'same'.*plugin 'first'"):
        envs = host.entries("envs")
    assert {i: e.plugin for i, e in envs.items()} == {"same": "first", "own": "second"}


def _rewards_plugin(reward_ids):
    class Plugin:
        @staticmethod
        @hookimpl
        def agentgym_rewards():
            return [Spec(reward_id, "x:Y", "a reward") for reward_id in reward_ids]

    return Plugin


def test_an_id_under_another_plugins_prefix_is_skipped():
    # "aaa" loads first and would take the reward word-reverse's env grades with.
    host = PluginHost(plugins=[("aaa", _rewards_plugin(["word-reverse/exact", "aaa/own"])),
                               ("word-reverse", _rewards_plugin(["word-reverse/exact"]))],
                      entry_points=False)
    with pytest.warns(PluginLoadWarning, match="'aaa'.*'word-reverse/exact'.*prefix of"
                                               " plugin 'word-reverse'"):
        rewards = host.entries("rewards")
    assert {i: e.plugin for i, e in rewards.items()} == {
        "word-reverse/exact": "word-reverse", "aaa/own": "aaa"}
    info = {i.name: i for i in host.plugin_infos()}["aaa"]
    assert [(s.kind, s.id) for s in info.skipped] == [("reward", "word-reverse/exact")]
    # With no plugin of that name installed, nobody's id is taken and nothing is skipped.
    alone = PluginHost(plugins=[("aaa", _rewards_plugin(["word-reverse/exact"]))],
                       entry_points=False)
    assert alone.entries("rewards")["word-reverse/exact"].plugin == "aaa"


def test_registering_an_id_under_another_plugins_prefix_is_refused():
    host = PluginHost(plugins=[("word-reverse", _rewards_plugin(["word-reverse/exact"]))],
                      entry_points=False)
    with pytest.raises(InvalidArgumentError, match=r"prefix of plugin 'word-reverse'.*'thief/'"):
        host.register(_rewards_plugin(["word-reverse/exact"]), name="thief")
    assert "thief" not in {i.name for i in host.plugin_infos()}
    # The prefix's own plugin, registered after an id of its prefix was taken, gets it.
    squatted = PluginHost(plugins=[("aaa", _rewards_plugin(["late/exact"]))],
                          entry_points=False)
    squatted.entries("rewards")
    squatted.register(_rewards_plugin(["late/exact"]), name="late")
    with pytest.warns(PluginLoadWarning, match="'aaa'.*prefix of plugin 'late'"):
        assert squatted.entries("rewards")["late/exact"].plugin == "late"


def test_a_plugin_that_fails_to_import_is_skipped_with_a_warning(fake_plugin):
    fake_plugin("broken", BROKEN)
    with pytest.warns(PluginLoadWarning, match="'broken'.*needs a library"):
        host = PluginHost()
    assert "calculator" in host.entries("envs")
    info = {i.name: i for i in host.plugin_infos()}["broken"]
    assert info.status == "failed" and "ImportError" in info.error
    # An id nothing provides names the plugin that failed: the likeliest place it was.
    with pytest.raises(UnknownIdError, match=r"failed to load.*broken \(import failed"):
        host.get("envs", "brokens-env")


def test_list_plugins_shows_failures_from_the_command_line(fake_plugin):
    fake_plugin("broken", BROKEN)
    out = subprocess.run(
        [sys.executable, "-m", "agentgym", "list", "plugins", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = {r["id"]: r for r in json.loads(out.stdout)["plugins"]}
    assert rows["broken"]["status"] == "failed"
    assert rows["calculator"]["status"] == "loaded"
    assert "PluginLoadWarning" in out.stderr


def test_lookup_errors_name_the_kind_in_the_singular():
    with pytest.raises(KeyError, match=r"Unknown sandbox 'dokcer'\. Did you mean 'docker'"):
        PluginHost().get("sandboxes", "dokcer")
    with pytest.raises(KeyError, match="Unknown task source 'x'"):
        PluginHost().get("task_sources", "x")


def test_environment_variables_control_loading(fake_plugin):
    fake_plugin("extra", EXTRA_ENV)
    disabled = PluginHost(environ={"AGENTGYM_DISABLE_PLUGINS":
                                           "calculator,swe,terminal,web,memory,mcp,openenv"})
    assert set(disabled.entries("envs")) == {"calculator-small"}
    assert {i.name: i.status for i in disabled.plugin_infos()}["calculator"] == "disabled"

    only = PluginHost(environ={"AGENTGYM_PLUGINS": "extra"})
    assert set(only.entries("envs")) == {"calculator-small"}
    # core and policies always load: the parsers and policies live there.
    assert "hermes" in only.entries("parsers")
    assert {"oracle", "hf"} <= set(only.entries("policies"))


def test_a_hook_that_raises_is_reported(fake_plugin):
    fake_plugin(
        "raising",
        """
from agentgym import hookimpl

@hookimpl
def agentgym_envs():
    raise RuntimeError("bad config")
""",
    )
    host = PluginHost()
    with pytest.warns(PluginLoadWarning, match="'raising'.*bad config"):
        envs = host.entries("envs")
    assert "calculator" in envs


def test_a_duplicate_leaves_make_and_list_working(fake_plugin):
    fake_plugin("copycat", DUPLICATE_CALCULATOR)
    code = "import agentgym; agentgym.make('calculator').close()"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "PluginLoadWarning: agentgym plugin 'copycat'" in out.stderr
    listed = subprocess.run([sys.executable, "-m", "agentgym", "list", "plugins", "--json"],
                            capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    rows = {r["id"]: r for r in json.loads(listed.stdout)["plugins"]}
    assert rows["copycat"]["status"] == "loaded"
    assert rows["copycat"]["skipped"] == [
        {"kind": "env", "id": "calculator",
         "reason": "plugin 'calculator' (agentgym) registered it first and keeps it"}
    ]
    assert rows["calculator"]["skipped"] == []


def test_register_plugin_from_code():
    import gymnasium

    import agentgym
    from agentgym.core.plugins import plugin_host, set_plugin_host

    class InProcess:
        @staticmethod
        @hookimpl
        def agentgym_envs():
            return [EnvRegistration("calculator-inline",
                                    "agentgym.plugins.calculator.env:CalculatorEnv",
                                    kwargs={"num_tasks": 2})]

    try:
        agentgym.register_plugin(InProcess, "inline")
        env = gymnasium.make("calculator-inline")
        assert len(env.unwrapped.tasks) == 2
        env.close()
        assert plugin_host().entries("envs")["calculator-inline"].plugin == "inline"
        copy = type("Copy", (), {"agentgym_envs": InProcess.agentgym_envs})
        with pytest.raises(DuplicateIdError, match="'inline' and 'inline-again'"):
            agentgym.register_plugin(copy, "inline-again")
        assert "inline-again" not in {i.name for i in plugin_host().plugin_infos()}
        assert "calculator-inline" in plugin_host().entries("envs")  # the host still works
    finally:
        set_plugin_host(None)


def write_package(root, name, envs):
    """A plugin distribution ``agentgym-NAME`` whose plugin ``NAME`` registers ``envs``
    (``{id: factory}``), in source form for pip."""
    module = f"agentgym_{name}"
    package = root / f"agentgym-{name}"
    (package / module).mkdir(parents=True)
    specs = ", ".join(f"EnvRegistration({i!r}, {f!r}, 'from {name}')" for i, f in envs.items())
    (package / module / "__init__.py").write_text(
        "from agentgym import hookimpl\nfrom agentgym.core.registry import EnvRegistration\n\n"
        f"@hookimpl\ndef agentgym_envs():\n    return [{specs}]\n"
    )
    (package / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n'
        f'[project]\nname = "agentgym-{name}"\nversion = "0.1.0"\n\n'
        f'[project.entry-points.agentgym]\n{name} = "{module}"\n\n'
        f'[tool.hatch.build.targets.wheel]\npackages = ["{module}"]\n'
    )
    return package


def test_installed_plugins_that_clash_leave_everything_else_working(tmp_path):
    # Two real distributions, pip-installed into a folder of their own (not this venv;
    # no build isolation, no dependencies: nothing comes from an index). Both register
    # `calculator` beside the built-in one, and `twin` between them.
    calculator = "agentgym.plugins.calculator.env:CalculatorEnv"
    packages = [
        write_package(tmp_path, "copycat", {"calculator": "nowhere:Missing",
                                            "twin": calculator}),
        write_package(tmp_path, "mimic", {"calculator": "nowhere:Missing",
                                          "twin": "nowhere:Missing", "mimic-calc": calculator}),
    ]
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation",
                    "--no-deps", "--no-index", "--target", str(site), *map(str, packages)],
                   check=True, capture_output=True, text=True)
    source = Path(agentgym.__file__).parents[1]  # the agentgym under test, before the venv's
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(source), str(site)])}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "agentgym", *args], capture_output=True,
                              text=True, env=env, cwd=tmp_path)

    for env_id in ("calculator", "twin", "mimic-calc"):
        out = cli("eval", env_id, "--policy", "oracle", "-n", "2", "--json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["mean_reward"] == 1.0
    warnings = out.stderr
    assert "agentgym plugin 'mimic' (agentgym-mimic) registers the env id 'twin', which" \
           " plugin 'copycat' (agentgym-copycat) already registered" in warnings
    assert "'copycat' (agentgym-copycat) registers the env id 'calculator'" in warnings
    assert "AGENTGYM_DISABLE_PLUGINS=mimic" in warnings

    listed = cli("list", "plugins", "--json")
    rows = {r["id"]: r for r in json.loads(listed.stdout)["plugins"]}
    assert {(s["kind"], s["id"]) for s in rows["mimic"]["skipped"]} == {
        ("env", "calculator"), ("env", "twin")}
    assert rows["mimic"]["distribution"] == "agentgym-mimic"
    envs = {r["id"]: r["plugin"] for r in json.loads(cli("list", "envs", "--json").stdout)["envs"]}
    assert (envs["calculator"], envs["twin"], envs["mimic-calc"]) == (
        "calculator", "copycat", "mimic")


# A plugin that adds a hook of its own (agentgym_addhooks) and a kind collected from it.
GRADERS_SPECS = """
from agentgym.core.hookspecs import hookspec

@hookspec
def graders_graders():
    \"\"\"Graders: objects with an id and a description.\"\"\"
"""

GRADERS = """
from types import SimpleNamespace
from agentgym import hookimpl

@hookimpl
def agentgym_addhooks(pluginmanager):
    import graders_specs_plugin
    pluginmanager.add_hookspecs(graders_specs_plugin)
    pluginmanager.add_kind("graders", "graders_graders")

@hookimpl
def graders_graders():
    return [SimpleNamespace(id="exact", description="Exact match.")]
"""

# Implements the graders plugin's hook; "a-" sorts it before "graders", so it registers first.
MORE_GRADERS = """
from types import SimpleNamespace
from agentgym import hookimpl

@hookimpl
def graders_graders():
    return [SimpleNamespace(id="exact", description="A copy."),
            SimpleNamespace(id="fuzzy", description="Close enough.")]
"""


def test_a_plugin_adds_a_kind_that_other_plugins_contribute_to(fake_plugin):
    from click.testing import CliRunner

    from agentgym.cli import main

    fake_plugin("graders-specs", GRADERS_SPECS)  # a module only: no hooks of its own
    fake_plugin("a-more", MORE_GRADERS)
    fake_plugin("graders", GRADERS)
    host = PluginHost()
    assert "graders" in host.kinds
    with pytest.warns(PluginLoadWarning, match="grader id 'exact'"):
        graders = host.entries("graders")
    assert {i: e.plugin for i, e in graders.items()} == {"exact": "a-more", "fuzzy": "a-more"}
    assert host.get("graders", "fuzzy").description == "Close enough."
    listed = CliRunner().invoke(main, ["list", "graders", "--json"])
    assert listed.exit_code == 0, listed.output
    assert [r["id"] for r in json.loads(listed.stdout)["graders"]] == ["exact", "fuzzy"]


def test_a_plugin_whose_addhooks_fails_is_skipped(fake_plugin):
    fake_plugin("badkind", """
        from agentgym import hookimpl

        @hookimpl
        def agentgym_addhooks(pluginmanager):
            pluginmanager.add_kind("graders", "no_such_hook")
    """)
    with pytest.warns(PluginLoadWarning, match="'badkind'.*no_such_hook has no hookspec"):
        host = PluginHost()
    assert "graders" not in host.kinds and "calculator" in host.entries("envs")
    info = {i.name: i for i in host.plugin_infos()}["badkind"]
    assert info.status == "failed"


def test_a_kind_name_cannot_be_taken_twice():
    class Plugin:
        @staticmethod
        @hookimpl
        def agentgym_addhooks(pluginmanager):
            pluginmanager.add_kind("envs", "agentgym_envs")

    with pytest.warns(PluginLoadWarning, match="kind 'envs' is already collected"):
        host = PluginHost(plugins=[("again", Plugin)], entry_points=False)
    assert host.kinds["envs"].hook == "agentgym_envs"
    with pytest.raises(InvalidArgumentError, match="already collected"):
        host.register(Plugin, "from-code")
