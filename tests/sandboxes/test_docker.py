"""The ``docker`` sandbox backend against a real engine (no mocks of Docker).

Skipped, with the reason, only where no Docker engine is reachable. The first run builds
the default image (about a minute and a half); later runs take about half a minute.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from agentgym.core.registry import open_sandbox
from agentgym.core.sandbox import TIMEOUT_EXIT_CODE, SandboxError, SandboxLimits, SandboxSpec


def run(coro):
    """One event loop per call: a sandbox must work across loops, as in sync wrappers."""
    return asyncio.run(coro)


@pytest.fixture
def make(engine):
    """Open docker sandboxes (``make(**kwargs)``); all are closed after the test."""
    from agentgym.sandboxes.docker import DockerSandbox

    boxes: list[DockerSandbox] = []

    def make_box(**kwargs) -> DockerSandbox:
        kwargs.setdefault("limits", SandboxLimits(timeout_s=30))
        box = run(DockerSandbox.create(SandboxSpec(**kwargs)))
        boxes.append(box)
        return box

    yield make_box
    for box in boxes:
        box.close_now()


@pytest.fixture
def box(make):
    return make()


def container_exists(engine, container_id: str) -> bool:
    import docker.errors

    try:
        engine.containers.get(container_id)
    except docker.errors.NotFound:
        return False
    return True


# -- the session -----------------------------------------------------------------------


def test_cd_and_export_persist_across_commands(box):
    assert run(box.exec("pwd")).output == "/workspace\n"
    assert run(box.exec("mkdir -p a/b && cd a/b && export GREETING='hi there'")).ok
    assert run(box.exec('pwd; echo "$GREETING"')).output == "/workspace/a/b\nhi there\n"


def test_exit_codes_and_interleaved_stderr(box):
    assert run(box.exec("false")).exit_code == 1
    result = run(box.exec("echo out; echo err >&2; (exit 7)"))
    assert (result.exit_code, result.output) == (7, "out\nerr\n")
    assert run(box.exec("printf 'no newline'")).output == "no newline"


def test_registered_as_the_docker_backend(engine):
    async def main():
        async with await open_sandbox("docker") as box:
            return box, await box.exec("id -u; echo $HOME")

    box, result = run(main())
    assert type(box).__name__ == "DockerSandbox"
    assert result.output == "1000\n/home/agent\n"
    assert not container_exists(engine, box.id)


def test_a_timeout_returns_124_and_the_session_goes_on(box):
    run(box.exec("cd /tmp && export KEEP=1"))
    start = time.monotonic()
    result = run(box.exec("echo BEFORE; for i in 1 2; do sleep 100; echo AFTER; done; echo AFTER",
                          timeout=1))
    assert result.exit_code == TIMEOUT_EXIT_CODE and result.timed_out
    # The rest of the command is abandoned, not run once its sleep is killed.
    assert "BEFORE" in result.output and "AFTER" not in result.output
    assert result.output.endswith("[timed out after 1 s: the command was killed]")
    assert time.monotonic() - start < 5
    assert run(box.exec('pwd; echo "$KEEP"; ps -e -o comm= | grep -c sleep')).output == (
        "/tmp\n1\n1\n")  # only the keep-alive: the command's sleep is gone


def test_a_loop_in_the_shell_itself_is_stopped(box):
    run(box.exec("export KEEP=1"))
    result = run(box.exec("while :; do :; done; echo AFTER", timeout=1))
    assert result.timed_out and "AFTER" not in result.output
    assert run(box.exec("echo $KEEP")).output == "1\n"


def test_a_wedged_shell_is_replaced_in_the_same_directory(box):
    run(box.exec("cd /tmp"))
    # Ignoring the signal that aborts commands leaves only replacing the shell.
    result = run(box.exec("trap '' URG; while :; do :; done", timeout=1))
    assert result.timed_out and result.exit_code == TIMEOUT_EXIT_CODE
    assert "a new shell was started in /tmp" in result.output
    assert run(box.exec("pwd")).output == "/tmp\n"


def test_exit_and_syntax_errors_do_not_break_the_session(box):
    run(box.exec("cd /tmp"))
    result = run(box.exec("exit 3"))
    assert result.exit_code == 3 and "the shell exited with status 3" in result.output
    assert run(box.exec("pwd")).output == "/tmp\n"
    run(box.exec("export KEEP=1"))
    for broken in ("echo 'unbalanced", "if true; then", "echo $(( 1 +", "}"):
        assert run(box.exec(broken)).exit_code == 2, broken
    assert run(box.exec("echo $KEEP")).output == "1\n"
    # A command closing its stdout does not silence the next one.
    run(box.exec("exec >&- 2>&-"))
    assert run(box.exec("echo visible")).output == "visible\n"


def test_commands_never_read_the_session_input(box):
    assert run(box.exec("cat; read line; echo done", timeout=5)).output == "done\n"


def test_output_is_truncated_with_a_marker(make):
    box = make(limits=SandboxLimits(output_bytes=1000))
    result = run(box.exec("seq 1 100000"))
    total = sum(len(str(n)) + 1 for n in range(1, 100001))
    assert result.truncated and result.exit_code == 0
    assert f"\n[... {total - 1000} bytes of output truncated ...]\n" in result.output
    assert result.output.startswith("1\n2\n3\n") and result.output.endswith("99999\n100000\n")


def test_endless_output_is_stopped_long_before_the_timeout(make):
    box = make(limits=SandboxLimits(output_bytes=4096))
    result = run(box.exec("yes; echo END", timeout=120))
    assert not result.timed_out and result.truncated and result.exit_code == 137
    assert result.output.endswith("the command was stopped]") and len(result.output) < 8192
    assert "END" not in result.output
    assert run(box.exec("echo next")).output == "next\n"


def test_invalid_utf8_is_replaced(box):
    assert run(box.exec(r"printf '\xff\xfeok\xc3'")).output == "\ufffd\ufffdok\ufffd"
    # Non-ASCII commands arrive intact.
    assert run(box.exec("echo 'héllo ✓'")).output == "héllo ✓\n"


def test_commands_wait_their_turn(box):
    async def both():
        return await asyncio.gather(box.exec("sleep 0.5; echo first"),
                                    box.exec("echo second"))

    first, second = run(both())
    assert (first.output, second.output) == ("first\n", "second\n")


def test_a_cancelled_command_is_killed(box):
    async def cancel():
        task = asyncio.ensure_future(box.exec("sleep 0.3; touch started; sleep 60; touch no"))
        await asyncio.sleep(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await box.exec("ls; pgrep -c -x sleep", timeout=10)

    assert run(cancel()).output == "started\n1\n"  # the keep-alive sleep only


# -- files -----------------------------------------------------------------------------


def test_files_read_write_list(box):
    run(box.write_file("deep/er/note.txt", "héllo\n"))
    data = os.urandom(2 * 1024 * 1024)
    run(box.write_file("/tmp/blob.bin", data))
    assert run(box.read_file("deep/er/note.txt")) == "héllo\n".encode()
    assert run(box.read_file("/workspace/deep/er/note.txt")) == "héllo\n".encode()
    assert run(box.read_file("/tmp/blob.bin")) == data
    assert run(box.exec("cat deep/er/note.txt; stat -c %u:%g deep deep/er/note.txt")).output == (
        "héllo\n1000:1000\n1000:1000\n")
    run(box.exec("touch .hidden 'with space' ..dots"))
    assert run(box.list_dir(".")) == ["..dots", ".hidden", "deep", "with space"]
    assert run(box.list_dir("deep/er")) == ["note.txt"]
    run(box.write_file("deep/er/note.txt", b"overwritten"))
    assert run(box.read_file("deep/er/note.txt")) == b"overwritten"


def test_file_errors_name_the_path(box):
    with pytest.raises(FileNotFoundError, match=r"/workspace/missing\.txt"):
        run(box.read_file("missing.txt"))
    with pytest.raises(FileNotFoundError, match="/nowhere"):
        run(box.list_dir("/nowhere"))
    run(box.write_file("file.txt", "x"))
    with pytest.raises(NotADirectoryError):
        run(box.list_dir("file.txt"))
    with pytest.raises(IsADirectoryError):
        run(box.read_file("."))
    with pytest.raises(PermissionError, match="read-only"):
        run(box.write_file("/etc/agentgym-test", "x"))


def test_the_template_is_copied_and_never_changed(make, tmp_path):
    template = tmp_path / "repo"
    (template / "pkg").mkdir(parents=True)
    (template / "pkg" / "mod.py").write_text("x = 1\n")
    (template / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (template / "run.sh").chmod(0o755)
    (template / "link").symlink_to("pkg/mod.py")
    before = {p: p.read_bytes() for p in template.rglob("*") if p.is_file()}
    box = make(template=template)
    assert run(box.exec("./run.sh && cat link && stat -c %U pkg/mod.py")).output == (
        "ran\nx = 1\nagent\n")
    run(box.exec("echo 'x = 2' > pkg/mod.py && rm run.sh && mkdir new && chmod 000 pkg"))
    assert {p: p.read_bytes() for p in template.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in template.iterdir()) == ["link", "pkg", "run.sh"]
    assert stat.S_IMODE((template / "pkg").stat().st_mode) != 0
    assert run(make(template=template).exec("cat pkg/mod.py")).output == "x = 1\n"


# -- isolation and limits ----------------------------------------------------------------


def test_the_container_is_locked_down(box):
    box.container.reload()
    host, labels = box.container.attrs["HostConfig"], box.container.labels
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] and host["Init"]
    assert host["CapDrop"] == ["ALL"] and host["SecurityOpt"] == ["no-new-privileges"]
    assert host["Memory"] == host["MemorySwap"] == 2048 * 1024 * 1024
    assert not host["AutoRemove"] and not host["Binds"]
    assert labels["agentgym.sandbox"] == "1" and labels["agentgym.owner_pid"] == str(os.getpid())
    status = run(box.exec("id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status")).output
    assert status.split() == ["1000", "CapEff:", "0000000000000000", "NoNewPrivs:", "1"]
    assert run(box.exec("touch /usr/x /x 2>&1 | grep -c Read-only")).output == "2\n"


def test_limits_reach_the_container(make):
    box = make(limits=SandboxLimits(memory_mb=300, pids=50, cpus=0.5, disk_mb=16))
    host = box.container.attrs["HostConfig"]
    assert host["Memory"] == host["MemorySwap"] == 300 * 1024 * 1024
    assert host["NanoCpus"] == 500_000_000 and host["PidsLimit"] >= 50
    result = run(box.exec("head -c 40M /dev/zero > big; head -c 40M /dev/zero > /tmp/big;"
                          " du -m big /tmp/big; df -m --output=size /workspace /tmp | tail -2"))
    assert result.output.count("No space left on device") == 2
    assert result.output.split()[-6:] == ["16", "big", "16", "/tmp/big", "16", "16"]


def test_the_network_is_none(box, tmp_path):
    server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "0"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        port = int(re.search(r"port (\d+)", server.stdout.readline()).group(1))
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # reachable from the host
        probe = textwrap.dedent(f"""\
            python3 - <<'EOF'
            import socket
            for host in ("127.0.0.1",):
                try:
                    socket.create_connection((host, {port}), timeout=3)
                    print(host, "reached")
                except OSError as error:
                    print(host, "unreachable")
            EOF
            ls /sys/class/net""")
        assert run(box.exec(probe)).output == "127.0.0.1 unreachable\nlo\n"
    finally:
        server.kill()
        server.wait()


def test_the_docker_socket_is_not_inside(box):
    result = run(box.exec("ls /var/run/docker.sock /run/docker.sock 2>&1;"
                          " grep -c docker.sock /proc/self/mountinfo"))
    assert result.output.count("No such file or directory") == 2
    assert result.output.endswith("0\n")


def test_a_memory_hog_is_killed_and_the_sandbox_lives(make):
    box = make(limits=SandboxLimits(memory_mb=128))
    result = run(box.exec("python3 -c 'x = bytearray(1 << 30); print(\"GOT\", \"IT\")'"))
    assert result.exit_code == 137 and "GOT IT" not in result.output
    assert run(box.exec("echo fine")).output == "fine\n"


def test_a_fork_bomb_hits_the_pids_limit(make):
    box = make(limits=SandboxLimits(pids=32))
    result = run(box.exec(":(){ :|:& };:; sleep 100", timeout=3))
    assert result.timed_out
    assert "Resource temporarily unavailable" in result.output
    # The bomb's processes detached from the command (a timeout ends only its command's
    # tree, as on the local backend); a fresh session ends them.
    run(box.fresh_session())
    count = run(box.exec("ls /proc | grep -c '^[0-9]'", timeout=10))
    assert int(count.output) < 8, count  # the bomb is gone


def test_daemons_die_with_the_sandbox(box, engine):
    tag = str(100000 + secrets.randbelow(800000))
    result = run(box.exec(f"nohup sleep {tag}1 >/dev/null 2>&1 & setsid sleep {tag}2"
                          " >/dev/null 2>&1 </dev/null & echo started"))
    assert result.output == "started\n"

    def host_sleeps() -> str:
        return subprocess.run(["pgrep", "-f", f"sleep {tag}"], capture_output=True,
                              text=True).stdout

    # They outlive their command (a background child may take a moment to exec `sleep`).
    deadline = time.monotonic() + 10
    while len(host_sleeps().split()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run(box.exec(f"pgrep -c -f 'sleep {tag}'")).output == "2\n"
    assert len(host_sleeps().split()) == 2
    run(box.close())
    assert not container_exists(engine, box.id)
    deadline = time.monotonic() + 10
    while host_sleeps() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert host_sleeps() == ""


# -- lifetime --------------------------------------------------------------------------


def test_close_is_idempotent_and_removes_the_container(box, engine):
    assert container_exists(engine, box.id)
    run(box.close())
    run(box.close())
    box.close_now()
    assert not container_exists(engine, box.id)
    with pytest.raises(SandboxError, match="closed"):
        run(box.exec("true"))


def test_a_container_killed_underneath_raises(box):
    threading.Timer(0.5, box.container.kill).start()
    start = time.monotonic()
    with pytest.raises(SandboxError, match="stopped"):
        run(box.exec("sleep 60", timeout=120))
    assert time.monotonic() - start < 10
    with pytest.raises(SandboxError, match="stopped"):
        run(box.exec("true"))


def test_a_stopped_container_is_described_in_errors(engine, box):
    from agentgym.sandboxes.docker import _state_of

    assert _state_of(engine, box.container.id) == ""  # running: nothing to add
    box.container.kill()
    box.container.wait(timeout=30)
    assert "the container is exited (exit code 137, killed for memory: False" in _state_of(
        engine, box.container.id)


def test_a_container_removed_underneath_raises(box):
    box.container.remove(force=True)
    with pytest.raises(SandboxError, match="removed"):
        run(box.exec("true", timeout=10))


def test_gc_removes_containers_whose_owner_died(engine, box):
    child = subprocess.run([sys.executable, "-c", textwrap.dedent("""\
        import asyncio, os
        from agentgym.sandboxes.docker import DockerSandbox
        box = asyncio.run(DockerSandbox.create())
        print(box.id, flush=True)
        os._exit(0)  # no close, no atexit: the container is left behind
        """)], capture_output=True, text=True, timeout=120)
    leftover = child.stdout.strip()
    assert container_exists(engine, leftover), child.stderr
    from agentgym.sandboxes.docker import gc

    assert gc() >= 1
    assert not container_exists(engine, leftover)
    assert container_exists(engine, box.id)  # its owner (this process) is alive


# -- errors that say what to do ----------------------------------------------------------


def test_an_unreachable_engine_says_how_to_start_one(monkeypatch, tmp_path):
    pytest.importorskip("docker", reason="the docker SDK is not installed: pip install docker")
    from agentgym.sandboxes.docker import DockerSandbox

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(SandboxError) as error:
        run(DockerSandbox.create())
    message = str(error.value)
    assert f"{tmp_path}/no-engine.sock" in message
    assert "dockerd --bridge=none --iptables=false" in message
    assert "systemctl start docker" in message


def test_a_missing_sdk_says_how_to_install_it(monkeypatch):
    from agentgym.sandboxes.image import docker_client

    monkeypatch.setitem(sys.modules, "docker", None)  # as if not installed
    with pytest.raises(SandboxError, match=r"pip install 'agentgym\[swe\]'"):
        docker_client()


def test_a_missing_image_says_how_to_build_it(engine):
    name = f"agentgym-test/absent:{secrets.token_hex(4)}"
    with pytest.raises(SandboxError, match=f"docker build -t {re.escape(name)}"):
        run(open_sandbox("docker", image=name))


def test_the_default_image_has_the_tools(box):
    from agentgym.sandboxes.image import build_default_image

    assert build_default_image() == "agentgym/sandbox:default"  # present: returns at once
    result = run(box.exec("bash --version | head -1 && git --version && python3 -m pytest"
                          " --version && python3 -m pip --version && ls --version | head -1"))
    assert result.ok, result.output
    assert [line.split()[0] for line in result.output.splitlines()] == [
        "GNU", "git", "pytest", "pip", "ls"]


def test_home_is_writable_and_git_commits_work(box):
    result = run(box.exec("git init -q r && cd r && touch f && git add f && git commit -qm m"
                          " && git log --oneline | wc -l && touch ~/ok && ls ~"))
    assert result.output == "1\nok\n", result.output

