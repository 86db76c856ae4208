"""``mounts``: host paths bound read-only into a sandbox, refused with a reason when unsafe."""

from __future__ import annotations

import pytest

from agentgym.core.registry import open_sandbox
from agentgym.core.sandbox import SandboxError, SandboxSpec
from agentgym.sandboxes.mounts import check_mounts


@pytest.fixture
def shared(tmp_path_factory: pytest.TempPathFactory):
    """A host folder like a shared environment: a file and a subfolder, world-readable."""
    root = tmp_path_factory.mktemp("shared")
    root.chmod(0o755)  # pytest makes its folders 0700: the sandbox user could not list it
    (root / "data.txt").write_text("hello from the host\n")
    (root / "sub").mkdir()
    (root / "sub" / "more.txt").write_text("more\n")
    return root


def test_a_mounted_folder_is_readable_and_not_writable(make_sandbox, run, shared) -> None:
    box = make_sandbox(mounts={"/opt/shared": str(shared)})
    assert run(box.exec("cat /opt/shared/data.txt /opt/shared/sub/more.txt")).output == (
        "hello from the host\nmore\n")
    for command in ("echo x > /opt/shared/data.txt", "touch /opt/shared/new",
                    "rm /opt/shared/data.txt", "mkdir /opt/shared/sub/dir"):
        assert run(box.exec(command)).exit_code != 0, command
    assert (shared / "data.txt").read_text() == "hello from the host\n"
    assert sorted(p.name for p in shared.iterdir()) == ["data.txt", "sub"]
    # The rest of the sandbox is as before: the workspace is still writable.
    assert run(box.exec("echo ok > here && cat here")).output == "ok\n"


def test_a_single_file_can_be_mounted(make_sandbox, run, shared) -> None:
    box = make_sandbox(mounts={"/opt/one.txt": str(shared / "data.txt")})
    assert run(box.exec("cat /opt/one.txt")).output == "hello from the host\n"
    assert run(box.exec("echo x >> /opt/one.txt")).exit_code != 0


def test_a_folder_the_sandbox_user_cannot_traverse_is_still_mounted(make_sandbox, run,
                                                                     tmp_path) -> None:
    # Like ~/.cache under /root (mode 0700): the files themselves are world-readable.
    locked = tmp_path / "locked"
    (locked / "env").mkdir(parents=True)
    (locked / "env" / "file").write_text("inside\n")
    locked.chmod(0o700)
    box = make_sandbox(mounts={"/opt/env": str(locked / "env")})
    assert run(box.exec("cat /opt/env/file")).output == "inside\n"


@pytest.mark.parametrize("inside, why", [
    ("relative/path", "absolute"),
    ("/", "overlap"),
    ("/workspace", "overlap"),
    ("/workspace/env", "overlap"),
    ("/usr/lib/env", "overlap"),
    ("/tmp", "overlap"),
])
def test_unsafe_mount_points_are_refused(inside: str, why: str, shared) -> None:
    # The spec refuses what no backend allows; check_mounts what clashes with a backend's own.
    with pytest.raises(SandboxError, match=why):
        spec = SandboxSpec(mounts={inside: str(shared)})
        check_mounts(spec.mounts, ("/tmp", "/usr", "/workspace"))


def test_a_mount_may_not_hide_a_workspace_elsewhere(backend, run, shared) -> None:
    with pytest.raises(SandboxError, match="overlap the sandbox's own /srv/app"):
        run(open_sandbox(backend, workdir="/srv/app", mounts={"/srv": str(shared)}))


def test_a_missing_host_path_is_refused(tmp_path) -> None:
    with pytest.raises(SandboxError, match="no such file or directory"):
        check_mounts({"/opt/x": str(tmp_path / "absent")}, ())


def test_mounts_are_validated_before_anything_starts(backend, run, tmp_path) -> None:
    with pytest.raises(SandboxError, match="no such file"):
        run(open_sandbox(backend, mounts={"/opt/x": str(tmp_path / "absent")}))


# ---- scratch_dirs: empty writable folders at fixed paths -----------------------------------

def test_scratch_dirs_are_empty_and_writable(make_sandbox, run) -> None:
    box = make_sandbox(workdir="/app", scratch_dirs=("/tests", "/logs/"))
    assert run(box.exec("ls -A /tests /logs")).output == "/logs:\n\n/tests:\n"
    assert run(box.exec("mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt &&"
                        " echo t > /tests/x && cat /tests/x /logs/verifier/reward.txt")
               ).output == "t\n1\n"
    assert run(box.exec("touch /srv 2>/dev/null || touch /opt/x")).exit_code != 0


@pytest.mark.parametrize("paths, why", [
    (("relative",), "absolute path"),
    (("/",), "other than '/'"),
    (("/tests", "/tests/"), "given twice"),
    ("/tests", "sequence of absolute paths"),
])
def test_bad_scratch_dirs_are_refused_by_the_spec(paths, why) -> None:
    with pytest.raises(SandboxError, match=why):
        SandboxSpec(scratch_dirs=paths)


def test_scratch_dirs_may_not_overlap_the_sandbox(backend, run, shared) -> None:
    for spec, clash in [({"scratch_dirs": ("/workspace/tests",)}, "/workspace"),
                        ({"scratch_dirs": ("/tmp/x",)}, "/tmp"),
                        ({"scratch_dirs": ("/opt/shared/x",), "mounts": {
                            "/opt/shared": str(shared)}}, "/opt/shared"),
                        ({"scratch_dirs": ("/a", "/a/b")}, "/a/b")]:
        with pytest.raises(SandboxError, match=f"would hide or overlap {clash}"):
            run(open_sandbox(backend, SandboxSpec(**spec)))
