"""A terminal task's starting workspace: a cached local template, or a locally built image.

* **local** (:func:`local_template`): a task whose Dockerfile the local backend can rebuild
  (:func:`~agentgym.plugins.terminal.formats.local_plan`) gets a host folder holding its
  workspace as the image would: the ``COPY``'d files, then the ``RUN`` steps run in a
  local sandbox over them (as the sandbox user, with the Dockerfile's ``ENV``), the result
  read back as a tar. It is built once and cached under ``~/.cache/agentgym/terminal/``,
  named by a digest of everything it is built from, so a reset only opens a sandbox on it.
* **docker** (:func:`task_image`): the docker backend builds an image (its
  ``build_image``, cached by content; base images are never pulled, and a missing one is
  an error naming it). A Dockerfile the local backend can rebuild is built as
  :func:`plan_dockerfile` writes it, so that its workspace is the same on both backends;
  any other is built as it is.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import shlex
import shutil
import tarfile
from pathlib import Path

from agentgym.core.cache import cache_root, file_lock, hash_tree
from agentgym.core.registry import open_sandbox, sandbox_backend
from agentgym.core.sandbox import SandboxError, SandboxImage, SandboxLimits, SandboxSpec
from agentgym.plugins.terminal.formats import TerminalTask

#: Bump when the way templates are built changes: old ones are then rebuilt.
TEMPLATE_VERSION = "1"
#: Seconds the RUN steps of one Dockerfile may take together.
BUILD_TIMEOUT_S = 600.0


def template_dir() -> Path:
    """Where built workspace templates are cached."""
    return cache_root() / "terminal" / "templates"


def template_digest(task: TerminalTask) -> str:
    """What a task's template is built from: the Dockerfile and every file it copies."""
    assert task.plan is not None
    digest = hashlib.sha256(f"{TEMPLATE_VERSION}\0{task.plan.workdir}\0".encode())
    if task.dockerfile is not None:
        digest.update(task.dockerfile.read_bytes())
    for index, (host, rel) in enumerate(task.plan.copies):
        hash_tree(digest, f"{index}:{rel}", host)
    return digest.hexdigest()[:20]


async def local_template(task: TerminalTask, limits: SandboxLimits | None = None) -> Path:
    """The folder a local sandbox's workspace starts from for ``task``, built on first use
    (see the module docstring). Raises :class:`SandboxError` naming the step that failed."""
    if task.plan is None:
        raise SandboxError(f"task {task.id!r} needs an image: {task.local_reason}")
    target = template_dir() / f"{task.id}-{template_digest(task)}"
    if target.is_dir():
        return target
    # On a thread, with a loop of its own: the lock may wait for another build.
    return await asyncio.to_thread(_build_once, task, target, limits)


def _build_once(task: TerminalTask, target: Path, limits: SandboxLimits | None) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.with_name(target.name + ".lock")):
        if not target.is_dir():
            staging = target.with_name(f".{target.name}.{os.getpid()}")
            shutil.rmtree(staging, ignore_errors=True)
            try:
                asyncio.run(_build(task, staging, limits))
                staging.rename(target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return target


async def _build(task: TerminalTask, staging: Path, limits: SandboxLimits | None) -> None:
    plan = task.plan
    assert plan is not None
    staging.mkdir(parents=True)
    for host, rel in plan.copies:
        dest = staging / rel
        if host.is_dir():
            shutil.copytree(host, dest, symlinks=True, dirs_exist_ok=True)
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(host, dest)
    if not plan.runs:
        return
    limits = limits or SandboxLimits(timeout_s=BUILD_TIMEOUT_S, memory_mb=2048, pids=512)
    spec = SandboxSpec(template=str(staging), workdir=plan.workdir, env=dict(plan.env),
                       limits=limits)
    async with await open_sandbox("local", spec) as box:
        for cwd, command in plan.runs:
            script = f"cd {shlex.quote(cwd)} && {{\n{command}\n}}"
            result = await box.exec(script, timeout=BUILD_TIMEOUT_S)
            if not result.ok:
                raise SandboxError(
                    f"task {task.id!r}: RUN {command[:200]!r} of {task.dockerfile} failed"
                    f" (exit {result.exit_code}) in the local sandbox:"
                    f" {result.output.strip()[-1500:]}")
        archive = "/tmp/.agentgym-workspace.tar"
        result = await box.exec(f"tar -C {shlex.quote(plan.workdir)} -cf {archive} .",
                                timeout=BUILD_TIMEOUT_S)
        if not result.ok:
            raise SandboxError(f"task {task.id!r}: the built workspace could not be read"
                               f" back: {result.output.strip()[-500:]}")
        data = await box.read_file(archive)
    shutil.rmtree(staging)
    staging.mkdir()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        if hasattr(tarfile, "tar_filter"):
            tar.extraction_filter = _keep_modes
        tar.extractall(staging)


def _keep_modes(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo:
    """tarfile's ``tar`` filter (no paths leaving the folder), keeping the permission bits
    it would clear (group and other write, sticky, setgid): tasks about permissions set
    them."""
    return tarfile.tar_filter(member, path).replace(mode=member.mode, deep=False)


def task_image(task: TerminalTask, backend: str = "docker", log=None) -> str | None:
    """The image ``task`` runs in on ``backend`` (one with ``build_image``, as ``docker``
    has): its prebuilt image (the backend checks it exists when the sandbox opens), or its
    Dockerfile's, built locally on first use (cached by content); None, the backend's
    default image, for a task without one."""
    if task.image:
        return task.image
    if task.context is None:
        if task.plan is None:
            raise SandboxError(f"task {task.id!r} has no Dockerfile to build:"
                               f" {task.local_reason}")
        return None
    builder = sandbox_backend(backend)
    if builder.default_image is None:
        raise SandboxError(f"task {task.id!r} needs its Dockerfile built, and the {backend}"
                           " backend builds no images; use backend='docker'")
    dockerfile = plan_dockerfile(task, builder.default_image) if task.plan is not None else None
    return builder.build_image(context=task.context, dockerfile=dockerfile,
                               repository="agentgym/terminal", log=log)


def plan_dockerfile(task: TerminalTask, image: SandboxImage) -> str:
    """The Dockerfile a backend with images builds for a task the local backend can
    rebuild, on its default ``image``: the workspace it describes, made as
    :func:`local_template` makes it (its files copied first, owned by the sandbox user;
    then each ``RUN`` step run by bash, as that user, in its folder, with every ``ENV``).
    Built as written, a Dockerfile ``FROM`` the default image would run its ``RUN`` steps
    as the sandbox user over folders ``WORKDIR`` and ``COPY`` made for root, and fail to
    write them."""
    plan, context = task.plan, task.context
    assert plan is not None and context is not None
    workdir, user = plan.workdir, image.user
    lines = [f"FROM {image.name}", "USER root",
             f"RUN mkdir -p {shlex.quote(workdir)} && chown {user}"
             f" {shlex.quote(workdir)}", f"USER {user}", f"WORKDIR {workdir}"]
    for host, rel in plan.copies:
        source = host.relative_to(Path(context).resolve()).as_posix()
        target = workdir if rel == "." else f"{workdir.rstrip('/')}/{rel}"
        lines.append(f"COPY --chown={user} {json.dumps([source, target])}")
    for name, value in plan.env:  # literal values, as the local backend sets them
        quoted = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
        lines.append(f'ENV {name}="{quoted}"')
    for cwd, command in plan.runs:
        script = f"cd {shlex.quote(cwd)} && {{\n{command}\n}}"
        lines.append(f"RUN {json.dumps(['bash', '-c', script])}")
    return "\n".join(lines) + "\n"
