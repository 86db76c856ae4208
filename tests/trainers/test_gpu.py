"""GPU-only trainer checks: they skip on CPU; scripts/gpu_tests.sh runs them on a GPU machine."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _train(tiny_model_dir: Path, out: Path, asynchronous: object = None,
           **args: object) -> object:
    from agentgym.core.policies import Sampling
    from agentgym.rollout.loop import RolloutConfig
    from agentgym.trainers.grpo import GRPOOptions, train_grpo

    return train_grpo(
        str(tiny_model_dir), "calculator", env_kwargs={"num_tasks": 16}, output_dir=out,
        args={"max_steps": 2, "per_device_train_batch_size": 8, "num_generations": 4,
              "save_strategy": "no", **args},
        options=GRPOOptions(mask_finish_reasons=(), asynchronous=asynchronous),
        rollout=RolloutConfig(Sampling(max_tokens=32, temperature=1.0), max_total_tokens=1024))


def test_grpo_steps_on_gpu_with_transformers_generation(tiny_model_dir: Path,
                                                        tmp_path: Path) -> None:
    trainer = _train(tiny_model_dir, tmp_path, bf16=True)
    assert trainer.state.global_step == 2
    assert next(trainer.model.parameters()).device.type == "cuda"


def test_async_grpo_steps_on_gpu_play_episodes_without_errors(tiny_model_dir: Path,
                                                              tmp_path: Path) -> None:
    """Asynchronous: the engine decodes (from CUDA graphs, on its own copy of the model)
    while the trainer steps on the same GPU."""
    trainer = _train(tiny_model_dir, tmp_path, asynchronous={"max_staleness": 2},
                     bf16=True, max_steps=3)
    assert trainer.state.global_step == 3
    episodes = trainer.env_rollout.last
    assert episodes and [t.error for t in episodes if t.error] == []
    engine = trainer._own_policy  # closed by now: cuda_graphs still on means no fallback
    assert engine.cuda_graphs and engine.steps_run > 0


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                    reason="vllm is not installed (pip install 'agentgym[vllm]')")
def test_grpo_steps_with_vllm_colocate(tiny_model_dir: Path, tmp_path: Path) -> None:
    trainer = _train(tiny_model_dir, tmp_path, bf16=True, use_vllm=True, vllm_mode="colocate",
                     vllm_gpu_memory_utilization=0.2)
    assert trainer.state.global_step == 2
    logged = [log for log in trainer.state.log_history if "env/turns" in log]
    assert logged and all(log["env/turns"] >= 1 for log in logged)
