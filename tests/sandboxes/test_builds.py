"""The docker backend's image capability: images built locally from a base plus files, or
from a Dockerfile folder, cached by what they are built from, never pulled."""

from __future__ import annotations

import asyncio
import secrets

import pytest

from agentgym.core.registry import open_sandbox, sandbox_backend
from agentgym.core.sandbox import SandboxError

REPOSITORY = "agentgym-test/build"


@pytest.fixture(scope="module")
def engine(engine):
    """The engine; the images these tests built are removed after them."""
    yield engine
    for image in engine.images.list(name=REPOSITORY):
        for tag in image.tags:
            engine.images.remove(tag, force=True)


def output_in(image: str, command: str) -> str:
    async def main() -> str:
        async with await open_sandbox("docker", image=image) as box:
            return (await box.exec(command)).output

    return asyncio.run(main())


def test_a_base_plus_files_is_built_once_and_again_when_a_file_changes(engine, tmp_path):
    backend = sandbox_backend("docker")
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "sub" / "x.txt").write_text("first\n")
    (tmp_path / "one.txt").write_text("one\n")
    files = {"/opt/data": data, "/opt/one.txt": tmp_path / "one.txt"}
    name = backend.build_image(files=files, repository=REPOSITORY)
    assert name.startswith(f"{REPOSITORY}:")
    built = engine.images.get(name).id
    assert output_in(name, "cat /opt/data/sub/x.txt /opt/one.txt") == "first\none\n"
    # The same inputs: the same name, nothing rebuilt.
    assert backend.build_image(files=files, repository=REPOSITORY) == name
    assert engine.images.get(name).id == built
    (data / "sub" / "x.txt").write_text("second\n")
    changed = backend.build_image(files=files, repository=REPOSITORY)
    assert changed != name
    assert output_in(changed, "cat /opt/data/sub/x.txt") == "second\n"


def test_a_dockerfile_folder_is_built_as_it_is(engine, tmp_path):
    (tmp_path / "hello.txt").write_text("hello\n")
    (tmp_path / "Dockerfile").write_text(
        "FROM agentgym/sandbox:default AS base\nFROM base\nCOPY hello.txt /opt/hello.txt\n"
        "USER root\nRUN tr a-z A-Z < /opt/hello.txt > /opt/shout\nUSER agent\n")
    lines = []
    name = sandbox_backend("docker").build_image(context=tmp_path, repository=REPOSITORY,
                                                 log=lines.append)
    assert lines == [f"building docker image {name} from {tmp_path}"]
    assert output_in(name, "cat /opt/hello.txt /opt/shout") == "hello\nHELLO\n"
    assert sandbox_backend("docker").build_image(context=tmp_path, repository=REPOSITORY,
                                                 log=lines.append) == name
    assert len(lines) == 1  # found, not built again


def test_a_base_image_missing_from_the_engine_is_named_with_how_to_provide_it(engine,
                                                                             tmp_path):
    absent = f"agentgym-test/absent:{secrets.token_hex(4)}"
    (tmp_path / "Dockerfile").write_text(f"FROM {absent}\nRUN true\n")
    for attempt in ({"context": tmp_path}, {"base": absent, "files": {}}):
        with pytest.raises(SandboxError) as error:
            sandbox_backend("docker").build_image(repository=REPOSITORY, **attempt)
        message = str(error.value)
        assert f"the base image {absent!r}" in message
        assert "never pulls" in message
        assert f"docker pull {absent}" in message and "docker load" in message


def test_bad_requests_are_explained(engine, tmp_path):
    backend = sandbox_backend("docker")
    with pytest.raises(SandboxError, match=r"either context .* or base and files, not both"):
        backend.build_image(context=tmp_path, files={"/opt/x": tmp_path})
    with pytest.raises(SandboxError, match="holds no Dockerfile"):
        backend.build_image(context=tmp_path)
    with pytest.raises(SandboxError, match="must be an absolute path in the image"):
        backend.build_image(files={"opt/x": tmp_path})
    with pytest.raises(SandboxError, match="not a docker repository name"):
        backend.build_image(files={"/opt/x": tmp_path}, repository="Bad Name")


def test_an_image_whose_keep_alive_cannot_run_fails_with_what_init_said(engine, tmp_path,
                                                                       caplog):
    """A container that stops before anything ran in it is tried afresh (an engine under
    load does that now and then); an image where it always stops fails with its words."""
    (tmp_path / "Dockerfile").write_text(
        "FROM agentgym/sandbox:default\nUSER root\n"
        "RUN rm -f \"$(command -v sleep)\" && ! command -v sleep\nUSER agent\n")
    name = sandbox_backend("docker").build_image(context=tmp_path, repository=REPOSITORY)
    with caplog.at_level("WARNING", logger="agentgym.sandboxes.docker"), \
            pytest.raises(SandboxError) as error:
        output_in(name, "true")
    message = str(error.value)
    assert "exit code 127" in message and "exec sleep failed" in message, message
    retries = [r.message for r in caplog.records if "starting a fresh container" in r.message]
    assert [retry[-8:] for retry in retries] == ["(2 of 3)", "(3 of 3)"], retries
    assert not engine.containers.list(all=True, filters={"ancestor": name})


def test_a_container_that_dies_at_start_once_is_replaced(engine, monkeypatch):
    from agentgym.sandboxes import docker as backend

    real, calls = backend.DockerSandbox._start_once, []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise backend._DiedAtStart("the container ... failed to start: exit code 127")
        return real(*args, **kwargs)

    monkeypatch.setattr(backend.DockerSandbox, "_start_once", flaky)
    assert output_in("agentgym/sandbox:default", "echo up") == "up\n"
    assert len(calls) == 2
