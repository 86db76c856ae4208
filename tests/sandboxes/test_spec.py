"""Each built-in backend honours the spec fields it supports and refuses the others by
name, before anything starts."""

from __future__ import annotations

import pytest

from agentgym.core.registry import open_sandbox, sandbox_backend
from agentgym.core.sandbox import (
    SandboxError,
    SandboxSpec,
    SandboxSpecError,
    UnsupportedFieldError,
)


def test_the_local_backend_refuses_an_image_naming_the_field_and_the_fix(run):
    with pytest.raises(UnsupportedFieldError) as error:
        run(open_sandbox("local", image="agentgym/sandbox:default"))
    assert str(error.value).startswith(
        "the local backend does not support image='agentgym/sandbox:default': ")
    assert "images need the docker backend (--backend docker" in str(error.value)
    # Refused by the spec check, before the host is even looked at.
    with pytest.raises(UnsupportedFieldError):
        sandbox_backend("local").check(SandboxSpec(image="x"))


def test_the_docker_backend_supports_every_field():
    sandbox_backend("docker").check(SandboxSpec(
        template="/t", image="i", workdir="/testbed", mounts={"/opt/x": "/h"},
        env={"A": "1"}))


def test_the_backends_say_what_a_spec_without_an_image_runs_in():
    from agentgym.sandboxes import image

    docker = sandbox_backend("docker").default_image
    assert docker is not None
    assert (docker.name, docker.programs, docker.user, docker.home) == (
        image.DEFAULT_IMAGE, image.PROGRAMS, image.SANDBOX_USER, image.SANDBOX_HOME)
    local = sandbox_backend("local")
    assert local.default_image is None  # the host's own system directories
    with pytest.raises(SandboxError, match="the local backend runs no images"):
        local.build_image(base="agentgym/sandbox:default")


def test_the_workspace_may_live_elsewhere(make_sandbox, run, tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    box = make_sandbox(template=str(tmp_path), workdir="/srv/app")
    assert box.workdir == "/srv/app"
    result = run(box.exec("pwd; cat pkg/a.py; echo new > b.txt && cd pkg && pwd"))
    assert result.output == "/srv/app\nx = 1\n/srv/app/pkg\n", result.output
    assert run(box.read_file("b.txt")) == b"new\n"
    run(box.write_file("c.txt", "written"))
    assert run(box.exec("cat /srv/app/c.txt")).output == "written"
    assert not (tmp_path / "b.txt").exists()  # the template never changes


def test_the_workspace_may_be_the_agent_home(make_sandbox, run, tmp_path):
    """Tasks written for an agent working in its home (AgentBench's) put the workspace at
    /home/agent: both backends take it, with the template's files there."""
    (tmp_path / "notes.txt").write_text("seed\n")
    box = make_sandbox(template=str(tmp_path), workdir="/home/agent")
    result = run(box.exec("pwd; cat notes.txt; echo more >> notes.txt; id -u"))
    assert result.output.splitlines()[:2] == ["/home/agent", "seed"], result.output
    assert run(box.read_file("/home/agent/notes.txt")) == b"seed\nmore\n"
    assert (tmp_path / "notes.txt").read_text() == "seed\n"


@pytest.mark.parametrize("workdir", ["/tmp", "/proc/x", "/dev"])
def test_a_workspace_over_the_sandbox_own_directories_is_refused(backend, run, workdir):
    with pytest.raises(SandboxSpecError, match=f"workdir {workdir!r} would hide or overlap"):
        run(open_sandbox(backend, workdir=workdir))
