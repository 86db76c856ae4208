"""The README's two commands are the ones CI and users run."""

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]


def readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert block, "the README must open with a bash block holding the two commands"
    return [line for line in block.group(1).splitlines() if line and not line.startswith("#")]


def test_readme_opens_with_two_commands_that_set_up_first():
    commands = readme_commands()
    assert len(commands) == 2
    assert all(c.startswith("bash scripts/setup.sh && ") for c in commands)
    assert "agentgym " in commands[0] and "pytest" in commands[1]


def test_ci_runs_the_readmes_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in ci


def synopsis() -> str:
    section = (ROOT / "README.md").read_text().split("## The command line", 1)[1]
    return section.split("```\n", 2)[1]


def command_paths() -> list[str]:
    """Every command of the CLI, plugins' and subcommands included."""
    import click

    from agentgym.cli import main

    paths, todo = [], [("agentgym", main)]
    while todo:
        path, command = todo.pop()
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            todo += [(f"{path} {name}", command.get_command(ctx, name))
                     for name in command.list_commands(ctx)]
        else:
            paths.append(path)
    return sorted(paths)


def test_the_readme_synopsis_has_every_command_list_kind_and_policy():
    from click.testing import CliRunner

    from agentgym.cli import POLICY_FORMS, main
    from agentgym.core.plugins import plugin_host
    from agentgym.listing import kinds

    text = synopsis()
    assert [p for p in command_paths() if f"{p} " not in text] == []
    assert [k for k in kinds() if f" {k}" not in text] == []
    policies = [POLICY_FORMS.get(p, p) for p in plugin_host().entries("policies")]
    assert [p for p in policies if p not in text] == []
    # eval --help names them all too (the first thing a newcomer reads).
    raw = CliRunner().invoke(main, ["eval", "--help"]).stdout
    help_text = " ".join(re.sub(r"-\n\s*", "-", raw).split())  # help wraps after hyphens
    assert [p for p in policies if p not in help_text] == []
