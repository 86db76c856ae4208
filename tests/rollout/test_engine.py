"""The continuous-batching engine on the real tiny model: the same tokens as HFPolicy,
slots that are reused, prefixes kept across turns, weights that land between steps, and
bad requests refused alone. Tests marked with ``overlap`` run both ways: each decode step
read back before the next (a CPU's default) and the next sent first (a GPU's), which on a
CPU runs the same bookkeeping in the same order as on a GPU."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the engine needs the train extra")
pytest.importorskip("transformers", reason="the engine needs the train extra")

from agentgym.core.errors import InvalidArgumentError  # noqa: E402
from agentgym.core.policies import Sampling, TokenPolicy  # noqa: E402
from agentgym.rollout.engine import Engine, EngineError  # noqa: E402
from agentgym.rollout.engine import engine as engine_module  # noqa: E402
from agentgym.rollout.policies.hf import HFPolicy  # noqa: E402

GREEDY = Sampling(max_tokens=24, temperature=0)


def run(*calls):
    async def main():
        return await asyncio.gather(*calls, return_exceptions=True)

    return asyncio.run(main())


OVERLAP = pytest.mark.parametrize("overlap", [False, True], ids=["read-each-step", "overlap"])


@pytest.fixture(scope="module", params=[False, True], ids=["read-each-step", "overlap"])
def engine(tiny_model_dir: Path, request: pytest.FixtureRequest) -> Engine:
    engine = Engine(str(tiny_model_dir), slots=8, max_len=512, prefill_chunk=64,
                    overlap=request.param)
    yield engine
    engine.close()


def mixed_requests(vocab: int, count: int, seed: int = 0) -> list[tuple[list[int], Sampling]]:
    """``count`` prompts of 3-150 tokens and budgets of 1-40 tokens, some sharing prefixes."""
    rng = random.Random(seed)
    base = [rng.randrange(vocab) for _ in range(150)]
    requests = []
    for i in range(count):
        length = rng.randrange(3, 150)
        prompt = base[:length] if i % 3 == 0 else [rng.randrange(vocab) for _ in range(length)]
        requests.append((prompt, Sampling(max_tokens=rng.randrange(1, 41), temperature=0)))
    return requests


def test_it_keeps_the_token_policy_contract(engine: Engine) -> None:
    assert isinstance(engine, TokenPolicy)
    (generation,) = run(engine.generate([1, 2, 3], GREEDY))
    assert len(generation.token_ids) == len(generation.logprobs) >= 1
    assert generation.finish_reason in ("stop", "length")
    assert all(lp <= 0 for lp in generation.logprobs)


@OVERLAP
def test_greedy_outputs_equal_hfpolicy_for_64_concurrent_mixed_requests(
        tiny_model_dir: Path, overlap: bool) -> None:
    """64 requests on 16 slots, so that requests join as others leave."""
    engine = Engine(str(tiny_model_dir), slots=16, max_len=256, prefill_chunk=100,
                    overlap=overlap)
    reference = HFPolicy(str(tiny_model_dir), max_batch_size=64)
    try:
        requests = mixed_requests(engine.local.vocab_size, 64)
        ours = run(*(engine.generate(p, s) for p, s in requests))
        theirs = run(*(reference.generate(p, s) for p, s in requests))
    finally:
        engine.close()
    assert reference.batches_run == 1
    for (prompt, sampling), a, b in zip(requests, ours, theirs, strict=True):
        assert a.token_ids == b.token_ids, (len(prompt), sampling)
        assert a.finish_reason == b.finish_reason
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
    assert engine.requests_served == 64
    # Continuous batching: far fewer decode steps than tokens, more than one batch's worth.
    longest = max(s.max_tokens for _, s in requests)
    assert longest <= engine.steps_run < sum(len(g.token_ids) for g in ours) / 4
    # A request's first token comes from its prefill; the rest from decode steps.
    assert engine.decode_tokens == sum(len(g.token_ids) for g in ours) - 64
    assert engine.busy_s > 0


@OVERLAP
def test_slots_are_reused_for_more_requests_than_slots(tiny_model_dir: Path,
                                                       overlap: bool) -> None:
    engine = Engine(str(tiny_model_dir), slots=2, max_len=128, overlap=overlap)
    seen = []
    original = engine._launch

    def counting(requests, ahead):
        seen.append(len(requests))
        return original(requests, ahead)

    engine._launch = counting
    try:
        requests = mixed_requests(engine.local.vocab_size, 9, seed=1)
        results = run(*(engine.generate(p[:60], s) for p, s in requests))
    finally:
        engine.close()
    assert all(len(g.token_ids) >= 1 for g in results)
    assert max(seen) == 2 and engine.requests_served == 9


def test_the_next_turn_reuses_the_previous_turns_cache(engine: Engine,
                                                       tiny_model_dir: Path) -> None:
    prompt = list(range(5, 105))
    (first,) = run(engine.generate(prompt, GREEDY))
    follow_up = prompt + first.token_ids + [7, 8, 9]
    before = engine.reused_tokens
    (second,) = run(engine.generate(follow_up, GREEDY))
    assert second.metrics["reused_tokens"] >= len(prompt)
    assert engine.reused_tokens - before == second.metrics["reused_tokens"]
    fresh = Engine(str(tiny_model_dir), slots=1, max_len=512)
    try:
        (again,) = run(fresh.generate(follow_up, GREEDY))
    finally:
        fresh.close()
    assert again.token_ids == second.token_ids
    assert again.metrics["reused_tokens"] == 0


@OVERLAP
def test_a_weight_update_changes_the_next_tokens(tiny_model_dir: Path, overlap: bool) -> None:
    engine = Engine(str(tiny_model_dir), slots=4, max_len=256, overlap=overlap)
    try:
        prompt = list(range(10, 60))
        (before,) = run(engine.generate(prompt, GREEDY))
        original = {k: v.clone() for k, v in engine.model.state_dict().items()}
        generator = torch.Generator().manual_seed(0)
        engine.update_weights({k: v + 0.5 * torch.randn(v.shape, generator=generator)
                               .to(v.device) for k, v in original.items()})
        (after,) = run(engine.generate(prompt, GREEDY))
        engine.update_weights(original)
        (back,) = run(engine.generate(prompt, GREEDY))
    finally:
        engine.close()
    assert after.token_ids != before.token_ids
    assert back.token_ids == before.token_ids


def test_a_training_model_samples_in_eval_mode_and_gets_its_mode_back(
        tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trainer's model in train mode, with dropout: the engine samples without dropout
    (greedy tokens equal an eval-mode model's), and every module, one added after the
    engine's first steps too (an adapter), is back in train mode afterwards."""
    monkeypatch.setattr(engine_module, "IDLE_EXIT_S", 0.1)
    model = HFPolicy(str(tiny_model_dir)).model
    reference = Engine(str(tiny_model_dir), slots=2, max_len=256)
    engine = Engine(model, slots=2, max_len=256)
    seen: list[bool] = []
    try:
        prompt = list(range(10, 60))
        (expected,) = run(reference.generate(prompt, GREEDY))
        model.train()
        (first,) = run(engine.generate(prompt, GREEDY))
        engine._thread.join()  # the thread ends when idle, so the next request starts one
        # A module added after the engine's first steps: the next busy period switches it.
        added = torch.nn.Dropout(0.5)
        added.register_forward_pre_hook(lambda module, args: seen.append(module.training))
        model.model.layers[0].add_module("adapter_dropout", added)
        for layer in model.model.layers:
            layer.self_attn.attention_dropout = 0.9  # would change the tokens if it ran
        model.model.layers[0].mlp.register_forward_hook(lambda m, args, out: added(out))
        (second,) = run(engine.generate(prompt, GREEDY))
    finally:
        engine.close()
        reference.close()
    assert first.token_ids == second.token_ids == expected.token_ids
    assert seen and not any(seen)
    assert all(module.training for module in model.modules())


