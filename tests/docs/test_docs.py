"""The docs site: it builds with no warnings (mkdocs --strict), its reference names every
public name of agentgym.core and every command, its plugin pages every env id, and every
code block of the quick start runs."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
    reason="the docs need mkdocs-material and mkdocstrings (pip install 'agentgym[docs]';"
           " scripts/setup.sh installs them)")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "WARNING" not in done.stderr, done.stderr[-3000:]
    return out


def text_of(page: Path) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.read_text()))


def test_every_public_name_of_core_is_in_the_reference(site):
    import agentgym.core

    page = (site / "reference" / "core" / "index.html").read_text()
    missing = [name for name in agentgym.core.__all__
               if f'id="agentgym.core.{name}"' not in page]
    assert not missing, missing


def test_every_command_is_in_the_reference(site):
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        from gen_reference import cli_commands
    finally:
        sys.path.remove(str(ROOT / "docs"))
    page = text_of(site / "reference" / "cli" / "index.html")
    paths = [path for path, _, _ in cli_commands()]
    assert {"agentgym view", "agentgym compare", "agentgym swe synth"} <= set(paths)
    assert [p for p in paths if p not in page] == []


def test_every_env_id_has_its_plugin_page(site):
    # The registry as a fresh process (the site's build) sees it: tests earlier in this
    # process may have registered plugins of their own.
    listing = subprocess.run(
        [sys.executable, "-c", "import json; from agentgym.core.plugins import plugin_host;"
         " print(json.dumps({k: e.plugin for k, e in plugin_host().entries('envs').items()}))"],
        capture_output=True, text=True, timeout=300, check=True)
    envs = json.loads(listing.stdout)
    assert envs
    for env_id, plugin in envs.items():
        page = text_of(site / "plugins" / plugin / "index.html")
        assert env_id in page or env_id.removeprefix("miniwob-") in page, env_id


@pytest.mark.parametrize("page", ["index.md", "pipeline.md"])
def test_every_code_block_of_the_quick_start_runs(tmp_path, page):
    text = (ROOT / "docs" / page).read_text()
    blocks = re.findall(r"```(\w*)\n(.*?)```", text, flags=re.S)
    assert blocks and all(kind == "python" for kind, _ in blocks), [k for k, _ in blocks]
    for number, (_, code) in enumerate(blocks):
        done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, (number, code, done.stderr[-2000:])
        assert done.stdout.strip(), (number, "printed nothing")


def test_the_plugin_pages_name_the_tools_of_the_envs_toolsets():
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        from gen_reference import plugin_pages
    finally:
        sys.path.remove(str(ROOT / "docs"))
    pages = plugin_pages()
    assert "Tools: `bash`, `str_replace_editor`, `search`, `submit`." in pages["swe"]
    assert "Tools: `terminal`, `bash`, `submit`." in pages["terminal"]
