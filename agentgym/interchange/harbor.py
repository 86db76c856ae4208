"""Tasks written as Harbor task folders: ``agentgym export-tasks ENV_ID --format harbor DIR``.

:func:`export_tasks` makes the env, asks it for each selected task as a
:class:`~agentgym.core.harbor.HarborTask` (:meth:`AgentEnv.harbor_task
<agentgym.core.env.AgentEnv.harbor_task>`, the contract in :mod:`agentgym.core.harbor`)
and writes each as ``DIR/<id>/`` (:func:`write_task`)::

    instruction.md  task.toml  environment/Dockerfile ...  tests/test.sh ...
    solution/solve.sh  solution/wrong*.sh

* **Which tasks.** All of the env's tasks in order, the first ``n``, or those named; a
  task without a reference solution is not written (nothing could check the folder), and
  is reported with that reason.
* **Envs that cannot.** An env class that does not override ``harbor_task`` is refused as
  a whole, before it is made, with its :attr:`~agentgym.core.env.AgentEnv.harbor_refusal`
  (why that family cannot be expressed as Harbor tasks); nothing is written. A task the
  env cannot write (its ``harbor_task`` raises
  :class:`~agentgym.core.harbor.NotExportableError`, or gives a value ``task.toml`` cannot
  hold) is reported with its reason, and the others are written.
* **Nothing half-written.** Every folder is prepared before the first is written, and a
  task folder already in ``DIR`` is an error unless ``force`` (then it is replaced). Each
  folder is written under a temporary name and renamed when complete.

``task.toml`` is written by :func:`toml_text`, a TOML writer for the values a task config
holds (strings, numbers, booleans, dates, arrays and tables; a key whose value is None is
left out: TOML has no null).

The written folders are read back by the ``terminal`` plugin (``agentgym validate terminal
-e tasks=DIR``) and by Harbor itself. See docs/interchange.md.
"""

from __future__ import annotations

import asyncio
import datetime
import inspect
import json
import math
import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium

from agentgym.core.env import AgentEnv
from agentgym.core.errors import InvalidArgumentError, UnknownIdError
from agentgym.core.harbor import FileSource, HarborTask, NotExportableError

#: The formats ``agentgym export-tasks`` writes.
FORMATS = ("harbor",)


@dataclass
class ExportReport:
    """What :func:`export_tasks` did.

    Attributes:
        env_id: the env exported.
        dest: the folder the task folders were written into.
        written: ``(task id, folder)`` of each task written, in the env's order.
        refused: ``(task id, reason)`` of each selected task not written.
    """

    env_id: str
    dest: Path
    written: list[tuple[str, Path]] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every selected task was written."""
        return not self.refused

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (what ``--json`` prints)."""
        return {"env": self.env_id, "format": "harbor", "dir": str(self.dest),
                "written": [{"id": task_id, "path": str(path)}
                            for task_id, path in self.written],
                "refused": [{"id": task_id, "reason": reason}
                            for task_id, reason in self.refused],
                "ok": self.ok}

    def summary(self) -> str:
        """One line: how many tasks were written where, and how many were not."""
        line = f"{len(self.written)} task folder(s) of {self.env_id} written to {self.dest}"
        if self.refused:
            line += f"; {len(self.refused)} not written, each with its reason"
        return line


def env_refusal(env_id: str) -> str | None:
    """Why the env ``env_id`` cannot write its tasks as Harbor folders, read from its class
    without making it (None when its class overrides ``harbor_task``, or when its factory
    is not a class: then only a made env says). Raises ``UnknownIdError`` for an unknown
    id."""
    from agentgym.core.plugins import plugin_host

    factory = plugin_host().get("envs", env_id.removeprefix("agentgym:")).load()
    if inspect.isclass(factory) and issubclass(factory, AgentEnv):
        return _class_refusal(factory)
    return None


def _class_refusal(cls: type) -> str | None:
    if not issubclass(cls, AgentEnv):
        return (f"its env ({cls.__name__}) is not an AgentEnv, whose harbor_task says how a"
                " task is written as a Harbor folder")
    if cls.harbor_task is AgentEnv.harbor_task:
        return cls.harbor_refusal
    return None


