"""The command line, as users and scripts call it."""

import json
import subprocess

import pytest
from click.testing import CliRunner

import agentgym
from agentgym.cli import main, parse_env_kwargs


@pytest.fixture
def run():
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(main, list(args), catch_exceptions=False)

    return invoke


def test_version_through_the_console_script(agentgym_cli):
    out = subprocess.run([agentgym_cli, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"agentgym, version {agentgym.__version__}"


def test_list_envs_json_shape(run):
    result = run("list", "envs", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    rows = {r["id"]: r for r in data["envs"]}
    assert rows["calculator"] == {
        "id": "calculator",
        "plugin": "calculator",
        "description": rows["calculator"]["description"],
    }
    assert rows["calculator"]["description"]


@pytest.mark.parametrize("kind", ["tools", "rewards", "plugins", "sandboxes", "policies"])
def test_list_other_kinds(run, kind):
    result = run("list", kind, "--json")
    assert result.exit_code == 0
    assert list(json.loads(result.stdout)) == [kind]


def test_list_everything_as_tables(run):
    result = run("list")
    assert result.exit_code == 0
    assert "calculator" in result.stdout and "oracle" in result.stdout


def test_eval_oracle_and_noop_json(agentgym_cli):
    # Through the real console script: --json output must be one JSON object on stdout.
    for policy, expected in (("oracle", 1.0), ("noop", 0.0)):
        out = subprocess.run(
            [agentgym_cli, "eval", "calculator", "--policy", policy, "-n", "20", "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        summary = json.loads(out.stdout)
        assert summary["mean_reward"] == expected and summary["pass_rate"] == expected
        assert summary["env"] == "calculator" and summary["policy"] == policy
        assert summary["n"] == 20


def test_eval_with_env_kwargs_and_output_file(run, tmp_path):
    out = tmp_path / "episodes.jsonl"
    result = run(
        "eval",
        "calculator",
        "--policy",
        "oracle",
        "-n",
        "3",
        "-e",
        "parser=xml",
        "-e",
        "max_turns=3",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    assert "mean_reward" in result.stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["episode"] for r in rows) == [0, 1, 2]
    assert all(r["reward"] == 1.0 for r in rows)
    assert rows[0]["messages"][2]["tool_calls"][0]["function"]["name"] == "calculator"


def test_eval_scripted_policy_from_a_file(run, tmp_path):
    turns = tmp_path / "turns.json"
    turns.write_text(
        json.dumps(['<tool_call>{"name": "submit", "arguments": {"answer": "x"}}</tool_call>'])
    )
    result = run("eval", "calculator", "--policy", f"scripted:{turns}", "-n", "2", "--json")
    assert json.loads(result.stdout)["finish_reasons"] == {"submitted": 2}


def test_unknown_env_from_the_cli(run):
    result = CliRunner().invoke(main, ["eval", "calculater", "--policy", "oracle"])
    assert result.exit_code == 1
    assert "Did you mean 'calculator'?" in result.output
    assert "agentgym list envs" in result.output


def test_unknown_policy_and_bad_kwargs(run):
    result = CliRunner().invoke(main, ["eval", "calculator", "--policy", "orcale"])
    assert result.exit_code == 1 and "Did you mean 'oracle'?" in result.output
    result = CliRunner().invoke(main, ["eval", "calculator", "--policy", "oracle", "-e", "x"])
    assert result.exit_code == 2 and "KEY=VALUE" in result.output


def test_missing_task_file_from_the_cli(tmp_path):
    result = CliRunner().invoke(
        main, ["eval", "calculator", "--policy", "oracle", "-e", f"tasks={tmp_path / 'nope.jsonl'}"]
    )
    assert result.exit_code == 1
    assert "does not exist" in result.output and "-e tasks=" in result.output


def test_env_kwarg_values_parse_as_json_or_text():
    assert parse_env_kwargs(("n=3", "name=abc", "flag=true", "path=a/b.jsonl")) == {
        "n": 3,
        "name": "abc",
        "flag": True,
        "path": "a/b.jsonl",
    }


def test_plugin_commands_are_added(fake_plugin):
    fake_plugin(
        "hello",
        """
import click
from agentgym import hookimpl

@click.command("hello")
def hello():
    '''Say hello.'''
    click.echo("hello from a plugin")

@hookimpl
def agentgym_cli_commands():
    return [hello]
""",
    )
    result = CliRunner().invoke(main, ["hello"])
    assert result.exit_code == 0 and result.stdout == "hello from a plugin\n"
    assert "hello" in CliRunner().invoke(main, ["--help"]).stdout
