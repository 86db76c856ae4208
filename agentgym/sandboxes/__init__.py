"""The ``sandboxes`` plugin: the built-in sandbox backends.

* ``local`` (the default): bubblewrap with a copy-on-write workspace, its own pid, network,
  mount and IPC namespaces, an unprivileged user, and cgroup limits. Needs Linux, root,
  and the ``bwrap`` program.
* ``docker``: one container per sandbox through the docker SDK, network none by default,
  with memory, pids and CPU limits. Needs a running Docker engine.

Registered through the entry point ``sandboxes``, like any third-party backend.
"""

from __future__ import annotations

from agentgym.core.hookspecs import hookimpl
from agentgym.core.registry import Spec


@hookimpl
def agentgym_sandboxes() -> list[Spec]:
    return [
        Spec("local", "agentgym.sandboxes.local:LocalSandbox.create",
             "bubblewrap: copy-on-write workspace, no network, cgroup limits (default)."),
        Spec("docker", "agentgym.sandboxes.docker:DockerSandbox.create",
             "A Docker container per sandbox: network none, memory/pids/cpu limits."),
    ]


@hookimpl
def agentgym_cli_commands() -> list:
    from agentgym.sandboxes.cli import sandbox_group

    return [sandbox_group]
