"""Finding and loading models and tokenizers from local folders, never from the hub."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")

from agentgym.core.errors import MissingResourceError
from agentgym.rollout.models import (
    load_causal_lm,
    load_model_and_tokenizer,
    load_tokenizer,
    local_folder,
    looks_like_hub_id,
    model_folder,
    source_folder,
)


def test_hub_ids_and_paths_are_told_apart():
    assert looks_like_hub_id("Qwen/Qwen2.5-0.5B-Instruct")
    assert not looks_like_hub_id("./runs/final")
    assert not looks_like_hub_id("/abs/model")
    assert not looks_like_hub_id("runs/a/final")


def test_a_folder_is_itself_and_an_uncached_hub_id_is_nothing(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    assert local_folder(tmp_path) == str(tmp_path)
    assert local_folder("nobody-here/no-such-model") is None
    assert local_folder(tmp_path / "missing") is None


def test_model_folder_errors_say_what_to_pass(tmp_path: Path):
    with pytest.raises(MissingResourceError, match=r"does not exist.*save_pretrained"):
        model_folder(tmp_path / "missing")
    with pytest.raises(MissingResourceError, match=r"has no config\.json"):
        model_folder(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(MissingResourceError, match="cannot load a causal LM"):
        load_causal_lm(tmp_path)
    with pytest.raises(MissingResourceError, match="cannot load a tokenizer"):
        load_tokenizer(tmp_path / "missing")


def test_a_folder_loads_as_model_and_tokenizer(tiny_model_dir: Path):
    model, tokenizer = load_model_and_tokenizer(tiny_model_dir, padding_side="left")
    assert source_folder(model) == str(tiny_model_dir)
    assert tokenizer.padding_side == "left" and tokenizer.pad_token_id is not None
    again, its_tokenizer = load_model_and_tokenizer(model)  # a loaded model: as is
    assert again is model and its_tokenizer.get_vocab() == tokenizer.get_vocab()


def test_a_model_built_in_memory_needs_its_tokenizer_given(tiny_model_dir: Path):
    loaded = load_causal_lm(tiny_model_dir)
    loaded.config.name_or_path = ""
    model = type(loaded)(loaded.config)  # made from a config: loaded from nowhere
    with pytest.raises(ValueError, match="pass tokenizer="):
        load_model_and_tokenizer(model)
    tokenizer = load_tokenizer(tiny_model_dir)
    assert load_model_and_tokenizer(model, tokenizer) == (model, tokenizer)
