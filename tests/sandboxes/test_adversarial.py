"""What an agent may try, and what every sandbox backend must contain.

Each test runs against ``local`` and ``docker``. After each, the ``make_sandbox`` fixture
closes the sandboxes and proves the next one works.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentgym.core.sandbox import TIMEOUT_EXIT_CODE, SandboxLimits


def test_writing_outside_the_workspace_fails(make_sandbox, run, tmp_path):
    box = make_sandbox()
    token = secrets.token_hex(4)
    for target in (f"/usr/{token}", f"/etc/{token}", f"/{token}", f"/bin/{token}"):
        result = run(box.exec(f"echo pwned > {target}"))
        assert result.exit_code != 0, f"wrote {target}: {result}"
        assert not os.path.exists(target)
    # Writing the workspace and /tmp works.
    assert run(box.exec("echo ok > /tmp/a && echo ok > a && cat /tmp/a a")).output == "ok\nok\n"


def test_another_episodes_workspace_is_unreachable(make_sandbox, run):
    first, second = make_sandbox(), make_sandbox()
    secret = f"secret-{secrets.token_hex(8)}"
    run(first.exec(f"echo {secret} > {secret}.txt && cp {secret}.txt /tmp/"))
    search = (f"grep -rl --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr {secret} / "
              f"2>/dev/null; ls /proc/*/root/workspace/{secret}.txt 2>/dev/null;"
              f" find / -name '{secret}*' -not -path '/proc/*' 2>/dev/null; true")
    result = run(second.exec(search, timeout=60))
    assert secret not in result.output
    assert run(first.exec(f"cat {secret}.txt")).output == f"{secret}\n"


@pytest.fixture
def host_port() -> int:
    """The port of a server listening on the host's 127.0.0.1."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def test_the_network_is_unreachable(make_sandbox, run, host_port):
    box = make_sandbox()
    probe = (
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', "
        f"{host_port}), timeout=3); print('CONNEC' + 'TED')\""
    )
    result = run(box.exec(probe, timeout=20))
    assert "CONNECTED" not in result.output and result.exit_code != 0
    # No interface but loopback: nothing can leave (no test traffic to other addresses).
    interfaces = run(box.exec("tail -n +3 /proc/net/dev | cut -d: -f1")).output.split()
    assert interfaces == ["lo"], interfaces


def test_host_unix_sockets_are_absent(make_sandbox, run, tmp_path):
    path = Path("/tmp") / f"agentgym-test-{secrets.token_hex(4)}.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    try:
        box = make_sandbox()
        for target in ("/var/run/docker.sock", "/run/docker.sock", str(path)):
            result = run(box.exec(
                "python3 -c \"import socket,sys; s=socket.socket(socket.AF_UNIX);"
                f" s.connect('{target}'); print('CONNEC' + 'TED')\""))
            assert "CONNECTED" not in result.output, target
        assert run(box.exec("ls /run /var/run 2>&1; true")).output.count("docker") == 0
    finally:
        listener.close()
        path.unlink()


def test_host_processes_cannot_be_signalled(make_sandbox, run):
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        box = make_sandbox()
        run(box.exec(f"kill -9 {victim.pid} {os.getpid()} 1; kill -9 -1", timeout=10))
        time.sleep(0.2)
        assert victim.poll() is None, "a host process was killed from inside the sandbox"
        assert run(box.exec("echo alive")).output.strip().endswith("alive")
        ps = run(box.exec("ps -e -o pid= 2>/dev/null | wc -l || ls /proc | grep -c '^[0-9]'"))
        assert int(ps.output.split()[0]) < 10, f"the sandbox sees host processes: {ps}"
    finally:
        victim.kill()
        victim.wait()


def sandbox_uid(backend: str) -> int:
    """The host uid the backend's commands run as."""
    if backend == "local":
        from agentgym.sandboxes.local import SANDBOX_UID

        return SANDBOX_UID
    from agentgym.sandboxes.image import SANDBOX_USER

    return int(SANDBOX_USER.split(":")[0])


def sandbox_process_count(uid: int, box_id: str) -> int:
    """Host processes of one sandbox: running as ``uid``, in a cgroup named for ``box_id``
    (each backend's cgroup path holds its sandbox's id). Other processes, other tests'
    sandboxes included, come and go meanwhile."""
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            status = Path(f"/proc/{name}/status").read_text()
            cgroups = Path(f"/proc/{name}/cgroup").read_text()
        except OSError:
            continue  # exited meanwhile
        real_uid = next(line.split()[1] for line in status.splitlines()
                        if line.startswith("Uid:"))
        count += int(real_uid) == uid and box_id in cgroups
    return count


