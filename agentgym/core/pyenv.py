"""Read-only Python environments built on the host and mounted into sandboxes.

A sandbox sees the host's ``/usr`` (``local``) or a Debian image of the same release
(``docker``), so a virtual environment made with the host's ``/usr/bin/python3`` runs
inside either, once it names the folder it is mounted at rather than the one it was built
in. Two users: the SWE plugin's per-project test envs, and agent harnesses
(:mod:`agentgym.core.harness`), whose program is installed here and started inside the
task's sandbox.

* :func:`build_python_env`: a virtual environment holding ``requirements``, built once in
  a cache folder named by what it holds (under a lock, so concurrent builders wait for
  one build), relocated to ``mount`` and made readable by the sandbox user.
* :func:`relocate_env`: rewrite an env so that it works where a sandbox mounts it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from agentgym.core.cache import cache_root, file_lock
from agentgym.core.errors import AgentGymError

__all__ = ["READY", "SANDBOX_PYTHON", "PythonEnvError", "build_python_env", "relocate_env"]

#: The interpreter envs are made with: the one inside the local sandbox (and the docker
#: image, the same Debian release).
SANDBOX_PYTHON = os.environ.get("AGENTGYM_SANDBOX_PYTHON", "/usr/bin/python3")
#: Written last into a finished env: what it holds. An env without it is rebuilt.
READY = ".agentgym-ready.json"


class PythonEnvError(AgentGymError):
    """A Python environment for sandboxes could not be built or moved to its mount."""


def build_python_env(requirements: Sequence[str], mount: str, *, name: str = "env",
                     cache: Path | None = None, python: str = SANDBOX_PYTHON,
                     log: Callable[[str], None] | None = None) -> Path:
    """The folder of a virtual environment with ``requirements`` installed (pip
    specifiers), relocated to ``mount``; built on first use in ``cache`` (default:
    ``pyenvs/`` in the agentgym cache root), then reused. The folder's name is ``name``
    and a hash of the requirements, the mount and the interpreter's version, so a change
    of any builds a new env. Needs the package index (or pip's configured one) the first
    time only."""
    version = _run([python, "-c", "import sys; print(sys.version)"], what=f"{python}").strip()
    digest = hashlib.sha256(json.dumps([sorted(requirements), mount, version]).encode())
    target = (cache or cache_root() / "pyenvs") / f"{name}-{digest.hexdigest()[:16]}"
    if (target / READY).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.with_name(target.name + ".lock")):
        if (target / READY).is_file():
            return target
        shutil.rmtree(target, ignore_errors=True)  # a build that died half-way
        if log:
            log(f"installing {', '.join(requirements)} into {target} (once; reused after)")
        try:
            _run([python, "-m", "venv", str(target)], what=f"{python} -m venv")
            pip = [str(target / "bin" / "python"), "-m", "pip", "--disable-pip-version-check",
                   "--no-input"]
            if requirements:
                _run([*pip, "install", "-q", *requirements],
                     what=f"installing {' '.join(requirements)}")
            frozen = _run([*pip, "freeze", "--all"]).split()
            relocate_env(target, mount)
            _run(["chmod", "-R", "a+rX", str(target)])
            (target / READY).write_text(json.dumps(
                {"requirements": list(requirements), "mount": mount, "python": version,
                 "installed": frozen}, indent=1))
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
    return target


def relocate_env(env: Path, mount: str) -> None:
    """Make the virtual environment at ``env`` name ``mount`` wherever it names its own
    folder, so that it works where sandboxes mount it (it keeps running on the host with
    ``env/bin/python -m ...``; only its scripts' shebangs point at ``mount``).

    The bytecode is compiled again as if its sources were under ``mount`` (tracebacks
    name the sandbox's paths; bytecode that still names the folder is deleted); text files
    (scripts' shebangs, ``pyvenv.cfg``, activate scripts, ``.pth`` files, metadata) have
    the folder replaced; absolute symlinks into it are re-aimed. Raises
    :class:`PythonEnvError` naming any other file that still holds the host folder (a
    binary file: it cannot be rewritten safely), since nothing inside a sandbox may depend
    on a host path.
    """
    # Both spellings of the folder, when it was reached through a symlink; longest first.
    hosts = sorted({str(env), str(env.resolve())}, key=len, reverse=True)
    purelib, platlib = _run([str(env / "bin" / "python"), "-c",
                             "import sysconfig; print(sysconfig.get_path('purelib'));"
                             " print(sysconfig.get_path('platlib'))"]).split()
    # Exit status 1 only says some file did not compile (a package's Python 2 template, say):
    # pip skipped the same ones, and the scan below catches any stale bytecode.
    subprocess.run([str(env / "bin" / "python"), "-m", "compileall", "-q", "-f",
                    "-s", str(env), "-p", mount, *sorted({purelib, platlib})],
                   capture_output=True, timeout=1800)
    stuck = []
    for path in sorted(env.rglob("*")):
        if path.is_symlink():
            link = os.readlink(path)
            host = next((h for h in hosts if link == h or link.startswith(h + "/")), None)
            if host is not None:
                path.unlink()
                path.symlink_to(mount + link[len(host):])
            continue
        if not path.is_file():
            continue
        data = path.read_bytes()
        if not any(h.encode() in data for h in hosts):
            continue
        if path.suffix == ".pyc":  # a cache: Python compiles its source again if needed
            path.unlink()
            continue
        if b"\0" in data:
            stuck.append(path.relative_to(env).as_posix())
            continue
        for host in hosts:
            data = data.replace(host.encode(), mount.encode())
        path.write_bytes(data)
    if stuck:
        raise PythonEnvError(
            f"the env built in {env} cannot be moved to {mount}: these binary files name the"
            f" build folder: {', '.join(stuck[:10])}. A sandbox would not find it; report the"
            " package that installs them")


def _run(argv: list[str], what: str = "", timeout: float = 1800) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, timeout=timeout)
    except FileNotFoundError:
        raise PythonEnvError(f"{argv[0]} does not exist: sandbox envs are made with the"
                             " interpreter sandboxes see. Install python3 and python3-venv,"
                             " or set AGENTGYM_SANDBOX_PYTHON") from None
    if result.returncode != 0:
        output = (result.stdout + result.stderr).decode(errors="replace").strip()
        raise PythonEnvError(f"{what or 'command'} failed (exit {result.returncode}):"
                             f" {shlex.join(argv)}\n{output[-3000:]}")
    return result.stdout.decode(errors="replace")
