"""scripts/gpu_table.py: the table a GPU run prints, here from a results folder written by
hand as scripts/gpu_smollm2.sh writes it (the checks themselves need a GPU)."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "scripts" / "gpu_table.py"


def test_one_row_per_recipe_run_and_a_reason_for_one_that_did_not_finish(tmp_path: Path):
    evals = tmp_path / "eval.json"
    evals.write_text(json.dumps({"stages": [{"stage": "base", "pass_rate": 0.0},
                                            {"stage": "00-sft", "pass_rate": 0.25},
                                            {"stage": "01-grpo", "pass_rate": 0.5}]}))
    (tmp_path / "train_recipe-terminal.json").write_text(
        "progress noise\n" + json.dumps({"eval": str(evals), "seconds": 421.4}) + "\n")
    (tmp_path / "train_recipe-web.json").write_text("")
    (tmp_path / "train_recipe-web.err").write_text(
        "loading...\nError: Chromium is not installed (looked for AGENTGYM_CHROMIUM)\n")
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True,
                         text=True, check=True).stdout
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()
            if line.startswith(("terminal", "web"))}
    assert rows["terminal"] == ["0.00", "0.25", "0.50", "7m01s"]
    assert rows["web"][:3] == ["did", "not", "finish:"] and "Chromium is not installed" in out
    assert "generation.json: FileNotFoundError" in out  # what did not run is said
