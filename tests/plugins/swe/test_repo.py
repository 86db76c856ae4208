"""sdist -> reproducible git repository, test discovery, and the shared dependency env.

The tests marked ``project`` use a real PyPI project (inflection 0.5.1: one module, a
1-second suite), built once into the default cache; they skip when it is not cached and
PyPI cannot be reached.
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import socket
import subprocess
import tarfile
from pathlib import Path

import pytest

from agentgym.core.pyenv import PythonEnvError
from agentgym.plugins.swe import repo
from agentgym.plugins.swe.repo import (
    ENV_MOUNT,
    RepoError,
    build_task_repo,
    commit_all,
    find_test_files,
    import_root,
    pytest_targets,
    requirements_for_tests,
    source_files,
    split_spec,
    task_commit,
    unpack_sdist,
)

PACKAGE, VERSION = "inflection", "0.5.1"


def offline_reason(package: str = PACKAGE, version: str = VERSION) -> str | None:
    """Why ``package==version`` cannot be fetched now, or None (cached, or PyPI is up)."""
    cached = repo.env_dir(package, version) / repo.ENV_READY
    if cached.is_file():
        return None
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError as error:
        return f"PyPI is unreachable ({error}) and {package}=={version} is not cached"
    return None


@pytest.fixture(scope="module")
def project() -> repo.Project:
    reason = offline_reason()
    if reason:
        pytest.skip(reason)
    return repo.prepare(PACKAGE, VERSION)


def make_tree(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


# ---- offline: names, discovery, commits ---------------------------------------------------


def test_split_spec_needs_one_pinned_version() -> None:
    assert split_spec("toolz==1.2.0") == ("toolz", "1.2.0")
    for bad in ("toolz", "toolz>=1", "toolz==", "==1.0", "toolz==1,<2"):
        with pytest.raises(RepoError, match="PACKAGE==VERSION"):
            split_spec(bad)


def test_tests_are_found_as_pytest_would(tmp_path: Path) -> None:
    make_tree(tmp_path, {
        "pkg/__init__.py": "", "pkg/core.py": "", "pkg/tests/__init__.py": "",
        "pkg/tests/test_core.py": "", "pkg/tests/helpers.py": "",
        "pkg/sub/tests/test_sub.py": "", "test_root.py": "", "tests/io_test.py": "",
        "build/lib/test_copy.py": "", ".tox/x/test_hidden.py": "", "x.egg/test_egg.py": "",
        "venv2/pyvenv.cfg": "", "venv2/test_in_venv.py": "", "docs/conf.py": "",
    })
    found = find_test_files(tmp_path)
    assert found == ["pkg/sub/tests/test_sub.py", "pkg/tests/test_core.py", "test_root.py",
                     "tests/io_test.py"]
    assert pytest_targets(found) == ["pkg/sub/tests", "pkg/tests", "test_root.py", "tests"]
    assert source_files(tmp_path) == ["pkg/__init__.py", "pkg/core.py"]
    assert import_root(tmp_path) == "."


def test_testpaths_in_the_config_limit_discovery(tmp_path: Path) -> None:
    make_tree(tmp_path, {"setup.cfg": "[tool:pytest]\ntestpaths = checks\n",
                         "checks/test_a.py": "", "other/test_b.py": ""})
    assert find_test_files(tmp_path) == ["checks/test_a.py"]


def test_a_src_layout_imports_from_src(tmp_path: Path) -> None:
    make_tree(tmp_path, {"src/lib/__init__.py": "", "src/lib/a.py": "", "tests/test_a.py": ""})
    assert import_root(tmp_path) == "src"
    assert source_files(tmp_path) == ["src/lib/__init__.py", "src/lib/a.py"]


def test_test_dependency_groups_are_read_with_their_includes(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[dependency-groups]\nlint = ["ruff"]\nbase = ["hypothesis"]\n'
        'test = ["pytest-mock", {include-group = "base"}]\n')
    assert requirements_for_tests(tmp_path) == ["pytest-mock", "hypothesis"]


def test_commits_do_not_depend_on_the_user_or_the_clock(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"pkg/__init__.py": "x = 1\n", "run.sh": "#!/bin/sh\n", ".gitignore": "*.log\n",
             "notes.log": "ignored files are part of an sdist too\n"}
    first = commit_all(make_tree(tmp_path / "a", files), "pkg 1.0\n")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "someone else")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2024-05-05T10:00:00Z")
    second = commit_all(make_tree(tmp_path / "b", files), "pkg 1.0\n")
    assert first == second
    assert "notes.log" in repo.git(tmp_path / "b", "ls-files").split()
    (tmp_path / "c").mkdir()
    make_tree(tmp_path / "c", files)
    os.chmod(tmp_path / "c" / "run.sh", 0o755)  # git records the executable bit
    assert commit_all(tmp_path / "c", "pkg 1.0\n") != first


def test_task_commit_is_what_a_rebuilt_tree_commits(tmp_path: Path) -> None:
    files = {"pkg/__init__.py": "x = 1\n", "pkg/core.py": "def f():\n    return 1\n"}
    clean = make_tree(tmp_path / "clean", files)
    commit_all(clean, "pkg 1.0\n")
    expected = task_commit(clean, {"pkg/core.py": "def f():\n    return 2\n"}, "pkg 1.0\n")
    rebuilt = make_tree(tmp_path / "rebuilt", {**files, "pkg/core.py": "def f():\n"
                                                                       "    return 2\n"})
    assert commit_all(rebuilt, "pkg 1.0\n") == expected
    assert repo.git(clean, "status", "--porcelain") == ""  # the clean repo is untouched


def test_unpacking_drops_the_top_folder_and_refuses_escapes(tmp_path: Path) -> None:
    def archive(name: str, members: dict[str, bytes]) -> Path:
        path = tmp_path / name
        with tarfile.open(path, "w:gz") as tar:
            for member, data in members.items():
                info = tarfile.TarInfo(member)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return path

    good = archive("pkg-1.0.tar.gz", {"pkg-1.0/setup.py": b"", "pkg-1.0/pkg/__init__.py": b""})
    out = unpack_sdist(good, tmp_path / "out")
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "pkg", "pkg/__init__.py", "setup.py"]
    evil = archive("evil-1.0.tar.gz", {"../escape.py": b"x"})
    with pytest.raises((RepoError, tarfile.TarError)):
        unpack_sdist(evil, tmp_path / "evil")
    assert not (tmp_path / "escape.py").exists()


# ---- a real project ------------------------------------------------------------------------


def test_the_sdist_repository_is_reproducible(project: repo.Project, tmp_path: Path) -> None:
    # Built again from the sdist alone: the same commit as the cached one.
    assert build_task_repo(PACKAGE, VERSION, "", tmp_path / "again") == project.commit
    assert repo.head(project.repo) == project.commit
    assert repo.git(project.repo, "status", "--porcelain") == ""
    assert project.test_targets == ("test_inflection.py",)
    assert project.repo_name == "pypi/inflection"


def test_a_task_repository_is_rebuilt_from_its_patch(project: repo.Project,
                                                     tmp_path: Path) -> None:
    path = "inflection/__init__.py"
    clean = (project.repo / path).read_text()
    buggy = clean.replace("def camelize(", "def camelize_(", 1)
    work = tmp_path / "work"
    shutil.copytree(project.repo, work)
    expected = task_commit(work, {path: buggy}, repo.commit_message(PACKAGE, VERSION))
    patch = repo.git(work, "diff", expected, project.commit)  # the fix, bug -> clean
    assert patch.startswith(f"diff --git a/{path} b/{path}\n")
    commit = build_task_repo(PACKAGE, VERSION, patch, tmp_path / "task")
    assert commit == expected
    assert (tmp_path / "task" / path).read_text() == buggy
    # A root commit: the history holds no clean version to diff against.
    assert repo.git(tmp_path / "task", "rev-list", "--all").split() == [commit]
    with pytest.raises(RepoError, match="reverse-apply"):
        build_task_repo(PACKAGE, VERSION, patch.replace("camelize", "nothing"),
                        tmp_path / "bad")


def test_the_env_has_the_tests_dependencies_but_not_the_project(project: repo.Project,
                                                                tmp_path: Path) -> None:
    python = str(project.env / "bin" / "python")
    assert Path(python).resolve() == Path(repo.SANDBOX_PYTHON).resolve()
    probe = ("import importlib.metadata as m, importlib.util as u, pytest;"
             f"print(m.version('{PACKAGE}'), u.find_spec('{PACKAGE}'))")
    out = subprocess.run([python, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == [VERSION, "None"]  # metadata only: the code comes from the workspace
    # Built once: a second call reuses it.
    assert repo.dependency_env(PACKAGE, VERSION) == project.env
    # Relocated to where sandboxes mount it: no file names the folder it was built in.
    assert project.env == repo.env_dir(PACKAGE, VERSION)
    assert project.env.parent.name == f"v{repo.ENV_LAYOUT}"
    assert (project.env / "bin" / "pytest").read_text().startswith(f"#!{ENV_MOUNT}/bin/python")
    assert f"-m venv {ENV_MOUNT}\n" in (project.env / "pyvenv.cfg").read_text()
    named = [p for p in project.env.rglob("*") if p.is_file() and not p.is_symlink()
             and str(project.env).encode() in p.read_bytes()]
    assert named == []


def test_relocating_an_env_rewrites_every_path_to_the_mount(tmp_path: Path) -> None:
    # Built through a symlink (as a cache whose envs/ links to another's): both spellings.
    (tmp_path / "built").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "built")
    env = tmp_path / "link" / "env"
    subprocess.run([repo.SANDBOX_PYTHON, "-m", "venv", "--without-pip", str(env)], check=True)
    site = Path(subprocess.run([str(env / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (env / "bin" / "tool").write_text(f"#!{env}/bin/python\nimport mod\n")
    (site / "extra.pth").write_text(f"{env}/extra\n{env.resolve()}/more\n")
    (site / "mod.py").write_text("VALUE = 1\n")
    subprocess.run([str(env / "bin" / "python"), "-m", "compileall", "-q", str(site)],
                   check=True)
    (env / "bin" / "here").symlink_to(env / "bin" / "tool")
    repo.relocate_env(env, "/opt/x")
    assert (env / "bin" / "tool").read_text() == "#!/opt/x/bin/python\nimport mod\n"
    assert (site / "extra.pth").read_text() == "/opt/x/extra\n/opt/x/more\n"
    assert " /opt/x\n" in (env / "pyvenv.cfg").read_text()
    assert os.readlink(env / "bin" / "here") == "/opt/x/bin/tool"
    compiled = next((site / "__pycache__").glob("mod.*.pyc")).read_bytes()
    assert b"/opt/x/" in compiled and str(env).encode() not in compiled
    # The env still runs where it was built (python -m); its scripts run at the mount.
    subprocess.run([str(env / "bin" / "python"), "-c", "import mod"], check=True, cwd=tmp_path)
    # A binary file naming the build folder cannot be rewritten: the error names it.
    (env / "lib" / "blob.so").write_bytes(b"\0" + str(env).encode())
    with pytest.raises(PythonEnvError, match=r"binary files name the build folder: lib/blob\.so"):
        repo.relocate_env(env, "/opt/x")


def test_the_suite_passes_in_a_sandbox_with_the_env_mounted(project: repo.Project) -> None:
    from agentgym.core.registry import open_sandbox
    from agentgym.core.sandbox import SandboxLimits
    from agentgym.plugins.swe.suite import local_sandbox_missing, parse_pytest_report

    if local_sandbox_missing():
        pytest.skip(f"local sandbox unavailable: {local_sandbox_missing()}")

    async def run() -> tuple[str, str]:
        async with await open_sandbox("local", template=str(project.repo),
                                      mounts=project.mounts,
                                      limits=SandboxLimits(output_bytes=1 << 22)) as box:
            result = await box.exec(project.test_cmd(), timeout=120)
            write = await box.exec(f"touch {ENV_MOUNT}/x 2>&1; git status --porcelain")
        return result.output, write.output

    output, after = asyncio.run(run())
    statuses = parse_pytest_report(output)
    assert len(statuses) > 100 and set(statuses.values()) == {"PASSED"}, output[-2000:]
    assert "Read-only file system" in after
    assert after.strip().endswith("Read-only file system")  # and the workspace stays clean


class _Box:
    """A sandbox whose one command gives ``result``: what the env check makes of it."""

    def __init__(self, result):
        self.result, self.timeouts = result, []

    async def exec(self, command, timeout=None):
        self.timeouts.append(timeout)
        return self.result


def test_the_env_check_tells_a_broken_env_from_a_machine_too_loaded_to_start_pytest(tmp_path):
    from agentgym.core.sandbox import ExecResult
    from agentgym.plugins.swe.env import _check_env_runs

    project = repo.Project("toolz", "1.2.0", tmp_path, "0" * 40, tmp_path / "env", ".",
                           ("tests",))
    broken = _Box(ExecResult(127, "python3: not found"))
    with pytest.raises(RepoError, match=r"does not run in this sandbox.*python3: not found"):
        asyncio.run(_check_env_runs(broken, project, timeout=900))
    slow = _Box(ExecResult(124, "[timed out after 900 s]", timed_out=True))
    with pytest.raises(RepoError, match=r"did not start pytest within 900 s.*too loaded"):
        asyncio.run(_check_env_runs(slow, project, timeout=900))
    assert broken.timeouts == slow.timeouts == [900]
    asyncio.run(_check_env_runs(_Box(ExecResult(0, "pytest 9.0")), project, timeout=900))
