"""``agentgym plugin new NAME``: write a complete third-party plugin package.

The package has a pyproject with the ``agentgym`` entry point, an env registered under the
id NAME (with its tasks, each with a reference solution and a known-wrong one, a tool and
a reward), and tests that run ``check_env`` and ``assert_valid`` (the ``agentgym
validate`` checks). It does not list ``agentgym`` as a dependency: that name on PyPI
belongs to an unrelated project, so agentgym is installed from its source first, and the
plugin on top of it.
"""

from __future__ import annotations

import re
from pathlib import Path

from agentgym.core.errors import AgentGymError

TEMPLATE = Path(__file__).parent / "template"
NAME_PATTERN = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


def new_plugin(name: str, directory: str | Path = ".") -> Path:
    """Write the package ``agentgym-NAME`` under ``directory`` and return its path."""
    if not NAME_PATTERN.fullmatch(name):
        raise AgentGymError(
            f"plugin name {name!r} is not valid: use lowercase letters, digits and single"
            " hyphens, starting with a letter (e.g. 'word-reverse')"
        )
    module = "agentgym_" + name.replace("-", "_")
    values = {
        "{{name}}": name,
        "{{module}}": module,
        "{{dist}}": f"agentgym-{name}",
        "{{class}}": "".join(part.capitalize() for part in name.split("-")) + "Env",
    }
    target = Path(directory) / f"agentgym-{name}"
    if target.exists():
        raise AgentGymError(f"{str(target)!r} already exists; choose another --dir or name")
    for source in sorted(TEMPLATE.rglob("*.tmpl")):
        relative = source.relative_to(TEMPLATE).with_suffix("")
        path = target / str(relative).replace("__module__", module)
        text = source.read_text(encoding="utf-8")
        for placeholder, value in values.items():
            text = text.replace(placeholder, value)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return target
