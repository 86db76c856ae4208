"""The local backend's template cache: one copy per template version, shared by every
process, and copies that are stale, idle or from the old keys removed unless in use."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentgym.core.registry import open_sandbox
from agentgym.sandboxes import templates

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="template copies are chowned to the sandbox user: root")
needs_local = pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="the local sandbox needs bubblewrap (apt-get install"
                                        " bubblewrap)")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty template cache of this test's own."""
    root = tmp_path / "cache"
    monkeypatch.setattr(templates, "TEMPLATE_DIR", root)
    return root


@pytest.fixture
def template(tmp_path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "README").write_text("hello\n")
    return root


def copies(cache: Path) -> list[str]:
    """The cached copies (folders not hidden)."""
    return sorted(p.name for p in cache.iterdir() if p.is_dir() and not p.name.startswith("."))


def edit(path: Path, text: str) -> None:
    """Rewrite a file so that its size or mtime changes (the key must see it)."""
    before = path.stat().st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_the_key_is_the_same_in_every_process_and_sees_nested_edits(template):
    key = templates.template_key(template)
    other = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path;"
                            " from agentgym.sandboxes.templates import template_key;"
                            " print(template_key(Path(sys.argv[1])))", str(template)],
                           capture_output=True, text=True, check=True)
    assert other.stdout.strip() == key  # unlike hash(), salted per process
    edit(template / "pkg" / "mod.py", "x = 2\n")  # nested: the root's mtime does not change
    assert templates.template_key(template) != key


@needs_local
def test_two_processes_opening_the_same_template_share_one_copy(tmp_path, template):
    cache = tmp_path / "shared-cache"
    script = textwrap.dedent("""\
        import asyncio, sys
        from agentgym.core.registry import open_sandbox

        async def main():
            async with await open_sandbox("local", template=sys.argv[1]) as box:
                print((await box.exec("cat pkg/mod.py")).output, end="")
                print(box.template.path)  # the cached copy its workspace is over

        asyncio.run(main())
        """)
    env = {**os.environ, "AGENTGYM_TEMPLATE_DIR": str(cache)}
    env.pop("PYTHONHASHSEED", None)  # each process salts hash() its own way

    def start() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", script, str(template)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    used = set()
    for batch in ([start(), start()], [start()]):  # at once, then one more later
        for process in batch:
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err
            content, copy = out.splitlines()
            assert content == "x = 1"
            used.add(copy)
    assert len(used) == 1, used
    assert copies(cache) == [Path(used.pop()).name]
    [copy] = copies(cache)
    assert (cache / copy / "pkg" / "mod.py").stat().st_uid == templates.SANDBOX_UID


def test_a_changed_template_gets_a_new_copy_and_the_old_one_goes(cache, template):
    first = templates.acquire(template)
    first.release()
    edit(template / "pkg" / "mod.py", "x = 2\n")
    second = templates.acquire(template)
    try:
        assert second.path != first.path
        assert copies(cache) == [second.path.name]
        assert (second.path / "pkg" / "mod.py").read_text() == "x = 2\n"
        assert not (cache / (first.path.name + ".lock")).exists()
    finally:
        second.release()


@needs_local
def test_a_copy_a_live_sandbox_uses_is_kept_until_it_closes(cache, template, run):
    box = run(open_sandbox("local", template=str(template)))
    try:
        old = box.template.path
        edit(template / "pkg" / "mod.py", "x = 2\n")
        newer = templates.acquire(template)
        newer.release()
        assert sorted(copies(cache)) == sorted([old.name, newer.path.name])
        assert run(box.exec("cat pkg/mod.py")).output == "x = 1\n"  # still whole
    finally:
        run(box.close())
    # The next cleanup removes it: after a new copy, every CLEAN_INTERVAL_S, or gc.
    templates.clean(keep=newer.path.name, source=template.resolve())
    assert copies(cache) == [newer.path.name]


def test_acquire_scans_the_cache_after_a_new_copy_or_now_and_then(cache, template,
                                                                  monkeypatch):
    scans = []
    monkeypatch.setattr(templates, "clean", lambda **kwargs: scans.append(kwargs))
    monkeypatch.setattr(templates, "_last_clean", [float("-inf")])
    templates.acquire(template).release()  # a new copy
    templates.acquire(template).release()  # the same copy, just after a scan
    assert len(scans) == 1
    monkeypatch.setattr(templates, "CLEAN_INTERVAL_S", 0.0)
    templates.acquire(template).release()
    assert len(scans) == 2


def test_copies_idle_past_the_ttl_are_removed_unless_held(cache, tmp_path, template):
    other = tmp_path / "other"
    other.mkdir()
    (other / "f").write_text("f\n")
    idle = templates.acquire(other)
    idle.release()
    held = templates.acquire(template)
    try:
        week_ago = time.time() - 7 * 24 * 3600
        for copy in (idle, held):
            os.utime(cache / (copy.path.name + ".lock"), (week_ago, week_ago))
        assert templates.clean(max_idle_s=24 * 3600) == 1
        assert copies(cache) == [held.path.name]
    finally:
        held.release()
    assert templates.clean(max_idle_s=24 * 3600) == 1
    assert copies(cache) == []


def test_copies_from_the_old_keys_go_once_no_sandbox_mounts_them(cache, tmp_path):
    cache.mkdir()
    legacy = [cache / "repo-1f3a9c0e2b", cache / "repo-77aa"]
    for folder in legacy:
        (folder / "pkg").mkdir(parents=True)
        os.chown(folder, templates.SANDBOX_UID, templates.SANDBOX_UID)
    # The first is still the lower layer of an overlay in another mount namespace, as a
    # sandbox made by an older agentgym would have it.
    for name in ("upper", "work", "merged"):
        (tmp_path / name).mkdir()
    mounted = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         f"mount -t overlay overlay -o lowerdir={legacy[0]},upperdir={tmp_path}/upper,"
         f"workdir={tmp_path}/work {tmp_path}/merged && echo ready && exec sleep 60"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert mounted.stdout.readline() == "ready\n"
        assert templates.clean(max_idle_s=3600) == 0  # too recent to be sure
        assert templates.clean(max_idle_s=0) == 1
        assert copies(cache) == [legacy[0].name]
    finally:
        mounted.kill()
        mounted.wait()
    assert templates.clean(max_idle_s=0) == 1
    assert copies(cache) == []


def test_half_made_copies_of_dead_processes_are_removed(cache, template):
    finished = subprocess.Popen(["true"])  # its pid is free once it ends
    finished.wait()
    cache.mkdir()
    leftover = cache / f".repo-abc.{finished.pid}.0"
    ours = cache / f".repo-abc.{os.getpid()}.0"
    leftover.mkdir()
    ours.mkdir()
    templates.clean()
    assert not leftover.exists() and ours.exists()
