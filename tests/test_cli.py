"""The command line, as users and scripts call it."""

import json
import re
import subprocess
import sys
from pathlib import Path

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


def list_at(columns, *args):
    return CliRunner().invoke(main, ["list", *args], env={"COLUMNS": str(columns)})


def shown_whole(name, text):
    """Whether ``name`` is on a line of ``text`` in one piece (not folded, not cut)."""
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text) is not None


def test_list_fits_80_columns_and_shows_every_id_whole():
    result = list_at(80)
    assert result.exit_code == 0, result.output
    assert max(map(len, result.stdout.splitlines())) <= 80
    data = json.loads(list_at(80, "--json").stdout)
    assert len(data["envs"]) > 140  # --json keeps every id, MiniWoB's too
    families = ("miniwob-",)
    for kind, rows in data.items():
        for row in rows:
            family = row["id"].startswith(families) and kind == "envs"
            assert shown_whole("miniwob-*" if family else row["id"], result.stdout), (
                kind, row["id"])
    for row in data["plugins"]:
        assert shown_whole(row["module"], result.stdout), row["module"]
    envs = list_at(80, "envs").stdout
    assert len(envs.splitlines()) < 120  # 444 lines when MiniWoB had a row per family
    narrow = list_at(60, "envs").stdout  # prose cut to a line per env, names whole
    assert max(map(len, narrow.splitlines())) <= 60 and "…" in narrow
    ids = [r["id"] for r in data["envs"] if not r["id"].startswith(families)]
    assert [line.split()[0] for line in narrow.splitlines()[3:] if line.strip()] == sorted(
        [*ids, "miniwob-*"])
    [row] = [line for line in list_at(300, "envs").stdout.splitlines() if "miniwob-*" in line]
    assert "MiniWoB++ task family: 130 envs (miniwob-ascending-numbers," in row
    assert "`agentgym list envs miniwob-` lists them" in row


def test_a_plugin_table_too_wide_for_its_names_wraps_them_and_keeps_every_column():
    from rich.console import Console

    from agentgym.cli import _list_table

    rows = [{"id": "calculator", "module": "agentgym.plugins.calculator",
             "distribution": "agentgym", "version": "0.1.0", "status": "loaded"},
            {"id": "wordle", "module": "agentgym_wordle_lite.plugin",
             "distribution": "agentgym-wordle-lite-extended", "version": "0.1.0.dev3",
             "status": "failed"}]
    console = Console(width=80, record=True)
    console.print(_list_table("plugins", rows, 80))
    text = console.export_text()
    assert max(map(len, text.splitlines())) <= 80
    assert shown_whole("loaded", text) and shown_whole("failed", text)  # was "lo", "fa"
    assert shown_whole("calculator", text) and shown_whole("wordle", text)


def test_list_narrows_by_text_and_plugin():
    swe = json.loads(list_at(80, "envs", "SWE", "--json").stdout)["envs"]
    assert [r["id"] for r in swe] == ["swe-gym", "swe-lite", "swe-synth", "swe-verified"]
    miniwob = list_at(80, "envs", "miniwob-click-b").stdout
    assert shown_whole("miniwob-click-button", miniwob) and "miniwob-*" not in miniwob
    web = list_at(80, "envs", "--plugin", "web").stdout
    assert shown_whole("miniwob-click-button", web) and shown_whole("webarena", web)
    assert not shown_whole("swe-lite", web)
    assert "none match" in list_at(80, "envs", "no-such-thing").stdout
    result = list_at(80, "envs", "--plugin", "wbe")
    assert result.exit_code == 2 and "Did you mean 'web'" in result.output
    plugins = list_at(80, "plugins").stdout
    assert "error" not in plugins.splitlines()[1]  # a column empty in every row is left out


def test_list_tools_shows_the_tools_of_every_env_by_toolset():
    rows = json.loads(list_at(80, "tools", "--json").stdout)["tools"]
    offered = {(r["toolset"], r["id"]): r["envs"] for r in rows}
    assert {"swe-verified", "terminal"} <= set(offered["BashTools", "bash"])
    assert "swe-verified" in offered["RepoEditorTools", "str_replace_editor"]
    assert "terminal" in offered["TerminalTools", "terminal"]
    assert "swe-verified" in offered["SWEEnv", "submit"]
    text = " ".join(list_at(80, "tools").stdout.split())
    assert "BashTools: offered by swe-gym, swe-lite, swe-synth, swe-verified, terminal," in text
    assert "WebTools: offered by miniwob, miniwob-* (130), web-forum" in text