def test_a_request_that_cannot_fit_is_refused_alone(engine: Engine) -> None:
    good = [1, 2, 3, 4]
    results = run(engine.generate(good, GREEDY),
                  engine.generate(list(range(500)), GREEDY),
                  engine.generate([engine.local.vocab_size + 5], GREEDY),
                  engine.generate(good, Sampling(max_tokens=600, temperature=0)),
                  engine.generate(good, GREEDY))
    assert results[0].token_ids == results[4].token_ids
    assert isinstance(results[1], InvalidArgumentError) and "511 positions" in str(results[1])
    assert isinstance(results[2], InvalidArgumentError) and "vocabulary" in str(results[2])
    assert isinstance(results[3], InvalidArgumentError) and "max_tokens=600" in str(results[3])


def test_the_same_seed_draws_the_same_tokens(engine: Engine) -> None:
    seeded = Sampling(max_tokens=20, temperature=1.0, top_p=0.9, seed=11)
    prompt = list(range(3, 40))
    alone = run(engine.generate(prompt, seeded))[0]
    crowded = run(*(engine.generate(prompt, seeded) for _ in range(3)),
                  engine.generate(prompt, Sampling(max_tokens=20, temperature=1.0)))
    assert all(g.token_ids == alone.token_ids for g in crowded[:3])


