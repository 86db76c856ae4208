"""Shared fixtures: installing throw-away plugin distributions onto sys.path."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from agentgym.core.plugins import set_plugin_host


@pytest.fixture
def fake_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Install a real (if tiny) distribution with an ``agentgym`` entry point.

    ``fake_plugin(name, source)`` writes module ``<name>_plugin`` with ``source`` and a
    ``.dist-info`` declaring ``[agentgym] name = <name>_plugin``, on a sys.path entry, so
    ``importlib.metadata`` (and pluggy) discover it exactly as a pip-installed plugin.
    Subprocesses see it through PYTHONPATH.
    """
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", str(site))

    def install(name: str, source: str) -> Path:
        module = f"{name.replace('-', '_')}_plugin"
        (site / f"{module}.py").write_text(textwrap.dedent(source))
        info = site / f"{module}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[agentgym]\n{name} = {module}\n")
        set_plugin_host(None)
        return site

    yield install
    set_plugin_host(None)
    for module in [m for m in sys.modules if m.endswith("_plugin")]:
        del sys.modules[module]


@pytest.fixture(scope="session")
def agentgym_cli() -> str:
    """The installed ``agentgym`` console script (beside this interpreter, activated or not)."""
    script = Path(sys.executable).with_name("agentgym")
    assert script.exists(), f"the console script {script} is missing: pip install -e ."
    return str(script)


@pytest.fixture(scope="session")
def content_only_template() -> str:
    """A ChatML template that writes each message's content and nothing else, so an
    assistant turn's ``tool_calls`` vanish (as SmolLM2's template does)."""
    return (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
