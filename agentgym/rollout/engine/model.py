"""``LocalModel``: a transformers causal LM loaded for sampling, and what sampling needs of it.

Shared by the engine (:class:`~agentgym.rollout.engine.engine.Engine`) and the
static-batch loop (:class:`~agentgym.rollout.policies.hf.HFPolicy`): where the model runs,
its vocabulary, its stop tokens, how a prompt is checked, and how new weights land.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agentgym.core.errors import InvalidArgumentError
from agentgym.rollout.models import load_causal_lm, load_tokenizer, model_folder, source_folder


@dataclass
class LocalModel:
    """A loaded model and its tokenizer, ready to sample from.

    Attributes:
        model: the ``PreTrainedModel`` (a trainer's model is shared, not copied).
        tokenizer: its tokenizer.
        device: where the model runs.
        vocab_size: rows of the input embedding; prompt tokens must be below it.
        stop_token_ids: tokens that end a completion.
        pad_token_id: what fills unused positions.
    """

    model: Any
    tokenizer: Any
    device: Any
    vocab_size: int
    stop_token_ids: frozenset[int]
    pad_token_id: int

    @classmethod
    def load(cls, model_or_path: Any, tokenizer: Any = None, device: Any = None,
             dtype: Any = None, stop_token_ids: Iterable[int] | None = None,
             who: str = "the policy") -> LocalModel:
        """Load ``model_or_path`` (a folder, a local hub id, or a loaded model), on
        ``device`` (default: a given model's device, else ``cuda`` when there is one, else
        ``cpu``); ``who`` names the caller in errors."""
        import torch

        if isinstance(model_or_path, (str, os.PathLike)):
            folder = model_folder(model_or_path)
            model = load_causal_lm(folder, dtype)
            tokenizer = tokenizer if tokenizer is not None else folder
            model.to(device or ("cuda" if torch.cuda.is_available() else "cpu")).eval()
        else:
            if not hasattr(model_or_path, "generation_config") or not callable(model_or_path):
                raise TypeError(f"{who} needs a transformers causal LM (PreTrainedModel) or"
                                f" the path of one, got {type(model_or_path).__name__}")
            model = model_or_path
            if device is not None:
                model.to(device)
            if tokenizer is None:
                tokenizer = source_folder(model)
        if isinstance(tokenizer, (str, os.PathLike)):
            tokenizer = load_tokenizer(tokenizer)
        stops = frozenset(stop_token_ids if stop_token_ids is not None
                          else _default_stops(model, tokenizer))
        if not stops:
            raise InvalidArgumentError(f"{who} found no stop token: set the tokenizer's"
                                       " eos_token or pass stop_token_ids=[...]")
        pad = tokenizer.pad_token_id
        return cls(model, tokenizer, next(model.parameters()).device,
                   int(model.get_input_embeddings().weight.shape[0]), stops,
                   int(pad if pad is not None else min(stops)))

    @property
    def name(self) -> str:
        """The model's name or path, for ``repr``."""
        return (getattr(self.model.config, "name_or_path", "")
                or type(self.model).__name__)

    def check_prompt(self, prompt: list[int]) -> None:
        """Raise :class:`InvalidArgumentError` for an empty prompt or a token outside the
        vocabulary."""
        if not prompt:
            raise InvalidArgumentError(
                "prompt_ids is empty: a completion needs at least one prompt token")
        low, high = min(prompt), max(prompt)
        if low < 0 or high >= self.vocab_size:
            bad = low if low < 0 else high
            raise InvalidArgumentError(
                f"prompt token id {bad} is outside the model's vocabulary"
                f" (0..{self.vocab_size - 1}); tokenize with this policy's tokenizer")

    def load_weights(self, state_dict_or_model: Any) -> None:
        """Copy new weights (a state dict, or a model whose state dict to take) into the
        model; the model itself is a no-op. Callers hold their step lock around this."""
        state = state_dict_or_model
        if state is self.model:
            return
        if hasattr(state, "state_dict") and callable(state.state_dict):
            state = state.state_dict()
        self.model.load_state_dict(state, strict=True)


def _default_stops(model: Any, tokenizer: Any) -> set[int]:
    stops: set[int] = set()
    if tokenizer.eos_token_id is not None:
        stops.add(int(tokenizer.eos_token_id))
    configured = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(configured, int):
        stops.add(configured)
    elif configured:
        stops.update(int(t) for t in configured)
    return stops
