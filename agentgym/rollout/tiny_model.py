"""A tiny local chat model for tests, benchmarks and the quick start: no hub needed.

``build_tiny_model(directory)`` builds, deterministically and in seconds on a CPU, a
randomly initialised ``Qwen2ForCausalLM`` (about 140k parameters, under 1 MB) and a
byte-level BPE tokenizer trained on local text, and saves both with ``save_pretrained``
so that ``AutoModelForCausalLM.from_pretrained(directory)`` and
``AutoTokenizer.from_pretrained(directory)`` (and the ``hf:DIRECTORY`` policy) load them.

What the build guarantees:

* The tokenizer speaks the chat format of a real model family: its chat template is read at
  run time from the installed ``trl`` package (``trl/chat_templates/{template}.jinja``),
  byte for byte, so TRL recognises it (``add_response_schema``, ``supports_tool_calling``)
  and ``GRPOTrainer(tools=...)`` accepts it. For ``qwen2_5``: eos ``<|im_end|>``, pad
  ``<|endoftext|>``, and ``<tool_call>``, ``</tool_call>``, ``<tool_response>``,
  ``</tool_response>`` are each one token, as in Qwen2.5.
* The BPE is trained on what the model will see: chat-formatted episodes of the reference
  env ``calculator`` (prompts, tool calls, tool results, errors), of any further envs
  named in ``corpus_envs`` (their reference solutions played out, each turn in the
  context window the model sees it in where the env moves one), plus English text that
  ships with Python; digits are split one per token, as Qwen's pre-tokenizer does. A model
  meant for another env should name it: its words then take one or two tokens, as in a
  real model's vocabulary, instead of five to eight pieces, which a model this small
  copies badly.
* Same arguments, same Python: identical vocabulary and weights. A directory that already
  holds a complete build with the same arguments is returned as is (the manifest
  ``agentgym_tiny_model.json`` is written last, so an interrupted build is redone).

The weights are random (the model writes gibberish until trained, and rarely ends a turn),
unless ``copy_steps`` pretrains them to copy from their context first (:func:`_pretrain_copy`).
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import importlib
import io
import json
import os
import shutil
import tempfile
import types
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from agentgym.core.context import visible
from agentgym.core.errors import InvalidArgumentError

__all__ = ["TEMPLATE_SPECIAL_TOKENS", "build_tiny_model", "chat_template"]

#: Bump when the build changes in a way that changes its output.
_FORMAT = 2
_MANIFEST = "agentgym_tiny_model.json"
_VOCAB_SIZE = 1024  # BPE vocabulary (256 byte symbols included), before the added tokens
_MAX_POSITIONS = 32768

#: Per chat template: (special tokens, non-special added tokens, eos, pad). Special tokens
#: are dropped by ``decode(skip_special_tokens=True)``; the added ones are single tokens too.
TEMPLATE_SPECIAL_TOKENS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str, str]] = {
    "qwen2_5": (
        ("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
        ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"),
        "<|im_end|>",
        "<|endoftext|>",
    ),
}

# Qwen2's pre-tokenizer: words, single digits, punctuation runs, newlines, spaces. It must
# stay Qwen2's: transformers loads a qwen2 model's tokenizer as Qwen2Tokenizer, which sets
# this pattern whatever tokenizer.json holds, so merges trained on another split would meet
# text split this way. (Merges trained with spaces split off words left the loaded tokenizer
# a space token before every word: the memory recipe's SFT model then miscopied the fact
# into its note, 0.33 held out against 0.71, its copy heads keying on the token before.)
_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Standard-library modules whose docstrings give the tokenizer some English prose.
_PROSE_MODULES = (
    "json",
    "textwrap",
    "string",
    "random",
    "collections",
    "functools",
    "argparse",
    "logging",
    "unittest",
    "difflib",
)
# Their submodules whose docstrings count too, imported first: a package lists a submodule
# among its attributes only once something has imported it, so the others (json.tool,
# logging.handlers, unittest.async_case...) are left out, and the corpus, so the
# vocabulary, is the same whatever the process imported before (`agentgym train` had these).
_PROSE_SUBMODULES = (
    "json.decoder", "json.encoder", "json.scanner", "collections.abc", "unittest.case",
    "unittest.loader", "unittest.main", "unittest.mock", "unittest.result", "unittest.runner",
    "unittest.signals", "unittest.suite", "unittest.util",
)


def chat_template(template: str) -> str:
    """The text of ``trl/chat_templates/{template}.jinja`` from the installed ``trl``."""
    try:
        folder = resources.files("trl") / "chat_templates"
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(
            "build_tiny_model reads its chat template from the trl package, which is not"
            " installed: pip install 'agentgym[train]'"
        ) from e
    path = folder / f"{template}.jinja"
    if not path.is_file():
        raise InvalidArgumentError(
            f"trl ships no chat template {template!r} ({path} is missing); "
            f"build_tiny_model supports: {', '.join(sorted(TEMPLATE_SPECIAL_TOKENS))}"
        )
    return path.read_text(encoding="utf-8")


def build_tiny_model(
    directory: str | os.PathLike,
    *,
    seed: int = 0,
    hidden_size: int = 64,
    num_layers: int = 2,
    template: str = "qwen2_5",
    init_std: float | None = None,
    corpus_envs: tuple[str, ...] | list[str] = (),
    vocab_size: int = _VOCAB_SIZE,
    corpus_episodes: int = 256,
    copy_steps: int = 0,
    progress: Callable[[int, float], None] | None = None,
) -> Path:
    """Build the tiny model and tokenizer into ``directory`` (created) and return it.

    Args:
        directory: where to ``save_pretrained`` both; reused when it already holds a
            complete build with the same arguments.
        seed: seeds the weight initialisation (``torch.manual_seed``).
        hidden_size: width of the model (a multiple of 16: heads are 16 wide).
        num_layers: decoder layers.
        template: a chat template shipped by ``trl`` that this builder knows the special
            tokens of (see :data:`TEMPLATE_SPECIAL_TOKENS`).
        init_std: standard deviation of the initial weights (``initializer_range``);
            default transformers' 0.02, a scale made for models hundreds of units wide. A
            narrow model learns faster from a few times larger one (the CPU quick start
            uses 0.06 at hidden size 128): its attention scores start further from
            uniform, so the heads that copy text from the prompt form early
            (docs/training.md).
        corpus_envs: registered env ids whose episodes the tokenizer also trains on (their
            first observations and reference solutions, chat-formatted; each turn with its
            context window where the env moves one); the calculator's are always in.
        vocab_size: BPE tokens (the 256 byte symbols included), before the chat template's
            added tokens; more leave whole words of ``corpus_envs`` a token each.
        corpus_episodes: episodes of each of ``corpus_envs`` (its first tasks); fewer for
            envs whose episodes are slow to play (a browser's).
        copy_steps: steps of synthetic pretraining in copying from the context, before the
            model is saved (0: random weights). A pretrained LM copies a name or a number
            from its prompt with induction heads, which form early in its pretraining; a
            tiny random model has none and a few hundred demonstrations do not grow them
            (docs/results.md). These steps do, on random token sequences over the whole
            vocabulary (:func:`_pretrain_copy`). At hidden size 128 and 2 layers the copy
            forms suddenly at about 700 steps; 1,400 steps take 5-6 minutes on 2 CPU
            cores, and fewer than 1,000 may stop before it forms. The weights are then the
            same on one machine for the same arguments, not across CPUs (floating-point
            kernels differ).
        progress: called with ``(step, loss)`` after each copy pretraining step.
    """
    if template not in TEMPLATE_SPECIAL_TOKENS:
        raise InvalidArgumentError(
            f"unknown template {template!r}: build_tiny_model knows the special tokens of"
            f" {', '.join(sorted(TEMPLATE_SPECIAL_TOKENS))}"
        )
    if hidden_size < 16 or hidden_size % 16:
        raise InvalidArgumentError(
            f"hidden_size must be a positive multiple of 16, got {hidden_size}")
    if num_layers < 1:
        raise InvalidArgumentError(f"num_layers must be >= 1, got {num_layers}")
    if init_std is not None and not 0 < init_std <= 1:
        raise InvalidArgumentError(f"init_std must be in (0, 1], got {init_std}")
    if corpus_episodes < 1:
        raise InvalidArgumentError(f"corpus_episodes must be >= 1, got {corpus_episodes}")
    if not isinstance(copy_steps, int) or copy_steps < 0:
        raise InvalidArgumentError(f"copy_steps must be an int >= 0, got {copy_steps!r}")
    if not isinstance(vocab_size, int) or not 256 < vocab_size <= 65536:
        raise InvalidArgumentError(
            f"vocab_size must be an int in (256, 65536] (256 byte symbols and merges), got"
            f" {vocab_size!r}")
    directory = Path(directory)
    template_text = chat_template(template)
    corpus_envs = tuple(corpus_envs)
    corpus = _corpus(template_text, corpus_envs, corpus_episodes)
    manifest = {
        "format": _FORMAT,
        "seed": seed,
        "hidden_size": hidden_size,
        "num_layers": num_layers,
        "template": template,
        **({"init_std": init_std} if init_std is not None else {}),
        **({"corpus_envs": list(corpus_envs)} if corpus_envs else {}),
        **({"vocab_size": vocab_size} if vocab_size != _VOCAB_SIZE else {}),
        **({"corpus_episodes": corpus_episodes} if corpus_episodes != 256 else {}),
        **({"copy_steps": copy_steps} if copy_steps else {}),
        "template_sha256": hashlib.sha256(template_text.encode()).hexdigest(),
        "corpus_sha256": hashlib.sha256("\x00".join(corpus).encode()).hexdigest(),
    }
    if _is_complete(directory, manifest):
        return directory

    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM
    from transformers.utils import logging as hf_logging

    tokenizer = _train_tokenizer(corpus, template, template_text, vocab_size)
    eos_id, pad_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    heads = hidden_size // 16
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=heads,
        num_key_value_heads=heads // 2 if heads % 2 == 0 else heads,
        max_position_embeddings=_MAX_POSITIONS,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        use_cache=True,
        **({"initializer_range": init_std} if init_std is not None else {}),
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(torch.float32).eval()
    if copy_steps:
        _pretrain_copy(model, tokenizer, copy_steps, seed, progress)
    model.generation_config = GenerationConfig(
        eos_token_id=eos_id, pad_token_id=pad_id, bos_token_id=None
    )

    directory.mkdir(parents=True, exist_ok=True)
    # Save beside the target, then move file by file and write the manifest last: a reader
    # never takes a half-written folder for a complete build.
    staging = Path(tempfile.mkdtemp(prefix=".tiny-model-", dir=directory))
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a one-shard progress bar is noise in test output
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        for item in sorted(staging.iterdir()):
            os.replace(item, directory / item.name)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
        shutil.rmtree(staging, ignore_errors=True)
    (directory / _MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return directory


def _pretrain_copy(model: Any, tokenizer: Any, steps: int, seed: int,
                   progress: Callable[[int, float], None] | None = None) -> None:
    """Train ``model`` in place, ``steps`` steps, to copy from its context.

    Each sequence is random tokens drawn from the whole vocabulary (the chat template's
    added tokens excepted, so their roles stay unlearned for SFT to set). A third are a
    run of 8-39 distinct tokens repeated to the end (predict what followed this token
    last time, an induction head's job); the rest are 4-23 key-value pairs, written key
    first or value first, then keys picked at random, each followed by its value (recall
    what a key was paired with, wherever it stood). The loss counts only the tokens that
    can be copied. Random tokens teach no language and no env: only the mechanism, so
    that what SFT and GRPO teach afterwards can lean on it.
    """
    import torch

    generator = torch.Generator().manual_seed(seed)
    added = set(tokenizer.added_tokens_encoder.values())
    pool = torch.tensor([i for i in range(len(tokenizer)) if i not in added])
    batch, length = 32, 128

    optimizer = torch.optim.AdamW(model.parameters(), lr=_copy_rate(1, steps), weight_decay=0.0)
    model.train()
    for step in range(1, steps + 1):
        for group in optimizer.param_groups:
            group["lr"] = _copy_rate(step, steps)
        tokens, copyable = _copy_batch(pool, generator, batch, length)
        # Logits only where the loss counts (about half the positions): the vocabulary's
        # projection is most of a step at this width.
        hidden = model.model(tokens).last_hidden_state[:, :-1]
        mask = copyable[:, 1:]
        loss = torch.nn.functional.cross_entropy(model.lm_head(hidden[mask]),
                                                 tokens[:, 1:][mask])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if progress is not None:
            progress(step, loss.item())
    model.eval()


def _copy_rate(step: int, steps: int, peak: float = 1e-2, warmup: int = 100) -> float:
    """The learning rate of copy pretraining step ``step`` (from 1) of ``steps``: a linear
    warm-up over ``warmup`` steps, ``peak``, then a linear decay over the last fifth.

    The loss sits near uniform until the copying heads form, then falls within a few
    hundred steps; a peak of 1e-2 halves that plateau against 3e-3 (docs/training.md), and
    the decay settles what so high a rate leaves noisy."""
    return peak * min(1.0, step / warmup, (steps - step + 1) / max(1, steps // 5))


def _copy_batch(pool: Any, generator: Any, batch: int, length: int) -> tuple[Any, Any]:
    """``batch`` sequences of ``length`` tokens from ``pool`` for :func:`_pretrain_copy`,
    and the mask of the tokens that a model can copy from earlier in their sequence."""
    import torch

    def distinct(count: int) -> torch.Tensor:  # so that what follows a token is one token
        return pool[torch.randperm(len(pool), generator=generator)[:count]]

    tokens = torch.empty(batch, length, dtype=torch.long)
    copyable = torch.zeros(batch, length, dtype=torch.bool)
    for row in range(batch):
        if row % 3 == 0:  # a run repeated: from the second token of its second time, copies
            run = int(torch.randint(8, 40, (1,), generator=generator))
            tokens[row] = distinct(run).repeat(length // run + 1)[:length]
            copyable[row, run + 1:] = True
            continue
        # Key-value pairs, then keys again, each followed by its value: a copy. Written
        # key first ("Tomas: oboe") or value first ("[14] button 'no'": the answer sits
        # before what names it), then queried key first either way.
        pairs = int(torch.randint(4, 24, (1,), generator=generator))
        keys, values = distinct(2 * pairs).view(2, pairs)
        first = (keys, values) if row % 3 == 1 else (values, keys)
        order = torch.randint(pairs, (length // 2 - pairs,), generator=generator)
        tokens[row] = torch.cat([torch.stack(first, 1).flatten(),
                                 torch.stack([keys[order], values[order]], 1).flatten()])
        copyable[row, 2 * pairs + 1::2] = True
    return tokens, copyable


def _is_complete(directory: Path, manifest: dict[str, Any]) -> bool:
    try:
        found = json.loads((directory / _MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    needed = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
    return found == manifest and all((directory / name).is_file() for name in needed)


def _train_tokenizer(corpus: list[str], template: str, template_text: str,
                     vocab_size: int = _VOCAB_SIZE) -> Any:
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    special, added, eos, pad = TEMPLATE_SPECIAL_TOKENS[template]
    backend = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    # The added tokens are cut out of the training text: they get ids of their own, and
    # merges spent on spelling them out would be wasted.
    pieces = [_strip_tokens(text, (*special, *added)) for text in corpus]
    backend.train_from_iterator(pieces, trainer=trainer)
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    backend.add_tokens([AddedToken(t, special=False, normalized=False) for t in added])

    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=eos,
        pad_token=pad,
        extra_special_tokens=[t for t in special if t not in (eos, pad)],
        padding_side="left",
        model_max_length=_MAX_POSITIONS,
        clean_up_tokenization_spaces=False,
        chat_template=template_text,
    )


def _strip_tokens(text: str, tokens: tuple[str, ...]) -> str:
    for token in tokens:
        text = text.replace(token, "\n")
    return text


def _corpus(template_text: str, envs: tuple[str, ...] = (), episodes: int = 256) -> list[str]:
    """Training text for the tokenizer, deterministic for a given Python and agentgym."""
    texts = _calculator_chats(template_text)
    for env_id in envs:
        texts += _reference_chats(env_id, template_text, episodes)
    with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints the Zen
        zen = importlib.import_module("this")
    texts.append(codecs.decode(zen.s, "rot13"))
    for name in _PROSE_SUBMODULES:
        importlib.import_module(name)
    for name in _PROSE_MODULES:
        module = importlib.import_module(name)
        texts.append(module.__doc__ or "")
        for attribute in sorted(dir(module)):
            value = getattr(module, attribute)
            if (isinstance(value, types.ModuleType) and value.__name__.startswith(f"{name}.")
                    and value.__name__ not in _PROSE_SUBMODULES):
                continue
            doc = getattr(value, "__doc__", None)
            if isinstance(doc, str) and not attribute.startswith("_"):
                texts.append(doc)
    texts += [f"{a} + {b} = {a + b}\n{a} * {b} = {a * b}\n" for a in range(13) for b in range(13)]
    return texts


def _reference_chats(env_id: str, template_text: str, episodes: int = 256) -> list[str]:
    """Episodes of ``env_id``'s first ``episodes`` tasks, chat-formatted: the opening
    observation, then the task's reference solution played out (when it has one)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    import agentgym
    from agentgym.core.errors import AgentGymError
    from agentgym.rollout.chat import with_decoded_arguments

    try:
        env = agentgym.make(env_id)
    except AgentGymError as error:
        raise InvalidArgumentError(f"corpus_envs: {env_id!r} cannot be made ({error})") from None
    try:
        chats = []
        for task_id in env.unwrapped.task_ids()[:episodes]:
            messages, _ = env.reset(options={"task_id": task_id})
            # What the model sees: the whole conversation, or, where the env moves its
            # context window, each turn's window (agentgym.core.context) and the turn.
            seen: list[list[dict[str, Any]]] = []
            start, replies_only = 0, False
            for turn in env.unwrapped.task.solution or ():
                shown = visible(messages, start, replies_only)
                new, _, terminated, truncated, info = env.step(turn)
                assistant = with_decoded_arguments(info["assistant_message"])
                seen.append([*shown, assistant])
                messages = [*messages, assistant, *new]
                start = int(info.get("context_start", start))
                replies_only = replies_only or bool(info.get("context_replies_only"))
                if terminated or truncated:
                    break
            windowed = start or replies_only
            with contextlib.redirect_stderr(io.StringIO()):
                rendered, _ = render_jinja_template(seen if windowed else [messages],
                                                    chat_template=template_text)
            chats += rendered
        return chats
    finally:
        env.close()


def _calculator_chats(template_text: str, episodes: int = 96) -> list[str]:
    """Episodes of the ``calculator`` env (reference turns, mistakes), chat-formatted."""
    from transformers.utils.chat_template_utils import render_jinja_template

    import agentgym

    env = agentgym.make("calculator")
    try:
        schemas = env.unwrapped.tool_schemas()
        chats = []
        for index in range(episodes):
            messages, _ = env.reset(seed=index)
            task = env.unwrapped.task
            turns: list[Any] = list(task.solution or [])
            if index % 4 == 1:  # a turn with no tool call, then the solution
                turns.insert(0, "Let me think about it.")
            elif index % 4 == 2:  # a malformed call and a bad expression
                turns[:0] = ['<tool_call>\n{"name": "calculator"\n</tool_call>']
                turns[:0] = [
                    '<tool_call>\n{"name": "calculator", "arguments": {"expression":'
                    ' "two plus 2"}}\n</tool_call>'
                ]
            for turn in turns:
                new, _, terminated, truncated, info = env.step(turn)
                calls = [
                    {"type": "function", "function": {k: c[k] for k in ("name", "arguments")}}
                    for c in info["tool_calls"]
                ]
                message: dict[str, Any] = {"role": "assistant", "content": "" if calls else turn}
                if calls:
                    message["tool_calls"] = calls
                messages = [*messages, message, *new]
                if terminated or truncated:
                    break
            with contextlib.redirect_stderr(io.StringIO()):
                rendered, _ = render_jinja_template(
                    [messages], tools=schemas if index % 8 else None, chat_template=template_text
                )
            chats.append(rendered[0])
        return chats
    finally:
        env.close()
