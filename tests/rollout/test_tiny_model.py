"""The tiny local model: deterministic, reusable, and speaking a chat format TRL knows."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the tiny model needs the train extra")
pytest.importorskip("trl", reason="the tiny model reads its chat template from trl")

from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

import agentgym
from agentgym.plugins.calculator.env import make_task
from agentgym.rollout.tiny_model import build_tiny_model, chat_template

SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
ADDED = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def schemas() -> list[dict]:
    env = agentgym.make("calculator")
    try:
        return env.unwrapped.tool_schemas()
    finally:
        env.close()


def conversation(expression: str = "37 * 4 + 12", answer: str = "160") -> list[dict]:
    """One calculator episode in OpenAI format (tool-call arguments as objects)."""

    def call(call_id: str, name: str, arguments: dict) -> dict:
        function = {"name": name, "arguments": arguments}
        return {"id": call_id, "type": "function", "function": function}

    return [
        {"role": "system", "content": "Use the calculator tool, then submit the result."},
        {"role": "user", "content": f"What is {expression}?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call("call_1_0", "calculator", {"expression": expression})],
        },
        {"role": "tool", "tool_call_id": "call_1_0", "name": "calculator", "content": answer},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call("call_2_0", "submit", {"answer": answer})],
        },
        {"role": "tool", "tool_call_id": "call_2_0", "name": "submit", "content": "Submitted."},
    ]


def test_build_is_deterministic(tiny_model_dir: Path, tmp_path: Path) -> None:
    again = build_tiny_model(tmp_path / "again")
    for name in ("tokenizer.json", "config.json", "chat_template.jinja"):
        assert (again / name).read_bytes() == (tiny_model_dir / name).read_bytes(), name
    first, second = (
        load_file(tiny_model_dir / "model.safetensors"),
        load_file(again / "model.safetensors"),
    )
    assert first.keys() == second.keys()
    assert all(first[k].equal(second[k]) for k in first)

    other = load_file(build_tiny_model(tmp_path / "seed1", seed=1) / "model.safetensors")
    assert not all(first[k].equal(other[k]) for k in first), "another seed, other weights"
    assert (tmp_path / "seed1" / "tokenizer.json").read_bytes() == (
        tiny_model_dir / "tokenizer.json"
    ).read_bytes(), "the vocabulary does not depend on the seed"


def test_a_complete_build_is_reused(tiny_model_dir: Path) -> None:
    stamps = {p.name: p.stat().st_mtime_ns for p in tiny_model_dir.iterdir()}
    assert build_tiny_model(tiny_model_dir) == tiny_model_dir
    assert {p.name: p.stat().st_mtime_ns for p in tiny_model_dir.iterdir()} == stamps
    manifest = json.loads((tiny_model_dir / "agentgym_tiny_model.json").read_text())
    assert manifest["seed"] == 0 and manifest["template"] == "qwen2_5"


def test_an_interrupted_build_is_redone(tmp_path: Path) -> None:
    folder = build_tiny_model(tmp_path / "m", hidden_size=32, num_layers=1)
    (folder / "model.safetensors").unlink()
    build_tiny_model(folder, hidden_size=32, num_layers=1)
    assert (folder / "model.safetensors").is_file()
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert model.config.hidden_size == 32 and model.config.num_hidden_layers == 1


def test_init_std_scales_the_initial_weights(tiny_model_dir: Path, tmp_path: Path) -> None:
    wide = build_tiny_model(tmp_path / "wide", init_std=0.06)
    assert json.loads((wide / "config.json").read_text())["initializer_range"] == 0.06
    assert json.loads((wide / "agentgym_tiny_model.json").read_text())["init_std"] == 0.06
    name = "model.layers.0.mlp.up_proj.weight"
    default = load_file(tiny_model_dir / "model.safetensors")[name].std().item()
    larger = load_file(wide / "model.safetensors")[name].std().item()
    assert default == pytest.approx(0.02, rel=0.1) and larger == pytest.approx(0.06, rel=0.1)
    # The default build's manifest has no init_std, so folders built before it are reused.
    assert "init_std" not in json.loads((tiny_model_dir / "agentgym_tiny_model.json").read_text())


def test_bad_arguments_name_the_value(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'chatml9'"):
        build_tiny_model(tmp_path, template="chatml9")
    with pytest.raises(ValueError, match="hidden_size must be a positive multiple of 16, got 40"):
        build_tiny_model(tmp_path, hidden_size=40)
    with pytest.raises(ValueError, match=r"init_std must be in \(0, 1\], got 0"):
        build_tiny_model(tmp_path, init_std=0)
    with pytest.raises(ValueError, match=r"vocab_size must be .* got 100"):
        build_tiny_model(tmp_path, vocab_size=100)
    with pytest.raises(ValueError, match="corpus_envs: 'no-such-env' cannot be made"):
        build_tiny_model(tmp_path, corpus_envs=["no-such-env"])
    with pytest.raises(ValueError, match="corpus_episodes must be >= 1, got 0"):
        build_tiny_model(tmp_path, corpus_envs=["calculator"], corpus_episodes=0)


def test_copy_batches_mark_only_tokens_found_earlier_in_their_sequence() -> None:
    import torch

    from agentgym.rollout.tiny_model import _copy_batch

    pool = torch.arange(100, 400)
    tokens, copyable = _copy_batch(pool, torch.Generator().manual_seed(0), 8, 128)
    assert tokens.shape == copyable.shape == (8, 128)
    assert ((tokens >= 100) & (tokens < 400)).all(), "tokens come from the pool"
    for row in range(8):
        seq, marked = tokens[row].tolist(), copyable[row].nonzero().flatten().tolist()
        assert len(marked) >= 128 // 4, "a good part of every sequence is a copy"
        for at in marked:  # the token before it occurred earlier, this one beside it
            earlier = [i for i in range(at - 1) if seq[i] == seq[at - 1]]
            assert any(seq[at] in (seq[i - 1] if i else None, seq[i + 1])
                       for i in earlier), (row, at)
        if row % 3 == 2:  # value first: what is copied stood before its key
            at = marked[0]
            assert seq.index(seq[at]) + 1 == seq.index(seq[at - 1]), row


def test_copy_rate_warms_up_holds_then_decays_over_the_last_fifth() -> None:
    from agentgym.rollout.tiny_model import _copy_rate

    rates = [_copy_rate(step, 1400) for step in range(1, 1401)]
    assert rates[0] == pytest.approx(1e-4) and rates[99] == pytest.approx(1e-2)
    assert rates[100:1121] == [pytest.approx(1e-2)] * 1021, "constant until the last fifth"
    tail = rates[1120:]
    assert all(a > b for a, b in itertools.pairwise(tail))
    assert tail[-1] == pytest.approx(1e-2 / 280)
    assert all(_copy_rate(step, 3) > 0 for step in (1, 2, 3)), "a short build trains each step"


def test_copy_steps_train_the_weights_and_are_part_of_the_build(tmp_path: Path) -> None:
    steps: list[tuple[int, float]] = []
    folder = build_tiny_model(tmp_path / "copy", hidden_size=32, num_layers=1, copy_steps=3,
                              progress=lambda step, loss: steps.append((step, loss)))
    assert [step for step, _ in steps] == [1, 2, 3]
    assert all(0 < loss < 20 for _, loss in steps)
    assert json.loads((folder / "agentgym_tiny_model.json").read_text())["copy_steps"] == 3
    random = build_tiny_model(tmp_path / "random", hidden_size=32, num_layers=1)
    trained, untrained = (load_file(f / "model.safetensors") for f in (folder, random))
    assert not all(trained[k].equal(untrained[k]) for k in trained)
    assert (folder / "tokenizer.json").read_bytes() == (random / "tokenizer.json").read_bytes()
    again = load_file(build_tiny_model(tmp_path / "again", hidden_size=32, num_layers=1,
                                       copy_steps=3) / "model.safetensors")
    assert all(trained[k].equal(again[k]) for k in trained), "same machine, same weights"
    with pytest.raises(ValueError, match="copy_steps must be an int >= 0, got -1"):
        build_tiny_model(tmp_path, copy_steps=-1)


def test_corpus_episodes_bounds_what_the_tokenizer_reads_of_each_env() -> None:
    from agentgym.rollout.tiny_model import _corpus, chat_template

    template = chat_template("qwen2_5")
    few, more = (_corpus(template, ("memory-sessions-small",), n) for n in (4, 12))
    # A chat a turn (the env moves its window every turn: each shows what the model saw
    # then, the env's replies alone, and the turn), the rest of the corpus the same.
    assert len(more) - len(few) == 8 * 5
    assert few[-1] == more[-1]
    windows = [chat for chat in more if "[next_session] " in chat or "Session 1 of 3" in chat]
    assert len(windows) == 12 * 5
    assert all(chat.count("<|im_start|>assistant") == 1 for chat in windows)  # its turn alone


def test_a_model_for_another_env_has_that_envs_words_as_tokens(tokenizer, tmp_path: Path
                                                               ) -> None:
    """Named in corpus_envs, the memory env's names and values become whole tokens, where
    the calculator-trained tokenizer spells them in pieces."""
    built = build_tiny_model(tmp_path / "memory", corpus_envs=["memory-sessions-small"],
                             vocab_size=2048)
    memory = AutoTokenizer.from_pretrained(built)
    words = [" Carcassonne", " accordion", " Biscuit", " flatmate", " astrophysics"]
    assert all(len(memory.encode(w, add_special_tokens=False)) == 1 for w in words)
    assert all(len(tokenizer.encode(w, add_special_tokens=False)) >= 3 for w in words)
    assert 2048 <= len(memory) <= 2048 + len(SPECIAL + ADDED)
    manifest = json.loads((built / "agentgym_tiny_model.json").read_text())
    assert manifest["corpus_envs"] == ["memory-sessions-small"]
    assert manifest["vocab_size"] == 2048


def test_the_loaded_tokenizer_splits_as_the_trained_one(tokenizer, tiny_model_dir: Path
                                                        ) -> None:
    """transformers loads a qwen2 model's tokenizer with Qwen2's own pre-tokenizer, whatever
    tokenizer.json says: the build's split must be that one, or its merges go unused."""
    from tokenizers import Tokenizer

    saved = Tokenizer.from_file(str(tiny_model_dir / "tokenizer.json"))
    text = ('By the way, my friend Sunita\'s dog is called Pepper.\n'
            '{"name": "answer", "arguments": {"text": "Pepper"}}  12 + 7 = 19\n\n')
    assert tokenizer.encode(text, add_special_tokens=False) == saved.encode(
        text, add_special_tokens=False).ids


