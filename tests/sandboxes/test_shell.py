"""The shared session-shell protocol, against a plain ``bash`` on the host (no sandbox)."""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from agentgym.core.sandbox import BoundedOutput, truncate_output
from agentgym.sandboxes import shell


class Bash:
    """A bash session driven through the protocol, over pipes: a minimal backend."""

    def __init__(self, cwd: Path):
        self.process = subprocess.Popen(["bash", "--noprofile", "--norc"], cwd=cwd,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT)
        self.reader = shell.SentinelReader()
        reply, _ = self.run(shell.start_script(str(cwd)))
        assert reply is not None and reply.code == self.process.pid

    def send(self, script: shell.Script) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(script.data)
        self.process.stdin.flush()

    def read(self, nonce: str, timeout: float = 10,
             out: BoundedOutput | None = None) -> shell.Reply | None:
        assert self.process.stdout is not None
        fd, deadline = self.process.stdout.fileno(), time.monotonic() + timeout
        reply = self.reader.feed(b"", out, nonce)
        while reply is None and time.monotonic() < deadline:
            if select.select([fd], [], [], deadline - time.monotonic())[0]:
                reply = self.reader.feed(os.read(fd, 65536), out, nonce)
        return reply

    def run(self, script: shell.Script, timeout: float = 10) -> tuple[shell.Reply | None, str]:
        out = BoundedOutput(1 << 20)
        self.send(script)
        reply = self.read(script.nonce, timeout, out)
        return reply, out.text()[0]

    def exec(self, command: str, timeout: float = 10) -> tuple[shell.Reply | None, str]:
        return self.run(shell.command_script(command), timeout)

    def children(self) -> list[int]:
        found = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text()
        return [int(pid) for pid in found.split()]

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture
def bash(tmp_path):
    session = Bash(tmp_path)
    yield session
    session.close()


def test_commands_keep_state_and_report_status_and_directory(bash, tmp_path):
    reply, output = bash.exec("mkdir sub && cd sub && export X='a b'; echo \"$X\"; (exit 4)")
    assert (reply.code, reply.pwd, output) == (4, str(tmp_path / "sub"), "a b\n")
    reply, output = bash.exec("echo out; echo err >&2; cat")  # stdin is /dev/null
    assert (reply.code, output) == (0, "out\nerr\n")


def test_quoting_carries_every_byte_but_nul(bash):
    text = bytes(range(1, 256)).decode("latin-1") + "héllo ✓ \udcff"
    reply, output = bash.exec(f"printf %s {shell.quote(text).decode()} | od -An -v -tx1")
    expected = text.encode("utf-8", errors="surrogateescape")
    assert reply.code == 0 and bytes.fromhex(output.replace("\n", "")) == expected


def test_redirections_last_one_command_and_never_hide_the_sentinel(bash):
    for closing in ("exec >/dev/null", "exec >&- 2>&-", "exec 19>&-", "exec 19>/dev/null"):
        assert bash.exec(closing)[0] is not None, closing
        reply, output = bash.exec("echo visible; ls /missing-dir")
        assert reply.code != 0 and output.startswith("visible\n"), closing
        assert "missing-dir" in output, closing


def test_syntax_errors_leave_the_parser_usable(bash):
    for broken in ("echo 'unbalanced", "if true; then", "echo $(( 1 +", "}", "{"):
        assert bash.exec(broken)[0].code == 2, broken
    assert bash.exec("echo fine") == (shell.Reply(0, bash.exec("pwd")[1].strip()), "fine\n")


def test_sigurg_abandons_the_rest_of_the_command(bash, tmp_path):
    script = shell.command_script("for i in 1 2; do sleep 100; touch ran$i; done; touch ran")
    bash.send(script)
    deadline = time.monotonic() + 10
    while not bash.children() and time.monotonic() < deadline:
        time.sleep(0.01)
    # Signal first, then kill the foreground process, as backends do.
    os.kill(bash.process.pid, signal.SIGURG)
    for child in bash.children():
        os.kill(child, signal.SIGKILL)
    assert bash.read(script.nonce) is not None  # its status is moot: backends report 124
    assert bash.run(shell.settle_script())[0] == shell.Reply(0, str(tmp_path))
    assert not list(tmp_path.glob("ran*"))
    assert bash.exec("touch after; echo ok") == (shell.Reply(0, str(tmp_path)), "ok\n")


