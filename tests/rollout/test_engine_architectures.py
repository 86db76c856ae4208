"""The engine on other transformers architectures than the tiny Qwen2: small random models
of each family the engine's slot cache must drive (grouped-query heads, sliding windows with
and without per-layer kinds, heads counted GPT-2's way, multi-query Falcon, DeepSeek's
compressed latent cache, Gemma 2's soft-capped eager attention, mixture of experts) sample
exactly what ``generate`` samples, greedy, over prompts longer than their windows and over a
second turn that reuses the first's cache. Models it cannot drive are refused when the
engine is built, with an error that names the policy to use instead; the static-batch loop
refuses recurrent ones."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the engine needs the train extra")
transformers = pytest.importorskip("transformers", reason="the engine needs the train extra")

from agentgym.core.errors import InvalidArgumentError  # noqa: E402
from agentgym.core.policies import Sampling  # noqa: E402
from agentgym.rollout.engine import Engine, transformers_policy  # noqa: E402
from agentgym.rollout.engine import engine as engine_module  # noqa: E402

VOCAB, PAD, EOS = 1031, 1024, 1026
SMALL = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
             num_attention_heads=4, max_position_embeddings=1024, pad_token_id=PAD,
             eos_token_id=EOS, bos_token_id=1025)
GQA = dict(num_key_value_heads=2)
WINDOW = dict(sliding_window=40)  # shorter than most prompts below

ARCHITECTURES = {
    "llama": GQA,
    "mistral": {**GQA, **WINDOW},  # one window for every layer, no per-layer kinds
    "starcoder2": {**GQA, **WINDOW},
    "gemma3_text": {**GQA, **WINDOW, "head_dim": 16},  # sliding and full layers
    "gpt2": dict(n_embd=64, n_layer=4, n_head=4, n_positions=1024),
    "falcon": dict(multi_query=True),
    "deepseek_v3": dict(num_key_value_heads=4, kv_lora_rank=32, q_lora_rank=32,
                        qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
                        n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                        first_k_dense_replace=1, n_group=1, topk_group=1),
    "gemma2": {**GQA, **WINDOW, "head_dim": 16},  # eager only: soft-capped attention
    "qwen3_moe": {**GQA, "head_dim": 16, "num_experts": 4, "num_experts_per_tok": 2,
                  "moe_intermediate_size": 32},
}


def small_model(family: str, **overrides):
    config = transformers.AutoConfig.for_model(family, **SMALL, **overrides)
    torch.manual_seed(0)
    try:
        model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    except ValueError:  # a family without an sdpa implementation
        model = transformers.AutoModelForCausalLM.from_config(config,
                                                              attn_implementation="eager")
    return model.eval()


def requests(seed: int = 0) -> list[tuple[list[int], Sampling]]:
    rng = random.Random(seed)
    shared = [rng.randrange(1000) for _ in range(120)]
    out = []
    for i in range(10):
        length = rng.randrange(3, 120)
        prompt = shared[:length] if i % 3 == 0 else [rng.randrange(1000) for _ in range(length)]
        out.append((prompt, Sampling(max_tokens=rng.randrange(1, 30), temperature=0)))
    return out


def generated(model, prompt: list[int], budget: int) -> list[int]:
    with torch.inference_mode():
        out = model.generate(input_ids=torch.tensor([prompt]), max_new_tokens=budget,
                             do_sample=False, eos_token_id=EOS, pad_token_id=PAD)
    return out[0, len(prompt):].tolist()


def played(engine: Engine, batch: list[tuple[list[int], Sampling]]) -> list[list[int]]:
    async def main():
        return await asyncio.gather(*(engine.generate(p, s) for p, s in batch))

    return [g.token_ids for g in asyncio.run(main())]


@pytest.mark.parametrize("family", sorted(ARCHITECTURES))
def test_greedy_outputs_equal_generate(family: str, tiny_model_dir: Path) -> None:
    model = small_model(family, **ARCHITECTURES[family])
    engine = Engine(model, tokenizer=str(tiny_model_dir), slots=4, max_len=256,
                    prefill_chunk=48, stop_token_ids=[EOS])
    try:
        first = requests()
        tokens = played(engine, first)
        assert tokens == [generated(model, p, s.max_tokens) for p, s in first]
        # The next turn: each prompt grows by its answer and a reply, and joins a slot
        # that holds its start.
        second = [(p + t + [5, 6, 7], s) for (p, s), t in zip(first, tokens, strict=True)]
        assert played(engine, second) == [generated(model, p, s.max_tokens) for p, s in second]
        assert engine.reused_tokens > 0
    finally:
        engine.close()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("family", ["mistral", "gemma3_text", "deepseek_v3", "gpt2"])
def test_cuda_graphs_replay_the_eager_tokens_on_other_architectures(
        family: str, tiny_model_dir: Path) -> None:
    """On a GPU: the cache layers allocated at their first write (inside the warm-up before
    a capture), sliding windows and MLA's latent cache, replayed from CUDA graphs, sample
    what the same engine samples without graphs."""
    model = small_model(family, **ARCHITECTURES[family]).to("cuda")
    engines = [Engine(model, tokenizer=str(tiny_model_dir), slots=4, max_len=256,
                      prefill_chunk=48, stop_token_ids=[EOS], cuda_graphs=graphs)
               for graphs in (False, True)]
    try:
        eager, graphed = (played(engine, requests()) for engine in engines)
        assert engines[1].graphs is not None and engines[1].graphs.error is None
        assert engines[1].graphs.captures >= 2
    finally:
        for engine in engines:
            engine.close()
    assert graphed == eager


@pytest.mark.parametrize("family,overrides,kind", [
    ("qwen3_next", dict(**GQA, head_dim=16), "linear_attention"),
    ("recurrent_gemma", dict(num_key_value_heads=4), "linear_attention"),
])
def test_a_model_with_layers_it_cannot_drive_is_refused(family, overrides, kind,
                                                        tiny_model_dir: Path) -> None:
    model = small_model(family, **overrides)
    with pytest.raises(InvalidArgumentError, match=f"{kind}.*hf-static"):
        Engine(model, tokenizer=str(tiny_model_dir), stop_token_ids=[EOS])


def test_a_model_whose_attention_fails_in_the_slot_cache_is_refused(
        tiny_model_dir: Path) -> None:
    model = small_model("bloom", n_head=4, n_layer=4)  # ALiBi, and its own cache layout
    with pytest.raises(InvalidArgumentError, match=r"cannot run BloomForCausalLM.*hf-static"):
        Engine(model, tokenizer=str(tiny_model_dir), stop_token_ids=[EOS])


def test_a_model_the_engine_would_get_wrong_is_refused(tiny_model_dir: Path,
                                                       monkeypatch) -> None:
    """The check compares the engine's logits with the model's own: masks that are wrong
    (here a sliding window of 3 positions the model does not have) are found when the
    engine is built, not in the tokens it samples."""
    monkeypatch.setattr(engine_module, "_attention_kinds",
                        lambda config: (["full_attention"], {"full_attention": 3}))
    with pytest.raises(InvalidArgumentError, match=r"does not reproduce.*hf-static"):
        Engine(str(tiny_model_dir))


def test_the_static_loop_refuses_a_recurrent_model(tiny_model_dir: Path) -> None:
    """Mamba's state would run through the loop's left padding (7 of 12 of its greedy
    completions equal generate's when it was let through): refused, naming vLLM."""
    from agentgym.core.errors import AgentGymError
    from agentgym.rollout.policies.hf import HFPolicy

    model = small_model("mamba")
    with pytest.raises(InvalidArgumentError, match=r"linear_attention.*vLLM"):
        Engine(model, tokenizer=str(tiny_model_dir), stop_token_ids=[EOS])
    loop = HFPolicy(model, tokenizer=str(tiny_model_dir), stop_token_ids=[EOS])
    with pytest.raises(AgentGymError, match=r"recurrent state.*vLLM"):
        played(loop, requests()[:2])


def test_the_trainers_sample_a_model_the_engine_refuses_with_the_static_loop(
        tiny_model_dir: Path) -> None:
    """What training and evaluation build (``transformers_policy``, and ``hf:PATH``): the
    engine, or for a model it cannot drive the static-batch loop, with a warning; Qwen3-Next
    (linear-attention layers) samples what generate samples."""
    from agentgym.rollout.policies.hf import HFPolicy

    model = small_model("qwen3_next", **GQA, head_dim=16)
    with pytest.warns(UserWarning, match="linear_attention.*static-batch loop"):
        policy = transformers_policy(model, tokenizer=str(tiny_model_dir), slots=4)
    assert isinstance(policy, HFPolicy)
    batch = requests()[:4]
    assert played(policy, batch) == [generated(model, p, s.max_tokens) for p, s in batch]
    assert isinstance(transformers_policy(small_model("llama", **GQA),
                                          tokenizer=str(tiny_model_dir)), Engine)
