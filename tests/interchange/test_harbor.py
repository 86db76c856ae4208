"""Harbor task export (``agentgym export-tasks ENV_ID --format harbor DIR``): the terminal
tasks written as Harbor folders, the folders as Harbor and the terminal plugin read them,
the round trip through ``agentgym validate`` with the same results as the originals, an
image ``docker build`` makes and Harbor's flow grades, the families that cannot be written
and why, and the errors."""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import stat
import sys
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentgym.cli import main
from agentgym.core.env import AgentEnv
from agentgym.core.errors import InvalidArgumentError
from agentgym.core.harbor import HarborTask, NotExportableError
from agentgym.interchange.harbor import env_refusal, export_tasks, toml_text, write_task
from agentgym.plugins.terminal.env import BUILTIN_TASKS
from agentgym.plugins.terminal.formats import load_task, load_tasks
from agentgym.plugins.terminal.workspace import local_template
from agentgym.testing import assert_valid

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

DATA = Path(__file__).parents[1] / "plugins" / "terminal" / "data"
#: What Harbor reads in a task folder (agentgym's wrong*.sh sit in solution/).
HARBOR_ENTRIES = {"instruction.md", "task.toml", "environment", "tests", "solution"}
#: task.toml's tables in Harbor's schema.
HARBOR_TABLES = {"metadata", "verifier", "agent", "environment", "solution"}
#: Families that cannot be written as Harbor tasks, and a word their reason must hold.
REFUSED = {"miniwob": "browser", "web-shop": "browser", "swe-verified": "fresh sandbox",
           "swe-synth": "fresh sandbox", "memory-sessions": "remembering",
           "mcp-git": "MCP server", "calculator": "submit tool call"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``terminal`` env's tasks, exported once for the module."""
    dest = tmp_path_factory.mktemp("harbor") / "tasks"
    report = export_tasks("terminal", dest)
    assert report.ok and not report.refused, report.refused
    return dest


def files(root: Path, skip: tuple[str, ...] = ()) -> dict[str, tuple[int, bytes | str | None]]:
    """Every entry under ``root``: its permission bits and content (a link's target)."""
    found = {}
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        if any(name.endswith(s) for s in skip):
            continue
        mode = stat.S_IMODE(path.lstat().st_mode)
        content = (os.readlink(path) if path.is_symlink() else
                   path.read_bytes() if path.is_file() else None)
        found[name] = (mode, content)
    return found


# ---- the written folders -------------------------------------------------------------------


def test_every_shipped_terminal_task_is_written(exported: Path) -> None:
    shipped = [task.id for task in load_tasks(BUILTIN_TASKS)]
    assert len(shipped) == 26  # the count issue 37 names
    assert sorted(p.name for p in exported.iterdir()) == sorted(shipped)


def test_the_folders_have_harbors_layout(exported: Path) -> None:
    for folder in sorted(exported.iterdir()):
        assert {p.name for p in folder.iterdir()} == HARBOR_ENTRIES, folder.name
        config = tomllib.loads((folder / "task.toml").read_text())
        assert set(config) - {"version"} <= HARBOR_TABLES and config["version"] == "1.0"
        assert isinstance(config["verifier"]["timeout_sec"], float)
        assert isinstance(config["agent"]["timeout_sec"], float)
        assert config["verifier"]["reward"] in ("binary", "fraction")
        assert config["environment"]["allow_internet"] is False
        assert config["metadata"]["author_name"] == "agentgym"
        for script in ("solution/solve.sh", "solution/wrong.sh"):
            assert (folder / script).stat().st_mode & 0o111, f"{folder.name}/{script}"
        assert "/logs/verifier/reward" in (folder / "tests" / "test.sh").read_text()
        # The grader's files are not in the image: none is in the build context, and the
        # Dockerfile copies only what the original copies.
        dockerfile = (folder / "environment" / "Dockerfile").read_text()
        assert dockerfile.startswith("FROM agentgym/sandbox:default\n")
        assert "tests" not in dockerfile and "solution" not in dockerfile
        context = {p.name for p in (folder / "environment").iterdir()}
        assert context == {"Dockerfile", "app"}, folder.name
        assert files(folder / "environment" / "app") == files(
            BUILTIN_TASKS / folder.name / "environment" / "app"), folder.name


def test_the_folders_read_back_as_the_originals(exported: Path) -> None:
    originals = {task.id: task for task in load_tasks(BUILTIN_TASKS)}
    for back in load_tasks(exported):
        task = originals[back.id]
        assert back.format == "harbor" and back.runs_locally, (back.id, back.local_reason)
        assert (back.instruction, back.solution, back.wrong_solutions) == (
            task.instruction, task.solution, task.wrong_solutions)
        assert (back.metadata, back.reward, back.agent_timeout_s, back.test_timeout_s,
                back.workdir, back.plan.workdir, back.plan.env) == (
            task.metadata, task.reward, task.agent_timeout_s, task.test_timeout_s,
            task.workdir, task.plan.workdir, task.plan.env)
        assert files(back.folder / "tests") == files(task.folder / "tests"), back.id


@pytest.mark.slow
def test_the_workspaces_are_the_same(exported: Path, local, sample) -> None:
    """The local backend builds the same workspace from the written Dockerfile as from the
    original (file for file, permission bits included; git's index holds file times)."""
    originals = {task.id: task for task in load_tasks(BUILTIN_TASKS)}
    for back in sample(load_tasks(exported), 8):
        built = [asyncio.run(local_template(task)) for task in (originals[back.id], back)]
        assert files(built[0], (".git/index",)) == files(built[1], (".git/index",)), back.id


# ---- the round trip through validate -------------------------------------------------------


def results(report) -> dict[tuple[str, str], tuple[bool, float | None]]:
    return {(r.task_id, r.check): (r.passed, r.reward) for r in report.results}


@pytest.mark.slow
def test_the_round_trip_validates_as_the_originals(exported: Path, local, sample) -> None:
    """oracle 1.0, noop 0.0, wrong solutions below 1.0, no exploit probe paid: the written
    folders, read by the terminal plugin, grade exactly as the shipped tasks do."""
    ids = sample([p.name for p in sorted(exported.iterdir())], 3)
    back = assert_valid("terminal", task_ids=ids, require_solutions=True, concurrency=4,
                        tasks=str(exported))
    original = assert_valid("terminal", task_ids=ids, require_solutions=True, concurrency=4)
    assert results(back) == results(original)
    checks = {check for _, check in results(back)}
    assert {"oracle", "noop", "wrong solution #1"} <= checks
    assert any(check.startswith("probe shell.") for check in checks)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["terminal-agentbench-os", "terminal-nl2bash"])