def export_tasks(env_id: str, dest: str | os.PathLike, env_kwargs: Mapping[str, Any] | None
                 = None, *, n: int | None = None, task_ids: Sequence[str] | None = None,
                 force: bool = False, make_env: Callable[[], Any] | None = None
                 ) -> ExportReport:
    """Write tasks of ``env_id`` as Harbor task folders under ``dest`` (see the module
    docstring).

    Args:
        env_kwargs: keyword arguments of ``agentgym.make(env_id, ...)`` (e.g. ``tasks=DIR``).
        n: the first ``n`` tasks, in the env's order; None for all (unless ``task_ids``).
        task_ids: these tasks, in this order.
        force: replace task folders already in ``dest``.
        make_env: builds the env instead of ``agentgym.make(env_id, **env_kwargs)``.

    Raises:
        NotExportableError: the env's family cannot be written as Harbor tasks (why is in
            the message); nothing is written.
        InvalidArgumentError: ``n`` and ``task_ids`` both given, ``dest`` is not a folder,
            or a task folder is already there (without ``force``).
        UnknownIdError: an unknown env id or task id (the message names close ones).
    """
    if n is not None and task_ids:
        raise InvalidArgumentError("give n (the first N tasks) or task_ids, not both")
    if n is not None and n < 1:
        raise InvalidArgumentError(f"n must be >= 1 (tasks to export), got {n}")
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise InvalidArgumentError(f"{dest} is a file; give a folder to write the task"
                                   " folders into (it is made if missing)")
    if make_env is None:
        refusal = env_refusal(env_id)
        if refusal:
            raise NotExportableError(_refused_env(env_id, refusal))
        import agentgym

        def make_env() -> Any:
            return agentgym.make(env_id, **dict(env_kwargs or {}))

    env = make_env()
    try:
        # An env made by agentgym.make is wrapped; one that keeps only the protocol is not.
        unwrapped = env.unwrapped if isinstance(env, gymnasium.Env) else env
        refusal = _class_refusal(type(unwrapped))
        if refusal:
            raise NotExportableError(_refused_env(env_id, refusal))
        known = list(unwrapped.task_ids())
        if task_ids:
            for task_id in task_ids:
                if task_id not in known:
                    raise UnknownIdError("task", task_id, known, "agentgym eval ENV -n N")
            selected = list(dict.fromkeys(task_ids))
        else:
            selected = known if n is None else known[:n]
        report = ExportReport(env_id, dest)
        tasks: list[tuple[str, HarborTask]] = []
        for task_id in selected:
            try:
                task = unwrapped.harbor_task(task_id)
                toml_text(task_config(task))  # a value TOML cannot hold fails here, not later
            except (NotExportableError, InvalidArgumentError) as e:
                report.refused.append((task_id, str(e)))
                continue
            if task.solution is None:
                report.refused.append((task_id, "it has no reference solution, so nothing"
                                                " could check the written folder"))
                continue
            tasks.append((task_id, task))
    finally:
        if isinstance(env, gymnasium.Env):
            env.close()
        else:
            asyncio.run(env.aclose())
    _check_targets(dest, [task for _, task in tasks], force)
    for task_id, task in tasks:
        report.written.append((task_id, write_task(task, dest, force=force)))
    return report


def _refused_env(env_id: str, reason: str) -> str:
    return f"the env {env_id!r} cannot be exported as Harbor tasks: {reason}"


def _check_targets(dest: Path, tasks: Sequence[HarborTask], force: bool) -> None:
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise InvalidArgumentError(f"two tasks would both be written to {dest / task.id}:"
                                       " their folder names must differ")
        seen.add(task.id)
    there = [dest / task.id for task in tasks if (dest / task.id).exists()]
    if there and not force:
        more = f" (and {len(there) - 1} more)" if len(there) > 1 else ""
        raise InvalidArgumentError(f"{there[0]} already exists{more}; pass --force"
                                   " (force=True) to replace it, or choose another folder")
    for path in there:
        if not path.is_dir() or path.is_symlink():
            raise InvalidArgumentError(f"{path} is not a task folder (a file or a link);"
                                       " remove it or choose another folder")


# ---- writing one folder ----------------------------------------------------------------------


def write_task(task: HarborTask, parent: str | os.PathLike, *, force: bool = False) -> Path:
    """Write ``task`` as the folder ``parent/<task.id>`` and return it (``parent`` is made
    if missing). A folder already there is an error unless ``force``, which replaces it.
    The folder is written under a temporary name and renamed when complete."""
    parent = Path(parent)
    target = parent / task.id
    if target.exists() and not force:
        raise InvalidArgumentError(f"{target} already exists; pass force=True to replace it")
    parent.mkdir(parents=True, exist_ok=True)
    staging = parent / f".{task.id}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir()
        text = task.instruction if task.instruction.endswith("\n") else task.instruction + "\n"
        _write(staging / "instruction.md", text)
        _write(staging / "task.toml", toml_text(task_config(task)))
        _write(staging / "environment", task.environment)
        _write(staging / "tests", task.tests)
        solutions: dict[str, FileSource] = {}
        if task.solution is not None:
            solutions["solve.sh"] = task.solution
        solutions.update(zip(wrong_names(len(task.wrong_solutions)), task.wrong_solutions,
                             strict=True))
        if solutions:
            _write(staging / "solution", solutions)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def wrong_names(count: int) -> list[str]:
    """The file names of ``count`` known-wrong solutions, in an order that sorts as given:
    ``wrong.sh`` for one, else ``wrong-1.sh`` ... (numbers padded to one width)."""
    if count == 1:
        return ["wrong.sh"]
    width = len(str(count))
    return [f"wrong-{k:0{width}d}.sh" for k in range(1, count + 1)]


