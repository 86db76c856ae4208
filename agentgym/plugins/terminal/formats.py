"""Terminal task folders: the two public formats, read into one :class:`TerminalTask`.

**Harbor** (Terminal-Bench 2)::

    TASK/instruction.md            what the agent is asked
    TASK/task.toml                 [metadata], [verifier] timeout_sec, [agent] timeout_sec
    TASK/environment/Dockerfile    the workspace's image (the folder is the build context)
    TASK/tests/test.sh             the grader: writes the reward to /logs/verifier/reward.txt
    TASK/solution/solve.sh         the reference solution

**Terminal-Bench** (1.x)::

    TASK/task.yaml                 instruction, max_agent_timeout_sec, max_test_timeout_sec
    TASK/Dockerfile                the workspace's image (the task folder is the context)
    TASK/run-tests.sh              the grader, run with TEST_DIR=/tests (pytest -rA output)
    TASK/tests/                    copied to /tests with run-tests.sh
    TASK/solution.sh | solution.yaml   the reference solution

agentgym adds two optional keys and one file to both: ``reward = "binary" | "fraction"``
(``[verifier]`` in task.toml, top level in task.yaml: all or nothing, or the fraction
reported: Harbor's reward file value, Terminal-Bench's share of passed tests; default
binary) and known-wrong solutions, ``solution/wrong*.sh`` (Harbor) or ``wrong*.sh``
(Terminal-Bench), which ``agentgym validate`` checks score below 1.0. Harbor's task.toml
may also set ``[verifier] snapshot``: a command run in the workspace when an episode
starts, before the agent's first command (as the agent's user, with the grader's
environment); its exit code and output (``{"exit_code": N, "output": "..."}``) reach the
tests as ``/tests/snapshot.json``. A grader that needs the workspace as it started (an
answer measured on the files before the agent could change them) reads it there, and
falls back to measuring now where the file is absent (another harness).

A folder that is neither format, or a file with a missing or mistyped field, raises
:class:`TaskFormatError` naming the file and the field.

**Where a task runs.** A Dockerfile that only starts ``FROM`` the default sandbox image and
uses ``WORKDIR``, ``COPY``/``ADD`` of local files into the workspace, ``ENV`` and ``RUN``
(:func:`local_plan`) needs no image: the local backend rebuilds it as a workspace template
(:mod:`agentgym.plugins.terminal.workspace`). Any other Dockerfile is built as an image
for the docker backend.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from agentgym.core.errors import AgentGymError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: Where a task's workspace is when its Dockerfile names no WORKDIR.
DEFAULT_WORKDIR = "/app"
#: Where tests are copied at grading, and where Harbor's verifier writes its reward.
TESTS_DIR = "/tests"
LOGS_DIR = "/logs"
REWARD_FILE = "/logs/verifier/reward.txt"
#: The image a Dockerfile must start from to run on the local backend.
LOCAL_BASE_IMAGES = ("agentgym/sandbox:default",)

Format = Literal["harbor", "terminal-bench"]
RewardMode = Literal["binary", "fraction"]


class TaskFormatError(AgentGymError, ValueError):
    """A task folder that cannot be read; the message names the file and the field."""


@dataclass(frozen=True)
class LocalPlan:
    """A Dockerfile the local backend can rebuild without an image: the workspace path,
    files copied into it (host path -> path relative to the workspace), variables, and
    ``RUN`` commands (each with the working directory it runs in)."""

    workdir: str
    copies: tuple[tuple[Path, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    runs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class TerminalTask:
    """One terminal task, whatever its format (see the module docstring).

    Attributes:
        id: the folder's name.
        format: ``harbor`` or ``terminal-bench``.
        folder: the task folder.
        instruction: what the agent is asked (Markdown).
        context: the Docker build context (the folder holding ``dockerfile``), or None.
        dockerfile: the Dockerfile, or None (the task runs in the default workspace).
        workdir: the workspace inside the sandbox (the Dockerfile's last WORKDIR).
        plan: how the local backend rebuilds the Dockerfile, or None when only an image
            can (``local_reason`` says why).
        tests: files copied to ``/tests`` at grading: name there -> host file or folder.
        test_command: what grading runs in the workspace.
        solution: the reference solution script, or None.
        wrong_solutions: known-wrong solution scripts.
        agent_timeout_s, test_timeout_s: the task's time limits.
        reward: ``binary`` or ``fraction``.
        metadata: the rest of the task's config (difficulty, category, tags ...).
        image: a prebuilt image the task runs in instead of building its Dockerfile
            (Harbor's ``[environment] docker_image``); it must be on the docker engine.
        verifier_env: variables the tests run with (Harbor's ``[verifier] env``).
        snapshot: the command whose result the tests get as ``/tests/snapshot.json``
            (``[verifier] snapshot``, module docstring), or None.
        cpus, memory_mb: the task's resources (Harbor's ``[environment]``); None for the
            env's limits.
    """

    id: str
    format: Format
    folder: Path
    instruction: str
    context: Path | None
    dockerfile: Path | None
    workdir: str
    plan: LocalPlan | None
    local_reason: str
    tests: tuple[tuple[str, Path], ...]
    test_command: str
    solution: str | None
    wrong_solutions: tuple[str, ...] = ()
    agent_timeout_s: float = 600.0
    test_timeout_s: float = 120.0
    reward: RewardMode = "binary"
    metadata: dict[str, Any] = field(default_factory=dict)
    image: str | None = None
    verifier_env: tuple[tuple[str, str], ...] = ()
    snapshot: str | None = None
    cpus: float | None = None
    memory_mb: int | None = None

    @property
    def runs_locally(self) -> bool:
        """The local backend can give this task's workspace (no image needed)."""
        return self.plan is not None


def load_task(folder: str | Path) -> TerminalTask:
    """Read one task folder, Harbor or Terminal-Bench (told apart by ``task.toml`` or
    ``task.yaml``)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise TaskFormatError(f"task folder {str(folder)!r} does not exist or is not a folder")
    if (folder / "task.toml").is_file():
        return _harbor(folder)
    if (folder / "task.yaml").is_file():
        return _terminal_bench(folder)
    raise TaskFormatError(
        f"{folder}: neither task.toml (Harbor) nor task.yaml (Terminal-Bench) is there;"
        " point at a task folder, or at a folder of task folders")


def load_tasks(root: str | Path) -> list[TerminalTask]:
    """Every task under ``root``: ``root`` itself if it is a task folder, else its
    subfolders that are (sorted by name). A subfolder that is a malformed task raises."""
    root = Path(root)
    if not root.is_dir():
        raise TaskFormatError(f"tasks={str(root)!r} is not a folder; give a task folder or a"
                              " folder of task folders (Harbor or Terminal-Bench format)")
    if (root / "task.toml").is_file() or (root / "task.yaml").is_file():
        return [load_task(root)]
    tasks = [load_task(sub) for sub in sorted(root.iterdir())
             if (sub / "task.toml").is_file() or (sub / "task.yaml").is_file()]
    if not tasks:
        raise TaskFormatError(f"{root} holds no task folders (none has a task.toml or"
                              " task.yaml)")
    return tasks


# ---- the two formats ---------------------------------------------------------------------


def _harbor(folder: Path) -> TerminalTask:
    config_file = folder / "task.toml"
    try:
        config = tomllib.loads(config_file.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise TaskFormatError(f"{config_file}: not valid TOML: {error}") from None
    instruction_file = folder / "instruction.md"
    if not instruction_file.is_file():
        raise TaskFormatError(f"{instruction_file} is missing: a Harbor task states its"
                              " instruction there")
    test_script = folder / "tests" / "test.sh"
    if not test_script.is_file():
        raise TaskFormatError(f"{test_script} is missing: a Harbor task's grader is"
                              " tests/test.sh, writing the reward to " + REWARD_FILE)
    verifier = _table(config, "verifier", config_file)
    agent = _table(config, "agent", config_file)
    environment = _table(config, "environment", config_file)
    context = folder / "environment"
    dockerfile = context / "Dockerfile"
    solution = folder / "solution" / "solve.sh"
    image = environment.get("docker_image")
    if image is not None and (not isinstance(image, str) or not image.strip()):
        raise TaskFormatError(f"{config_file}: environment.docker_image must be an image name,"
                              f" got {image!r}")
    verifier_env = verifier.get("env", {})
    if not isinstance(verifier_env, dict) or not all(
            isinstance(v, (str, int, float)) for v in verifier_env.values()):
        raise TaskFormatError(f"{config_file}: verifier.env must be a table of variables,"
                              f" got {verifier_env!r:.80}")
    task = _task(
        folder, "harbor", instruction_file.read_text(), config_file,
        context=context if dockerfile.is_file() else None,
        tests=(("", folder / "tests"),), test_command=f"bash {TESTS_DIR}/test.sh",
        solution=solution, wrong=sorted((folder / "solution").glob("wrong*.sh")),
        agent_timeout=_number(agent, "timeout_sec", 600.0, config_file, "agent"),
        test_timeout=_number(verifier, "timeout_sec", 120.0, config_file, "verifier"),
        reward=_reward(verifier.get("reward", "binary"), config_file, "verifier.reward"),
        metadata=dict(_table(config, "metadata", config_file)))
    snapshot = verifier.get("snapshot")
    if snapshot is not None and (not isinstance(snapshot, str) or not snapshot.strip()):
        raise TaskFormatError(f"{config_file}: verifier.snapshot must be a shell command,"
                              f" got {snapshot!r:.80}")
    resources = _resources(environment, config_file)
    task = dataclasses.replace(task, verifier_env=tuple((k, str(v)) for k, v in
                                                        verifier_env.items()),
                               snapshot=snapshot, **resources)
    if image:
        task = dataclasses.replace(task, image=image, plan=None,
                                   local_reason=f"it runs in the prebuilt image {image!r}")
    return task


def _terminal_bench(folder: Path) -> TerminalTask:
    import yaml

    config_file = folder / "task.yaml"
    try:
        config = yaml.safe_load(config_file.read_text()) or {}
    except yaml.YAMLError as error:
        raise TaskFormatError(f"{config_file}: not valid YAML: {error}") from None
    if not isinstance(config, dict):
        raise TaskFormatError(f"{config_file}: must be a mapping of fields, got {config!r:.80}")
    instruction = config.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        raise TaskFormatError(f"{config_file}: field 'instruction' is missing or empty; it"
                              " holds what the agent is asked")
    run_tests = folder / "run-tests.sh"
    if not run_tests.is_file():
        raise TaskFormatError(f"{run_tests} is missing: a Terminal-Bench task's grader runs"
                              " it (with TEST_DIR=/tests)")
    tests: list[tuple[str, Path]] = [("run-tests.sh", run_tests)]
    if (folder / "tests").is_dir():
        tests.insert(0, ("", folder / "tests"))
    solution = folder / "solution.sh"
    if not solution.is_file() and (folder / "solution.yaml").is_file():
        solution = folder / "solution.yaml"
    known = {"instruction", "reward", "max_agent_timeout_sec", "max_test_timeout_sec"}
    task = _task(
        folder, "terminal-bench", instruction, config_file,
        context=folder if (folder / "Dockerfile").is_file() else None,
        tests=tuple(tests), test_command=f"TEST_DIR={TESTS_DIR} bash {TESTS_DIR}/run-tests.sh",
        solution=solution, wrong=sorted(folder.glob("wrong*.sh")),
        agent_timeout=_number(config, "max_agent_timeout_sec", 600.0, config_file, None),
        test_timeout=_number(config, "max_test_timeout_sec", 120.0, config_file, None),
        reward=_reward(config.get("reward", "binary"), config_file, "reward"),
        metadata={k: v for k, v in config.items() if k not in known})
    if task.dockerfile is None and (folder / "docker-compose.yaml").is_file():
        task = dataclasses.replace(task, plan=None, local_reason=(
            "its environment is a docker-compose.yaml without a Dockerfile, which agentgym"
            " does not run"))
    return task


def _task(folder: Path, format: Format, instruction: str, config_file: Path, *,
          context: Path | None, tests: tuple[tuple[str, Path], ...], test_command: str,
          solution: Path, wrong: list[Path], agent_timeout: float, test_timeout: float,
          reward: RewardMode, metadata: dict[str, Any]) -> TerminalTask:
    dockerfile = context / "Dockerfile" if context is not None else None
    if dockerfile is None:
        plan, reason, workdir = LocalPlan(DEFAULT_WORKDIR), "", DEFAULT_WORKDIR
    else:
        plan, reason, workdir = local_plan(dockerfile)
    return TerminalTask(
        id=folder.name, format=format, folder=folder, instruction=instruction.strip(),
        context=context, dockerfile=dockerfile, workdir=workdir, plan=plan,
        local_reason=reason, tests=tests, test_command=test_command,
        solution=_script(solution) if solution.is_file() else None,
        wrong_solutions=tuple(_script(path) for path in wrong),
        agent_timeout_s=agent_timeout, test_timeout_s=test_timeout, reward=reward,
        metadata=metadata)


def _resources(environment: dict[str, Any], where: Path) -> dict[str, Any]:
    """``cpus`` and ``memory_mb`` from Harbor's ``[environment]`` (``memory = "2G"`` too)."""
    found: dict[str, Any] = {}
    if "cpus" in environment:
        found["cpus"] = _number(environment, "cpus", 1.0, where, "environment")
    memory = environment.get("memory_mb", environment.get("memory"))
    if memory is not None:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([MmGg])?[Bb]?\s*", str(memory))
        if not match or isinstance(memory, bool):
            raise TaskFormatError(f"{where}: environment.memory must be megabytes or a size"
                                  f" such as '2G', got {memory!r}")
        value = float(match.group(1)) * (1024 if (match.group(2) or "M") in "Gg" else 1)
        found["memory_mb"] = int(value)
    return found


def _table(config: dict[str, Any], name: str, where: Path) -> dict[str, Any]:
    value = config.get(name, {})
    if not isinstance(value, dict):
        raise TaskFormatError(f"{where}: [{name}] must be a table, got {value!r:.80}")
    return value


def _number(config: dict[str, Any], key: str, default: float, where: Path,
            table: str | None) -> float:
    value = config.get(key, default)
    name = f"{table}.{key}" if table else key
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise TaskFormatError(f"{where}: {name} must be a number of seconds > 0, got"
                              f" {value!r}")
    return float(value)


def _reward(value: Any, where: Path, name: str) -> RewardMode:
    if value not in ("binary", "fraction"):
        raise TaskFormatError(f"{where}: {name} must be 'binary' or 'fraction', got {value!r}")
    return value


def _script(path: Path) -> str:
    """A solution as a bash script; Terminal-Bench's ``solution.yaml`` (a list of
    ``{command: ...}``) becomes its commands, one per line."""
    if path.suffix not in (".yaml", ".yml"):
        return path.read_text()
    import yaml

    steps = yaml.safe_load(path.read_text()) or []
    if not isinstance(steps, list) or not all(isinstance(s, dict) and isinstance(
            s.get("command"), str) for s in steps):
        raise TaskFormatError(f"{path}: must be a list of steps, each with a 'command'"
                              " string")
    return "\n".join(step["command"].rstrip("\n") for step in steps) + "\n"


# ---- Dockerfiles the local backend can rebuild ---------------------------------------------


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` per instruction of a Dockerfile: comments and parser
    directives dropped, line continuations joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#") and pending:
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        whole = (pending + stripped).strip()
        pending = ""
        if whole:
            keyword, _, rest = whole.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    if pending.strip():
        keyword, _, rest = pending.strip().partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
    return instructions


def local_plan(dockerfile: Path) -> tuple[LocalPlan | None, str, str]:
    """How the local backend rebuilds ``dockerfile``: ``(plan, "", workdir)``, or
    ``(None, why not, workdir)`` when only an image can."""
    context = dockerfile.parent
    instructions = dockerfile_instructions(dockerfile.read_text())
    workdirs = [arg for keyword, arg in instructions if keyword == "WORKDIR"]
    final = _inside("/", workdirs[-1]) if workdirs else DEFAULT_WORKDIR
    if final == "/":
        return None, "its WORKDIR is /", final
    if not instructions or instructions[0][0] != "FROM":
        return None, "it does not start with FROM", final
    base = instructions[0][1].split()[0] if instructions[0][1] else ""
    if base not in LOCAL_BASE_IMAGES:
        return None, f"it starts FROM {base!r}, not the default sandbox image", final
    cwd, copies, env, runs = "/", [], [], []
    for keyword, args in instructions[1:]:
        if keyword == "WORKDIR":
            cwd = _inside(cwd, args)
        elif keyword in ("COPY", "ADD"):
            flags, words = copy_arguments(args)
            if len(words) < 2 or any("://" in w for w in words) or any(
                    f.startswith("--from") for f in flags):
                return None, f"{keyword} {args!r} copies from outside the context", final
            dest = _inside(cwd, words[-1])
            for source in words[:-1]:
                host = (context / source).resolve()
                if not host.is_relative_to(context.resolve()) or not host.exists():
                    return None, f"{keyword} source {source!r} is not in the context", final
                # A folder's content goes into dest; a file into dest/ (or becomes dest).
                into = host.is_file() and (words[-1].endswith("/") or len(words) > 2)
                target = f"{dest}/{host.name}" if into else dest
                rel = _relative(target, final)
                if rel is None:
                    return None, f"{keyword} writes {target}, outside the workspace {final}", \
                        final
                if keyword == "ADD" and host.is_file() and re.search(
                        r"\.(tar|tgz|tar\.\w+)$", host.name):
                    return None, f"ADD {source} would unpack an archive", final
                copies.append((host, rel))
        elif keyword == "ENV":
            pairs = _env_pairs(args)
            if pairs is None:
                return None, f"ENV {args!r} cannot be read", final
            env += pairs
        elif keyword == "RUN":
            command = args
            if args.startswith("["):
                try:
                    command = " ".join(map(shlex.quote, json.loads(args)))
                except (ValueError, TypeError):
                    return None, f"RUN {args!r} is not valid JSON", final
            if _relative(cwd, final) is None:
                return None, f"RUN runs in {cwd}, outside the workspace {final}", final
            runs.append((cwd, command))
        elif keyword in ("CMD", "ENTRYPOINT", "EXPOSE", "LABEL", "MAINTAINER", "STOPSIGNAL",
                         "HEALTHCHECK"):
            continue  # how a container starts or is described: no workspace content
        else:
            return None, f"it uses {keyword}, which only an image build runs", final
    return LocalPlan(final, tuple(copies), tuple(env), tuple(runs)), "", final


def copy_arguments(args: str) -> tuple[list[str], list[str]]:
    """A ``COPY``/``ADD``'s leading ``--flags`` and its paths, in the shell form or the JSON
    form (``COPY --chown=1000:1000 ["a b", "/app/"]``)."""
    flags, rest = [], args.strip()
    while rest.startswith("--"):
        flag, _, rest = rest.partition(" ")
        flags.append(flag)
        rest = rest.lstrip()
    if rest.startswith("["):
        try:
            return flags, [str(w) for w in json.loads(rest)]
        except ValueError:
            return flags, []
    return flags, shlex.split(rest)


def _inside(cwd: str, path: str) -> str:
    path = path.strip().strip('"')
    return str(PurePosixPath("/", cwd, path)) if path else cwd


def _relative(path: str, workdir: str) -> str | None:
    """``path`` relative to ``workdir`` (``.`` for itself), None when outside it."""
    pure = PurePosixPath(path)
    try:
        return str(pure.relative_to(workdir))
    except ValueError:
        return None


def _env_pairs(args: str) -> list[tuple[str, str]] | None:
    try:
        words = shlex.split(args)
    except ValueError:
        return None
    if words and "=" not in words[0]:  # the legacy form: ENV NAME value with spaces
        return [(words[0], " ".join(words[1:]))]
    pairs = []
    for word in words:
        name, sep, value = word.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            return None
        pairs.append((name, value))
    return pairs
