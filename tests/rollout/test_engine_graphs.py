"""The engine's bucketed steps (what its CUDA graphs replay: decode and prefill) give the
tokens of the eager ones; a Llama-family model (one kind of attention layer: SmolLM2's)
decodes too; on a GPU the graphs are really captured and replayed (those tests skip on a
CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the engine needs the train extra")
pytest.importorskip("transformers", reason="the engine needs the train extra")

from agentgym.core.errors import InvalidArgumentError  # noqa: E402
from agentgym.rollout.engine import Engine, EngineError  # noqa: E402
from agentgym.rollout.engine.graphs import MAX_GRAPH_TOKENS, StepGraphs  # noqa: E402
from agentgym.rollout.policies.hf import HFPolicy  # noqa: E402

from .test_engine import mixed_requests, run  # noqa: E402

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def llama_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer Llama (SmolLM2's architecture) on the tiny model's tokenizer, with weights
    large enough that greedy decoding does not repeat one token."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, tie_word_embeddings=True,
                         initializer_range=0.3, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def same_tokens(engine: Engine, reference: HFPolicy, count: int, seed: int = 0) -> None:
    requests = mixed_requests(engine.local.vocab_size, count, seed=seed)
    ours = run(*(engine.generate(p, s) for p, s in requests))
    theirs = run(*(reference.generate(p, s) for p, s in requests))
    for (prompt, sampling), a, b in zip(requests, ours, theirs, strict=True):
        assert a.token_ids == b.token_ids, (len(prompt), sampling)
        assert a.logprobs == pytest.approx(b.logprobs, abs=2e-3)


def bucketed(engine: Engine) -> StepGraphs:
    """Give ``engine`` the graphs' bucketed steps, run eagerly (no capture on a CPU)."""
    engine.cuda_graphs = True
    engine._ensure_cache()
    engine.graphs = StepGraphs(engine._run, engine.model, engine.slots, engine.max_len,
                               engine.local.pad_token_id, engine.local.device, capture=CUDA)
    return engine.graphs


def test_a_llama_model_decodes_the_same_tokens_as_hfpolicy(llama_dir: Path) -> None:
    engine = Engine(str(llama_dir), slots=8, max_len=256, prefill_chunk=100)
    try:
        same_tokens(engine, HFPolicy(str(llama_dir), max_batch_size=32), 24)
        assert len({t for g in run(engine.generate(list(range(3, 40)), mixed_requests(
            engine.local.vocab_size, 1)[0][1])) for t in g.token_ids}) > 1
    finally:
        engine.close()


@pytest.mark.parametrize("overlap", [False, True], ids=["read-each-step", "overlap"])
def test_bucketed_steps_give_the_eager_steps_tokens(tiny_model_dir: Path,
                                                    overlap: bool) -> None:
    """Rows rounded up to a bucket ride along at the scratch position, prefill chunks
    left-padded to a power of two too, and the window rounded up to a power of two is
    masked: none of it changes a token (with overlap, the inputs of the requests whose
    last tokens are not read back yet come from the device). Prefills of more than
    MAX_GRAPH_TOKENS padded tokens run eagerly."""
    engine = Engine(str(tiny_model_dir), slots=12, max_len=300, prefill_chunk=200,
                    overlap=overlap)
    graphs = bucketed(engine)
    try:
        same_tokens(engine, HFPolicy(str(tiny_model_dir), max_batch_size=64), 48, seed=3)
    finally:
        engine.close()
    decodes = {(rows, window) for gathered, rows, _, window in graphs._replays
               if not gathered}
    prefills = {(rows, width) for gathered, rows, width, _ in graphs._replays if gathered}
    assert {rows for rows, _ in decodes} >= {12, 8}  # 9-11 running ran as 12, 5-7 as 8
    assert {window for _, window in decodes} <= {128, 256, 300}
    assert len({window for _, window in decodes}) >= 2
    assert len(prefills) >= 2
    assert all(rows * width <= MAX_GRAPH_TOKENS and width & (width - 1) == 0
               for rows, width in prefills)


