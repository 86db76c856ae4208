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
    return text_of_html(page.read_text())


def text_of_html(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def gen_reference():
    """docs/gen_reference.py, the site's mkdocs hook, as a module."""
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import gen_reference
    finally:
        sys.path.remove(str(ROOT / "docs"))
    return gen_reference


def test_every_public_name_of_core_is_in_the_reference(site):
    import agentgym.core

    page = (site / "reference" / "core" / "index.html").read_text()
    missing = [name for name in agentgym.core.__all__
               if f'id="agentgym.core.{name}"' not in page]
    assert not missing, missing


def generated_pages(site: Path) -> list[Path]:
    return [*(site / "reference").glob("*/index.html"), *(site / "plugins").glob("*/index.html")]


def test_the_reference_renders_no_sphinx_role(site):
    # Docstrings write cross-references as Sphinx roles; the site shows links or code.
    raw = re.compile(r":(?:class|meth|func|mod|attr|data|exc|obj|const):")
    found = {str(page.relative_to(site)): raw.findall(text_of(page))
             for page in generated_pages(site)}
    assert not {page: roles for page, roles in found.items() if roles}


def test_roles_become_links_to_the_reference(site):
    page = (site / "reference" / "core" / "index.html").read_text()
    episode = section(page, "Episode")
    assert 'href="#agentgym.core.Task"' in episode  # :class:`~agentgym.core.task.Task`
    assert 'href="#agentgym.core.EnvProtocol"' in section(page, "env")  # the module
    # A role naming what the reference does not render is plain code, never a broken link.
    assert "<code>turn_time_left()</code>" in page


def section(page: str, name: str) -> str:
    """The HTML of ``agentgym.core.NAME``'s section of the reference, its members included."""
    start = page.index(f'id="agentgym.core.{name}"')
    end = re.compile(r'<h[23] id="').search(page, start + 1)
    return page[start:end.start() if end else len(page)]


def test_every_dataclass_of_core_has_its_fields_in_the_reference(site):
    import dataclasses

    import agentgym.core

    page = (site / "reference" / "core" / "index.html").read_text()
    row = re.compile(r'<tr class="doc-section-item">\s*<td>\s*<code>(?:<span[^>]*>)?(\w+)')
    missing = {}
    for name in agentgym.core.__all__:
        item = getattr(agentgym.core, name)
        if dataclasses.is_dataclass(item):
            # A row of the class's Attributes or Parameters table, each field.
            rows = set(row.findall(section(page, name)))
            missing[name] = [f.name for f in dataclasses.fields(item)
                                 if f.name not in rows and not f.name.startswith("_")]
    assert "Episode" in missing
    assert not {name: fields for name, fields in missing.items() if fields}


def test_sphinx_roles_convert_to_autorefs():
    convert_roles = gen_reference().convert_roles
    resolve = {"Task": "agentgym.core.task.Task"}.get
    assert convert_roles(":class:`Task`", lambda t: resolve(t) or t) == (
        '<autoref identifier="agentgym.core.task.Task" optional>`Task`</autoref>')
    assert convert_roles(":meth:`~a.B.run` and :attr:`toolsets <a.B.toolsets>`") == (
        "`run()` and `toolsets`")
    assert convert_roles("Write it so::\n\n    code\n") == "Write it so:\n\n    code\n"


def test_every_command_is_in_the_reference(site):
    page = text_of(site / "reference" / "cli" / "index.html")
    paths = [path for path, _, _ in gen_reference().cli_commands()]
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
    """Python blocks run and print; each shell command runs as a reader would type it
    (from a checkout: ``examples/`` is there), except installing and training, which are
    checked without doing them."""
    text = (ROOT / "docs" / page).read_text()
    blocks = re.findall(r"```(\w*)\n(.*?)```", text, flags=re.S)
    assert blocks and {kind for kind, _ in blocks} <= {"python", "bash"}, blocks
    for name in ("examples", "scripts"):
        (tmp_path / name).symlink_to(ROOT / name)
    trained: set[Path] = set()
    for number, (kind, code) in enumerate(blocks):
        if kind == "bash":
            for line in code.splitlines():
                check_command(line.split("  #")[0].strip(), tmp_path, trained)
            continue
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


def check_command(line: str, cwd: Path, trained: set[Path]) -> None:
    """Run one command of a quick start's shell block in ``cwd``, or check it where running
    it would install software or train for minutes."""
    import shlex

    words = shlex.split(line)
    if not words or line.startswith(("source ", "pip install ", "python3 -m venv ")):
        return
    if words[:2] == ["bash", "scripts/setup.sh"]:
        assert (cwd / words[1]).is_file()
        return
    assert words[0] == "agentgym", f"the test does not know how to check {line!r}"
    if words[1] == "train":
        from agentgym.trainers.config import load_config

        config = load_config(cwd / words[2])
        trained.add(cwd / config.output_dir)
    elif words[1] == "view":
        # The viewer's own tests serve pages; here, what it is asked to open must exist.
        missing = [w for w in words[2:] if not w.startswith("-") and not (cwd / w).exists()
                   and cwd / w not in trained]
        assert not missing, (line, missing)
    else:
        done = subprocess.run([sys.executable, "-m", "agentgym", *words[1:]], cwd=cwd,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