def test_list_tools_names_every_plugin_of_the_reusable_tools():
    from rich.console import Console

    from agentgym.cli import _print_tools
    from agentgym.listing import REUSABLE

    rows = [{"id": i, "plugin": p, "description": "d", "toolset": REUSABLE, "envs": []}
            for i, p in (("calculator", "calculator"), ("is_word", "wordle"))]
    console = Console(width=80, record=True)
    _print_tools(console, rows)
    assert "from calculator, wordle, for any env to use" in console.export_text()


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


def test_a_failing_json_command_still_answers_on_stdout(run):
    # A script that parses stdout gets the error as JSON, with the exit code; the message
    # still goes to stderr for a person.
    for args, code, words in (
            (["eval", "no-such-env", "--policy", "oracle", "--json"], 1, "Unknown env"),
            (["eval", "calculator", "--json"], 2, "Missing option '--policy'"),
            (["validate", "calculator", "-e", "max_turns=abc", "--json"], 2, "max_turns")):
        result = run(*args)
        assert result.exit_code == code, result.output
        answer = json.loads(result.stdout)
        assert answer["exit_code"] == code and words in answer["error"], answer
        assert words in result.stderr
    result = run("eval", "no-such-env", "--policy", "oracle")  # without --json: stderr only
    assert result.exit_code == 1 and result.stdout == ""


def test_eval_exits_1_when_every_episode_failed(agentgym_cli):
    # calculator's tasks carry 3 wrong solutions: there is no #9 to play, so each episode
    # ends in an error, and the figures (0.0) would otherwise read as a real result
    done = subprocess.run([agentgym_cli, "eval", "calculator", "--policy", "wrong:9", "-n", "3",
                           "--json"], capture_output=True, text=True)
    assert done.returncode == 1
    assert json.loads(done.stdout)["errors"] == 3  # the summary is still printed
    assert "every one of the 3 episodes failed" in done.stderr
    assert "cannot play #9" in done.stderr


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


def test_a_policy_argument_keeps_its_colons(fake_plugin):
    fake_plugin("echo", """
from agentgym import hookimpl
from agentgym.core.errors import AgentGymError
from agentgym.core.registry import Spec

def echo(argument):
    raise AgentGymError(f"echo was built with {argument!r}")

@hookimpl
def agentgym_policies():
    return [Spec("echo", echo)]
""")
    result = CliRunner().invoke(
        main, ["eval", "calculator", "--policy", "echo:http://127.0.0.1:8000/v1", "-n", "1"])
    assert result.exit_code == 1
    assert "echo was built with 'http://127.0.0.1:8000/v1'" in result.output


def test_missing_task_file_from_the_cli(tmp_path):
    result = CliRunner().invoke(
        main, ["eval", "calculator", "--policy", "oracle", "-e", f"tasks={tmp_path / 'nope.jsonl'}"]
    )
    assert result.exit_code == 1
    assert "does not exist" in result.output and "-e tasks=" in result.output


def agentgym_module(*args):
    """``python -m agentgym ARGS`` from the source under test, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "agentgym", *args], capture_output=True,
                          text=True, cwd=Path(agentgym.__file__).parents[1])


@pytest.mark.parametrize(("pair", "key", "expected"), [
    ("splt=test", "splt", ["takes no argument 'splt'; did you mean 'split'?",
                           "(it takes: split, num_tasks, seed, operands, tasks, max_turns,"]),
    ("max_turns=abc", "max_turns", ["max_turns=abc: expected an integer, got 'abc'"]),
])
def test_a_bad_env_kwarg_is_one_line_before_the_env_is_built(pair, key, expected):
    out = agentgym_module("eval", "calculator", "--policy", "oracle", "-e", pair)
    assert out.returncode == 2
    assert "Traceback" not in out.stdout + out.stderr
    [line] = out.stderr.splitlines()  # the error alone: no usage text around it
    assert line.startswith("Error: Invalid value for '-e': ") and key in line, line
    assert all(text in line for text in expected), line


@pytest.mark.parametrize(("args", "code", "message"), [
    (["-e", "split=valid"], 2, "split=valid: 'valid' is not allowed (allowed: train, test)"),
    (["-e", "max_turns=0"], 1, "max_turns must be >= 1, got 0"),
    (["-e", "tasks={unreadable}"], 1, "cannot read tasks from"),
    (["-e", "tasks={missing}"], 1, "does not exist"),
    (["--out", "{unreadable}"], 2, "already holds trajectories; choose another --out"),
    (["--policy", "scripted:{missing}"], 1, "cannot read scripted turns"),
])
def test_user_mistakes_are_one_line_errors(tmp_path, args, code, message):
    unreadable, missing = tmp_path / "notes.jsonl", tmp_path / "missing.jsonl"
    unreadable.write_text("not json\n")
    args = [a.format(unreadable=unreadable, missing=missing) for a in args]
    result = CliRunner().invoke(main, ["eval", "calculator", "--policy", "oracle", "-n", "1",
                                       *args])
    assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit)  # not an exception out of the command
    [line] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert message in line


def test_env_kwarg_values_convert_by_the_env_signature():
    kwargs = parse_env_kwargs(("max_turns=3", "split=test", "tasks=null", "parser=xml"),
                              "calculator")
    assert kwargs == {"max_turns": 3, "split": "test", "tasks": None, "parser": "xml"}


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


def test_a_json_command_that_crashes_still_answers_on_stdout(fake_plugin):
    fake_plugin(
        "crasher",
        """
