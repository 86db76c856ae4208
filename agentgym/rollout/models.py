"""Finding and loading transformers models and tokenizers, never from the network.

What the ``hf`` policy, the ``openai`` policy's tokenizer and the trainers share:

* :func:`local_folder`: a path as a local folder, or a hub id's snapshot already in the
  local hub cache. The hub is never contacted: offline, a missing model would otherwise
  cost a minute of retries before failing.
* :func:`model_folder`: the same for a model, or :class:`MissingResourceError` saying what
  to pass instead.
* :func:`load_causal_lm`, :func:`load_tokenizer`: load from such a folder, with errors that
  name the path and the fix.
* :func:`source_folder`: where a loaded model was loaded from (where its tokenizer is).
* :func:`load_model_and_tokenizer`: a model (folder or object) and its tokenizer (object,
  folder, or the model's own), as a trainer takes them.

transformers is imported when something is loaded, not when this module is imported.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from agentgym.core.errors import InvalidArgumentError, MissingResourceError

__all__ = ["load_causal_lm", "load_model_and_tokenizer", "load_tokenizer", "local_folder",
           "looks_like_hub_id", "model_folder", "source_folder"]

_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")

#: How to get a model folder, for error messages.
_FOLDER_FIX = ("Pass a folder written by save_pretrained (build a tiny one with"
               " agentgym.testing.build_tiny_model), or download a hub model first"
               " (hf download ID --local-dir DIR) and pass its folder")


def looks_like_hub_id(value: str) -> bool:
    """Whether ``value`` reads as a hub id (``Qwen/Qwen2.5-0.5B-Instruct``), not a path."""
    return bool(_HUB_ID.match(value)) and not value.startswith(".")


def local_folder(source: str | os.PathLike, marker: str = "config.json") -> str | None:
    """``source`` if it is a folder, else the local hub cache's snapshot of hub id
    ``source`` that holds ``marker``, else None. The hub is never contacted."""
    folder = Path(source).expanduser()
    if folder.is_dir():
        return str(folder)
    if not folder.exists() and looks_like_hub_id(str(source)):
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(str(source), marker)
        if isinstance(cached, str):
            return str(Path(cached).parent)
    return None


def model_folder(path: str | os.PathLike) -> str:
    """The local folder of model ``path`` (a folder, or a hub id in the local cache).

    Raises:
        MissingResourceError: there is no such folder, or it holds no ``config.json``.
    """
    folder = local_folder(path)
    if folder is None:
        raise MissingResourceError(f"the model folder {str(path)!r} does not exist",
                                   _FOLDER_FIX)
    if not (Path(folder) / "config.json").is_file():
        raise MissingResourceError(
            f"{str(path)!r} is not a transformers model folder (it has no config.json)",
            _FOLDER_FIX)
    return folder


def load_causal_lm(path: str | os.PathLike, dtype: Any = None) -> Any:
    """The causal LM in :func:`model_folder` ``(path)``, in ``dtype`` (default: the one in
    its config).

    Raises:
        MissingResourceError: no folder, or it holds no loadable causal LM.
    """
    from transformers import AutoModelForCausalLM

    folder = model_folder(path)
    try:
        return AutoModelForCausalLM.from_pretrained(
            folder, dtype=dtype if dtype is not None else "auto")
    except (OSError, ValueError) as e:
        raise MissingResourceError(
            f"cannot load a causal LM from {str(path)!r} ({e})",
            "Pass a folder written by save_pretrained with a causal LM's config and weights",
        ) from e


def load_tokenizer(path: str | os.PathLike) -> Any:
    """The tokenizer in folder ``path`` (or hub id ``path`` in the local cache).

    Raises:
        MissingResourceError: nothing there loads as a tokenizer.
    """
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(
            local_folder(path, "tokenizer_config.json") or str(path))
    except (OSError, ValueError) as e:
        raise MissingResourceError(
            f"cannot load a tokenizer from {str(path)!r} ({e})",
            "Pass tokenizer= (an object or a folder with tokenizer files)",
        ) from e


def source_folder(model: Any) -> str:
    """Where the loaded ``model`` was loaded from (its config's ``name_or_path``).

    Raises:
        ValueError: the model does not say (built in memory): pass its tokenizer instead.
    """
    config = getattr(model, "config", None)
    path = getattr(config, "name_or_path", "") or getattr(model, "name_or_path", "")
    if not path:
        raise InvalidArgumentError(
            f"the {type(model).__name__} does not say where it was loaded from, so its"
            " tokenizer cannot be found: pass tokenizer=..."
        )
    return str(path)


def load_model_and_tokenizer(model: Any, tokenizer: Any = None, *, dtype: Any = None,
                             padding_side: str | None = None) -> tuple[Any, Any]:
    """A causal LM and its tokenizer.

    Args:
        model: a model folder or hub id (loaded with :func:`load_causal_lm`), or a loaded
            model (returned as is).
        tokenizer: a tokenizer object, or a folder to load one from; default: the model's
            folder (:func:`source_folder` for a loaded model).
        dtype: the weights' dtype when loading (default: the config's).
        padding_side: set on the tokenizer (``"left"`` for batched generation, as GRPO
            needs), which then pads with its eos token if it has no pad token.
    """
    if isinstance(model, (str, os.PathLike)):
        folder = model_folder(model)
        model = load_causal_lm(folder, dtype)
        tokenizer = tokenizer if tokenizer is not None else folder
    elif tokenizer is None:
        tokenizer = source_folder(model)
    if isinstance(tokenizer, (str, os.PathLike)):
        tokenizer = load_tokenizer(tokenizer)
    if padding_side is not None:
        tokenizer.padding_side = padding_side
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer
