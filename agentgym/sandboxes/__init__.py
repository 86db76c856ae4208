"""The ``sandboxes`` plugin: the built-in sandbox backends.

* ``local`` (the default, :class:`~agentgym.sandboxes.local.LocalBackend`): bubblewrap
  with a copy-on-write workspace, its own pid, network, mount and IPC namespaces, an
  unprivileged user, and cgroup limits. Needs Linux, root, and the ``bwrap`` program.
  Supports every spec field but ``image``.
* ``docker`` (:class:`~agentgym.sandboxes.docker.DockerBackend`): one container per
  sandbox through the docker SDK, network none by default, with memory, pids and CPU
  limits. Needs a running Docker engine. Supports every spec field, and builds images
  locally (``build_image``).

Registered through the entry point ``sandboxes``, like any third-party backend. The plugin
also contributes the generic shell exploit probes (:mod:`agentgym.toolkits.probes`,
``shell.*``), which apply to any env offering a ``bash`` or ``terminal`` tool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentgym.core.hookspecs import hookimpl

if TYPE_CHECKING:
    from agentgym.core.probes import ExploitProbe
    from agentgym.core.sandbox import SandboxBackend


@hookimpl
def agentgym_sandboxes() -> list[SandboxBackend]:
    from agentgym.sandboxes.docker import DockerBackend
    from agentgym.sandboxes.local import LocalBackend

    return [LocalBackend(), DockerBackend()]


@hookimpl
def agentgym_cli_commands() -> list:
    from agentgym.sandboxes.cli import sandbox_group

    return [sandbox_group]


@hookimpl
def agentgym_exploit_probes() -> list[ExploitProbe]:
    from agentgym.toolkits.probes import shell_probes

    return shell_probes()
