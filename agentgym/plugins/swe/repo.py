"""Python projects from PyPI sdists as reproducible git repositories, with a shared test env.

The contract, for a project named by ``(package, version)``:

* :func:`download_sdist`: the source distribution, fetched once with
  ``pip download --no-deps --no-binary :all:`` into the cache.
* :func:`source_repo`: a git repository holding every file of the sdist in one root commit
  made with a fixed identity and date (:data:`IDENTITY`), so that its hash is the same on
  every machine. Cached; never edit it.
* :func:`build_task_repo`: the repository at a task's ``base_commit`` from
  ``(package, version, patch)`` alone: the sdist's files with the gold ``patch`` reversed,
  committed as a *root* commit with the same identity and message. Being a root commit,
  its history shows no clean version to diff against. :func:`task_commit` computes the same
  hash without a checkout.
* :func:`dependency_env`: one virtual environment per project, made with
  :data:`SANDBOX_PYTHON` (the interpreter inside the local sandbox, which binds only /usr
  and /etc), holding pytest and the project's runtime and test dependencies but *not* the
  project's code (only its metadata, so ``importlib.metadata.version`` works): tests import
  the workspace's code through ``PYTHONPATH``. Built once under a lock, then shared
  read-only, mounted at :data:`ENV_MOUNT` in sandboxes (:attr:`Project.mounts`). It is
  built in the cache, then *relocated* to :data:`ENV_MOUNT` (:func:`relocate_env`): its
  scripts' shebangs, ``pyvenv.cfg``, activate scripts and bytecode name the mount point,
  never the host folder, so ``pip``, ``pytest`` and every other script of the env run
  inside a sandbox. :meth:`Project.sandbox_env` is the environment that puts the env's
  ``bin`` first on a sandbox's PATH.
* :func:`find_test_files` finds the test files as pytest's defaults would;
  :meth:`Project.test_cmd` is the shell command, run from the workspace, that runs them
  with ``-rA`` status lines.

:func:`prepare` does all of it and returns a :class:`Project`. The cache lives in
``$AGENTGYM_SWE_CACHE`` (default ``swe/`` in the agentgym cache root,
:func:`agentgym.core.cache.cache_root`): ``sdists/``, ``repos/``,
``envs/`` (one folder per :data:`ENV_LAYOUT`).
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agentgym.core import pyenv
from agentgym.core.cache import cache_root, file_lock
from agentgym.core.errors import AgentGymError
from agentgym.core.pyenv import relocate_env
from agentgym.core.sandbox import DEFAULT_WORKDIR
from agentgym.plugins.swe.instance import is_test_path

#: Author and committer of every commit made here; with a fixed date and message, a tree
#: always gives the same commit hash.
IDENTITY = {
    "GIT_AUTHOR_NAME": "agentgym", "GIT_AUTHOR_EMAIL": "swe@agentgym.invalid",
    "GIT_AUTHOR_DATE": "946684800 +0000",  # 2000-01-01T00:00:00Z
    "GIT_COMMITTER_NAME": "agentgym", "GIT_COMMITTER_EMAIL": "swe@agentgym.invalid",
    "GIT_COMMITTER_DATE": "946684800 +0000",
}
#: The interpreter the dependency envs are made with: the one inside the local sandbox.
SANDBOX_PYTHON = os.environ.get("AGENTGYM_SWE_PYTHON", pyenv.SANDBOX_PYTHON)
#: Where sandboxes see the dependency env, and the interpreter in it.
ENV_MOUNT = "/opt/agentgym/env"
ENV_PYTHON = f"{ENV_MOUNT}/bin/python"
#: pytest is pinned so that node ids and statuses read the same wherever an env is built.
PYTEST_REQUIREMENT = "pytest==8.4.2"
#: Extras and dependency groups (PEP 735) that hold a project's test dependencies.
TEST_EXTRAS = ("test", "tests", "testing")
#: Folders pytest does not recurse into by default (``norecursedirs``), plus VCS folders.
NORECURSE = re.compile(r"^(\..*|.*\.egg|_darcs|build|CVS|dist|node_modules|venv|\{arch\})$")
TEST_FILE = re.compile(r"^(test_.*|.*_test)\.py$")
#: Written last into a dependency env: its installed packages; the env is complete.
ENV_READY = ".agentgym-ready.json"
#: How dependency envs are laid out; their cache folder is ``envs/v<ENV_LAYOUT>/``, so an
#: env made by an older agentgym is never reused. 2: relocated to :data:`ENV_MOUNT` (layout
#: 1 envs had shebangs naming the host's cache folder, so their scripts could not run in a
#: sandbox).
ENV_LAYOUT = 2
#: The PATH of a sandbox working on a project, after the env's ``bin``: Debian's default.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class RepoError(AgentGymError):
    """A project could not be fetched, unpacked, committed or given its environment."""


def cache_dir() -> Path:
    """The SWE cache: ``$AGENTGYM_SWE_CACHE``, else ``swe/`` in the agentgym cache root."""
    override = os.environ.get("AGENTGYM_SWE_CACHE")
    return Path(override).expanduser() if override else cache_root() / "swe"


def canonical(package: str) -> str:
    """The normalized project name (PEP 503): ``Foo_Bar`` -> ``foo-bar``."""
    return re.sub(r"[-_.]+", "-", package).lower()


def split_spec(spec: str) -> tuple[str, str]:
    """``"toolz==1.2.0"`` -> ``("toolz", "1.2.0")``; a pinned version is required."""
    name, sep, version = spec.partition("==")
    if not sep or not name.strip() or not version.strip() or re.search(r"[<>=!~,;\s]",
                                                                        version.strip()):
        raise RepoError(f"{spec!r} is not PACKAGE==VERSION; pin one exact version, e.g."
                        " toolz==1.2.0")
    return name.strip(), version.strip()


def _run(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None,
         what: str = "", input: bytes | None = None, timeout: float = 1800) -> str:
    result = subprocess.run(argv, cwd=cwd, env=env, input=input, capture_output=True,
                            timeout=timeout)
    if result.returncode != 0:
        output = (result.stdout + result.stderr).decode(errors="replace").strip()
        raise RepoError(f"{what or 'command'} failed (exit {result.returncode}):"
                        f" {shlex.join(argv)}\n{output[-3000:]}")
    return result.stdout.decode(errors="replace")


def git(repo: Path, *args: str, input: bytes | None = None,
        env: dict[str, str] | None = None) -> str:
    """Run git in ``repo`` with no user or system configuration (hooks, signing, autocrlf
    would make commits differ between machines) and the fixed :data:`IDENTITY`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    base.update(IDENTITY, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
                LC_ALL="C", **(env or {}))
    config = ["-c", "core.autocrlf=false", "-c", "core.fileMode=true",
              "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main",
              "-c", "core.quotePath=false", "-c", "advice.detachedHead=false"]
    return _run(["git", *config, *args], cwd=repo, env=base, input=input,
                what=f"git {args[0]}")


