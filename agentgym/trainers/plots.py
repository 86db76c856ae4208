"""``reward_curve.png``: a training run's curves, drawn from its ``metrics.jsonl`` records.

:func:`plot_curves` draws the GRPO reward and pass rate (top) and every stage's loss
(bottom) per training step, the stages one after another on the step axis with a dotted
line between them, and writes the PNG atomically (a reader never sees half an image).
matplotlib (the ``train`` extra) is imported when a plot is drawn, with the ``Agg``
backend: no display needed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["plot_curves"]


def plot_curves(records: list[dict[str, Any]], path: str | os.PathLike,
                title: str = "") -> Path:
    """Draw the GRPO reward and pass rate (top) and every stage's loss (bottom) per training
    step, the stages one after another on the step axis, and write the PNG atomically."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    stages: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        stages.setdefault(record.get("stage", "?"), []).append(record)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    offset = 0
    series = ((top, "reward", "", "-"), (top, "env/pass_rate", " pass rate", "--"),
              (bottom, "loss", "", "-"))
    for index, (name, rows) in enumerate(stages.items()):
        for axis, key, suffix, style in series:
            points = [(offset + r["step"], r[key]) for r in rows
                      if isinstance(r.get(key), (int, float)) and "step" in r]
            if points:
                xs, ys = zip(*points, strict=True)
                axis.plot(xs, ys, style, color=f"C{index}", label=name + suffix,
                          marker="." if len(points) < 50 else None)
        last = max((r.get("step", 0) for r in rows), default=0)
        offset += last
        if offset:
            for axis in (top, bottom):
                axis.axvline(offset, color="grey", linewidth=0.5, linestyle=":")
    top.set_ylabel("GRPO reward")
    bottom.set_ylabel("loss")
    bottom.set_xlabel("training step (stages in order)")
    for axis in (top, bottom):
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize="small")
        axis.grid(alpha=0.3)
    if not top.get_legend_handles_labels()[0]:
        top.text(0.5, 0.5, "no GRPO reward logged", ha="center", va="center",
                 transform=top.transAxes, color="grey")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    os.replace(tmp, path)
    return path