def test_the_package_sourced_tasks_round_trip(tmp_path: Path, local, sample, env_id) -> None:
    """The tasks converted from AgentBench-OS and NL2Bash, written as Harbor folders, grade
    as they do where they were converted (their own grade.py, answers and files)."""
    import agentgym

    env = agentgym.make(env_id)
    ids = sample(env.unwrapped.task_ids(), 2)
    env.close()
    report = export_tasks(env_id, tmp_path, task_ids=ids)
    assert [task_id for task_id, _ in report.written] == ids
    back = assert_valid("terminal", n=None, require_solutions=True, probes=False,
                        tasks=str(tmp_path))
    original = assert_valid(env_id, task_ids=ids, require_solutions=True, probes=False)
    assert results(back) == results(original)


# ---- Terminal-Bench tasks and tasks without a Dockerfile -------------------------------------


def test_a_folder_of_both_formats_is_written_as_harbor(tmp_path: Path) -> None:
    report = export_tasks("terminal", tmp_path, {"tasks": str(DATA)})
    assert [task_id for task_id, _ in report.written] == [
        "harbor-image", "local-task", "tb-image"] and report.ok
    tb = tmp_path / "tb-image"
    assert {p.name for p in (tb / "environment").iterdir()} == {"Dockerfile"}
    assert (tb / "environment" / "Dockerfile").read_bytes() == (
        DATA / "tb-image" / "Dockerfile").read_bytes()  # an image build: as it is
    assert {p.name for p in (tb / "tests").iterdir()} == {
        "test_outputs.py", "run-tests.sh", "test.sh"}
    config = tomllib.loads((tb / "task.toml").read_text())
    assert config["verifier"] == {"timeout_sec": 60.0, "reward": "fraction"}
    assert config["metadata"]["parser_name"] == "pytest"
    back = load_task(tb)
    assert (back.format, back.reward, back.solution) == (
        "harbor", "fraction", (DATA / "tb-image" / "solution.sh").read_text())
    assert back.plan is None and "USER" in back.local_reason  # still an image build
    # No Dockerfile (an empty /app): one that makes the workspace, from an empty folder.
    local = load_task(tmp_path / "local-task")
    assert local.runs_locally and local.workdir == "/app"
    assert list((tmp_path / "local-task" / "environment" / "empty").iterdir()) == []
    # A Harbor task's own keys stay: version, and the rest of what agentgym does not read.
    harbor = tomllib.loads((tmp_path / "harbor-image" / "task.toml").read_text())
    assert harbor["metadata"]["tags"] == ["test-fixture", "docker"]


