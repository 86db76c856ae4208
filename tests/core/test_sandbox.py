"""The sandbox contract's typed side: SandboxSpec validation, the backend contract
(unsupported fields refused with the field, the backend and the fix), open_sandbox and
sandbox_backend through the plugin registry."""

from __future__ import annotations

import asyncio
import pickle

import pytest

from agentgym.core import hookimpl
from agentgym.core.errors import UnknownIdError
from agentgym.core.plugins import PluginHost, set_plugin_host
from agentgym.core.registry import Spec, open_sandbox, sandbox_backend
from agentgym.core.sandbox import (
    DEFAULT_WORKDIR,
    SPEC_FIELDS,
    ExecResult,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxLimits,
    SandboxSpec,
    SandboxSpecError,
    UnsupportedFieldError,
)

# ---- SandboxSpec ---------------------------------------------------------------------------


def test_defaults_and_normalized_values(tmp_path):
    spec = SandboxSpec()
    assert (spec.template, spec.image, spec.workdir) == (None, None, DEFAULT_WORKDIR)
    assert (spec.mounts, spec.env, spec.limits) == ({}, {}, SandboxLimits())
    spec = SandboxSpec(template=tmp_path, workdir="/testbed//x/", mounts={"/opt//env/": tmp_path},
                       env={"A_1": "v"}, limits=None)
    assert spec.template == str(tmp_path)
    assert spec.workdir == "/testbed/x"
    assert spec.mounts == {"/opt/env": str(tmp_path)}
    assert spec.limits == SandboxLimits()
    assert SandboxSpec(workdir=None, mounts=None, env=None) == SandboxSpec()
    assert pickle.loads(pickle.dumps(spec)) == spec  # specs travel to Ray workers


def test_a_spec_is_frozen():
    with pytest.raises(AttributeError):
        SandboxSpec().image = "x"  # type: ignore[misc]


@pytest.mark.parametrize("fields, message", [
    ({"template": ""}, "SandboxSpec.template must be a host directory"),
    ({"template": 3}, "SandboxSpec.template must be a host directory"),
    ({"image": ""}, "SandboxSpec.image must be an image name"),
    ({"image": "two words"}, "no spaces"),
    ({"workdir": "relative"}, "must be an absolute path inside the sandbox, got 'relative'"),
    ({"workdir": "//"}, "would make the whole filesystem the workspace"),
    ({"mounts": ["/opt/x"]}, "must map paths inside the sandbox to host paths"),
    ({"mounts": {"opt/x": "/h"}}, "mount point 'opt/x' must be an absolute path"),
    ({"mounts": {"/": "/h"}}, "would overlap the whole filesystem"),
    ({"mounts": {"/opt/x": "/a", "/opt/x/": "/b"}}, "is given twice"),
    ({"mounts": {"/opt/x": None}}, "must be a str or Path, got None"),
    ({"env": {"1BAD": "v"}}, "'1BAD' is not a shell identifier"),
    ({"env": {"A": 1}}, "A=1 must be a string without NUL bytes"),
    ({"env": {"A": "a\0b"}}, "without NUL bytes"),
    ({"limits": {"memory_mb": 1}}, "SandboxSpec.limits must be a SandboxLimits"),
])
def test_bad_values_are_refused_naming_the_value_and_the_fix(fields, message):
    with pytest.raises(SandboxSpecError, match=message.replace("(", r"\(")) as error:
        SandboxSpec(**fields)
    assert isinstance(error.value, ValueError) and isinstance(error.value, SandboxError)


def test_an_unknown_field_name_gets_the_closest_one():
    with pytest.raises(SandboxSpecError, match="'imag' is not a sandbox spec field; did you"
                                               " mean 'image'"):
        SandboxSpec.from_fields(imag="x")
    assert SandboxSpec.from_fields(image="x") == SandboxSpec(image="x")


# ---- the backend contract, through the registry ----------------------------------------------