def test_tokenizer_special_tokens_are_single_tokens(tokenizer) -> None:
    for token in SPECIAL + ADDED:
        ids = tokenizer.encode(token, add_special_tokens=False)
        assert len(ids) == 1, f"{token} is {len(ids)} tokens"
        assert tokenizer.convert_ids_to_tokens(ids[0]) == token
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.padding_side == "left"
    assert 500 <= len(tokenizer) <= 2000
    # digits one per token, as Qwen splits them: arithmetic stays learnable
    assert [tokenizer.decode([t]) for t in tokenizer.encode("160")] == ["1", "6", "0"]
    hermes = '<tool_call>\n{"name": "submit", "arguments": {"answer": "160"}}\n</tool_call>'
    ids = tokenizer.encode(hermes + "<|im_end|>", add_special_tokens=False)
    assert ids[0] == tokenizer.convert_tokens_to_ids("<tool_call>")
    assert ids[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(ids) == hermes + "<|im_end|>"


def test_chat_template_renders_tools_and_tool_calls(tokenizer, schemas) -> None:
    messages = conversation()
    text = tokenizer.apply_chat_template(
        messages, tools=schemas, add_generation_prompt=True, tokenize=False
    )
    assert '"name": "calculator"' in text.split("\n</tools>")[0], "the tool schemas are listed"
    assert (
        '<|im_start|>assistant\n<tool_call>\n{"name": "calculator", "arguments":'
        ' {"expression": "37 * 4 + 12"}}\n</tool_call><|im_end|>' in text
    )
    assert '{"name": "submit", "arguments": {"answer": "160"}}' in text
    assert "<|im_start|>user\n<tool_response>\n160\n</tool_response><|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")
    ids = tokenizer.apply_chat_template(
        messages, tools=schemas, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    assert tokenizer.decode(ids) == text
    # two in the system prompt's instructions, one per call
    assert ids.count(tokenizer.convert_tokens_to_ids("<tool_call>")) == 4


def test_the_tokenizer_was_trained_on_calculator_text(tokenizer, schemas) -> None:
    task = make_task(12345, "test")
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": task.prompt}], tools=schemas, tokenize=False
    )
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert len(ids) < len(text) / 2.5, "the chat format compresses well"