def commit_message(package: str, version: str) -> str:
    """The message of every commit of a project's repositories (neutral: no hint of a bug)."""
    return f"{package} {version}\n"


# ---- sdists ---------------------------------------------------------------------------


def download_sdist(package: str, version: str, cache: Path | None = None) -> Path:
    """The sdist archive of ``package==version``, downloaded once into the cache."""
    folder = (cache or cache_dir()) / "sdists" / f"{canonical(package)}-{version}"
    with file_lock(folder.with_suffix(".lock")):
        found = _archives(folder)
        if found:
            return found[0]
        with tempfile.TemporaryDirectory(prefix="sdist-", dir=folder.parent) as tmp:
            try:
                _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
                      ":all:", "--disable-pip-version-check", "-d", tmp,
                      f"{package}=={version}"], what=f"pip download of {package}=={version}")
            except RepoError as error:
                raise RepoError(f"could not download the sdist of {package}=={version} from"
                                f" PyPI (is the network up, and does that version have an"
                                f" sdist?): {error}") from None
            archives = _archives(Path(tmp))
            if len(archives) != 1:
                raise RepoError(f"pip download of {package}=={version} gave"
                                f" {[p.name for p in Path(tmp).iterdir()]}, not one sdist")
            folder.mkdir(parents=True, exist_ok=True)
            return Path(shutil.move(archives[0], folder / archives[0].name))


