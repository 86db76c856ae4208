"""`agentgym plugin new` writes a package that pip installs and agentgym discovers."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from agentgym.cli import main


def pip(*args):
    # No build isolation and no dependencies: nothing is fetched from an index, and the
    # agentgym under test (installed from source) is the one the plugin uses.
    return subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, check=True
    )


def test_generated_plugin_installs_is_discovered_and_passes_its_tests(tmp_path, agentgym_cli):
    result = CliRunner().invoke(main, ["plugin", "new", "word-reverse", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    package = tmp_path / "agentgym-word-reverse"
    assert (package / "pyproject.toml").read_text().count('word-reverse = "agentgym_word_reverse"')
    pip("install", "--no-build-isolation", "--no-deps", "--quiet", str(package))
    try:
        listed = subprocess.run(
            [agentgym_cli, "list", "envs", "--json"], capture_output=True, text=True, check=True
        )
        ids = {row["id"]: row["plugin"] for row in json.loads(listed.stdout)["envs"]}
        assert ids["word-reverse"] == "word-reverse"
        evaluated = subprocess.run(
            [agentgym_cli, "eval", "word-reverse", "--policy", "oracle", "-n", "4", "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(evaluated.stdout)["mean_reward"] == 1.0
        validated = subprocess.run([agentgym_cli, "validate", "word-reverse", "--json"],
                                   capture_output=True, text=True)
        report = json.loads(validated.stdout)
        assert validated.returncode == 0 and report["ok"], validated.stdout + validated.stderr
        # 10 tasks: oracle, noop, one known-wrong solution, and the answer-stuffing probe
        # that every env with a submit(answer) tool gets
        assert report["checked"] == 40
        assert report["probes"] == {"answer.stuff": {"attack": "answer-stuffing",
                                                     "played": 10, "paid": 0,
                                                     "not_applicable": 0}}
        # The package's own tests run check_env and assert_valid on the installed env.
        tests = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                str(package / "tests"),
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert tests.returncode == 0, tests.stdout + tests.stderr
        assert "3 passed" in tests.stdout
    finally:
        pip("uninstall", "--yes", "--quiet", "agentgym-word-reverse")


@pytest.mark.parametrize("name", ["Bad", "two--hyphens", "1abc", "under_score"])
def test_bad_plugin_names_are_explained(tmp_path, name):
    result = CliRunner().invoke(main, ["plugin", "new", name, "--dir", str(tmp_path)])
    assert result.exit_code == 1 and "is not valid" in result.output


def test_existing_directory_is_not_overwritten(tmp_path):
    CliRunner().invoke(main, ["plugin", "new", "demo", "--dir", str(tmp_path)])
    result = CliRunner().invoke(main, ["plugin", "new", "demo", "--dir", str(tmp_path)])
    assert result.exit_code == 1 and "already exists" in result.output