import click
from agentgym import hookimpl

@click.command("crash")
@click.option("--json", "as_json", is_flag=True)
def crash(as_json):
    raise RuntimeError("a bug in the command")

@hookimpl
def agentgym_cli_commands():
    return [crash]
""",
    )
    result = CliRunner().invoke(main, ["crash", "--json"])
    assert isinstance(result.exception, RuntimeError)  # the traceback is not swallowed
    assert json.loads(result.stdout) == {"error": "RuntimeError: a bug in the command",
                                         "exit_code": 1}
    assert CliRunner().invoke(main, ["crash"]).stdout == ""


# ---- validate -----------------------------------------------------------------------------


def calculator_task_file(path, edit):
    """The calculator's first four tasks as a task file, each row passed to ``edit``;
    without their own known-wrong solutions (``edit`` sets the ones a test wants)."""
    from agentgym.plugins.calculator.env import make_task

    rows = [make_task(i).to_dict() for i in range(4)]
    for index, row in enumerate(rows):
        del row["metadata"]["wrong_solutions"]
        edit(index, row)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def broken_rows(index, row):
    if index == 1:
        row["metadata"]["answer"] = "-1"  # the oracle's true result is now graded 0
    if index == 2:  # the reference solution filed as a known-wrong one: scores 1.0
        row["metadata"]["wrong_solutions"] = [row["solution"]]


def validate(*args):
    return CliRunner().invoke(main, ["validate", *args], env={"COLUMNS": "200"})


def test_validate_passes_valid_tasks(run):
    result = run("validate", "calculator", "-n", "5")
    assert result.exit_code == 0, result.output
    assert "calculator: 5 tasks checked (30 checks), 0 failed" in result.stdout
    assert "answer.stuff" in result.stdout  # the probes' table
    assert result.stdout.rstrip().endswith("1 exploit probe played 5 times, paid 0")


def test_validate_names_the_failing_tasks_and_checks(tmp_path):
    tasks = calculator_task_file(tmp_path / "t.jsonl", broken_rows)
    result = validate("calculator", "-e", f"tasks={tasks}", "--all", "--no-probes")
    assert result.exit_code == 1, result.output
    rows = [line for line in result.stdout.splitlines() if "calculator-train-" in line]
    assert len(rows) == 2
    assert "calculator-train-1" in rows[0] and "oracle" in rows[0]
    assert "calculator-train-2" in rows[1] and "wrong solution #1" in rows[1]
    assert "4 tasks checked (9 checks), 2 failed (2 checks)" in result.stdout


def test_validate_checks_the_tasks_named(tmp_path):
    tasks = calculator_task_file(tmp_path / "t.jsonl", broken_rows)
    result = validate("calculator", "-e", f"tasks={tasks}", "--task", "calculator-train-2",
                      "--task", "calculator-train-0", "--no-probes")
    assert result.exit_code == 1, result.output
    assert "2 tasks checked (5 checks), 1 failed (1 check)" in result.stdout
    result = validate("calculator", "-e", f"tasks={tasks}", "--task", "calculator-train-9")
    assert result.exit_code != 0 and "Unknown task 'calculator-train-9'" in result.output


def test_validate_json_is_one_object_and_names_the_failures(tmp_path, agentgym_cli):
    tasks = calculator_task_file(tmp_path / "t.jsonl", broken_rows)
    out = subprocess.run([agentgym_cli, "validate", "calculator", "-e", f"tasks={tasks}",
                          "--all", "--no-probes", "--json"], capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)  # the whole of stdout: one object and nothing else
    assert report["env"] == "calculator" and report["ok"] is False
    assert (report["tasks"], report["checked"]) == (4, 9)
    assert [(f["task_id"], f["check"], f["reward"]) for f in report["failed"]] == [
        ("calculator-train-1", "oracle", 0.0), ("calculator-train-2", "wrong solution #1", 1.0)]
    assert set(report["failed"][0]) == {"task_id", "check", "reward", "finish_reason", "reason"}


@pytest.mark.parametrize(("args", "message"), [
    (["--backend", "local"], "the env 'calculator' takes no backend"),
    (["-n", "3", "--all"], "give one of -n N, --all and --task ID"),
    (["--task", "calculator-train-0", "--all"], "give one of -n N, --all and --task ID"),
    (["-n", "0"], "0 is not in the range x>=1"),
])
def test_validate_usage_errors(args, message):
    result = validate("calculator", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output


# ---- eval's destinations ------------------------------------------------------------------


def eval_calculator(*args):
    return CliRunner().invoke(main, ["eval", "calculator", "--policy", "oracle", "-n", "2",
                                     *args])


def test_a_report_folder_that_holds_a_report_is_refused_before_any_episode(tmp_path):
    folder, out = tmp_path / "report", tmp_path / "episodes.jsonl"
    folder.mkdir()
    (folder / "summary.json").write_text('{"n": 7}')
    result = eval_calculator("--report", str(folder), "--out", str(out))
    assert result.exit_code == 2, result.output
    [line] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert f"Invalid value for '--report': {str(folder)!r} already holds a report" in line
    assert "--force" in line and "--resume" not in line
    assert not out.exists()  # refused before the run opened --out
    assert (folder / "summary.json").read_text() == '{"n": 7}'


def test_force_overwrites_the_out_file_and_the_report_folder(tmp_path):
    folder, out = tmp_path / "report", tmp_path / "episodes.jsonl"
    assert eval_calculator("--report", str(folder), "--out", str(out)).exit_code == 0
    result = eval_calculator("--out", str(out))
    assert result.exit_code == 2 and "pass --force to overwrite it" in result.output
    result = eval_calculator("-n", "3", "--report", str(folder), "--out", str(out), "--force",
                             "--json")
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 3
    assert json.loads((folder / "summary.json").read_text())["n"] == 3
    assert len((folder / "trajectories.jsonl").read_text().splitlines()) == 3


@pytest.mark.parametrize("with_out", [True, False])
def test_episodes_survive_a_report_that_cannot_be_written(tmp_path, monkeypatch, with_out):
    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("agentgym.viewer.report.write_report", broken)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "episodes.jsonl"
    result = eval_calculator("--report", str(tmp_path / "report"),
                             *(["--out", str(out)] if with_out else []))
    assert result.exit_code == 1
    assert "could not write the report" in result.stderr and "No space left" in result.stderr
    [kept] = [out] if with_out else list(tmp_path.glob("agentgym-eval-calculator-*.jsonl"))
    assert f"the 2 episodes are in {kept}:" in result.stderr
    assert [json.loads(line)["reward"] for line in kept.read_text().splitlines()] == [1.0, 1.0]
    assert "mean_reward" in result.stdout  # the summary is still printed


def test_the_oracle_on_tasks_without_solutions_is_refused_before_any_episode(tmp_path):
    def unsolved(index, row):
        if index:
            del row["solution"]

    tasks = calculator_task_file(tmp_path / "t.jsonl", unsolved)
    out = tmp_path / "episodes.jsonl"
    result = eval_calculator("-n", "4", "-e", f"tasks={tasks}", "--out", str(out))
    assert result.exit_code == 1, result.output
    assert ("the oracle policy replays each task's reference solution, but 3 of the 4 tasks"
            " of 'calculator' to play have none (calculator-train-1, calculator-train-2,"
            " calculator-train-3)") in result.output
    assert "choose another policy (noop," in result.output
    assert out.read_text() == ""  # no episode ran
    assert eval_calculator("-n", "1", "-e", f"tasks={tasks}").exit_code == 0  # task 0 has one


def test_server_options_check_the_host_then_run_the_command():
    import click

    from agentgym.cli import server_options

    @click.command()
    @server_options(default_port=9)
    def serving(host: str, port: int, allow_remote: bool) -> None:
        click.echo(f"{host} {port} {allow_remote}")

    runner = CliRunner()
    assert runner.invoke(serving, []).output == "127.0.0.1 9 False\n"
    assert runner.invoke(serving, ["--host", "0.0.0.0", "--allow-remote"]).output == (
        "0.0.0.0 9 True\n")
    refused = runner.invoke(serving, ["--host", "0.0.0.0"])
    assert refused.exit_code == 2 and "--allow-remote" in refused.output
