"""Optional embedding search for the memory store: a sentence-transformers model from a
local folder.

Nothing here is needed: without a model the store searches by keywords (BM25). With one
(``MemoryStore(path, embedder=load_embedder(FOLDER))``, or the memory envs'
``embedding_model=FOLDER``), each note also gets a unit vector and ``memory_search``
fuses the keyword ranking with the cosine ranking (reciprocal rank fusion), so that
"automobile" can find a note about a car. The model is whatever sentence-transformers
folder the user points at (no hub is contacted); :func:`build_tiny_embedder` writes a tiny,
untrained one for tests and offline demos.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from agentgym.core.errors import MissingFileError, MissingResourceError

_INSTALL = "pip install sentence-transformers (or agentgym[embeddings], from this source)"


class Embedder:
    """Texts to unit vectors (float32) with the sentence-transformers model at ``path``."""

    def __init__(self, path: str | Path):
        self.path = Path(path).expanduser()
        if not (self.path / "modules.json").is_file():
            raise MissingFileError(
                f"embedding_model={str(path)!r} is not a sentence-transformers model folder"
                " (it has no modules.json)",
                "point at a folder saved with SentenceTransformer.save(), or leave"
                " embedding_model unset to search by keywords alone")
        try:
            from sentence_transformers import SentenceTransformer
        except ModuleNotFoundError:
            raise MissingResourceError("embedding search needs sentence-transformers",
                                       _INSTALL) from None
        self.model = SentenceTransformer(str(self.path), device="cpu", local_files_only=True)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One unit vector per text, as rows of a float32 array."""
        vectors = self.model.encode(list(texts), convert_to_numpy=True,
                                    normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)


@functools.cache
def load_embedder(path: str) -> Embedder:
    """The embedder of the model folder ``path``, loaded once per process."""
    return Embedder(path)


def build_tiny_embedder(folder: str | Path, words: Sequence[str] = ()) -> Path:
    """Write a tiny, randomly initialised sentence-transformers model (a 2-layer BERT with
    mean pooling, a word-piece vocabulary of ``words`` plus letters) to ``folder``: for
    tests, which need a real model folder and no hub. Its vectors are deterministic but
    carry no meaning beyond shared words."""
    import shutil

    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    try:  # sentence-transformers >= 6; the old home of the modules before it
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:
        from sentence_transformers.models import Pooling, Transformer

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "_bert"
    source.mkdir(exist_ok=True)
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("0123456789")
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *letters,
                  *(f"##{c}" for c in letters),
                  *sorted({w.lower() for w in words} - set(letters))]
    ids = {token: index for index, token in enumerate(dict.fromkeys(vocabulary))}
    BertTokenizerFast(vocab=ids).save_pretrained(source)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(ids), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=256)
    BertModel(config).save_pretrained(source)
    encoder = Transformer(str(source), max_seq_length=128)
    width = getattr(encoder, "get_embedding_dimension", None) or \
        encoder.get_word_embedding_dimension
    pooling = Pooling(width(), pooling_mode="mean")
    SentenceTransformer(modules=[encoder, pooling], device="cpu").save(str(folder))
    shutil.rmtree(source)
    return folder
