"""``agentgym sandbox ...``: see exactly what an agent's command would do, and clean up.

::

    agentgym sandbox exec [--backend local|docker] [--image IMG] [--template DIR]
                          [--timeout S] -- CMD...
    agentgym sandbox gc [--all]
    agentgym sandbox build-image [--force]

``exec`` prints the command's output and exits with its exit code (124 when the timeout
stopped it).
"""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path

import click

from agentgym.core.registry import open_sandbox
from agentgym.core.sandbox import SandboxError, SandboxLimits


@click.group("sandbox")
def sandbox_group() -> None:
    """Run commands in a sandbox, build its image, remove leftovers."""


@sandbox_group.command("exec", context_settings={"ignore_unknown_options": True})
@click.option("--backend", default="local", show_default=True,
              help="A sandbox backend from `agentgym list sandboxes`.")
@click.option("--image", default=None, help="Docker image (docker backend only).")
@click.option("--template", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Directory the workspace starts from (copy-on-write; never modified).")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(min=0.001),
              help="Wall-time limit of the command, in seconds.")
@click.option("--network", is_flag=True, help="Allow network access (off by default).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_command(backend: str, image: str | None, template: Path | None, timeout: float,
                 network: bool, command: tuple[str, ...]) -> None:
    """Run COMMAND in a fresh sandbox, print its output, exit with its exit code."""
    text = command[0] if len(command) == 1 else shlex.join(command)

    async def run() -> int:
        kwargs = {"limits": SandboxLimits(timeout_s=timeout, network=network)}
        if image:
            kwargs["image"] = image
        if template:
            kwargs["template"] = str(template)
        async with await open_sandbox(backend, **kwargs) as box:
            result = await box.exec(text, timeout=timeout)
        sys.stdout.write(result.output)
        sys.stdout.flush()
        return result.exit_code

    try:
        code = asyncio.run(run())
    except SandboxError as e:
        raise click.ClickException(str(e)) from e
    sys.exit(code)


@sandbox_group.command("gc")
@click.option("--all", "everything", is_flag=True,
              help="Remove every agentgym sandbox, not only those whose process died.")
def gc_command(everything: bool) -> None:
    """Remove sandboxes (processes, cgroups, folders, containers) left by crashed runs,
    and cached template copies nobody uses that are stale or idle."""
    from agentgym.sandboxes import local, templates

    removed = {"local": local.gc(everything)}
    try:
        from agentgym.sandboxes import docker

        removed["docker"] = docker.gc(everything)
    except (ImportError, SandboxError) as e:
        click.echo(f"docker: skipped ({e})", err=True)
    for backend, count in removed.items():
        click.echo(f"{backend}: removed {count} leftover sandbox(es)")
    click.echo(f"local templates: removed {templates.clean()} unused cached copies")


@sandbox_group.command("build-image")
@click.option("--force", is_flag=True, help="Rebuild even if the image exists.")
def build_image_command(force: bool) -> None:
    """Build the docker backend's default image locally (no registry needed)."""
    from agentgym.sandboxes.image import build_default_image

    try:
        name = build_default_image(force=force, log=lambda line: click.echo(line, err=True))
    except SandboxError as e:
        raise click.ClickException(str(e)) from e
    click.echo(name)
