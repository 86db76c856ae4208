"""The default image of the ``docker`` sandbox, built locally.

:data:`DEFAULT_IMAGE` holds a minimal Debian (bookworm) with bash, coreutils, git,
python3 with pip and pytest, procps, patch, sqlite3, curl, make, zip, unzip and a C
compiler (gcc); an unprivileged user ``agent`` (uid 1000, home ``/home/agent``) and an
empty ``/workspace``. It is never pulled: no registry needs to be reachable.
:func:`build_default_image` makes it in two steps:

1. ``debootstrap --variant=minbase`` a root filesystem from a Debian mirror (the host's
   apt sources, ``$AGENTGYM_DEBIAN_MIRROR``, or deb.debian.org) and cache it as a tarball
   under ``~/.cache/agentgym/`` (``$AGENTGYM_CACHE``), so a rebuild downloads nothing;
2. ``docker build`` ``FROM scratch`` with that tarball, adding the user (no network).

The first step needs root and the ``debootstrap`` program (``apt-get install
debootstrap``). Building is idempotent and safe when several processes race (a file lock
serializes them). From a shell: ``agentgym sandbox build-image [--force]`` (or
``python -m agentgym.sandboxes.image [--force]``).

Images other than the default come from the docker backend's ``build_image``
(:mod:`agentgym.sandboxes.builds`: a base plus files, or a Dockerfile folder, cached by
content) or the user (``docker build -t NAME ...``, ``FROM agentgym/sandbox:default`` is a
good start); :func:`ensure_image` only checks that they exist.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgym.core.cache import cache_root, file_lock
from agentgym.core.sandbox import SandboxError

#: The image a ``docker`` sandbox starts from when none is named.
DEFAULT_IMAGE = "agentgym/sandbox:default"

#: Debian release and packages of the default image's root filesystem.
SUITE = "bookworm"
PACKAGES = ("python3", "python3-pip", "python3-pytest", "python3-venv", "git",
            "ca-certificates", "procps", "patch", "sqlite3", "curl", "make", "gcc",
            "libc6-dev", "zip", "unzip", "less")
#: Programs on the default image's PATH (besides bash, coreutils and util-linux's).
PROGRAMS = ("python3", "pip3", "git", "sqlite3", "curl", "make", "gcc", "tar", "gzip",
            "zip", "unzip", "less")

#: The unprivileged user commands run as (uid:gid), and its home.
SANDBOX_USER = "1000:1000"
SANDBOX_HOME = "/home/agent"

# Git and pip must work for an unprivileged user on a read-only root: identity and
# safe.directory for git, and pip allowed to install into the user site (PEP 668).
DOCKERFILE = f"""\
FROM scratch
ADD rootfs.tar /
RUN useradd --uid 1000 --user-group --create-home --shell /bin/bash agent \\
 && mkdir -p /workspace && chown agent:agent /workspace \\
 && git config --system user.name agent \\
 && git config --system user.email agent@agentgym.invalid \\
 && git config --system init.defaultBranch main \\
 && git config --system --add safe.directory '*'
ENV LANG=C.UTF-8 HOME={SANDBOX_HOME} PIP_BREAK_SYSTEM_PACKAGES=1 \\
    PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
USER agent
WORKDIR /workspace
CMD ["bash"]
"""

DEFAULT_MIRROR = "http://deb.debian.org/debian"

# Changing the recipe changes this digest, so a stale image or rootfs is rebuilt.
RECIPE = hashlib.sha256(repr((SUITE, PACKAGES, DOCKERFILE)).encode()).hexdigest()[:12]
_ROOTFS_RECIPE = hashlib.sha256(repr((SUITE, PACKAGES)).encode()).hexdigest()[:12]
_RECIPE_LABEL = "agentgym.recipe"


def cache_dir() -> Path:
    """Where rootfs tarballs and the build lock live: the agentgym cache root."""
    return cache_root()


def debian_mirror() -> str:
    """The Debian mirror to bootstrap from: ``$AGENTGYM_DEBIAN_MIRROR``, else the first
    ``.../debian`` URI in the host's apt sources, else deb.debian.org."""
    if os.environ.get("AGENTGYM_DEBIAN_MIRROR"):
        return os.environ["AGENTGYM_DEBIAN_MIRROR"]
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for source in sources:
        try:
            text = source.read_text()
        except OSError:
            continue
        # One-line format ("deb URI suite ...") and deb822 ("URIs: URI").
        for match in re.finditer(r"^\s*(?:deb\s+(?:\[[^\]]*\]\s+)?|URIs:\s*)(\S+)", text, re.M):
            uri = match.group(1).rstrip("/")
            if uri.startswith(("http://", "https://")) and uri.endswith("/debian"):
                return uri
    return DEFAULT_MIRROR


def docker_client() -> Any:
    """A docker SDK client from the environment (``DOCKER_HOST`` ...), or a
    :class:`SandboxError` saying how to install the SDK or start an engine."""
    try:
        import docker
    except ImportError as error:
        raise SandboxError(
            "The docker sandbox needs the docker SDK, which is not installed:"
            " pip install 'agentgym[swe]' (or pip install docker)."
        ) from error
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        # Many sandboxes share one client: a pool as big as the sandbox module's.
        client = docker.from_env(timeout=120, max_pool_size=32)
        client.ping()
    except Exception as error:
        raise SandboxError(
            f"No Docker engine is reachable at {host} ({error}). Start one:"
            " `systemctl start docker`, or as root `dockerd --bridge=none --iptables=false &`"
            " (no bridge network is needed: sandboxes run with network none); or point"
            " DOCKER_HOST at a running engine."
        ) from error
    return client