def test_a_fork_bomb_is_contained(backend, make_sandbox, run):
    uid = sandbox_uid(backend)
    box = make_sandbox(limits=SandboxLimits(pids=64, timeout_s=10))
    before = sandbox_process_count(uid, box.id)
    assert before > 0  # the session shell, at least: the count sees this sandbox
    run(box.exec(":(){ :|:& };:", timeout=5))
    time.sleep(2)
    assert sandbox_process_count(uid, box.id) - before < 64 + 16, "the pids limit did not hold"
    subprocess.run(["true"], check=True)  # the host can still start processes
    run(box.close())
    deadline = time.monotonic() + 10
    while sandbox_process_count(uid, box.id) > 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sandbox_process_count(uid, box.id) == 0, "the bomb outlived its sandbox"


def test_a_memory_hog_is_killed(make_sandbox, run):
    box = make_sandbox(limits=SandboxLimits(memory_mb=128, timeout_s=30))
    hog = "python3 -c \"x = bytearray(1024 * 1024 * 1024); print('GOT', 'IT')\""
    result = run(box.exec(hog))
    assert "GOT IT" not in result.output and result.exit_code != 0
    assert run(box.exec("echo fine")).output.strip().endswith("fine")


def test_filling_the_workspace_disk_stops_at_the_limit(make_sandbox, run):
    box = make_sandbox(limits=SandboxLimits(disk_mb=64, timeout_s=60))
    result = run(box.exec("dd if=/dev/zero of=big bs=1M count=200 2>&1; ls -l big"))
    assert "No space left" in result.output
    size = int(run(box.exec("stat -c %s big")).output.strip())
    assert size <= 64 * 1024 * 1024
    tmp = run(box.exec("dd if=/dev/zero of=/tmp/big bs=1M count=200 2>&1"))
    assert "No space left" in tmp.output


def test_gigabytes_of_output_are_truncated(make_sandbox, run):
    box = make_sandbox(limits=SandboxLimits(output_bytes=10_000, timeout_s=60))
    start = time.monotonic()
    result = run(box.exec("head -c 3000000000 /dev/zero | tr '\\0' x; echo; echo END"))
    assert result.truncated
    assert len(result.output) < 12_000
    assert "truncated" in result.output
    assert time.monotonic() - start < 60
    assert run(box.exec("echo next")).output == "next\n"


def test_commands_that_never_end_time_out(make_sandbox, run):
    box = make_sandbox()
    for command in ("sleep 1000", "while :; do :; done", "tail -f /dev/null"):
        start = time.monotonic()
        result = run(box.exec(command, timeout=1))
        assert result.exit_code == TIMEOUT_EXIT_CODE and result.timed_out, command
        assert time.monotonic() - start < 10
    run(box.exec("cd /tmp"))
    run(box.exec("sleep 1000", timeout=0.5))
    assert run(box.exec("pwd")).output == "/tmp\n"


@pytest.mark.slow
def test_the_rest_of_a_command_does_not_run_after_its_timeout(make_sandbox, run):
    box = make_sandbox()
    run(box.exec("cd /tmp && export KEEP=1"))
    for command in ("sleep 100; touch ran", "for i in 1 2; do sleep 100; touch ran$i; done",
                    "while :; do :; done; touch ran", "sleep 100 & wait; touch ran"):
        result = run(box.exec(f"echo BEFORE; {command}", timeout=1))
        assert result.exit_code == TIMEOUT_EXIT_CODE and result.timed_out, command
        assert "BEFORE" in result.output, command
        time.sleep(0.3)  # whatever the shell would still do has had time to
        # (The output may start with bash's notice that a background job was killed.)
        left = run(box.exec("ls -d /tmp/ran* 2>/dev/null || echo nothing")).output
        assert left.endswith("nothing\n"), (command, left)
    assert run(box.exec('pwd; echo "$KEEP"')).output == "/tmp\n1\n"


def test_a_command_redirecting_the_shell_does_not_break_the_next(make_sandbox, run):
    box = make_sandbox()
    for closing in ("exec >/dev/null", "exec >&-", "exec >&- 2>&-", "exec 2>/dev/null",
                    "exec 1>&2 2>&-", "exec 19>/dev/null"):
        run(box.exec(closing))
        assert run(box.exec("echo visible")).output == "visible\n", closing
        assert "No such file" in run(box.exec("ls /missing")).output, closing  # stderr too
        result = run(box.exec("echo again; (exit 3)"))
        assert (result.exit_code, result.output) == (3, "again\n"), closing


