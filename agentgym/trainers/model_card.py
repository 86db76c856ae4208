"""The model card (``README.md``) saved with a model agentgym trained.

TRL's card is a template for models pushed to the hub: it names the base model only when
that is a hub id, so a model trained from a folder (every stage after the first, the tiny
model) reads "a fine-tuned version of [None]", and its usage snippet loads the model
``"None"``. :func:`model_card` says what the model was trained from (a hub id, linked and
named in the card's ``base_model`` metadata, or a local folder), by which kind of stage,
on which env when known, with which versions, and how to load and evaluate it.

The GRPO and SFT trainers write it beside their checkpoints (in place of TRL's card,
through :class:`~agentgym.trainers.trl_adapter.ModelCardHook`) and into ``final/``.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from agentgym.rollout.models import looks_like_hub_id

__all__ = ["METHODS", "model_card"]

#: What each kind of stage did, as the card says it.
METHODS = {
    "sft": "supervised fine-tuning on trajectories (loss on the model's own tokens only)",
    "rft": "rejection fine-tuning (supervised fine-tuning on its own successful attempts)",
    "grpo": "GRPO on multi-turn episodes of the env (TRL's GRPOTrainer fed by agentgym's"
            " rollouts; environment tokens carry no gradient)",
}


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def model_card(*, kind: str, base_model: str, model_dir: str | Path,
               env_id: str | None = None) -> str:
    """The card of the model saved in ``model_dir``, trained by a ``kind`` stage (sft, rft,
    grpo) from ``base_model`` (a hub id or a folder; empty: a model built in memory)."""
    name = Path(model_dir).name if Path(model_dir).name != "final" else Path(model_dir).parent.name
    on_hub = bool(base_model) and looks_like_hub_id(base_model) and not Path(base_model).exists()
    if on_hub:
        source = f"[{base_model}](https://huggingface.co/{base_model})"
    elif base_model:
        source = f"the local model `{base_model}`"
    else:
        source = "a model built in memory"
    env = f" on the `{env_id}` env" if env_id else ""
    metadata = ["library_name: transformers", f"tags: [agentgym, trl, {kind}]"]
    if on_hub:
        metadata.append(f"base_model: {base_model}")
    eval_line = (f"agentgym eval {env_id} --policy hf:{model_dir}" if env_id
                 else f"agentgym eval ENV_ID --policy hf:{model_dir}")
    return "\n".join([
        "---", *metadata, "---", "",
        f"# {name}", "",
        f"Trained from {source}{env} by {METHODS.get(kind, kind)}, with agentgym"
        f" {_version('agentgym')} on TRL {_version('trl')} and transformers"
        f" {_version('transformers')}.", "",
        "## Use", "",
        "```python",
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        "",
        f'tokenizer = AutoTokenizer.from_pretrained("{model_dir}")',
        f'model = AutoModelForCausalLM.from_pretrained("{model_dir}")',
        "```", "",
        "Evaluate it:", "",
        "```",
        eval_line,
        "```", "",
    ])