@pytest.mark.slow
def test_a_task_without_a_dockerfile_round_trips(tmp_path: Path, local) -> None:
    export_tasks("terminal", tmp_path, {"tasks": str(DATA)}, task_ids=["local-task"])
    back = assert_valid("terminal", n=None, require_solutions=True, probes=False,
                        tasks=str(tmp_path))
    original = assert_valid("terminal", task_ids=["local-task"], require_solutions=True,
                            probes=False, tasks=str(DATA))
    assert results(back) == results(original)


@pytest.mark.slow
def test_a_terminal_bench_task_grades_the_same_through_its_test_script(tmp_path: Path,
                                                                         docker) -> None:
    """The written test.sh scores pytest's summary as agentgym scores a Terminal-Bench
    task: the fraction of tests passed (the wrong solution passes 2 of 3)."""
    export_tasks("terminal", tmp_path, {"tasks": str(DATA)}, task_ids=["tb-image"])
    back = assert_valid("terminal", n=None, require_solutions=True, probes=False,
                        tasks=str(tmp_path), backend="docker")
    original = assert_valid("terminal", task_ids=["tb-image"], require_solutions=True,
                            probes=False, tasks=str(DATA), backend="docker")
    assert results(back) == results(original)
    assert results(back)[("tb-image", "wrong solution #1")][1] == pytest.approx(2 / 3)


#: A local-backend Dockerfile with what a plain rewrite gets wrong: a COPY into a folder of
#: the workspace (docker would make the workspace root's), a path with a space (the JSON
#: form), ENV values with quotes and a $ (docker would expand it, the local backend does
#: not), RUN steps in two folders.
ODD_DOCKERFILE = """FROM agentgym/sandbox:default
WORKDIR /app
COPY ["my app", "/app/sub dir/"]
ENV GREETING="it's $HOME \\"q\\"" PLAIN=a\\ b
RUN printf '%s|%s\\n' "$GREETING" "$PLAIN" > env.txt && mkdir -p deeper
WORKDIR /app/deeper
RUN pwd > where.txt
WORKDIR /app
"""


def odd_task(root: Path) -> Path:
    folder = root / "odd"
    (folder / "environment" / "my app").mkdir(parents=True)
    (folder / "environment" / "my app" / "x.txt").write_text("hi\n")
    (folder / "environment" / "Dockerfile").write_text(ODD_DOCKERFILE)
    (folder / "tests").mkdir()
    (folder / "tests" / "test.sh").write_text(
        "grep -qx 'it'\\''s $HOME \"q\"|a b' /app/env.txt && r=1 || r=0\n"
        "echo $r > /logs/verifier/reward.txt\n")
    (folder / "solution").mkdir()
    (folder / "solution" / "solve.sh").write_text("true\n")
    (folder / "instruction.md").write_text("Nothing to do.\n")
    (folder / "task.toml").write_text('[metadata]\nauthor_name = "test"\n')
    return folder