def test_graphs_are_dropped_when_the_weights_move(tiny_model_dir: Path) -> None:
    engine = Engine(str(tiny_model_dir), slots=4, max_len=256)
    graphs = bucketed(engine)
    try:
        run(engine.generate([5, 6, 7], mixed_requests(engine.local.vocab_size, 1)[0][1]))
        assert graphs._replays
        graphs.check_weights()  # nothing moved
        assert graphs._replays
        weight = next(engine.model.parameters())
        weight.data = weight.data.clone()  # as a .to() or new adapters would
        graphs.check_weights()
        assert not graphs._replays
    finally:
        engine.close()


def test_bucket_sizes() -> None:
    graphs = StepGraphs.__new__(StepGraphs)
    graphs.slots, graphs.max_len = 40, 1000
    assert [graphs.rows_for(n) for n in (1, 3, 5, 17, 25, 33, 40)] == [1, 4, 8, 24, 32, 40, 40]
    assert [graphs.window_for(r) for r in (1, 128, 129, 600, 999)] == [128, 128, 256, 1000, 1000]


@pytest.mark.skipif(CUDA, reason="checks the error on a machine without CUDA")
def test_cuda_graphs_on_a_cpu_is_a_clear_error(tiny_model_dir: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="needs a CUDA device"):
        Engine(str(tiny_model_dir), cuda_graphs=True)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cuda_graphs_replay_the_eager_tokens(llama_dir: Path, dtype: str) -> None:
    eager = Engine(str(llama_dir), slots=16, max_len=256, cuda_graphs=False,
                   dtype=getattr(torch, dtype))
    graphed = Engine(str(llama_dir), slots=16, max_len=256, dtype=getattr(torch, dtype))
    try:
        requests = mixed_requests(graphed.local.vocab_size, 40, seed=5)
        a = run(*(eager.generate(p, s) for p, s in requests))
        b = run(*(graphed.generate(p, s) for p, s in requests))
        graphs = graphed.graphs
    finally:
        eager.close()
        graphed.close()
    assert graphs is not None and graphs.error is None and graphs.captures >= 2
    assert graphed.graphs is None  # closing lets the graphs and the cache go
    agree = sum(x.token_ids == y.token_ids for x, y in zip(a, b, strict=True))
    # bf16 rounding can flip a near-tie between two tokens; float32 must agree everywhere
    assert agree == len(requests) if dtype == "float32" else agree >= 0.9 * len(requests)


def test_a_failing_graph_step_runs_again_without_graphs(tiny_model_dir: Path) -> None:
    """A step that fails inside the graphs runs again eagerly, and the requests get the
    tokens they would have had; a failure after the forward pass (sampling) is not retried:
    its requests fail."""
    engine = Engine(str(tiny_model_dir), slots=4, max_len=256)
    graphs = bucketed(engine)

    def broken(*args, **kwargs):
        raise RuntimeError("operation not permitted when stream is capturing (simulated)")

    graphs.forward = broken
    reference = HFPolicy(str(tiny_model_dir), max_batch_size=8)
    try:
        with pytest.warns(UserWarning, match="simulated.*runs without graphs"):
            same_tokens(engine, reference, 6, seed=2)
    finally:
        engine.close()
    assert engine.cuda_graphs is False


def test_a_failure_after_the_forward_pass_fails_its_requests(
        tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentgym.rollout.engine import engine as engine_module

    engine = Engine(str(tiny_model_dir), slots=4, max_len=256)
    bucketed(engine)

    def broken(*args, **kwargs):
        raise RuntimeError("probability tensor contains nan (simulated)")

    monkeypatch.setattr(engine_module, "sample_tokens", broken)
    try:
        (result,) = run(engine.generate([5, 6, 7], mixed_requests(
            engine.local.vocab_size, 1)[0][1]))
    finally:
        engine.close()
    assert isinstance(result, EngineError) and "simulated" in str(result)
    assert engine.cuda_graphs  # not a graph's failure: the graphs stay on
