"""The run folder of ``agentgym train`` (a config's ``output_dir``): the file that marks it
as holding a run, and the check that refuses to overwrite one.

Light to import on purpose: the command line checks the folder before it loads the
trainers (seconds of torch and TRL imports), so a reused ``output_dir`` is refused at once;
it reads the folder's name from the file first (:func:`output_dir_of`), since validating
the config's TRL arguments imports TRL too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentgym.core.errors import AgentGymError
from agentgym.trainers.layout import RUN_FILE  # written first: the folder holds a run


class RunExistsError(AgentGymError):
    """``output_dir`` already holds a run and ``resume`` was not asked for."""


def output_dir_of(config_file: str | Path) -> Path | None:
    """The ``output_dir`` a config file names, read without validating the rest (which
    imports TRL); None when the file cannot be read or names none."""
    import yaml

    try:
        data = yaml.safe_load(Path(config_file).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    out = data.get("output_dir") if isinstance(data, dict) else None
    return Path(out) if isinstance(out, str) else None


def check_output_dir(out: Path, resume: bool, stages: list[str] | None = None,
                     seed: int | None = None) -> dict[str, Any]:
    """The run record the folder ``out`` holds (``{}`` when it holds none).

    Raises :class:`RunExistsError` for a folder that holds a run when ``resume`` is False,
    and, given the config's stage kinds and seed, for one whose run had other stages or
    another seed (a run started with ``--seed N`` and resumed without it would go on with
    the config's)."""
    run_file = out / RUN_FILE
    if not run_file.exists():
        return {}
    if not resume:
        raise RunExistsError(
            f"{str(out)!r} already holds a run ({RUN_FILE}); pass --resume to continue it,"
            " or choose another --output-dir")
    record = json.loads(run_file.read_text(encoding="utf-8"))
    old = [next(iter(s)) for s in record.get("config", {}).get("stages", [])]
    if stages is not None and old != stages:
        raise RunExistsError(
            f"cannot resume {str(out)!r}: its stages were {old}, the config now has {stages};"
            " restore the stages or start a new run in another --output-dir")
    started = record.get("config", {}).get("seed")
    if seed is not None and started is not None and started != seed:
        raise RunExistsError(
            f"cannot resume {str(out)!r}: it ran with seed {started}, and would go on with"
            f" seed {seed}; pass --seed {started} (or start a new run in another"
            " --output-dir)")
    return record