def test_a_command_with_a_nul_byte_is_refused_clearly(make_sandbox, run):
    box = make_sandbox()
    result = run(box.exec("echo a\0b > nul.txt"))
    assert result.exit_code != 0 and not result.timed_out
    assert "NUL byte" in result.output
    assert run(box.exec("ls; echo fine")).output == "fine\n"  # nothing of it ran


def test_daemons_die_with_the_sandbox(make_sandbox, run, host_processes):
    box = make_sandbox()
    tag = str(1000 + secrets.randbelow(8000))
    result = run(box.exec(f"nohup sleep {tag}1 >/dev/null 2>&1 & setsid sleep {tag}2 "
                          f">/dev/null 2>&1 < /dev/null & echo started"))
    assert result.output.strip() == "started"
    deadline = time.monotonic() + 10  # a background child may take a moment to exec
    while len(host_processes(f"sleep {tag}[12]")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(host_processes(f"sleep {tag}[12]")) == 2
    run(box.close())
    deadline = time.monotonic() + 10
    while host_processes(f"sleep {tag}[12]") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert host_processes(f"sleep {tag}[12]") == []


def test_binary_garbage_and_invalid_utf8(make_sandbox, run):
    box = make_sandbox()
    result = run(box.exec("head -c 200000 /dev/urandom; printf '\\xff\\xfe\\x00end'"))
    assert isinstance(result.output, str) and result.output.endswith("\x00end")
    assert run(box.exec("echo clean")).output == "clean\n"


def test_the_template_never_changes(make_sandbox, run, tmp_path):
    template = tmp_path / "repo"
    (template / "pkg").mkdir(parents=True)
    (template / "pkg" / "a.py").write_text("x = 1\n")
    (template / "keep.txt").write_text("keep\n")
    box = make_sandbox(template=str(template))
    run(box.exec("echo 'x = 2' > pkg/a.py && rm keep.txt && mkdir new && chmod 000 pkg"))
    assert run(box.exec("chmod 755 pkg; cat pkg/a.py; ls")).output == "x = 2\nnew\npkg\n"
    assert (template / "pkg" / "a.py").read_text() == "x = 1\n"
    assert (template / "keep.txt").read_text() == "keep\n"
    assert sorted(p.name for p in template.iterdir()) == ["keep.txt", "pkg"]
    other = make_sandbox(template=str(template))
    assert run(other.exec("cat pkg/a.py keep.txt")).output == "x = 1\nkeep\n"


def test_session_state_and_files(make_sandbox, run):
    box = make_sandbox()
    run(box.exec("mkdir -p sub && cd sub && export GREETING='hi there'"))
    assert run(box.exec("pwd; echo $GREETING")).output == "/workspace/sub\nhi there\n"
    assert run(box.exec("false")).exit_code == 1
    assert run(box.exec("echo 'unbalanced")).exit_code != 0
    assert run(box.exec("echo still here")).output == "still here\n"
    run(box.write_file("dir/data.bin", b"\x00\xffabc"))
    assert run(box.read_file("/workspace/dir/data.bin")) == b"\x00\xffabc"
    assert run(box.list_dir("dir")) == ["data.bin"]
    with pytest.raises(FileNotFoundError):
        run(box.read_file("missing.txt"))


def test_no_host_secret_reaches_the_sandbox(make_sandbox, run, monkeypatch):
    secret = f"agentgym-secret-{secrets.token_hex(8)}"
    canary = f"agentgym-canary-{secrets.token_hex(8)}"
    monkeypatch.setenv("AGENTGYM_TEST_SECRET", secret)
    box = make_sandbox(env={"TASK_VARIABLE": "given"})
    # The patterns travel in a file (written base64-encoded), never in a command line that
    # /proc would show. The canary, exported inside, proves the search reads environments.
    run(box.write_file("/tmp/patterns", f"{secret}\n{canary}\n"))
    run(box.exec("export AGENT_CANARY=$(tail -n 1 /tmp/patterns | rev | rev)"))
    result = run(box.exec(
        "env; tr '\\0' ' ' < /proc/1/cmdline; cat /proc/1/environ;"
        " timeout 100 grep -rsohaF -f /tmp/patterns /proc /sys | sort -u", timeout=120))
    assert secret not in result.output
    assert canary in result.output, f"the search found nothing at all: {result.output[-2000:]}"
    assert "TASK_VARIABLE=given" in result.output  # what the task gives does arrive


def test_the_sandbox_init_cannot_be_traced_but_own_processes_can(make_sandbox, run):
    box = make_sandbox()
    attach = ("python3 -c \"import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True);"
              " print('attach', sys.argv[1], libc.ptrace(16, int(sys.argv[1]), 0, 0))\"")
    result = run(box.exec(f"{attach} 1; sleep 30 & {attach} $!; kill -9 $!"))
    assert "attach 1 -1" in result.output, result.output  # PTRACE_ATTACH to PID 1: EPERM
    assert result.output.count(" 0\n") == 1, result.output  # its own child: allowed
    assert run(box.exec("cat /proc/1/environ >/dev/null && echo READABLE")).exit_code != 0


def test_signals_to_the_sandbox_init_change_nothing(make_sandbox, run):
    box = make_sandbox()
    run(box.exec("export STILL=here"))
    run(box.exec("for s in INT TERM HUP QUIT USR1 KILL; do kill -$s 1; done; true"))
    assert run(box.exec("echo $STILL")).output == "here\n"  # the same session shell


def test_commands_start_with_default_signal_dispositions(make_sandbox, run):
    box = make_sandbox(limits=SandboxLimits(timeout_s=20))
    # An ignored SIGPIPE is inherited across exec: every pipeline's writer would see write
    # errors where it should end quietly.
    assert run(box.exec("yes | head -n 1")).output == "y\n"
    # Nor may the host's ignored or blocked signals reach commands (nohup ignores SIGHUP).
    status = run(box.exec("grep -E '^Sig(Ign|Blk):' /proc/self/status")).output.split()
    assert status == ["SigBlk:", "0000000000000000", "SigIgn:", "0000000000000000"], status


def test_new_namespaces_and_mounts_are_refused(make_sandbox, run):
    box = make_sandbox()
    for command in ("unshare -r true", "unshare -n true", "unshare -m true",
                    "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m"):
        result = run(box.exec(command))
        assert result.exit_code != 0, f"{command!r} worked: {result.output}"
    status = run(box.exec("grep '^Seccomp:' /proc/self/status")).output
    assert status.split() == ["Seccomp:", "2"], status  # a filter is on


def test_with_the_network_on_the_hosts_loopback_stays_unreachable(make_sandbox, run,
                                                                  host_port):
    box = make_sandbox(limits=SandboxLimits(network=True))
    # 127.0.0.1 is the sandbox's own loopback; the default gateway is where user-mode
    # NAT would map the host's (slirp4netns' 10.0.2.2): both must refuse.
    run(box.write_file("/tmp/probe.py", textwrap.dedent(f"""
        import socket, struct
        hosts = ["127.0.0.1"]
        for line in open("/proc/net/route").read().splitlines()[1:]:
            fields = line.split()
            if fields[1] == "00000000":
                hosts.append(socket.inet_ntoa(struct.pack("<I", int(fields[2], 16))))
        for host in hosts:
            try:
                socket.create_connection((host, {host_port}), timeout=3)
                print(host, "CONNEC" + "TED")
            except OSError as e:
                print(host, e)
    """)))
    result = run(box.exec("python3 /tmp/probe.py", timeout=30))
    assert "CONNECTED" not in result.output, result.output
    assert "127.0.0.1" in result.output, result.output
    # A namespace of its own: a server inside can take the port the host's server holds.
    inner = run(box.exec(
        f"python3 -m http.server {host_port} --bind 127.0.0.1 >/dev/null 2>&1 & sleep 1;"
        f" python3 -c \"import urllib.request as u; print(u.urlopen("
        f"'http://127.0.0.1:{host_port}/', timeout=5).status)\"", timeout=30))
    assert inner.output.strip().endswith("200"), inner.output


def test_the_cpu_quota_holds(make_sandbox, run):
    box = make_sandbox(limits=SandboxLimits(cpus=0.25, timeout_s=30))
    # CPU seconds a busy loop gets in 2 s of wall time: ~0.5 under the quota, ~2 without.
    result = run(box.exec("TIMEFORMAT=%U; time timeout 2 sh -c 'while :; do :; done'"))
    used = float(result.output.strip().splitlines()[-1])
    assert 0 < used < 1.2, result.output