def image_exists(client: Any, name: str) -> bool:
    import docker.errors

    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return True


def ensure_image(name: str, client: Any = None,
                 log: Callable[[str], None] | None = None) -> None:
    """Make sure image ``name`` exists locally: build :data:`DEFAULT_IMAGE` if absent (or
    built from an older recipe); for any other name raise :class:`SandboxError` saying how
    to build it (nothing is pulled)."""
    client = client or docker_client()
    if name == DEFAULT_IMAGE:
        if not _default_image_current(client):
            build_default_image(log=log, client=client)
        return
    if not image_exists(client, name):
        raise SandboxError(
            f"The docker image {name!r} does not exist on this engine, and agentgym does not"
            f" pull images. Build it (`docker build -t {name} DIR`, e.g. FROM"
            f" {DEFAULT_IMAGE}), `docker pull {name}` where a registry is reachable, or"
            " leave image unset for the default image."
        )


def build_default_image(force: bool = False, log: Callable[[str], None] | None = None,
                        client: Any = None) -> str:
    """Build :data:`DEFAULT_IMAGE` unless it exists (always with ``force``); returns its name.

    Progress goes to ``log`` (one line per step). The debootstrapped root filesystem is
    cached under :func:`cache_dir`, so a forced rebuild only repeats the ``docker build``
    step; delete the ``rootfs-*.tar`` there to bootstrap afresh.
    """
    log = log or (lambda message: None)
    client = client or docker_client()
    with file_lock(cache_dir() / "default-image.lock"):
        # Whoever held the lock before us may have built it.
        if not force and _default_image_current(client):
            return DEFAULT_IMAGE
        started = time.monotonic()
        previous = _image_id(client, DEFAULT_IMAGE)
        rootfs = _rootfs_tarball(log)
        log(f"Building docker image {DEFAULT_IMAGE} from {rootfs} ...")
        with tempfile.TemporaryFile(dir=cache_dir()) as context:
            with tarfile.open(fileobj=context, mode="w") as tar:
                dockerfile = DOCKERFILE.encode()
                info = tarfile.TarInfo("Dockerfile")
                info.size = len(dockerfile)
                tar.addfile(info, io.BytesIO(dockerfile))
                tar.add(rootfs, arcname="rootfs.tar")
            context.seek(0)
            try:
                client.images.build(
                    fileobj=context, custom_context=True, tag=DEFAULT_IMAGE,
                    network_mode="none", rm=True, forcerm=True,
                    labels={_RECIPE_LABEL: RECIPE},
                )
            except Exception as error:
                raise SandboxError(f"docker build of {DEFAULT_IMAGE} failed: {error}") from error
        if previous and previous != _image_id(client, DEFAULT_IMAGE):
            # The replaced image is now untagged; containers still using it keep it alive.
            with contextlib.suppress(Exception):
                client.images.remove(previous)
        log(f"Built {DEFAULT_IMAGE} in {time.monotonic() - started:.0f}s.")
        return DEFAULT_IMAGE


def _image_id(client: Any, name: str) -> str | None:
    import docker.errors

    try:
        return client.images.get(name).id
    except docker.errors.ImageNotFound:
        return None


def _default_image_current(client: Any) -> bool:
    import docker.errors

    try:
        image = client.images.get(DEFAULT_IMAGE)
    except docker.errors.ImageNotFound:
        return False
    return (image.labels or {}).get(_RECIPE_LABEL) == RECIPE


def _rootfs_tarball(log: Callable[[str], None]) -> Path:
    """The cached root filesystem tarball, bootstrapped first if absent."""
    target = cache_dir() / f"rootfs-{SUITE}-{_ROOTFS_RECIPE}.tar"
    if target.exists():
        log(f"Using the cached root filesystem {target}.")
        return target
    debootstrap = shutil.which("debootstrap") or (
        "/usr/sbin/debootstrap" if Path("/usr/sbin/debootstrap").exists() else None)
    if debootstrap is None:
        raise SandboxError(
            f"Building {DEFAULT_IMAGE} needs debootstrap, which is not installed:"
            " apt-get install debootstrap (or build the image elsewhere and `docker load` it)."
        )
    if os.geteuid() != 0:
        raise SandboxError(
            f"Building {DEFAULT_IMAGE} runs debootstrap, which needs root: run"
            " `sudo python -m agentgym.sandboxes.image` once (AGENTGYM_CACHE decides where"
            " the root filesystem is cached)."
        )
    mirror = debian_mirror()
    root = Path(tempfile.mkdtemp(prefix="rootfs-", dir=cache_dir()))
    try:
        log(f"Bootstrapping Debian {SUITE} from {mirror} (a few minutes, once) ...")
        _run([debootstrap, "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE,
              str(root), mirror], "debootstrap")
        # Package caches and lists only make the image bigger.
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for path in (root / leftover).glob("*"):
                if path.is_file():
                    path.unlink()
        log(f"Packing the root filesystem into {target} ...")
        partial = target.with_suffix(".tar.partial")
        _run(["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", str(partial),
              "--exclude=./dev/*", "--exclude=./proc/*", "--exclude=./sys/*", "."], "tar")
        partial.rename(target)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return target


def _run(command: list[str], what: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, errors="replace")
    if result.returncode != 0:
        tail = (result.stdout + result.stderr)[-2000:]
        raise SandboxError(f"{what} failed (exit {result.returncode}): {' '.join(command)}\n"
                           f"{tail}")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=f"Build the docker image {DEFAULT_IMAGE}.")
    parser.add_argument("--force", action="store_true", help="rebuild even if it exists")
    args = parser.parse_args()
    print(build_default_image(force=args.force, log=print))