def test_trl_recognizes_the_chat_template(tokenizer, tiny_model_dir: Path) -> None:
    from trl.chat_template_utils import (
        add_response_schema,
        is_chat_template_prefix_preserving,
        qwen2_5_chat_template,
        supports_tool_calling,
    )

    assert tokenizer.chat_template == qwen2_5_chat_template == chat_template("qwen2_5")
    add_response_schema(tokenizer)  # raises "Unrecognized chat template" otherwise
    assert supports_tool_calling(tokenizer)
    assert is_chat_template_prefix_preserving(tokenizer)
    answer = '<tool_call>\n{"name": "submit", "arguments": {"answer": "160"}}\n</tool_call>'
    parsed = tokenizer.parse_response(answer + "<|im_end|>", prefix="")
    assert parsed["tool_calls"][0]["function"]["name"] == "submit"


def test_model_loads_and_runs(tiny_model_dir: Path, tokenizer) -> None:
    import torch

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    config = model.config
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert config.vocab_size == len(tokenizer)
    assert config.tie_word_embeddings and config.max_position_embeddings >= 4096
    assert config.eos_token_id == tokenizer.eos_token_id
    assert config.pad_token_id == tokenizer.pad_token_id
    assert sum(p.numel() for p in model.parameters()) < 250_000
    assert (tiny_model_dir / "model.safetensors").stat().st_size < 1_000_000
    ids = torch.tensor([tokenizer.encode("What is 2 + 2?")])
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], len(tokenizer))
    assert torch.isfinite(logits).all()


def test_the_vocabulary_does_not_depend_on_what_the_process_imported() -> None:
    """A package lists a submodule as an attribute only once something imported it: the
    prose corpus reads the same in a bare interpreter and in this one (pytest and the suite
    imported json.tool, logging.handlers, unittest.async_case...)."""
    import hashlib
    import json.tool  # noqa: F401
    import logging.handlers  # noqa: F401
    import subprocess
    import sys
    import unittest.async_case  # noqa: F401

    from agentgym.rollout.tiny_model import _corpus, chat_template

    script = ("import hashlib; from agentgym.rollout.tiny_model import _corpus, chat_template;"
              " print(hashlib.sha256('\\0'.join(_corpus(chat_template('qwen2_5')))"
              ".encode()).hexdigest())")
    bare = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True).stdout.strip()
    here = hashlib.sha256("\0".join(_corpus(chat_template("qwen2_5"))).encode()).hexdigest()
    assert here == bare
