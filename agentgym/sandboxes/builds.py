"""Docker images built locally for tasks, cached by what they are built from; never pulled.

:func:`build_image` is the docker backend's image capability
(:meth:`agentgym.sandboxes.docker.DockerBackend.build_image`). It builds from either

* ``base`` plus ``files``: an image (default :data:`~agentgym.sandboxes.image.DEFAULT_IMAGE`)
  with host files or folders copied in (``{path in the image: host path}``), or
* ``context``: a folder holding a ``Dockerfile`` (a Terminal-Bench/Harbor task's
  ``environment/``), built as it is.

The image is named ``REPOSITORY:<digest>``, the digest a SHA-256 of its inputs: the id of
every base image it starts from, the Dockerfile, and every input file's relative path,
permissions and content (symlinks by their target). The same inputs give the same name, in
any process, and the build is skipped when the engine has it; a changed file, or a rebuilt
base image, gives a new name. One process builds a given name at a time (a file lock).

Nothing is pulled: every base image (``FROM``) must be on the engine already (the default
image is built when missing); otherwise :class:`~agentgym.core.sandbox.SandboxError` names
it and how to provide it. Builds run without network unless ``network=True`` (a Dockerfile
that installs packages needs it).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from agentgym.core.cache import cache_root, file_lock, hash_tree
from agentgym.core.sandbox import SandboxError
from agentgym.sandboxes.image import DEFAULT_IMAGE, docker_client, ensure_image, image_exists

#: The repository of built images unless the caller names another.
REPOSITORY = "agentgym/build"
#: Label holding the full digest of an image's inputs.
INPUTS_LABEL = "agentgym.inputs"


def build_image(*, base: str | None = None,
                files: Mapping[str, str | os.PathLike[str]] | None = None,
                context: str | os.PathLike[str] | None = None, dockerfile: str | None = None,
                repository: str = REPOSITORY, network: bool = False,
                log: Callable[[str], None] | None = None, client: Any = None) -> str:
    """Build (or find already built) an image from ``base`` plus ``files``, or from the
    Dockerfile folder ``context``; returns its name, ``REPOSITORY:<digest>``.

    Args:
        base: the image to start from (with ``files``; default :data:`DEFAULT_IMAGE`).
        files: absolute path in the image -> host file or folder, copied there (owned by
            root, permissions kept).
        context: a folder with a ``Dockerfile``, instead of ``base`` and ``files``.
        dockerfile: with ``context``, the Dockerfile's text to build instead of the
            folder's own (the folder's other files are the build context).
        repository: the name's part before ``:``, e.g. ``agentgym/terminal``.
        network: let the build's ``RUN`` steps reach the network.
        log: called with a line when a build starts.
    """
    if context is not None and (base is not None or files):
        raise SandboxError("build_image takes either context (a Dockerfile folder) or base"
                           " and files, not both; pass one")
    if not re.fullmatch(r"[a-z0-9]+(?:[._/-][a-z0-9]+)*", repository):
        raise SandboxError(f"repository {repository!r} is not a docker repository name"
                           " (lowercase letters, digits and . _ - /); e.g. agentgym/terminal")
    client = client or docker_client()
    if dockerfile is not None and context is None:
        raise SandboxError("build_image's dockerfile needs context (the folder it builds"
                           " from); pass both")
    replaced = dockerfile is not None
    if context is not None:
        folder = Path(context)
        dockerfile_path = folder / "Dockerfile"
        if not dockerfile_path.is_file() and not replaced:
            raise SandboxError(f"context {str(folder)!r} holds no Dockerfile; pass the folder"
                               " that has one (a task's environment/)")
        if dockerfile is None:
            dockerfile = dockerfile_path.read_text()
        bases = _from_images(dockerfile, str(dockerfile_path))
        inputs: dict[str, Path] = {".": folder}
    else:
        bases = [base or DEFAULT_IMAGE]
        inputs = {f"file{index}": Path(host) for index, host in enumerate((files or {}).values())}
        dockerfile = f"FROM {bases[0]}\n" + "".join(
            f"COPY {key} {_inside(inside)}\n"
            for key, inside in zip(inputs, files or {}, strict=True))
    digest = hashlib.sha256(dockerfile.encode())
    where = f"FROM in {context}/Dockerfile" if context is not None else "base"
    for image in bases:
        digest.update(_base_id(client, image, where).encode())
    for key, host in inputs.items():
        try:
            hash_tree(digest, key, host)
        except FileNotFoundError:
            raise SandboxError(f"cannot build an image from {str(host)!r}: no such file or"
                               " directory") from None
    full = digest.hexdigest()
    name = f"{repository}:{full[:24]}"
    if image_exists(client, name):
        return name
    lock = cache_root() / "images" / f"{name.replace('/', '_').replace(':', '-')}.lock"
    with file_lock(lock):
        if image_exists(client, name):  # built while we waited
            return name
        if log:
            log(f"building docker image {name}" + (f" from {context}" if context else
                                                    f" on {bases[0]}"))
        options = dict(tag=name, pull=False, rm=True, forcerm=True,
                       network_mode=None if network else "none",
                       labels={INPUTS_LABEL: full})
        try:
            if context is not None and not replaced:
                client.images.build(path=str(context), **options)
            else:
                with tempfile.TemporaryFile() as archive:
                    _write_context(archive, dockerfile, inputs if context is None else {
                        child.name: child for child in sorted(Path(context).iterdir())
                        if child.name != "Dockerfile"})
                    archive.seek(0)
                    client.images.build(fileobj=archive, custom_context=True, **options)
        except Exception as error:
            raise SandboxError(f"docker build of {name} failed: {_build_error(error)}"
                               ) from error
    return name


def _inside(path: str) -> str:
    if not isinstance(path, str) or not path.startswith("/"):
        raise SandboxError(f"files key {path!r} must be an absolute path in the image, e.g."
                           " {'/opt/data': '/host/data'}")
    return str(PurePosixPath(path))


def _from_images(dockerfile: str, where: str) -> list[str]:
    """The images a Dockerfile's stages start from (not ``scratch``, not earlier stages,
    not names built from ``ARG``s, which the build itself resolves)."""
    images, stages = [], set()
    for match in re.finditer(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", dockerfile,
                             re.IGNORECASE | re.MULTILINE):
        image, stage = match.group(1), match.group(2)
        if image.lower() != "scratch" and image not in stages and "$" not in image:
            images.append(image)
        if stage:
            stages.add(stage)
    if not images and not re.search(r"^\s*FROM\s", dockerfile, re.I | re.M):
        raise SandboxError(f"{where} has no FROM line; a Dockerfile starts FROM an image")
    return images


def _base_id(client: Any, name: str, where: str) -> str:
    """The id of base image ``name``, built if it is the default image; never pulled."""
    if name == DEFAULT_IMAGE:
        ensure_image(name, client)
    if not image_exists(client, name):
        raise SandboxError(
            f"the base image {name!r} ({where}) is not on this docker engine, and agentgym"
            f" never pulls images. Provide it: `docker pull {name}` where a registry is"
            f" reachable, `docker load -i IMAGE.tar` from a saved copy, or `docker build -t"
            f" {name} DIR`; or start FROM {DEFAULT_IMAGE}, which agentgym builds itself")
    return client.images.get(name).id


def _write_context(archive: Any, dockerfile: str, inputs: Mapping[str, Path]) -> None:
    with tarfile.open(fileobj=archive, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for key, host in inputs.items():
            tar.add(host, arcname=key)


def _build_error(error: Exception) -> str:
    """The error, with the end of the build log when docker gives one."""
    log = getattr(error, "build_log", None) or []
    lines = [str(entry.get("stream") or entry.get("error") or "").rstrip()
             for entry in log if isinstance(entry, dict)]
    tail = "\n".join(line for line in lines if line)[-2000:]
    return f"{error}\n{tail}" if tail else str(error)
