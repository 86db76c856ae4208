"""reward_curve.png: a panel column per stage on its own steps, the held-out pass rate by
stage, several runs overlaid, and `agentgym plot` (the command lives in cli.py; its tests
are here, next to the run folders they draw)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from click.testing import CliRunner

from agentgym.cli import main
from agentgym.trainers import plots
from agentgym.trainers.plots import (
    RunCurves,
    build_figure,
    load_run,
    pass_rates,
    plot_curves,
    rolling_mean,
)

PNG = b"\x89PNG\r\n\x1a\n"
GRPO_REWARDS = [0.1, 0.3, 0.2, 0.6, 0.4, 0.9, 0.5, 0.7, 0.8, 0.6,
                0.9, 1.0, 0.7, 0.8, 0.9, 0.6, 1.0, 0.9, 0.8, 1.0]
PASS_RATES = {"base": 0.1, "00-sft": 0.35, "01-grpo": 0.5}


def sft_records(stage: str = "00-sft", steps: int = 800, kind: str = "sft") -> list[dict]:
    rows = [{"stage": stage, "kind": kind, "step": s, "loss": 3.0 / s,
             "learning_rate": 1e-4 * (1 - s / steps)} for s in range(1, steps + 1)]
    # TRL's last line of a stage: a summary without loss, at the last step.
    return [*rows, {"stage": stage, "kind": kind, "step": steps, "train_loss": 0.5}]


def grpo_records(with_variance: bool = False) -> list[dict]:
    rows = []
    for step, reward in enumerate(GRPO_REWARDS, start=1):
        row = {"stage": "01-grpo", "kind": "grpo", "step": step, "reward": reward,
               "frac_reward_zero_std": 0.25, "completions/mean_length": 100.0 + step,
               "env/turns": 2.0 + step / 10, "loss": 0.01, "time/init_s": 1.0,
               "time/generate_s": 4.0 + step, "time/tool_s": 2.0, "time/grade_s": 0.5,
               "time/rollout_s": 3.0 + step, "time/step_s": 5.0 + step,
               "rollout/tokens_per_s": 300.0 + step}
        if with_variance:
            row["groups/with_variance"] = 0.5
        rows.append(row)
    return rows


def write_run(folder: Path, records: list[dict], evals: dict | None = None) -> Path:
    """A run folder as `agentgym train` leaves it: metrics.jsonl and eval.json."""
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    if evals is not None:
        (folder / "eval.json").write_text(json.dumps(evals))
    return folder


def eval_json(rates: dict[str, float] = PASS_RATES) -> dict:
    stages = [{"stage": stage, "kind": stage.rpartition("-")[2], "pass_rate": rate,
               "mean_reward": rate, "mean_turns": 2.0} for stage, rate in rates.items()]
    return {"env": "calculator", "episodes": 20, "stages": stages, "before": stages[0],
            "after": stages[-1], "change": stages[-1]["pass_rate"] - stages[0]["pass_rate"]}


@pytest.fixture
def sft_then_grpo(tmp_path: Path) -> Path:
    return write_run(tmp_path / "sft-grpo", sft_records() + grpo_records(), eval_json())


def line(axes, gid: str):
    [found] = [line for line in axes.get_lines() if line.get_gid() == gid]
    return found


def test_each_stage_is_a_column_on_its_own_steps(sft_then_grpo: Path):
    curves = build_figure([load_run(sft_then_grpo)])
    assert list(curves.stages) == ["00-sft", "01-grpo"]
    sft, grpo = curves.stages["00-sft"], curves.stages["01-grpo"]
    assert (len(sft), len(grpo)) == (2, 4)  # loss, lr | reward, groups, length, rollout
    for axes in sft:
        low, high = axes.get_xlim()
        assert -20 < low <= 1 and 800 <= high < 820
    for axes in grpo:
        low, high = axes.get_xlim()
        assert 0 <= low <= 1 and 20 <= high < 21  # not squeezed into an 800-step axis
    assert list(line(sft[0], "sft-grpo/loss").get_xdata()) == list(range(1, 801))


def test_the_grpo_column_holds_reward_its_rolling_mean_groups_length_and_turns(
        sft_then_grpo: Path):
    curves = build_figure([load_run(sft_then_grpo)])
    reward, groups, length, rollout = curves.stages["01-grpo"]
    assert list(line(reward, "sft-grpo/reward").get_ydata()) == GRPO_REWARDS
    smooth = list(line(reward, "sft-grpo/reward_rolling_mean").get_ydata())
    assert smooth[:2] == pytest.approx([0.1, 0.2])  # fewer than 5 steps at the start
    assert smooth[-1] == pytest.approx(sum(GRPO_REWARDS[-5:]) / 5)
    # Without groups/with_variance: one minus TRL's frac_reward_zero_std.
    assert set(line(groups, "sft-grpo/groups_with_variance").get_ydata()) == {0.75}
    assert line(length, "sft-grpo/mean_length").get_ydata()[-1] == 120.0
    turns = line(curves.twins["01-grpo"], "sft-grpo/turns")
    assert turns.get_ydata()[-1] == pytest.approx(4.0)
    assert line(reward, "sft-grpo/reward").get_xdata()[-1] == 20
    # Wall time: the step's and its rollout's (not seconds summed over episodes), and
    # tokens per second on the right.
    assert list(line(rollout, "sft-grpo/time/step").get_ydata())[-2:] == [24.0, 25.0]
    assert line(rollout, "sft-grpo/time/rollout").get_ydata()[-1] == 23.0
    assert {ln.get_gid() for ln in rollout.get_lines()} == {"sft-grpo/time/step",
                                                           "sft-grpo/time/rollout"}
    assert rollout.get_ylabel() == "wall seconds per step"
    speed = line(curves.speeds["01-grpo"], "sft-grpo/tokens_per_s")
    assert speed.get_ydata()[-1] == 320.0


def test_x_axes_are_the_logged_steps():
    # logging_steps 5 (SFT) and 4 (GRPO): points at those steps, not at 1, 2, 3.
    sft = [r for r in sft_records(steps=40) if r["step"] % 5 == 0]
    grpo = [r for r in grpo_records() if r["step"] % 4 == 0]
    curves = build_figure([RunCurves("run", sft + grpo)])
    loss = line(curves.stages["00-sft"][0], "run/loss")
    assert list(loss.get_xdata()) == [5, 10, 15, 20, 25, 30, 35, 40]
    for axes in curves.stages["01-grpo"]:
        for drawn in axes.get_lines():
            assert list(drawn.get_xdata()) == [4, 8, 12, 16, 20], drawn.get_gid()
    assert list(line(curves.twins["01-grpo"], "run/turns").get_xdata()) == [4, 8, 12, 16, 20]


def test_steps_that_trained_no_episode_are_gaps_not_zeros():
    rows = grpo_records()
    for row in rows:
        row.update({"episodes/mean_length": 40.0 + row["step"], "episodes/in_loss": 1.0})
    for row in rows[4:6]:  # every group masked: TRL logs length 0 and a null reward
        row.update({"episodes/mean_length": None, "episodes/in_loss": 0.0,
                    "completions/mean_length": 0.0, "reward": None})
    curves = build_figure([RunCurves("run", rows)])
    reward, _, length, _ = curves.stages["01-grpo"]
    lengths = list(line(length, "run/mean_length").get_ydata())
    assert list(line(length, "run/mean_length").get_xdata()) == list(range(1, 21))
    assert math.isnan(lengths[4]) and math.isnan(lengths[5])
    assert lengths[3] == 44.0 and lengths[6] == 47.0 and 0.0 not in lengths
    rewards = list(line(reward, "run/reward").get_ydata())
    assert math.isnan(rewards[4]) and math.isnan(rewards[5])
    smooth = line(reward, "run/reward_rolling_mean").get_ydata()
    assert smooth[5] == pytest.approx(sum(GRPO_REWARDS[1:4]) / 3)  # the gaps left out

    # An older run, without episodes/mean_length: TRL's length, but not where no episode
    # was in the loss.
    for row in rows:
        del row["episodes/mean_length"]
    length = build_figure([RunCurves("old", rows)]).stages["01-grpo"][2]
    lengths = list(line(length, "old/mean_length").get_ydata())
    assert math.isnan(lengths[4]) and lengths[3] == 104.0


def test_groups_with_variance_is_preferred_to_trls_zero_std_share():
    run = RunCurves("run", grpo_records(with_variance=True))
    [_, groups, _, _] = build_figure([run]).stages["01-grpo"]
    assert set(line(groups, "run/groups_with_variance").get_ydata()) == {0.5}


def test_a_reward_null_at_every_step_is_said_so():
    masked = [{**row, "reward": None} for row in grpo_records()]
    reward = build_figure([RunCurves("run", masked)]).stages["01-grpo"][0]
    assert not reward.get_lines()
    assert [t.get_text() for t in reward.texts] == [
        "reward logged as null at every step\n(every episode masked)"]


def test_rolling_mean_is_trailing():
    assert rolling_mean([1, 2, 3, 4, 5, 6], window=5) == [1, 1.5, 2, 2.5, 3, 4]
    assert rolling_mean([]) == []
    nan = math.nan
    smooth = rolling_mean([nan, 2, nan, 4], window=2)
    assert math.isnan(smooth[0]) and smooth[1:] == [2, 2, 4]


def test_the_pass_rate_points_are_eval_jsons_by_stage(sft_then_grpo: Path):
    curves = build_figure([load_run(sft_then_grpo)])
    points = line(curves.pass_rate, "sft-grpo/pass_rate")
    assert list(points.get_ydata()) == list(PASS_RATES.values())
    labels = [t.get_text() for t in curves.pass_rate.get_xticklabels()]
    assert [labels[int(x)] for x in points.get_xdata()] == list(PASS_RATES)
    written = {t.get_text() for t in curves.pass_rate.texts}
    assert written == {"0.10", "0.35", "0.50"}
    assert "held-out pass rate after: 0.35" in curves.stages["00-sft"][0].get_title()
    assert curves.figure.get_suptitle() == (
        "sft-grpo: held-out pass rate 0.10 (base) \u2192 0.50 (01-grpo)")


def test_an_eval_json_with_only_before_and_after_gives_base_and_the_last_stage():
    old = {"before": {"pass_rate": 0.2}, "after": {"pass_rate": 0.4}, "change": 0.2}
    assert pass_rates(old, "01-grpo") == [("base", 0.2), ("01-grpo", 0.4)]
    assert pass_rates({"before": {"pass_rate": 0.2}}, "01-grpo") == [("base", 0.2)]
    assert pass_rates(None) == []
    curves = build_figure([RunCurves("old", grpo_records(), old)])
    labels = [t.get_text() for t in curves.pass_rate.get_xticklabels()]
    assert labels == ["base", "01-grpo"]


def test_a_curve_is_written_for_every_kind_of_run(tmp_path: Path):
    records = sft_records(steps=2) + grpo_records()
    for name, rows in (("both", records), ("sft-only", records[:2]), ("empty", [])):
        path = plot_curves(rows, tmp_path / f"{name}.png", title=name)
        assert path.read_bytes().startswith(PNG)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["both.png", "empty.png",
                                                          "sft-only.png"]  # no .tmp left


def test_the_figure_widens_with_the_stages():
    one = build_figure([RunCurves("a", grpo_records())]).figure.get_figwidth()
    two = build_figure([RunCurves("a", sft_records(steps=5) + grpo_records())])
    assert two.figure.get_figwidth() > one + 3


def test_runs_with_different_stages_share_the_union_of_stage_columns():
    sft = RunCurves("sft-run", sft_records(steps=10) + grpo_records(), eval_json())
    rft = RunCurves("rft-run", sft_records("00-rft", 30, "rft") + grpo_records(),
                    eval_json({"base": 0.1, "00-rft": 0.2, "01-grpo": 0.3}))
    curves = build_figure([sft, rft])
    assert list(curves.stages) == ["00-rft", "00-sft", "01-grpo"]
    gids = {stage: {ln.get_gid() for ln in axes[0].get_lines()}
            for stage, axes in curves.stages.items()}
    assert gids["00-sft"] == {"sft-run/loss"} and gids["00-rft"] == {"rft-run/loss"}
    assert {"sft-run/reward", "rft-run/reward"} <= gids["01-grpo"]
    assert curves.stages["00-rft"][0].get_xlim()[1] < 31  # its own 30 steps
    labels = [t.get_text() for t in curves.pass_rate.get_xticklabels()]
    assert labels == ["base", "00-rft", "00-sft", "01-grpo"]
    legend = [t.get_text() for t in curves.figure.legends[0].get_texts()]
    assert legend == ["sft-run", "rft-run"]


# ---- agentgym plot ----------------------------------------------------------------------


def plot(*args: str):
    return CliRunner().invoke(main, ["plot", *args])


def test_plot_redraws_one_run_in_its_folder(sft_then_grpo: Path):
    result = plot(str(sft_then_grpo))
    assert result.exit_code == 0, result.output
    assert (sft_then_grpo / "reward_curve.png").read_bytes().startswith(PNG)
    assert f"wrote {sft_then_grpo / 'reward_curve.png'}" in result.output


def test_plot_overlays_two_runs_in_one_png(tmp_path: Path, sft_then_grpo: Path,
                                           monkeypatch: pytest.MonkeyPatch):
    other = write_run(tmp_path / "other" / "sft-grpo", sft_records(steps=100) + grpo_records(),
                      eval_json({"base": 0.1, "00-sft": 0.2, "01-grpo": 0.6}))
    drawn = []
    save = plots.save_figure
    monkeypatch.setattr(plots, "save_figure", lambda curves, path: (drawn.append(curves),
                                                                    save(curves, path))[1])
    monkeypatch.chdir(tmp_path)
    result = plot(str(sft_then_grpo), str(other))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "reward_curves.png").read_bytes().startswith(PNG)  # the default
    [curves] = drawn
    # Both folders are named sft-grpo: the runs are named by their paths.
    names = [str(sft_then_grpo), str(other)]
    reward = curves.stages["01-grpo"][0]
    assert {f"{name}/reward_rolling_mean" for name in names} <= {
        ln.get_gid() for ln in reward.get_lines()}
    rates = {name: list(line(curves.pass_rate, f"{name}/pass_rate").get_ydata())
             for name in names}
    assert rates == {names[0]: [0.1, 0.35, 0.5], names[1]: [0.1, 0.2, 0.6]}

    out = tmp_path / "compare.png"
    assert plot(str(sft_then_grpo), str(other), "--out", str(out)).exit_code == 0
    assert out.read_bytes().startswith(PNG)


@pytest.mark.parametrize(("folder", "message"), [
    ("missing", "'{folder}' is not a folder"),
    ("no-metrics", "'{folder}' holds no metrics.jsonl"),
    ("empty-metrics", "'{folder}/metrics.jsonl' is empty: the run in '{folder}'"),
])
def test_plot_names_the_folder_without_a_run_in_one_line(tmp_path: Path, folder: str,
                                                         message: str):
    path = tmp_path / folder
    if folder != "missing":
        path.mkdir()
    if folder == "empty-metrics":
        (path / "metrics.jsonl").write_text("")
    result = plot(str(path))
    assert result.exit_code == 2
    [line] = result.output.splitlines()  # the error alone: no usage text, no traceback
    assert line.startswith("Error: Invalid value for 'RUN_DIR': ")
    assert message.format(folder=path) in line