def test_a_late_sigurg_is_disarmed_by_the_settle_script(bash, tmp_path):
    assert bash.exec("true")[0].code == 0
    os.kill(bash.process.pid, signal.SIGURG)  # the command had already reported
    assert bash.run(shell.settle_script())[0] == shell.Reply(0, str(tmp_path))
    assert bash.exec("echo runs") == (shell.Reply(0, str(tmp_path)), "runs\n")


def test_nul_bytes_are_refused():
    refused = shell.refusal("echo a\0b")
    assert refused is not None and refused.exit_code != 0 and "NUL byte" in refused.output
    assert shell.refusal("echo ab") is None
    with pytest.raises(ValueError, match="refusal"):
        shell.command_script("a\0b")


def sentinel(nonce: str, code: int, pwd: str | None) -> bytes:
    tail = b"" if pwd is None else b" " + pwd.encode()
    return shell.SENTINEL + f"{nonce} {code}".encode() + tail + b"\0"


def test_the_reader_finds_a_sentinel_split_anywhere():
    stream = b"out\x1e\x1eAGENTGYM-ish\n" + sentinel("abc", 3, "/a b") + b"next"
    for cut in range(len(stream) + 1):
        for second in (cut, min(cut + 7, len(stream))):
            reader, out, later = shell.SentinelReader(), BoundedOutput(1000), None
            replies = []
            for part in (stream[:cut], stream[cut:second], stream[second:]):
                if later is None:
                    replies.append(reader.feed(part, out, "abc"))
                    if replies[-1] is not None:  # the next command's output from here on
                        later = BoundedOutput(100)
                        assert reader.feed(b"", later, "xyz") is None
                else:
                    assert reader.feed(part, later, "xyz") is None
            assert [r for r in replies if r] == [shell.Reply(3, "/a b")], cut
            assert out.text()[0] == "out\x1e\x1eAGENTGYM-ish\n"
            reader.drain(later)
            assert later.text()[0] == "next"


def test_the_reader_drops_other_replies_and_reports_the_shell_ending():
    reader, out = shell.SentinelReader(ended_nonce="end"), BoundedOutput(1000)
    data = (b"a" + sentinel("stale", 0, "/") + b"b" + shell.SENTINEL + b"bad\0"
            + sentinel("end", 137, None) + sentinel("mine", 0, "/"))
    assert reader.feed(data, out, "mine") == shell.Reply(137, ended=True)
    assert reader.feed(b"", out, "mine") == shell.Reply(0, "/")
    assert out.text()[0] == "ab" + shell.SENTINEL.decode() + "bad\0"


def test_a_prefix_never_completed_is_output():
    reader, out = shell.SentinelReader(), BoundedOutput(1 << 20)
    data = shell.SENTINEL + b"x" * (shell.MAX_SENTINEL + 10)
    assert reader.feed(data, out, "n") is None
    assert reader.feed(sentinel("n", 1, "/"), out, "n") == shell.Reply(1, "/")
    assert out.total == len(data)


def test_ended_report_is_read_back(tmp_path):
    line = shell.ended_report("cafe", "7")
    printed = subprocess.run(["sh", "-c", line], capture_output=True, check=True).stdout
    assert shell.SentinelReader("cafe").feed(printed, None, "x") == shell.Reply(7, ended=True)


def test_bounded_output_keeps_what_truncate_output_keeps():
    rng = random.Random(7)
    for _ in range(500):
        limit = rng.randint(1, 40)
        data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
        out = BoundedOutput(limit, hard_cap=100)
        position = 0
        while position < len(data):
            step = rng.randint(0, 90)
            out.add(data[position:position + step])
            position += step
        assert out.text() == truncate_output(data, limit)
        assert out.total == len(data) and out.overflowed == (len(data) > 100)
    assert truncate_output(b"abcdefghij", 4) == ("ab\n[... 6 bytes of output truncated ...]\nij",
                                                 True)


def test_notes_go_on_lines_of_their_own():
    assert shell.with_notes("", ["[a]", "[b]"]) == "[a]\n[b]"
    assert shell.with_notes("x", ["[a]"]) == "x\n[a]"
    assert shell.with_notes("x\n", ["[a]"]) == "x\n[a]"
    assert shell.with_notes("x", []) == "x"
