"""HFPolicy on the real tiny model: the Generation contract, batching, seeds, weights."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="HFPolicy needs the train extra")
pytest.importorskip("transformers", reason="HFPolicy needs the train extra")

from agentgym.core.errors import AgentGymError, MissingResourceError  # noqa: E402
from agentgym.core.policies import Generation, Sampling, TokenPolicy  # noqa: E402
from agentgym.rollout.policies.hf import HFPolicy, hf_policy  # noqa: E402


@pytest.fixture(scope="module")
def policy(tiny_model_dir: Path) -> HFPolicy:
    return hf_policy(str(tiny_model_dir))


@pytest.fixture(scope="module")
def prompt(policy: HFPolicy) -> list[int]:
    messages = [
        {"role": "system", "content": "Use the calculator tool, then submit the result."},
        {"role": "user", "content": "What is 37 * 4 + 12?"},
    ]
    return policy.tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=False
    )


def run(*calls):
    """Run generate calls concurrently on a fresh event loop."""

    async def main():
        return await asyncio.gather(*calls)

    return asyncio.run(main())


def check(generation: Generation, sampling: Sampling, stops: frozenset[int]) -> None:
    """The Generation contract."""
    ids, logprobs = generation.token_ids, generation.logprobs
    assert logprobs is not None and len(logprobs) == len(ids) >= 1
    assert all(lp <= 0 and math.isfinite(lp) for lp in logprobs)
    assert len(ids) <= sampling.max_tokens
    assert not stops & set(ids[:-1]), "nothing follows the first stop token"
    if generation.finish_reason == "stop":
        assert ids[-1] in stops
    else:
        assert generation.finish_reason == "length"
        assert len(ids) == sampling.max_tokens and ids[-1] not in stops


def first_new_token(ids: list[int], start: int) -> int:
    """The index of the first token at or after ``start`` that did not occur before it."""
    return next(i for i in range(start, len(ids)) if ids[i] not in ids[:i])


def test_is_a_token_policy(policy: HFPolicy) -> None:
    assert isinstance(policy, TokenPolicy)
    assert policy.stop_token_ids == {policy.tokenizer.convert_tokens_to_ids("<|im_end|>")}
    assert policy.pad_token_id == policy.tokenizer.pad_token_id


def test_generation_contract(policy: HFPolicy, prompt: list[int]) -> None:
    samplings = [
        Sampling(max_tokens=1),
        Sampling(max_tokens=7, temperature=0),
        Sampling(max_tokens=16, temperature=0.7, top_p=0.9, seed=3),
        Sampling(max_tokens=32, temperature=1.5),
    ]
    results = run(*(policy.generate(prompt, s) for s in samplings))
    for result, sampling in zip(results, samplings, strict=True):
        check(result, sampling, policy.stop_token_ids)
    # the greedy and the seeded requests are known not to stop early on this model
    assert [len(r.token_ids) for r in results[:3]] == [1, 7, 16]


def test_greedy_is_deterministic_alone_and_in_a_batch(policy: HFPolicy, prompt: list[int]) -> None:
    greedy = Sampling(max_tokens=12, temperature=0)
    (alone,) = run(policy.generate(prompt, greedy))
    (again,) = run(policy.generate(prompt, greedy))
    assert alone.token_ids == again.token_ids and alone.logprobs == again.logprobs
    # in a batch, left-padded beside a longer prompt and a sampled request
    batched, _ = run(
        policy.generate(prompt, greedy),
        policy.generate([*prompt, *prompt], Sampling(max_tokens=20)),
    )
    assert batched.token_ids == alone.token_ids
    assert batched.logprobs == pytest.approx(alone.logprobs, abs=1e-4)


def forward(policy: HFPolicy, ids: list[int]) -> torch.Tensor:
    """The logits of one forward pass over ``ids``, on the CPU (the model may be on a GPU)."""
    return policy.model(torch.tensor([ids], device=policy.device)).logits[0].cpu()


def test_logprobs_are_those_a_trainer_computes(policy: HFPolicy, prompt: list[int]) -> None:
    """The log-softmax of logits / temperature at each sampled token, from one forward pass
    over prompt + completion (with top_p=1, the sampling distribution)."""
    for temperature in (1.0, 0.7):
        sampling = Sampling(max_tokens=12, temperature=temperature, seed=5)
        (result,) = run(policy.generate(prompt, sampling))
        with torch.no_grad():
            logits = forward(policy, prompt + result.token_ids)
        scored = logits[len(prompt) - 1 : -1].float() / temperature
        expected = scored.log_softmax(-1).gather(-1, torch.tensor(result.token_ids)[:, None])
        assert result.logprobs == pytest.approx(expected.squeeze(-1).tolist(), abs=1e-4)


def test_top_p_logprobs_are_renormalised_over_the_nucleus(
    policy: HFPolicy, prompt: list[int]
) -> None:
    top_p = 0.3
    sampling = Sampling(max_tokens=10, temperature=1.0, top_p=top_p, seed=9)
    (result,) = run(policy.generate(prompt, sampling))
    with torch.no_grad():
        logits = forward(policy, prompt + result.token_ids)
    logp = logits[len(prompt) - 1 : -1].float().log_softmax(-1)
    for position, (token, got) in enumerate(zip(result.token_ids, result.logprobs, strict=True)):
        probs = logp[position].exp().sort(descending=True).values
        kept = probs[(probs.cumsum(0) - probs) < top_p]  # the smallest set holding top_p
        assert logp[position, token] >= math.log(kept[-1]) - 1e-5, "sampled inside the nucleus"
        expected = logp[position, token] - kept.sum().log()
        assert got == pytest.approx(expected.item(), abs=1e-4)


def test_seeds_make_sampling_reproducible(policy: HFPolicy, prompt: list[int]) -> None:
    seeded = Sampling(max_tokens=16, temperature=1.0, seed=42)
    (first,) = run(policy.generate(prompt, seeded))
    (second,) = run(policy.generate(prompt, seeded))
    assert first.token_ids == second.token_ids and first.logprobs == second.logprobs
    (other,) = run(policy.generate(prompt, Sampling(max_tokens=16, temperature=1.0, seed=43)))
    assert other.token_ids != first.token_ids
    # a seeded request draws from its own generator, whatever else shares the batch
    same_shape, _ = run(
        policy.generate(prompt, seeded),
        policy.generate(prompt, Sampling(max_tokens=30, temperature=1.0)),
    )
    twin, _ = run(
        policy.generate(prompt, seeded),
        policy.generate(prompt, Sampling(max_tokens=5, temperature=1.0, seed=7)),
    )
    assert same_shape.token_ids == twin.token_ids


def test_stops_at_and_keeps_the_first_stop_token(policy: HFPolicy, prompt: list[int]) -> None:
    """The random model rarely samples <|im_end|>; make a token it does sample the stop."""
    seeded = Sampling(max_tokens=24, temperature=1.0, seed=11)
    (free,) = run(policy.generate(prompt, seeded))
    k = first_new_token(free.token_ids, 4)
    stop = free.token_ids[k]
    stopping = HFPolicy(policy.model, tokenizer=policy.tokenizer, stop_token_ids=[stop])
    (stopped,) = run(stopping.generate(prompt, seeded))
    assert stopped.finish_reason == "stop"
    assert stopped.token_ids == free.token_ids[: k + 1]
    assert stopped.logprobs == free.logprobs[: k + 1]
    check(stopped, seeded, stopping.stop_token_ids)
    text = policy.tokenizer.decode(prompt + stopped.token_ids)
    assert text.endswith(policy.tokenizer.decode([stop]))

    # in a batch: rows that stop early leave; the others run to their own max_tokens
    samplings = [seeded, Sampling(max_tokens=3), Sampling(max_tokens=40, temperature=0)]
    results = run(*(stopping.generate(prompt, s) for s in samplings))
    assert results[0].token_ids == stopped.token_ids
    for result, sampling in zip(results, samplings, strict=True):
        check(result, sampling, stopping.stop_token_ids)


def test_decoded_completion_continues_the_prompt(policy: HFPolicy, prompt: list[int]) -> None:
    (result,) = run(policy.generate(prompt, Sampling(max_tokens=16, temperature=0)))
    tokenizer = policy.tokenizer
    completion = tokenizer.decode(result.token_ids)
    assert tokenizer.decode(prompt + result.token_ids) == tokenizer.decode(prompt) + completion
    assert completion == "".join(tokenizer.decode([t]) for t in result.token_ids)


def test_concurrent_requests_share_forward_passes(policy: HFPolicy, prompt: list[int]) -> None:
    before_batches, before_served = policy.batches_run, policy.requests_served
    samplings = [Sampling(max_tokens=4 + i, temperature=0 if i % 2 else 1.0) for i in range(8)]
    prompts = [prompt[: len(prompt) - i] for i in range(8)]  # ragged: left padding matters
    results = run(*(policy.generate(p, s) for p, s in zip(prompts, samplings, strict=True)))
    assert policy.requests_served - before_served == 8
    assert policy.batches_run - before_batches < 8
    for result, sampling in zip(results, samplings, strict=True):
        check(result, sampling, policy.stop_token_ids)
        assert result.metrics["batch_size"] > 1
    # each greedy row matches the same request run alone
    for i in (1, 3, 5, 7):
        (alone,) = run(policy.generate(prompts[i], samplings[i]))
        assert alone.token_ids == results[i].token_ids


def test_max_batch_size_splits_batches(tiny_model_dir: Path, prompt: list[int]) -> None:
    small = HFPolicy(str(tiny_model_dir), max_batch_size=3, batch_wait_ms=0)
    results = run(*(small.generate(prompt, Sampling(max_tokens=3)) for _ in range(7)))
    assert small.batches_run == 3 and small.requests_served == 7
    assert max(r.metrics["batch_size"] for r in results) == 3


def test_weights_are_shared_and_updatable(tiny_model_dir: Path, prompt: list[int]) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    shared = HFPolicy(model)  # the tokenizer comes from the folder the model was loaded from
    greedy = Sampling(max_tokens=4, temperature=0)
    (before,) = run(shared.generate(prompt, greedy))

    # zero weights: uniform logits, so greedy picks token 0 at probability 1/vocab
    zeros = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    shared.update_weights(zeros)
    (after,) = run(shared.generate(prompt, greedy))
    assert after.token_ids == [0, 0, 0, 0]
    assert after.logprobs == pytest.approx([-math.log(len(shared.tokenizer))] * 4, abs=1e-5)

    # a trainer changing the shared model in place is seen by the next batch
    fresh = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        for name, value in fresh.state_dict().items():
            model.state_dict()[name].copy_(value)
    (restored,) = run(shared.generate(prompt, greedy))
    assert restored.token_ids == before.token_ids

    # a model mid-training: sampling runs in eval mode (gradient checkpointing would turn
    # the KV cache off in train mode), then the train mode comes back
    (
        getattr(model, "activation_checkpointing_enable", None)
        or model.gradient_checkpointing_enable
    )()
    model.train()
    (training,) = run(shared.generate(prompt, greedy))
    assert training.token_ids == before.token_ids
    assert model.training


def test_bad_prompts_name_the_problem(policy: HFPolicy) -> None:
    with pytest.raises(ValueError, match="prompt_ids is empty"):
        run(policy.generate([], Sampling()))
    with pytest.raises(ValueError, match=r"token id 99999 is outside the model's vocabulary"):
        run(policy.generate([1, 99999], Sampling()))


def test_hf_spec_errors_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(MissingResourceError, match=str(missing)):
        hf_policy(str(missing))
    with pytest.raises(MissingResourceError, match=r"has no config\.json"):
        hf_policy(str(tmp_path))
    with pytest.raises(AgentGymError, match="hf-static:PATH"):
        hf_policy(None)
    with pytest.raises(TypeError, match="causal LM"):
        HFPolicy(object())


def test_vllm_policy_without_vllm_says_how_to_get_it() -> None:
    """vLLM cannot run here (no GPU); its policy must fail with the install line."""
    pytest.importorskip("agentgym.rollout.policies.vllm")
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vllm is installed: the missing-vllm error cannot be triggered")
    from agentgym.rollout.policies.vllm import vllm_policy

    with pytest.raises(MissingResourceError, match=r"pip install 'agentgym\[vllm\]'.*GPU"):
        vllm_policy("Qwen/Qwen2.5-0.5B-Instruct")
    with pytest.raises(AgentGymError, match="vllm:"):
        vllm_policy(None)


def test_factories_load_from_spec_strings(tiny_model_dir: Path) -> None:
    """What the ``policies`` plugin registers: ``Spec(id, "module:factory")``, built with
    the text after ``hf:`` / ``openai:`` / ``vllm:``."""
    from agentgym.core.plugins import plugin_host
    from agentgym.core.policies import build_policy
    from agentgym.rollout.engine import Engine

    built = build_policy(f"hf:{tiny_model_dir}")
    assert isinstance(built, Engine) and isinstance(built, TokenPolicy)
    built.close()
    static = build_policy(f"hf-static:{tiny_model_dir}")
    assert isinstance(static, HFPolicy) and isinstance(static, TokenPolicy)
    for name in ("openai", "vllm"):
        assert callable(plugin_host().get("policies", name).load())