def _archives(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir()
                  if p.name.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")))


def unpack_sdist(archive: Path, dest: Path) -> Path:
    """Extract ``archive`` into ``dest`` (created, must be empty), without its top folder.

    Extraction refuses absolute paths and links leaving the tree; file modes are kept (git
    records the executable bit) minus group/other write and setuid bits.
    """
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise RepoError(f"cannot unpack {archive.name} into {dest}: the folder is not empty")
    with tempfile.TemporaryDirectory(prefix="unpack-", dir=dest.parent) as tmp:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zipped:
                for name in zipped.namelist():
                    if name.startswith("/") or ".." in Path(name).parts:
                        raise RepoError(f"{archive.name} holds an unsafe path {name!r}")
                zipped.extractall(tmp)
        else:
            with tarfile.open(archive) as tar:
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(tmp, filter="data")
                else:  # Python < 3.10.12: no filters
                    for member in tar.getmembers():
                        if member.name.startswith("/") or ".." in Path(member.name).parts:
                            raise RepoError(f"{archive.name} holds an unsafe path"
                                            f" {member.name!r}")
                    tar.extractall(tmp)
        entries = list(Path(tmp).iterdir())
        top = entries[0] if len(entries) == 1 and entries[0].is_dir() else Path(tmp)
        for entry in top.iterdir():
            shutil.move(str(entry), dest / entry.name)
    return dest


# ---- repositories -----------------------------------------------------------------------


def commit_all(repo: Path, message: str) -> str:
    """``git init`` ``repo`` if needed and commit every file in it (ignored ones too: the
    repository is the whole sdist) as a root commit; returns the commit hash."""
    if not (repo / ".git").exists():
        git(repo, "init", "-q")
    git(repo, "add", "-A", "-f", ".")
    tree = git(repo, "write-tree").strip()
    commit = git(repo, "commit-tree", tree, input=message.encode()).strip()
    git(repo, "update-ref", "HEAD", commit)
    return commit


def source_repo(package: str, version: str, cache: Path | None = None) -> Path:
    """The clean repository of ``package==version``: the sdist's files in one root commit.

    Built once into ``<cache>/repos`` (atomically: other processes see it whole or not at
    all); the same on every machine. Treat it as read-only.
    """
    cache = cache or cache_dir()
    target = cache / "repos" / f"{canonical(package)}-{version}"
    if (target / ".git").is_dir():
        return target
    with file_lock(target.with_suffix(".lock")):
        if (target / ".git").is_dir():
            return target
        archive = download_sdist(package, version, cache)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        try:
            unpack_sdist(archive, staging)
            commit_all(staging, commit_message(package, version))
            staging.chmod(0o755)
            staging.rename(target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return target


def head(repo: Path) -> str:
    """The commit ``repo`` is at."""
    return git(repo, "rev-parse", "HEAD").strip()


def build_task_repo(package: str, version: str, patch: str, dest: Path,
                    cache: Path | None = None) -> str:
    """Make ``dest`` the repository of a task at its base commit: the sdist's files with the
    gold ``patch`` reversed (so the bug is in), committed as a root commit. Returns the commit
    hash, which equals the task's ``base_commit`` when the task came from this module."""
    archive = download_sdist(package, version, cache)
    unpack_sdist(archive, dest)
    if patch.strip():
        try:
            git(dest, "apply", "-R", "--whitespace=nowarn", "-", input=patch.encode())
        except RepoError as error:
            raise RepoError(f"the patch does not reverse-apply to the sdist of"
                            f" {package}=={version}; is it the task's gold patch? {error}"
                            ) from None
    return commit_all(dest, commit_message(package, version))


def task_commit(repo: Path, files: dict[str, str | bytes], message: str) -> str:
    """The hash of the root commit whose tree is ``repo``'s HEAD tree with ``files`` (path ->
    content) replaced, and ``message``: what :func:`build_task_repo` makes, computed without
    touching ``repo``'s working tree or index (the object is written to its object store)."""
    with tempfile.TemporaryDirectory(prefix="index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(repo, "read-tree", "HEAD", env=env)
        for path, content in sorted(files.items()):
            data = content.encode() if isinstance(content, str) else content
            blob = git(repo, "hash-object", "-w", "--stdin", input=data).strip()
            listed = git(repo, "ls-tree", "HEAD", "--", path).split()
            mode = listed[0] if listed else "100644"
            git(repo, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}", env=env)
        tree = git(repo, "write-tree", env=env).strip()
    return git(repo, "commit-tree", tree, input=message.encode()).strip()


# ---- finding the code and the tests -------------------------------------------------------


def _pytest_testpaths(root: Path) -> list[str]:
    """``testpaths`` from the project's pytest configuration, if it sets any."""
    candidates: list[tuple[Path, str]] = [(root / "pytest.ini", "pytest"),
                                          (root / "tox.ini", "pytest"),
                                          (root / "setup.cfg", "tool:pytest")]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            import tomllib
        except ImportError:  # Python 3.10
            tomllib = None
        if tomllib is not None:
            try:
                options = tomllib.loads(pyproject.read_text()).get("tool", {}).get(
                    "pytest", {}).get("ini_options", {})
            except (tomllib.TOMLDecodeError, UnicodeDecodeError):
                options = {}
            paths = options.get("testpaths")
            if paths:
                return [paths] if isinstance(paths, str) else list(paths)
    for path, section in candidates:
        if not path.is_file():
            continue
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(path)
        except configparser.Error:
            continue
        if parser.has_option(section, "testpaths"):
            return parser.get(section, "testpaths").split()
    return []


def find_test_files(root: Path) -> list[str]:
    """Test files of the project in ``root`` as pytest's defaults collect them: ``test_*.py``
    and ``*_test.py`` anywhere (under ``testpaths`` when configured), skipping the folders
    of ``norecursedirs`` and virtual environments. Sorted paths relative to ``root``."""
    starts = [root / p for p in _pytest_testpaths(root) if (root / p).exists()] or [root]
    found: set[str] = set()
    for start in starts:
        if start.is_file():
            found.add(start.relative_to(root).as_posix())
            continue
        for folder, dirs, files in os.walk(start):
            here = Path(folder)
            dirs[:] = sorted(d for d in dirs if not NORECURSE.match(d)
                             and not (here / d / "pyvenv.cfg").exists())
            found.update((here / f).relative_to(root).as_posix()
                         for f in files if TEST_FILE.match(f))
    return sorted(found)


def pytest_targets(test_files: list[str]) -> list[str]:
    """The fewest pytest arguments that cover ``test_files``: the outermost folder named
    ``test``/``tests`` holding each file, else the file itself."""
    targets: set[str] = set()
    for path in test_files:
        parts = path.split("/")
        folder = next((i for i, p in enumerate(parts[:-1]) if p in ("test", "tests")), None)
        targets.add("/".join(parts[: folder + 1]) if folder is not None else path)
    # A target inside another target is covered by it.
    return sorted(t for t in targets
                  if not any(t != o and t.startswith(o + "/") for o in targets))


def import_root(root: Path) -> str:
    """Where the project's importable code lives, relative to ``root``: ``src`` for a src
    layout, else ``.``."""
    src = root / "src"
    if src.is_dir() and any((p / "__init__.py").is_file() or (p.suffix == ".py")
                            for p in src.iterdir()):
        return "src"
    return "."


def source_files(root: Path) -> list[str]:
    """The project's own Python modules (not tests, setup scripts, docs or examples):
    every ``.py`` file of the top-level packages and modules under :func:`import_root`."""
    base = root / import_root(root)
    found: list[str] = []
    for entry in sorted(base.iterdir()):
        if entry.is_file() and entry.suffix == ".py" and entry.name not in (
                "setup.py", "conftest.py", "noxfile.py", "fabfile.py", "tasks.py"):
            found.append(entry.relative_to(root).as_posix())
        elif entry.is_dir() and (entry / "__init__.py").is_file() and not NORECURSE.match(
                entry.name) and entry.name not in ("test", "tests", "docs", "examples"):
            found += sorted(p.relative_to(root).as_posix() for p in entry.rglob("*.py"))
    return [p for p in found if not is_test_path(p)]


# ---- the dependency environment ---------------------------------------------------------


def _metadata(root: Path) -> dict[str, list[str]]:
    """Fields of the sdist's PKG-INFO (each a list of values)."""
    fields: dict[str, list[str]] = {}
    info = root / "PKG-INFO"
    if info.is_file():
        from email.parser import HeaderParser

        message = HeaderParser().parsestr(info.read_text(errors="replace"))
        for key, value in message.items():
            fields.setdefault(key, []).append(value)
    return fields


def requirements_for_tests(root: Path) -> list[str]:
    """Requirements of the project's test dependency groups (PEP 735: ``test``, ``tests``,
    ``testing`` in pyproject.toml), includes resolved."""
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return []
    try:
        import tomllib
    except ImportError:  # Python 3.10
        return []
    try:
        groups = tomllib.loads(pyproject.read_text()).get("dependency-groups", {})
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return []

    def expand(name: str, seen: frozenset[str]) -> list[str]:
        items: list[str] = []
        for item in groups.get(name, []):
            if isinstance(item, str):
                items.append(item)
            elif isinstance(item, dict) and item.get("include-group") not in seen:
                items += expand(item["include-group"], seen | {name})
        return items

    return [r for name in TEST_EXTRAS for r in expand(name, frozenset())]


def env_dir(package: str, version: str, cache: Path | None = None) -> Path:
    """The folder of ``package==version``'s dependency env (complete once it holds
    :data:`ENV_READY`)."""
    return (cache or cache_dir()) / "envs" / f"v{ENV_LAYOUT}" / f"{canonical(package)}-{version}"


def dependency_env(package: str, version: str, cache: Path | None = None,
                   extra_requirements: tuple[str, ...] = (),
                   log: Callable[[str], None] | None = None) -> Path:
    """The virtual environment the tests of ``package==version`` run with (see the module
    docstring); built on first use, under a lock, then reused. Returns its folder."""
    cache = cache or cache_dir()
    target = env_dir(package, version, cache)
    if (target / ENV_READY).is_file():
        return target
    if not Path(SANDBOX_PYTHON).exists():
        raise RepoError(f"{SANDBOX_PYTHON} does not exist: the dependency env is made with the"
                        " interpreter sandboxes see. Install python3 and python3-venv, or set"
                        " AGENTGYM_SWE_PYTHON")
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.with_name(target.name + ".lock")):
        if (target / ENV_READY).is_file():
            return target
        shutil.rmtree(target, ignore_errors=True)  # a build that died half-way
        repo = source_repo(package, version, cache)
        archive = download_sdist(package, version, cache)
        if log:
            log(f"building the test environment of {package}=={version} in {target}")
        try:
            _build_env(target, repo, archive, package, version, extra_requirements)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
    return target


def _build_env(target: Path, repo: Path, archive: Path, package: str, version: str,
               extra_requirements: tuple[str, ...]) -> None:
    _run([SANDBOX_PYTHON, "-m", "venv", str(target)], what=f"{SANDBOX_PYTHON} -m venv")
    pip = [str(target / "bin" / "python"), "-m", "pip", "--disable-pip-version-check",
           "--no-input"]
    metadata = _metadata(repo)
    extras = [e for e in metadata.get("Provides-Extra", []) if e in TEST_EXTRAS]
    project = f"{archive}[{','.join(extras)}]" if extras else str(archive)
    # Installing the sdist resolves its runtime (and test extra) dependencies whatever the
    # build backend; the project itself is removed afterwards, so that only the workspace's
    # copy can be imported.
    _run([*pip, "install", "-q", project, PYTEST_REQUIREMENT, *requirements_for_tests(repo),
          *extra_requirements], what=f"installing the dependencies of {package}=={version}")
    _run([*pip, "uninstall", "-y", "-q", package], what=f"uninstalling {package}")
    site = Path(_run([str(target / "bin" / "python"), "-c",
                      "import sysconfig; print(sysconfig.get_path('purelib'))"]).strip())
    # Metadata only: importlib.metadata.version(package) works, no code is importable.
    info = site / f"{re.sub(r'[-.]+', '_', package)}-{version}.dist-info"
    info.mkdir()
    metadata_file = repo / "PKG-INFO"
    (info / "METADATA").write_text(metadata_file.read_text(errors="replace")
                                   if metadata_file.is_file()
                                   else f"Metadata-Version: 2.1\nName: {package}\n"
                                        f"Version: {version}\n")
    (info / "INSTALLER").write_text("agentgym\n")
    frozen = _run([*pip, "freeze", "--all"]).split()
    relocate_env(target, ENV_MOUNT)
    _run(["chmod", "-R", "a+rX", str(target)])
    (target / ENV_READY).write_text(json.dumps({"package": package, "version": version,
                                             "installed": frozen}, indent=1))


# ---- the project, ready to test ---------------------------------------------------------


@dataclass(frozen=True)
class Project:
    """A project ready to be tested: its clean repository and its dependency env.

    Attributes:
        package, version: the PyPI project.
        repo: the clean repository (cached, read-only), at ``commit``.
        env: the dependency env's folder on the host.
        import_root: where the project's code is, relative to the workspace (``.``/``src``).
        test_targets: the pytest arguments that run its whole suite.
    """

    package: str
    version: str
    repo: Path
    commit: str
    env: Path
    import_root: str
    test_targets: tuple[str, ...]
    test_files: tuple[str, ...] = field(default=(), repr=False)

    @property
    def repo_name(self) -> str:
        """The instance's ``repo`` field: ``pypi/<name>``."""
        return f"pypi/{canonical(self.package)}"

    @property
    def mounts(self) -> dict[str, str]:
        """What a sandbox running the tests needs mounted (read-only)."""
        return {ENV_MOUNT: str(self.env)}

    def sandbox_env(self, workdir: str = DEFAULT_WORKDIR) -> dict[str, str]:
        """The environment of a sandbox working on the project at ``workdir`` with
        :attr:`mounts` (``SandboxSpec.env``), as an activated venv gives a person:

        * ``PATH``: the env's ``bin`` first, so ``python``, ``python3``, ``pip`` and
          ``pytest`` are the env's; ``VIRTUAL_ENV`` names it.
        * ``PYTHONPATH``: the workspace's import root, so every interpreter and ``pytest``
          (from any folder) import the workspace's code, the agent's edits.
        * ``PYTHONDONTWRITEBYTECODE``: no ``__pycache__`` in the workspace, whose diff is
          what gets graded.
        * pip: no version check, prompts or retries. The env is read-only and sandboxes
          are offline by default, so ``pip install`` fails at once ("No matching
          distribution", or "Read-only file system" with the network on; ``--user`` is
          refused in a venv); ``pip install --target DIR`` works with the network on.
        """
        root = workdir if self.import_root == "." else f"{workdir}/{self.import_root}"
        return {"PATH": f"{ENV_MOUNT}/bin:{SYSTEM_PATH}", "VIRTUAL_ENV": ENV_MOUNT,
                "PYTHONPATH": root, "PYTHONDONTWRITEBYTECODE": "1",
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PIP_RETRIES": "0"}

    def test_cmd(self, python: str = ENV_PYTHON, targets: tuple[str, ...] | None = None) -> str:
        """The shell command, run from the workspace's root, that runs ``targets`` (None:
        the whole suite; ``()``: none, for a caller that appends its own, as grading does)
        against the workspace's code and prints ``-rA`` status lines."""
        pythonpath = "$PWD" if self.import_root == "." else f"$PWD/{self.import_root}"
        chosen = self.test_targets if targets is None else targets
        return (f'PYTHONPATH="{pythonpath}" PYTHONDONTWRITEBYTECODE=1 {shlex.quote(python)}'
                " -m pytest -rA --tb=short -p no:cacheprovider -p no:randomly "
                + " ".join(map(shlex.quote, chosen))).rstrip()


def prepare(package: str, version: str, cache: Path | None = None,
            log: Callable[[str], None] | None = None) -> Project:
    """Fetch, commit and give an environment to ``package==version`` (each step cached)."""
    repo = source_repo(package, version, cache)
    env = dependency_env(package, version, cache, log=log)
    tests = find_test_files(repo)
    if not tests:
        raise RepoError(f"the sdist of {package}=={version} holds no test files (test_*.py or"
                        " *_test.py); its tests cannot check a fix. Pick a project whose sdist"
                        " ships its tests")
    return Project(package, version, repo, head(repo), env, import_root(repo),
                   tuple(pytest_targets(tests)), tuple(tests))


__all__ = [
    "ENV_LAYOUT",
    "ENV_MOUNT",
    "ENV_PYTHON",
    "ENV_READY",
    "IDENTITY",
    "Project",
    "RepoError",
    "build_task_repo",
    "cache_dir",
    "canonical",
    "commit_all",
    "dependency_env",
    "download_sdist",
    "env_dir",
    "find_test_files",
    "head",
    "import_root",
    "prepare",
    "pytest_targets",
    "relocate_env",
    "requirements_for_tests",
    "source_files",
    "source_repo",
    "split_spec",
    "task_commit",
    "unpack_sdist",
]
