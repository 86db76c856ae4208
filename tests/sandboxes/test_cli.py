"""`agentgym sandbox exec`: what an agent's command would do, with its exit code."""

import os
import subprocess

import pytest


def sandbox(cli, *args, **kwargs):
    return subprocess.run([cli, "sandbox", *args], capture_output=True, text=True, **kwargs)


def test_exec_prints_output_and_returns_the_exit_code(backend, agentgym_cli):
    out = sandbox(agentgym_cli, "exec", "--backend", backend, "--", "echo hello; exit 3")
    assert out.returncode == 3 and out.stdout.startswith("hello\n")
    out = sandbox(agentgym_cli, "exec", "--backend", backend, "--", "ls", "-d", "/workspace")
    assert (out.returncode, out.stdout) == (0, "/workspace\n")


def test_exec_timeout_exits_124(backend, agentgym_cli):
    out = sandbox(agentgym_cli, "exec", "--backend", backend, "--timeout", "0.5", "--",
                  "sleep 30")
    assert out.returncode == 124 and "timed out" in out.stdout


def test_exec_with_a_template(backend, agentgym_cli, tmp_path):
    (tmp_path / "hello.txt").write_text("from the template\n")
    out = sandbox(agentgym_cli, "exec", "--backend", backend, "--template", str(tmp_path),
                  "--", "cat hello.txt; rm hello.txt")
    assert out.stdout == "from the template\n"
    assert (tmp_path / "hello.txt").exists()


def test_unknown_backend_is_explained(agentgym_cli):
    out = sandbox(agentgym_cli, "exec", "--backend", "lokal", "--", "true")
    assert out.returncode == 1 and "Did you mean 'local'?" in out.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="checks the root-only local backend's message")
def test_missing_bubblewrap_says_how_to_install_it(agentgym_cli, tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # no bwrap on this PATH
    out = sandbox(agentgym_cli, "exec", "--", "true", env=env)
    assert out.returncode == 1
    assert "apt-get install bubblewrap" in out.stderr


def test_an_image_on_the_local_backend_is_refused_with_the_fix(agentgym_cli):
    out = sandbox(agentgym_cli, "exec", "--image", "agentgym/sandbox:default", "--", "true")
    assert out.returncode == 1
    assert ("the local backend does not support image='agentgym/sandbox:default'"
            in out.stderr)
    assert "--backend docker" in out.stderr