@pytest.mark.slow
def test_an_odd_dockerfile_makes_the_same_workspace_everywhere(tmp_path: Path, local,
                                                               docker) -> None:
    """The written Dockerfile of a task with ODD_DOCKERFILE: the local backend builds the
    same workspace from it as from the original, and so does ``docker build`` (files, and
    the workspace the image user's)."""
    import docker as sdk

    original = load_task(odd_task(tmp_path / "source"))
    export_tasks("terminal", tmp_path / "out", {"tasks": str(tmp_path / "source")})
    written = tmp_path / "out" / "odd"
    dockerfile = (written / "environment" / "Dockerfile").read_text()
    assert "COPY --chown=1000:1000 empty /app\n" in dockerfile  # the workspace, made first
    assert 'COPY --chown=1000:1000 ["my app", "/app/sub dir"]' in dockerfile
    back = load_task(written)
    assert back.format == "harbor" and back.runs_locally, back.local_reason
    built = [asyncio.run(local_template(task)) for task in (original, back)]
    assert files(built[0]) == files(built[1])
    assert (built[1] / "env.txt").read_text() == "it's $HOME \"q\"|a b\n"
    client = sdk.from_env()
    tag = "agentgym-test/harbor-export:odd"
    client.images.build(path=str(written / "environment"), tag=tag, network_mode="none",
                        rm=True, forcerm=True)
    try:
        listing = client.containers.run(
            tag, ["bash", "-c", "cd /app && find . | sort && cat env.txt deeper/where.txt"
                                " && stat -c %U /app"], network_mode="none", remove=True)
    finally:
        client.images.remove(tag, force=True)
    local_listing = sorted(["."] + [f"./{name}" for name in files(built[1])])
    assert listing.decode().splitlines() == [*local_listing, "it's $HOME \"q\"|a b",
                                             "/app/deeper", "agent"]


def test_a_dockerfile_that_copies_the_tests_into_the_image_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(DATA, source)
    dockerfile = source / "tb-image" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "COPY . /app/\n")
    report = export_tasks("terminal", tmp_path / "out", {"tasks": str(source)})
    [(task_id, reason)] = report.refused
    assert task_id == "tb-image" and "COPY ." in reason and "into the image" in reason
    assert not (tmp_path / "out" / "tb-image").exists() and not report.ok
    assert {task_id for task_id, _ in report.written} == {"harbor-image", "local-task"}


