"""The shared ``bash`` tool on a real local sandbox whose workspace is a small git
repository (the ``ws`` fixture of tests/conftest.py)."""

from __future__ import annotations

import pytest

from agentgym.core.tools import ToolError
from agentgym.toolkits import BashTools


def test_schema_and_calls_through_the_tool_api(ws) -> None:
    [bash] = ws.bash_tools.tools()
    schema = bash.schema()["function"]
    assert schema["name"] == "bash"
    assert schema["parameters"]["required"] == ["command"]
    assert "persists between calls" in schema["description"]
    assert schema["parameters"]["properties"]["command"]["description"]
    assert "[exit code 0]" in ws.run(bash.call({"command": "true"}))
    with pytest.raises(ToolError, match=r"missing required argument\(s\) 'command'"):
        ws.run(bash.call({}))


def test_bash_reports_output_exit_code_and_keeps_the_shell(ws) -> None:
    assert ws.bash("echo hello") == "hello\n[exit code 0]"
    assert ws.bash("ls nowhere").endswith("[exit code 2]")
    assert ws.bash("true") == "(no output)\n[exit code 0]"
    ws.bash("cd geometry && export COLOUR=blue")
    assert ws.bash("pwd; echo $COLOUR") == "/workspace/geometry\nblue\n[exit code 0]"
    assert "tests/test_shapes.py" in ws.bash("cd /workspace && git ls-files")
    with pytest.raises(ToolError, match="command is empty"):
        ws.run(ws.bash_tools.bash("  "))


def test_bash_timeout_is_reported(ws) -> None:
    quick = BashTools(ws.box, command_timeout_s=1)
    text = ws.run(quick.bash("echo started; sleep 30; echo never"))
    assert "started" in text and "never" not in text
    assert "[exit code 124: timed out after 1 s" in text
    assert ws.bash("echo alive") == "alive\n[exit code 0]"


def test_bash_long_output_is_cut_in_the_middle(ws) -> None:
    text = ws.bash("seq 1 100000")
    assert len(text) < 13_000
    assert text.startswith("1\n2\n3\n") and text.endswith("100000\n[exit code 0]")
    assert "characters of output cut: redirect the output to a file" in text


def test_options_are_checked(ws) -> None:
    with pytest.raises(ValueError, match="command_timeout_s must be > 0 or None, got 0"):
        BashTools(ws.box, command_timeout_s=0)
    with pytest.raises(ValueError, match=r"max_output_chars must be >= 4000 \(two long"
                                         r" lines\), got 100"):
        BashTools(ws.box, max_output_chars=100)
