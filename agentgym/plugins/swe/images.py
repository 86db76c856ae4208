"""Docker images for synthesized tasks: the default sandbox image plus a project's test env.

SWE-bench instances bring their own images. A task from `agentgym swe synth` runs on the
docker backend in an image built here, locally, with nothing pulled:
``agentgym/swe-env:<project>-<version>``, which is
:data:`~agentgym.sandboxes.image.DEFAULT_IMAGE` with the project's dependency env (see
:func:`agentgym.plugins.swe.repo.dependency_env`) copied to
:data:`~agentgym.plugins.swe.repo.ENV_MOUNT`, where the local backend mounts it. The
task's repository becomes the container's workspace, so one image serves every task of a
project. The image is labelled with what it was built from and rebuilt when that changes.

The env is built on the host with the interpreter sandboxes see; it runs in the image
only when the image's ``python3`` is the same version (Debian bookworm's, on the hosts
agentgym is tested on). Otherwise the build stops with an error that says so.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
import tempfile
from collections.abc import Callable

from agentgym.core.cache import file_lock
from agentgym.plugins.swe.repo import (
    ENV_MOUNT,
    ENV_PYTHON,
    ENV_READY,
    Project,
    RepoError,
    cache_dir,
)

IMAGE_REPOSITORY = "agentgym/swe-env"
_RECIPE_LABEL = "agentgym.swe.recipe"


def project_image_name(project: Project) -> str:
    """``agentgym/swe-env:<project>-<version>`` (characters docker tags do not allow
    become ``_``)."""
    tag = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{project.package}-{project.version}".lower())
    return f"{IMAGE_REPOSITORY}:{tag[:128]}"


def project_image(project: Project, client: object = None,
                  log: Callable[[str], None] | None = None) -> str:
    """The docker image that runs ``project``'s tests, built on first use; returns its name."""
    from agentgym.sandboxes.image import DEFAULT_IMAGE, docker_client, ensure_image

    client = client or docker_client()
    ensure_image(DEFAULT_IMAGE, client, log=log)
    name = project_image_name(project)
    recipe = _recipe(project, client.images.get(DEFAULT_IMAGE).id)
    if _current(client, name, recipe):
        return name
    with file_lock(cache_dir() / "images" / f"{name.replace('/', '_')}.lock"):
        if _current(client, name, recipe):  # built while we waited
            return name
        if log:
            log(f"building docker image {name} on {DEFAULT_IMAGE}")
        dockerfile = f"FROM {DEFAULT_IMAGE}\nCOPY env {ENV_MOUNT}\n".encode()
        with tempfile.TemporaryFile() as context:
            with tarfile.open(fileobj=context, mode="w") as tar:
                info = tarfile.TarInfo("Dockerfile")
                info.size = len(dockerfile)
                tar.addfile(info, io.BytesIO(dockerfile))
                tar.add(project.env, arcname="env")
            context.seek(0)
            try:
                client.images.build(fileobj=context, custom_context=True, tag=name, rm=True,
                                    forcerm=True, network_mode="none",
                                    labels={_RECIPE_LABEL: recipe})
            except Exception as error:
                raise RepoError(f"docker build of {name} failed: {error}") from error
        _check_runs(client, name, project)
    return name


def _recipe(project: Project, base_image_id: str) -> str:
    ready = (project.env / ENV_READY).read_bytes()
    return hashlib.sha256(base_image_id.encode() + ready).hexdigest()[:16]


def _current(client: object, name: str, recipe: str) -> bool:
    import docker.errors

    try:
        image = client.images.get(name)  # type: ignore[attr-defined]
    except docker.errors.ImageNotFound:
        return False
    return (image.labels or {}).get(_RECIPE_LABEL) == recipe


def _check_runs(client: object, name: str, project: Project) -> None:
    """The env's interpreter must start and import pytest inside the image."""
    import docker.errors

    try:
        client.containers.run(  # type: ignore[attr-defined]
            name, [ENV_PYTHON, "-c", "import pytest"], network_mode="none", remove=True,
            stderr=True)
    except docker.errors.ContainerError as error:
        client.images.remove(name, force=True)  # type: ignore[attr-defined]
        raise RepoError(
            f"the test env of {project.package}=={project.version} ({project.env}) does not"
            f" run in {name}: {error.stderr!r}. It was built with the host's interpreter,"
            " which must be the same Python version as the image's python3; use"
            " backend='local', or point AGENTGYM_SWE_PYTHON at a matching interpreter and"
            " delete the env to rebuild it") from error