@OVERLAP
def test_a_cancelled_request_frees_its_slot(tiny_model_dir: Path, overlap: bool) -> None:
    engine = Engine(str(tiny_model_dir), slots=1, max_len=256, overlap=overlap)

    async def main():
        long = asyncio.ensure_future(engine.generate([1, 2, 3], Sampling(max_tokens=200,
                                                                          temperature=0)))
        await asyncio.sleep(0.05)
        long.cancel()
        return await asyncio.wait_for(engine.generate([4, 5, 6], GREEDY), 60)

    try:
        generation = asyncio.run(main())
    finally:
        engine.close()
    assert len(generation.token_ids) >= 1


def test_out_of_memory_ends_that_step_and_the_engine_serves_smaller_batches(
        tiny_model_dir: Path) -> None:
    # Eager decode steps: a replayed CUDA graph runs no forward pass that could raise.
    engine = Engine(str(tiny_model_dir), slots=4, max_len=128, cuda_graphs=False)
    forward = engine.local.model.forward
    calls = {"n": 0}

    def failing_once(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 6:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return forward(*args, **kwargs)

    engine.local.model.forward = failing_once
    try:
        first = run(*(engine.generate([i + 1, 2, 3], GREEDY) for i in range(4)))
        second = run(*(engine.generate([i + 1, 2, 3], GREEDY) for i in range(4)))
    finally:
        engine.close()
    failed = [r for r in first if isinstance(r, EngineError)]
    assert failed and "out of memory" in str(failed[0]) and "at most" in str(failed[0])
    assert engine.max_running < 4
    assert all(not isinstance(r, Exception) for r in second)


def test_close_fails_what_is_left_and_refuses_more(tiny_model_dir: Path) -> None:
    engine = Engine(str(tiny_model_dir), slots=1, max_len=512)
    engine.close()
    (result,) = run(engine.generate([1, 2, 3], GREEDY))
    assert isinstance(result, EngineError) and "closed" in str(result)


def test_closing_lets_the_cache_go(tiny_model_dir: Path) -> None:
    engine = Engine(str(tiny_model_dir), slots=2, max_len=128)
    (generation,) = run(engine.generate([1, 2, 3], GREEDY))
    assert generation.token_ids and engine._cache is not None
    engine.close()
    assert engine._cache is None and engine.graphs is None


def test_sampling_flags_unusable_logits_and_never_draws_from_them() -> None:
    from agentgym.rollout.engine.sampling import sample_tokens

    logits = torch.randn(4, 50)
    logits[1, 7] = float("nan")
    logits[2, 3] = float("inf")
    logits[3] = float("-inf")
    sampled = Sampling(max_tokens=4, temperature=1.0, top_p=0.9)
    # Drawing from NaN probabilities raises here, and is a device-side assert on a GPU.
    picked, logprobs, usable = sample_tokens(
        logits, torch.ones(4), torch.full((4,), 0.9), [sampled] * 4, [None] * 4)
    assert usable.tolist() == [True, False, False, False]
    assert 0 <= int(picked[0]) < 50 and float(logprobs[0]) <= 0
    # -inf for some tokens is a model masking them, not a fault.
    logits = torch.randn(2, 50)
    logits[:, :10] = float("-inf")
    picked, _, usable = sample_tokens(logits, torch.ones(2), torch.ones(2),
                                      [Sampling(max_tokens=4, temperature=1.0)] * 2, [None] * 2)
    assert usable.all() and (picked >= 10).all()


def test_sampling_draws_from_the_distribution_it_reports() -> None:
    """Each row's token follows softmax(logits / temperature) cut to the nucleus: the counts
    of 6,000 rows match the probabilities, no cut token is ever drawn, a row's own seed
    repeats its draw, and the log-probability returned is the drawn token's."""
    from agentgym.rollout.engine.sampling import sample_tokens

    torch.manual_seed(0)
    rows, logits = 6000, torch.tensor([2.0, 1.0, 0.0, -1.0, -30.0])
    batch = logits.repeat(rows, 1)
    for temperature, top_p in ((1.0, 1.0), (0.5, 1.0), (1.0, 0.8)):
        sampling = Sampling(max_tokens=4, temperature=temperature, top_p=top_p)
        picked, logprobs, _ = sample_tokens(batch, torch.full((rows,), temperature),
                                            torch.full((rows,), top_p), [sampling] * rows,
                                            [None] * rows)
        expected = (logits / temperature).softmax(-1)
        if top_p < 1:  # the tokens ranked after top_p of the mass is reached are cut
            expected[(expected.cumsum(-1) - expected) >= top_p] = 0
            expected /= expected.sum()
        counts = torch.bincount(picked, minlength=5).double() / rows
        assert (counts - expected).abs().max() < 0.02, (temperature, top_p, counts, expected)
        assert counts[expected == 0].sum() == 0
        assert torch.allclose(logprobs, expected.log()[picked].float(), atol=1e-5)
    # greedy rows beside sampled ones take the argmax; the sampled ones still vary
    mixed = [Sampling(max_tokens=4, temperature=float(i % 2)) for i in range(200)]
    picked, _, _ = sample_tokens(batch[:200], torch.tensor([s.temperature for s in mixed]),
                                 torch.ones(200), mixed, [None] * 200)
    assert picked[::2].eq(0).all() and len(set(picked[1::2].tolist())) > 1
    seeded = Sampling(max_tokens=4, temperature=1.0, seed=3)
    draws = [sample_tokens(batch[:8], torch.ones(8), torch.ones(8), [seeded] * 8,
                           [torch.Generator().manual_seed(3 + i) for i in range(8)])[0]
             for _ in range(2)]
    assert torch.equal(*draws) and len(set(draws[0].tolist())) > 1


@OVERLAP
def test_a_request_whose_logits_go_bad_fails_alone(tiny_model_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   overlap: bool) -> None:
    """NaN logits in one row (bad weights, an overflow) end that request with a clear error;
    the others decode on."""
    engine = Engine(str(tiny_model_dir), slots=4, max_len=128, overlap=overlap)
    poison = 7
    run_pass = engine._run

    def poisoned(input_ids, positions, rows, window):
        logits = run_pass(input_ids, positions, rows, window)
        return torch.where((input_ids[:, -1] == poison)[:, None],
                           torch.full_like(logits, float("nan")), logits)

    monkeypatch.setattr(engine, "_run", poisoned)
    try:
        sampling = Sampling(max_tokens=8, temperature=1.0, seed=1)
        bad, good = run(engine.generate([5, 6, poison], sampling),
                        engine.generate([5, 6, 8], sampling))
    finally:
        engine.close()
    assert isinstance(bad, EngineError) and "not usable (NaN" in str(bad)
    assert not isinstance(good, Exception) and len(good.token_ids) >= 1


@pytest.mark.slow
def test_a_compiled_engine_decodes_the_eager_tokens(tiny_model_dir: Path) -> None:
    """compile=True (torch.compile of the decode passes) changes no greedy token, and
    compiles a bounded number of graphs, not one per step's shapes."""
    import shutil

    if not (shutil.which("cc") or shutil.which("gcc")):  # scripts/setup.sh installs gcc
        pytest.skip("torch.compile on a CPU needs a C compiler (gcc: scripts/setup.sh"
                    " installs it); none is installed")
    dynamo = pytest.importorskip("torch._dynamo.utils", reason="torch.compile")
    requests = mixed_requests(1000, 16, seed=4)
    outputs = []
    for compiled in (False, True):
        engine = Engine(str(tiny_model_dir), slots=8, max_len=256, compile=compiled)
        try:
            before = dynamo.counters["stats"]["unique_graphs"]
            outputs.append(run(*(engine.generate(p, s) for p, s in requests)))
            graphs = dynamo.counters["stats"]["unique_graphs"] - before
        finally:
            engine.close()
    assert [g.token_ids for g in outputs[0]] == [g.token_ids for g in outputs[1]]
    assert 1 <= graphs <= 4