def test_a_value_toml_cannot_hold_refuses_the_task_alone(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(DATA, source)
    with (source / "tb-image" / "task.yaml").open("a") as config:
        config.write("1999: a year as a key\n")  # YAML allows it, TOML does not
    report = export_tasks("terminal", tmp_path / "out", {"tasks": str(source)})
    assert report.refused == [("tb-image", "metadata: TOML keys are strings, got 1999")]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["harbor-image",
                                                                     "local-task"]


# ---- Harbor's own flow, with docker ----------------------------------------------------------


def _tar(folder: Path, name: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(folder, arcname=name)
    return buffer.getvalue()


def harbor_run(client, image: str, folder: Path, solution: str | None) -> str:
    """A task played as Harbor plays it: a container of the built image, ``solution``
    (a script of ``solution/``, or nothing) run by the image's user in its workdir, then
    ``tests/`` copied to /tests, ``bash /tests/test.sh`` run, the reward file read."""
    container = client.containers.run(image, ["sleep", "infinity"], detach=True,
                                      network_mode="none")
    try:
        container.exec_run(["mkdir", "-p", "/logs/verifier", "/logs/agent"], user="root")
        container.exec_run(["chown", "-R", "1000:1000", "/logs"], user="root")
        if solution:
            container.put_archive("/", _tar(folder / "solution", "solution"))
            done = container.exec_run(["bash", f"/solution/{solution}"])
            assert done.exit_code == 0 or solution.startswith("wrong"), done.output[-500:]
        container.put_archive("/", _tar(folder / "tests", "tests"))
        container.exec_run(["bash", "/tests/test.sh"])
        return container.exec_run(["cat", "/logs/verifier/reward.txt"]).output.decode().strip()
    finally:
        container.remove(force=True)


@pytest.mark.slow
def test_docker_builds_the_written_image_and_harbors_flow_grades_it(exported: Path, docker,
                                                                     sample) -> None:
    """What Harbor does with a folder, done with plain docker: build environment/, run
    the solution, copy tests/ in, run test.sh, read the reward (the shipped Dockerfiles,
    built as written, fail: their RUN steps cannot write the root-owned workspace)."""
    import docker as sdk

    client = sdk.from_env()
    for folder in sample(sorted(exported.iterdir()), 2):
        tag = f"agentgym-test/harbor-export:{folder.name}"
        client.images.build(path=str(folder / "environment"), tag=tag, network_mode="none",
                            rm=True, forcerm=True)
        try:
            assert harbor_run(client, tag, folder, "solve.sh") == "1", folder.name
            assert harbor_run(client, tag, folder, None) == "0", folder.name
            assert harbor_run(client, tag, folder, "wrong.sh") != "1", folder.name
        finally:
            client.images.remove(tag, force=True)


# ---- families that cannot be written, and the errors -----------------------------------------


@pytest.mark.parametrize("env_id", sorted(REFUSED))
def test_a_family_that_cannot_be_written_says_why(tmp_path: Path, env_id: str) -> None:
    dest = tmp_path / "out"
    result = CliRunner().invoke(main, ["export-tasks", env_id, "--format", "harbor",
                                       str(dest)])
    assert result.exit_code == 1, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith(f"Error: the env {env_id!r} cannot be exported as Harbor tasks: ")
    assert REFUSED[env_id] in line
    assert not dest.exists()  # nothing written
    assert env_refusal(env_id) and env_refusal("terminal") is None


def test_the_default_harbor_task_refuses_with_the_reason(tmp_path: Path) -> None:
    from agentgym.plugins.calculator.env import CalculatorEnv
    from agentgym.testing.protocol_env import EchoEnv

    env = CalculatorEnv(num_tasks=1)
    with pytest.raises(NotExportableError, match="CalculatorEnv: the answer is the argument"):
        env.harbor_task(env.task_ids()[0])

    class Quiet(CalculatorEnv):  # an env that says nothing about Harbor: the default
        harbor_refusal = AgentEnv.harbor_refusal

    with pytest.raises(NotExportableError, match=r"does not override AgentEnv\.harbor_task"):
        export_tasks("calculator", tmp_path, make_env=lambda: Quiet(num_tasks=1))
    with pytest.raises(NotExportableError, match=r"\(EchoEnv\) is not an AgentEnv"):
        export_tasks("echo", tmp_path, make_env=EchoEnv)
    assert not list(tmp_path.iterdir())


def cli(*args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(main, ["export-tasks", *args])
    return result.exit_code, [line for line in result.output.splitlines()
                              if line.startswith("Error:")]


def test_bad_arguments_give_one_line_errors(tmp_path: Path) -> None:
    code, [line] = cli("terminl", str(tmp_path))
    assert code == 1 and "Unknown env 'terminl'. Did you mean 'terminal'" in line
    code, [line] = cli("terminal", str(tmp_path), "--task", "log-top-ip")
    assert code == 2 and "Unknown task 'log-top-ip'. Did you mean 'log-top-ips'" in line
    code, [line] = cli("terminal", str(tmp_path), "-n", "2", "--task", "log-top-ips")
    assert code == 2 and "give -n N (the first N tasks) or --task ID, not both" in line
    code, [line] = cli("terminal", str(tmp_path), "-e", "bogus=1")
    assert code == 2 and "takes no argument 'bogus'" in line
    code, [line] = cli("terminal", str(tmp_path), "--format", "atif")
    assert code == 2 and "'atif' is not 'harbor'" in line
    a_file = tmp_path / "file"
    a_file.write_text("")
    code, [line] = cli("terminal", str(a_file))
    assert code == 2 and f"{a_file} is a file" in line
    assert not list(tmp_path.glob("*/task.toml"))  # nothing was written by any of them


def test_a_folder_already_there_needs_force(tmp_path: Path) -> None:
    code, lines = cli("terminal", str(tmp_path), "--task", "log-top-ips")
    assert code == 0 and not lines
    (tmp_path / "log-top-ips" / "stale.txt").write_text("from before")
    code, [line] = cli("terminal", str(tmp_path), "--task", "csv-pivot-sales", "--task",
                       "log-top-ips")
    assert code == 2 and "log-top-ips already exists; pass --force" in line
    assert not (tmp_path / "csv-pivot-sales").exists()  # nothing half-written
    result = CliRunner().invoke(main, ["export-tasks", "terminal", str(tmp_path),
                                       "--task", "log-top-ips", "--force", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["written"] == [{"id": "log-top-ips", "path": str(tmp_path / "log-top-ips")}]
    assert not (tmp_path / "log-top-ips" / "stale.txt").exists()  # replaced
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


# ---- the contract and the TOML writer -----------------------------------------------------


def test_harbor_task_checks_its_fields(tmp_path: Path) -> None:
    good = {"id": "t", "instruction": "Do it.", "tests": {"test.sh": "exit 0"},
            "environment": {"Dockerfile": "FROM agentgym/sandbox:default\n"}}
    HarborTask(**good)
    for change, message in [({"id": "a/b"}, "folder"), ({"id": ".."}, "folder"),
                            ({"tests": {"check.sh": ""}}, "no 'test.sh'"),
                            ({"environment": {}}, "no 'Dockerfile'"),
                            ({"tests": {"test.sh": "", "../x": ""}}, "stay inside"),
                            ({"tests": {"test.sh": "", "d": {"/abs": ""}}}, "stay inside"),
                            ({"test_timeout_s": 0}, "test_timeout_s must be a number > 0"),
                            ({"reward": "partial"}, "'binary' or 'fraction'"),
                            ({"tests": {"test.sh": 3}}, "got int")]:
        with pytest.raises(InvalidArgumentError, match=message):
            HarborTask(**{**good, **change})
    HarborTask(**{**good, "environment": {}, "docker_image": "python:3.12"})


def test_write_task_writes_what_the_task_says(tmp_path: Path) -> None:
    asset = tmp_path / "asset.bin"
    asset.write_bytes(b"\x00\x01")
    task = HarborTask(
        id="t", instruction="Do it.", tests={"test.sh": "echo 1 > /logs/verifier/reward.txt",
                                             "data": {"deep/x.txt": "x"}, "asset": asset},
        environment={"Dockerfile": "FROM x\n", "empty": {}}, solution="true",
        wrong_solutions=("false", "exit 1"), metadata={"tags": ["a"], "none": None},
        verifier_env={"A": "1"}, cpus=2.0, memory_mb=512, reward="fraction",
        extra={"environment": {"memory": "2G", "gpus": 0}, "solution": {"env": {"B": "2"}}})
    folder = write_task(task, tmp_path / "out")
    assert (folder / "instruction.md").read_text() == "Do it.\n"
    assert (folder / "tests" / "data" / "deep" / "x.txt").read_text() == "x"
    assert (folder / "tests" / "asset").read_bytes() == b"\x00\x01"
    assert list((folder / "environment" / "empty").iterdir()) == []
    assert sorted(p.name for p in (folder / "solution").iterdir()) == [
        "solve.sh", "wrong-1.sh", "wrong-2.sh"]
    config = tomllib.loads((folder / "task.toml").read_text())
    assert config == {"version": "1.0", "metadata": {"tags": ["a"]},
                      "verifier": {"timeout_sec": 120.0, "reward": "fraction",
                                   "env": {"A": "1"}},
                      "agent": {"timeout_sec": 600.0},
                      "environment": {"gpus": 0, "cpus": 2, "memory_mb": 512,
                                      "allow_internet": False},
                      "solution": {"env": {"B": "2"}}}
    with pytest.raises(InvalidArgumentError, match="already exists"):
        write_task(task, tmp_path / "out")


def test_toml_text_reads_back() -> None:
    import datetime

    data = {"version": "1.0", "a": {"s": 'quote " back \\ nl \n tab \t del \x7f é',
                                    "n": 3, "f": 0.1, "big": 1e300, "t": True,
                                    "when": datetime.date(2024, 1, 2), "list": [1, "x"],
                                    "inline": [{"k": 1}, 2], "odd key": "v",
                                    "sub": {"deep": {"x": 1}, "odd table": {"y": 2}},
                                    "gone": None},
            "servers": [{"name": "a"}, {"name": "b"}]}
    back = tomllib.loads(toml_text(data))
    del data["a"]["gone"]
    assert back == data
    with pytest.raises(InvalidArgumentError, match=r"a\.x: TOML cannot hold a set"):
        toml_text({"a": {"x": {1}}})
