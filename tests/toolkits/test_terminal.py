"""The ``terminal`` tool (a pty shell) on each real sandbox backend: a session that keeps
its state, keys that reach programs, interactive programs that behave as for a person."""

from __future__ import annotations

import asyncio

import pytest

from agentgym.core.registry import open_sandbox
from agentgym.core.sandbox import SandboxSpec
from agentgym.core.tools import ToolError
from agentgym.toolkits.terminal import TerminalTools, screen_text


@pytest.fixture
def term(backend):
    """Call ``term(input=..., key=..., timeout=...)`` on a fresh sandbox of each backend."""
    loop = asyncio.new_event_loop()
    box = loop.run_until_complete(open_sandbox(backend, SandboxSpec(workdir="/app")))
    [tool] = TerminalTools(box, command_timeout_s=20).tools()

    def call(**arguments):
        return loop.run_until_complete(tool.call(arguments))

    call.tool = tool
    yield call
    loop.run_until_complete(box.close())
    loop.close()


def test_state_persists_across_calls(term) -> None:
    first = term(input="cd /tmp && export GREETING=hello")
    assert first.endswith("[command finished, exit code 0]")
    assert "hello\n/tmp" in term(input="echo $GREETING; pwd")
    assert term(input="false").endswith("[command finished, exit code 1]")


def test_a_background_server_keeps_running_between_calls(term) -> None:
    term(input="mkdir -p /tmp/site && echo served-page > /tmp/site/index.html")
    term(input="python3 -m http.server 8765 --bind 127.0.0.1 --directory /tmp/site"
               " > /tmp/server.log 2>&1 &")
    fetch = ("for i in $(seq 50); do python3 -c \"import urllib.request as u;"
             " print(u.urlopen('http://127.0.0.1:8765/').read().decode())\" 2>/dev/null"
             " && break; sleep 0.1; done")
    assert "served-page" in term(input=fetch)
    assert "served-page" in term(input=fetch)  # still there a call later
    assert "python3" in term(input="jobs -l")


def test_ctrl_c_stops_a_long_command(term) -> None:
    running = term(input="sleep 1000", timeout=1)
    assert "sleep is still running after 1 s" in running
    stopped = term(key="C-c")
    assert stopped.endswith("[command finished, exit code 130]")
    assert "ok" in term(input="echo ok")


def test_an_interactive_python_session(term) -> None:
    started = term(input="python3")
    assert ">>>" in started and started.endswith("[python3 is waiting for input]")
    term(input="numbers = [3, 4, 5]")
    assert "12" in term(input="print(sum(numbers))")
    assert "ZeroDivisionError" in term(input="1 / 0")
    left = term(key="C-d")
    assert left.endswith("[command finished, exit code 0]")
    assert "back-in-bash" in term(input="echo back-in-bash")


def test_a_pager_waits_for_keys(term) -> None:
    term(input="seq 1 500 > numbers.txt")
    paged = term(input="less numbers.txt")
    assert paged.endswith("[less is waiting for input]") and "\n1\n" in paged
    assert term(key="q").endswith("[command finished, exit code 0]")


def test_exiting_the_shell_starts_a_new_session(term) -> None:
    assert "the shell exited" in term(input="exit")
    again = term(input="pwd")
    assert "a new terminal session started" in again and "/app" in again


def test_errors_the_agent_can_fix(term) -> None:
    with pytest.raises(ToolError, match="unknown key 'C-x'"):
        term(key="C-x")
    with pytest.raises(ToolError, match="timeout must be > 0"):
        term(input="ls", timeout=0)
    long = term(input="seq 1 100000")
    assert "truncated" in long or "characters" in long
    assert len(long) < 14_000


def test_screen_text_removes_control_sequences() -> None:
    assert screen_text("\x1b[?2004h/app$ ls\r\n\x1b[01;34mdir\x1b[0m\r\n") == "/app$ ls\ndir\n"
    assert screen_text("progress 10%\rprogress 100%\r\n") == "progress 100%\n"
    assert screen_text("ab\bc\x1b]0;title\x07") == "ac"


def test_a_sandbox_without_script_gets_a_clear_error(backend) -> None:
    async def scenario():
        async with await open_sandbox(backend) as box:
            await box.exec("export PATH=/nowhere")  # as in an image without util-linux
            [tool] = TerminalTools(box).tools()
            with pytest.raises(ToolError, match=r"no `script` program \(util-linux\)"):
                await tool.call({"input": "ls"})

    asyncio.run(scenario())
