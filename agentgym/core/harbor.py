"""A task as a Harbor task folder: what an env says when asked to write one of its tasks in
the format of Harbor, the harness of Terminal-Bench 2 (``agentgym export-tasks ENV_ID
--format harbor DIR`` writes the folders; see docs/interchange.md).

A Harbor task is a folder::

    TASK/instruction.md            what the agent is asked
    TASK/task.toml                 [metadata]; [agent] timeout_sec; [verifier] timeout_sec,
                                   env; [environment] docker_image, cpus, memory_mb,
                                   allow_internet
    TASK/environment/Dockerfile    the image the agent works in (the folder is the context)
    TASK/tests/test.sh             the grader: copied to /tests only when the agent is done,
                                   it writes the reward to /logs/verifier/reward.txt
    TASK/solution/solve.sh         the reference solution

with agentgym's two optional additions, which Harbor ignores: ``reward = "binary" |
"fraction"`` in ``[verifier]`` and known-wrong solutions, ``solution/wrong*.sh``.

**The env's side.** :meth:`AgentEnv.harbor_task <agentgym.core.env.AgentEnv.harbor_task>`
returns one task as a :class:`HarborTask`. Its default raises
:class:`NotExportableError` with the class's
:attr:`~agentgym.core.env.AgentEnv.harbor_refusal`: an env family whose tasks cannot be
written this way (the agent acts in a browser, or the grader needs what a Harbor
verifier, run in the agent's own container, cannot promise) states why there, and the
command reports it without making the env. An env that can overrides ``harbor_task``; it
raises :class:`NotExportableError` for a single task it cannot write, saying why.

**What the grader may trust.** Harbor copies ``tests/`` into the container only to
grade, after the agent is done: everything the grader reads besides the agent's work
belongs there, never in the image (``environment/``), which the agent can read and change.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from agentgym.core.errors import AgentGymError, InvalidArgumentError

#: A file or folder of a task folder: text (``str``, written as UTF-8), ``bytes``, a host
#: file or folder copied as it is (``Path``: modes kept, links copied as links), or a
#: folder given as a mapping of names (or relative paths) to its entries (``{}``: an empty
#: folder). Written text whose name ends in ``.sh`` is made executable.
FileSource = str | bytes | Path | Mapping[str, "FileSource"]

RewardMode = Literal["binary", "fraction"]


class NotExportableError(AgentGymError):
    """A task, or every task of an env, that cannot be written in an interchange format;
    the message says which and why."""


@dataclass(frozen=True)
class HarborTask:
    """One task as a Harbor task folder (see the module docstring).

    Attributes:
        id: the folder's name (no ``/``, not ``.`` or ``..``).
        instruction: ``instruction.md``, what the agent is asked (Markdown).
        tests: ``tests/``: the grader's files, ``test.sh`` among them (run as ``bash
            /tests/test.sh``; it writes the reward to ``/logs/verifier/reward.txt``).
        environment: ``environment/``, the Docker build context: its ``Dockerfile`` (or a
            ``docker-compose.yaml``) unless :attr:`docker_image` names a prebuilt image.
        solution: ``solution/solve.sh``, the reference solution; None for none.
        wrong_solutions: known-wrong solutions, ``solution/wrong*.sh`` in order; each must
            score below 1.0.
        metadata: ``[metadata]`` (author, difficulty, category, tags ...).
        agent_timeout_s: ``[agent] timeout_sec``.
        test_timeout_s: ``[verifier] timeout_sec``.
        reward: ``[verifier] reward``: ``binary`` (1.0 only for a full score) or
            ``fraction`` (the reward file's number).
        verifier_env: ``[verifier] env``, variables the tests run with.
        docker_image: ``[environment] docker_image``, a prebuilt image to run instead of
            building ``environment/``; None to build it.
        cpus: ``[environment] cpus``; None for the harness's default.
        memory_mb: ``[environment] memory_mb``; None for the harness's default.
        allow_internet: ``[environment] allow_internet`` (agentgym's sandboxes have no
            network).
        extra: further ``task.toml`` keys and tables kept as they are (a task read from a
            Harbor folder keeps what agentgym does not read); the fields above win over
            them.
    """

    id: str
    instruction: str
    tests: Mapping[str, FileSource]
    environment: Mapping[str, FileSource] = field(default_factory=dict)
    solution: str | None = None
    wrong_solutions: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    agent_timeout_s: float = 600.0
    test_timeout_s: float = 120.0
    reward: RewardMode = "binary"
    verifier_env: Mapping[str, str] = field(default_factory=dict)
    docker_image: str | None = None
    cpus: float | None = None
    memory_mb: int | None = None
    allow_internet: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"HarborTask {self.id!r}"
        if (not self.id or self.id in (".", "..") or "/" in self.id or "\\" in self.id
                or self.id != self.id.strip()):
            raise InvalidArgumentError(f"{where}: the id names the task's folder; give a"
                                       " name without '/' that is not '.' or '..'")
        if not self.instruction.strip():
            raise InvalidArgumentError(f"{where}: the instruction is empty")
        for part, files in (("tests", self.tests), ("environment", self.environment)):
            _check_tree(f"{where}: {part}", files)
        if "test.sh" not in self.tests:
            raise InvalidArgumentError(
                f"{where}: tests has no 'test.sh'; Harbor grades by running tests/test.sh,"
                " which writes the reward to /logs/verifier/reward.txt")
        if self.docker_image is None and not {"Dockerfile", "docker-compose.yaml"} & set(
                self.environment):
            raise InvalidArgumentError(
                f"{where}: environment has no 'Dockerfile'; give one (the image the agent"
                " works in) or docker_image, a prebuilt image")
        for name, value in (("agent_timeout_s", self.agent_timeout_s),
                            ("test_timeout_s", self.test_timeout_s),
                            ("cpus", self.cpus), ("memory_mb", self.memory_mb)):
            if value is not None and (isinstance(value, bool) or not isinstance(
                    value, (int, float)) or not value > 0 or math.isinf(value)):
                raise InvalidArgumentError(f"{where}: {name} must be a number > 0, got"
                                           f" {value!r}")
        if self.reward not in ("binary", "fraction"):
            raise InvalidArgumentError(f"{where}: reward must be 'binary' or 'fraction', got"
                                       f" {self.reward!r}")


def _check_tree(where: str, files: Mapping[str, FileSource]) -> None:
    """Every name in ``files`` (and in the folders it gives as mappings) is a relative
    path that stays inside its folder, and every entry a :data:`FileSource`."""
    for name, source in files.items():
        path = PurePosixPath(name) if isinstance(name, str) else None
        if (path is None or not name or path.is_absolute() or ".." in path.parts
                or "\\" in name):
            raise InvalidArgumentError(f"{where}/{name}: a path inside the task folder must be"
                                       " relative and stay inside it (no '..', no leading"
                                       " '/')")
        if isinstance(source, Mapping):
            _check_tree(f"{where}/{name}", source)
        elif not isinstance(source, (str, bytes, Path)):
            raise InvalidArgumentError(f"{where}/{name}: give text, bytes, a Path or a"
                                       f" mapping (a folder), got {type(source).__name__}")