class EchoSandbox(Sandbox):
    """Runs nothing: echoes commands back, so a test can see what was opened."""

    def __init__(self, spec: SandboxSpec):
        self.spec, self.limits, self.workdir = spec, spec.limits, spec.workdir

    async def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        return ExecResult(0, command)

    async def read_file(self, path: str) -> bytes:
        raise FileNotFoundError(path)

    async def write_file(self, path: str, data: bytes | str) -> None:
        raise OSError(path)

    async def list_dir(self, path: str = ".") -> list[str]:
        return []

    async def close(self) -> None:
        pass

    def close_now(self) -> None:
        pass


class TemplateOnly(SandboxBackend):
    name = "template-only"
    description = "Supports a template and limits, nothing else."
    supports = frozenset({"template", "limits"})
    hints = {"env": "this backend passes no variables; bake them into the template"}

    async def start(self, spec: SandboxSpec) -> Sandbox:
        return EchoSandbox(spec)


class Plugin:
    @hookimpl
    def agentgym_sandboxes(self):
        return [TemplateOnly()]


class LegacyPlugin:
    @hookimpl
    def agentgym_sandboxes(self):
        return [Spec("legacy", "json:dumps")]


@pytest.fixture
def host():
    """The installed plugins plus the template-only backend and a legacy registration."""
    old = set_plugin_host(PluginHost(plugins=[("mini", Plugin()), ("legacy", LegacyPlugin())]))
    yield
    set_plugin_host(old)


def test_open_sandbox_builds_the_spec_from_fields_or_takes_one(host, tmp_path):
    box = asyncio.run(open_sandbox("template-only", template=tmp_path))
    assert box.spec == SandboxSpec(template=str(tmp_path))
    spec = SandboxSpec(limits=SandboxLimits(timeout_s=5))
    assert asyncio.run(open_sandbox("template-only", spec)).spec is spec
    with pytest.raises(SandboxSpecError, match="both a spec and the fields template"):
        asyncio.run(open_sandbox("template-only", spec, template=tmp_path))


GENERIC_FIX = ("unset, or use a backend that supports it (`agentgym list sandboxes` shows"
               " what each supports)")


@pytest.mark.parametrize("field, value, fix", [
    ("image", "x:1", f"leave image {GENERIC_FIX}"),
    ("workdir", "/testbed", f"leave workdir {GENERIC_FIX}"),
    ("mounts", {"/opt/x": "/h"}, f"leave mounts {GENERIC_FIX}"),
    ("env", {"A": "1"}, "this backend passes no variables; bake them into the template"),
])
def test_a_field_the_backend_does_not_support_is_refused_naming_field_backend_and_fix(
        host, field, value, fix):
    with pytest.raises(UnsupportedFieldError) as error:
        asyncio.run(open_sandbox("template-only", **{field: value}))
    message = str(error.value)
    assert message.startswith(f"the template-only backend does not support {field}="), message
    assert fix in message
    assert (error.value.backend, error.value.field) == ("template-only", field)


def test_default_values_of_unsupported_fields_pass():
    # Spelling out a default is not asking for the field.
    TemplateOnly().check(SandboxSpec(workdir="/workspace/", mounts={}, env=None))


def test_sandbox_backend_gives_the_registered_object(host):
    backend = sandbox_backend("template-only")
    assert isinstance(backend, TemplateOnly) and backend.supports == {"template", "limits"}
    assert sandbox_backend("docker").supports == SPEC_FIELDS
    assert "image" not in sandbox_backend("local").supports
    with pytest.raises(UnknownIdError, match="Did you mean 'template-only'"):
        sandbox_backend("template-onyl")
    with pytest.raises(SandboxError, match="must return SandboxBackend objects"):
        sandbox_backend("legacy")


def test_every_built_in_backend_is_listed_with_its_description():
    from agentgym.core.plugins import plugin_host

    entries = plugin_host().entries("sandboxes")
    assert {"local", "docker"} <= set(entries)
    assert entries["local"].description.startswith("bubblewrap")
    assert entries["local"].description.endswith(
        "Spec fields: env, limits, mounts, scratch_dirs, template, workdir.")
    assert entries["docker"].plugin == "sandboxes"

