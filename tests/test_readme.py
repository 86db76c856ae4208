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