def task_config(task: HarborTask) -> dict[str, Any]:
    """``task.toml`` of ``task`` as data: ``version``, ``[metadata]``, ``[verifier]``,
    ``[agent]``, ``[environment]``, then the rest of :attr:`HarborTask.extra
    <agentgym.core.harbor.HarborTask.extra>` (the task's fields win over it)."""
    extra = {key: dict(value) if isinstance(value, Mapping) else value
             for key, value in task.extra.items()}
    verifier = {**extra.pop("verifier", {}), "timeout_sec": float(task.test_timeout_s),
                "reward": task.reward}
    if task.verifier_env:
        verifier["env"] = dict(task.verifier_env)
    agent = {**extra.pop("agent", {}), "timeout_sec": float(task.agent_timeout_s)}
    environment = dict(extra.pop("environment", {}))
    if task.docker_image is not None:
        environment["docker_image"] = task.docker_image
    if task.cpus is not None:
        environment["cpus"] = int(task.cpus) if float(task.cpus).is_integer() else task.cpus
    if task.memory_mb is not None:
        environment.pop("memory", None)  # one memory size: this one
        environment["memory_mb"] = int(task.memory_mb)
    environment["allow_internet"] = task.allow_internet
    extra.pop("metadata", None)
    return {"version": extra.pop("version", "1.0"), "metadata": dict(task.metadata),
            "verifier": verifier, "agent": agent, "environment": environment, **extra}


def _write(target: Path, source: FileSource) -> None:
    if isinstance(source, Mapping):
        target.mkdir(parents=True, exist_ok=True)
        for name, entry in source.items():
            _write(target / name, entry)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(source, Path):
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        elif source.is_dir():
            shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
        elif source.is_file():
            shutil.copy2(source, target)
        else:
            raise NotExportableError(f"{source}, which {target.name} is copied from, does"
                                     " not exist")
        return
    target.write_bytes(source.encode() if isinstance(source, str) else source)
    target.chmod(0o755 if target.name.endswith(".sh") else 0o644)


# ---- TOML ---------------------------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def toml_text(data: Mapping[str, Any]) -> str:
    """``data`` as a TOML document: top-level values, then a ``[table]`` per mapping (and
    ``[[array]]`` per list of mappings), recursively; keys whose value is None are left
    out. Raises ``InvalidArgumentError`` naming a value TOML cannot hold."""
    lines: list[str] = []
    _toml_table(lines, (), data)
    return "\n".join(lines).lstrip("\n") + "\n"


def _toml_table(lines: list[str], path: tuple[str, ...], data: Mapping[str, Any]) -> None:
    nested = []
    for key, value in data.items():
        if value is None:
            continue
        if isinstance(value, Mapping) or _table_array(value):
            nested.append((key, value))
        else:
            lines.append(f"{_toml_key(key, path)} = {_toml_value(value, (*path, key))}")
    for key, value in nested:
        header = ".".join([*map(_toml_key, path), _toml_key(key, path)])
        if isinstance(value, Mapping):
            lines += ["", f"[{header}]"]
            _toml_table(lines, (*path, key), value)
        else:
            for item in value:
                lines += ["", f"[[{header}]]"]
                _toml_table(lines, (*path, key), item)


def _table_array(value: Any) -> bool:
    return (isinstance(value, (list, tuple)) and bool(value)
            and all(isinstance(item, Mapping) for item in value))


def _toml_key(key: Any, path: tuple[str, ...] = ()) -> str:
    if not isinstance(key, str):
        where = ".".join(map(str, path)) or "the top level"
        raise InvalidArgumentError(f"{where}: TOML keys are strings, got {key!r}")
    return key if _BARE_KEY.fullmatch(key) else _toml_string(key)


def _toml_string(text: str) -> str:
    # JSON's escapes are TOML's (\\", \\\\, \\n, \\uXXXX ...), but for DEL, which TOML
    # wants escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_value(value: Any, path: tuple[str, ...]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value)  # 1.0, 1e+16, inf, -inf: all TOML
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, Mapping):
        items = ", ".join(f"{_toml_key(k, path)} = {_toml_value(v, (*path, k))}"
                          for k, v in value.items() if v is not None)
        return "{ " + items + " }" if items else "{}"
    if isinstance(value, (list, tuple)):
        if any(item is None for item in value):
            raise InvalidArgumentError(f"{'.'.join(path)}: a TOML array cannot hold None")
        return "[" + ", ".join(_toml_value(item, path) for item in value) + "]"
    raise InvalidArgumentError(f"{'.'.join(path)}: TOML cannot hold a"
                               f" {type(value).__name__} ({value!r:.60})")
