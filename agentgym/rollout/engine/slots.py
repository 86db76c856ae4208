"""``SlotCache``: a static KV cache of fixed sequence slots, each at its own length.

The engine (:mod:`agentgym.rollout.engine.engine`) keeps one sequence per slot. A forward
pass writes the keys and values of its new tokens into the slots it names, at each
slot's own positions, and attends over a window of the first ``window`` positions of
those slots; the mask it is given hides what a query may not see (positions past its own,
what the slot held for an earlier sequence). Nothing is ever allocated after
construction, so shapes stay fixed: what CUDA graphs need, and what makes a slot free to
reuse the moment its request ends.

It is handed to a transformers model as its cache (``cache=`` or ``past_key_values=``);
the model's attention layers call :meth:`SlotCache.update`. Layout per layer:
``[slots, heads, max_len, dim]``, one tensor for keys and one for values, each allocated at
the layer's first write with the heads and dim the model wrote (not what the config says:
GPT-2 and Falcon count heads their own way, DeepSeek's MLA caches a compressed latent and a
rotary key of different widths in the two).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class SlotCache:
    """Keys and values of ``slots`` sequences of up to ``max_len`` positions.

    Before each forward pass the engine calls :meth:`target` with the slots the batch's
    rows are, the positions each row's new tokens take, and the window the rows attend
    over.
    """

    #: transformers asks a cache whether it compiles; this one is not compiled (the engine
    #: captures its decode step as a CUDA graph itself).
    is_compileable = False

    def __init__(self, config: Any, slots: int, max_len: int, device: Any, dtype: Any):
        import torch

        self.layers = config.num_hidden_layers
        # Per layer, as transformers reads it (mask creation looks for a full-attention
        # layer); the engine prepares every mask itself, sliding windows included.
        self.is_sliding = [False] * self.layers
        self.keys: list[Any] = [None] * self.layers  # allocated by the layer's first write
        self.values: list[Any] = [None] * self.layers
        self.slots, self.max_len = slots, max_len
        self.device, self.dtype = device, dtype
        self._head_index: dict[int, Any] = {}
        self._slot_index = torch.arange(slots, device=device)[:, None, None]
        self._window = max_len
        self._read: Any = None
        self._rows: Any = None
        self._positions: Any = None

    def target(self, rows: Sequence[int] | Any, positions: Any, window: int) -> None:
        """Aim the next forward pass at slots ``rows`` (one per row of the batch: a
        sequence of ints, or a 1-D tensor of slot ids on the cache's device): row ``i``'s
        new tokens go to positions ``positions[i]`` (``[rows, new_tokens]``), and every row
        attends over positions ``0..window-1``. Rows that are a contiguous range are read
        as a view; others are gathered (a copy). Neither a range nor a tensor allocates
        from host data, which is what a CUDA graph capture needs."""
        import torch

        self._window = window
        if isinstance(rows, torch.Tensor):
            self._read: Any = rows
        else:
            first = rows[0]
            if list(rows) == list(range(first, first + len(rows))):
                self._read = slice(first, first + len(rows))
            else:
                self._read = torch.tensor(list(rows), device=positions.device)
        self._rows = (self._slot_index[self._read] if isinstance(self._read, slice)
                      else self._read[:, None, None])
        self._positions = positions[:, None, :]

    def update(self, key_states: Any, value_states: Any, layer_idx: int, *args: Any,
               **kwargs: Any) -> tuple[Any, Any]:
        """Write this layer's new keys and values (``[rows, kv_heads, new, head_dim]``) and
        return the keys and values the rows attend over."""
        if layer_idx >= len(self.keys) or self.keys[layer_idx] is None:
            self._allocate(layer_idx, key_states, value_states)
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        keys.index_put_((self._rows, self._head_index[key_states.shape[1]], self._positions),
                        key_states.to(keys.dtype))
        values.index_put_((self._rows, self._head_index[value_states.shape[1]],
                           self._positions), value_states.to(values.dtype))
        window = slice(0, self._window)
        return keys[self._read, :, window], values[self._read, :, window]

    def _allocate(self, layer_idx: int, *states: Any) -> None:
        import torch

        missing = layer_idx + 1 - len(self.keys)
        if missing > 0:  # a model with more cache layers than hidden layers
            self.keys += [None] * missing
            self.values += [None] * missing
        keys, values = (torch.zeros((self.slots, s.shape[1], self.max_len, s.shape[-1]),
                                    device=self.device, dtype=self.dtype) for s in states)
        self.keys[layer_idx], self.values[layer_idx] = keys, values
        for s in states:
            self._head_index.setdefault(
                s.shape[1], torch.arange(s.shape[1], device=self.device)[None, :, None])

    @property
    def allocated(self) -> bool:
        """Whether every layer has been written once (its tensors allocated)."""
        return all(k is not None for k in self.keys[:self.layers])

    # What model code may ask of a cache besides update (transformers' Cache API).
    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self._window

    def get_max_cache_shape(self, layer_idx: int = 0) -> int:
        return self.max_len

    def __len__(self) -> int:
        return self.layers

    def copy_slot(self, source: int, target: int, length: int) -> None:
        """Copy the first ``length`` positions of slot ``source`` into slot ``target``."""
        for tensors in (self.keys, self.values):
            for layer in tensors:
                if layer is not None:
                    layer[target, :, :length] = layer[source, :, :length]
