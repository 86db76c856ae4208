"""What the bench scripts share: a percentile, and printing their results as one JSON
object (``--json``) or as a table. Scripts run as ``python bench/NAME.py``, so this folder
is on ``sys.path`` and they import it as ``_shared``."""

from __future__ import annotations

import json
from typing import Any


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``: the nearest value in sorted order."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def print_results(results: dict[str, Any], as_json: bool, width: int = 22,
                  digits: int = 2) -> None:
    """One JSON object on stdout, or one ``name value`` line per result."""
    if as_json:
        print(json.dumps(results))
        return
    for key, value in results.items():
        print(f"{key:<{width}}{value:>12.{digits}f}")
