"""The drafters' fast path: a cache each drafter owns and fused forwards of the feature drafters' networks.

`DraftCache` holds a drafter's keys and values in one preallocated tensor per kind, (layers, 1, kv_heads, capacity,
head_dim), written in place; its length is a host integer, and a rollback is a new length, nothing copied (a
transformers DynamicCache appends with a copy of every layer's whole cache and crops with another). Its `update` is
the one a DynamicCache has, so the networks' own modules (dflash_model.DraftAttention) run over it unchanged.

`FusedBlock` (DFlash's and DSpark's backbone) and `FusedEagle3` (EAGLE-3's layers) compute what those modules do, with
the arithmetic arranged as the target's fused forward (engine/target/fused.py) arranges it: the query, key and value
projections as one product (a block drafter's over the new context rows and the block, its queries then cut to the
block's rows), the MLP's gate and up as another, every norm one operation, queries and keys rotated together with
RoPE read from a table made once by the model's own rotary embedding. The weights are the checkpoint's, joined by the
target's own joining (engine/target/fused.py) at a drafter's first forward, never when it is built: on the CPU as
copies; off it the network's own projections become views of the joined ones, so nothing is held twice, and a drafter
built only for its label (on ZeroGPU, in the app's process, whose tensors a GPU call moves by their storage) joins
nothing. Nothing is saved differently. A network with biased projections runs through its own modules (`supports`
says which).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..models import crop_cache
from ..target.fused import _joined, rotate_half

ROOM = 256  # positions a drafter's cache holds past its prompt at first; it doubles when a run outgrows it


class DraftCache:
    """Keys and values of a drafter's layers for one request, preallocated; `length` positions stand."""

    def __init__(self, num_layers: int, kv_heads: int, head_dim: int, capacity: int, like: torch.Tensor):
        shape = (num_layers, 1, kv_heads, capacity, head_dim)
        self.keys = torch.zeros(shape, dtype=like.dtype, device=like.device)
        self.values = torch.zeros(shape, dtype=like.dtype, device=like.device)
        self.num_layers = num_layers
        self.length = 0

    @classmethod
    def for_model(cls, model: nn.Module, positions: int) -> "DraftCache":
        config = model.config
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return cls(config.num_hidden_layers, config.num_key_value_heads, head_dim, positions + ROOM,
                   next(model.parameters()))

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.length

    def update(self, keys: torch.Tensor, values: torch.Tensor, layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Write a layer's new keys and values (1, kv_heads, n, head_dim) after the standing ones; returns all of that
        layer's, views of the cache. The length moves on with the last layer's write."""
        end = self.length + keys.shape[2]
        if end > self.keys.shape[3]:
            self._grow(2 * end)
        self.keys[layer_idx, :, :, self.length: end] = keys
        self.values[layer_idx, :, :, self.length: end] = values
        if layer_idx == self.num_layers - 1:
            self.length = end
        return self.keys[layer_idx, :, :, :end], self.values[layer_idx, :, :, :end]

    def _grow(self, capacity: int) -> None:
        for name in ("keys", "values"):
            old = getattr(self, name)
            new = old.new_zeros(old.shape[:3] + (capacity, old.shape[4]))
            new[:, :, :, : old.shape[3]] = old
            setattr(self, name, new)


def roll_back(cache, length: int) -> None:
    """Keep a drafter cache's first `length` positions: a new length for a DraftCache, a crop for a DynamicCache."""
    if isinstance(cache, DraftCache):
        cache.length = min(cache.length, length)
    else:
        crop_cache(cache, length)


def kept(fused, model):
    """`fused` while it still reads `model`'s weights; None once the drafter drafts with another network, as a run that
    tunes its own copy does (engine/online.py): that copy's changing weights are read by its own forward."""
    return fused if fused is not None and fused.model is model else None


class _Rope:
    """cos and sin of every position up to a capacity, made by the model's own rotary embedding (the same numbers it
    gives a forward at those positions), grown on the host when a position passes the end."""

    def __init__(self, rotary: nn.Module, like: torch.Tensor):
        self.rotary, self.like = rotary, like
        self.cos = self.sin = like.new_zeros((1, 0, 1))

    def at(self, first: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(1, 1, count, head_dim) each: positions first..first + count − 1, for every head at once."""
        end = first + count
        if end > self.cos.shape[1]:
            positions = torch.arange(2 * end + ROOM, device=self.like.device)[None]
            self.cos, self.sin = self.rotary(self.like, positions)
        return self.cos[:, None, first: end], self.sin[:, None, first: end]


class _Weights:
    """One draft layer's weights as a fused forward reads them (the checkpoint's, the query, key and value projections
    and the MLP's gate and up projections each joined into one)."""

    def __init__(self, layer: nn.Module):
        attn, mlp = layer.self_attn, layer.mlp
        self.qkv = _joined([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
        self.o, self.down = attn.o_proj.weight, mlp.down_proj.weight
        self.gate_up = _joined([mlp.gate_proj.weight, mlp.up_proj.weight])
        self.q_norm, self.k_norm = attn.q_norm.weight, attn.k_norm.weight
        self.input_norm, self.post_norm = layer.input_layernorm.weight, layer.post_attention_layernorm.weight
        self.hidden_norm = layer.hidden_norm.weight if hasattr(layer, "hidden_norm") else None


class _Fused:
    """What both fused networks share: shapes, norms, the rope table, attention and the MLP."""

    def __init__(self, model: nn.Module):
        config = model.config
        self.model = model
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.eps = config.rms_norm_eps
        self._layers: list[_Weights] | None = None
        self.rope = _Rope(model.rotary_emb, model.norm.weight)

    @property
    def layers(self) -> list[_Weights]:
        """Every layer's weights, joined on first use (the module's words)."""
        if self._layers is None:
            self._layers = [_Weights(layer) for layer in self.model.layers]
        return self._layers

    @staticmethod
    def supports(model: nn.Module) -> bool:
        return not getattr(model.config, "attention_bias", False)

    def norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), weight, self.eps)

    def projected(self, x: torch.Tensor, layer: _Weights, cos: torch.Tensor, sin: torch.Tensor):
        """Queries and keys (1, h + kv, n, D), normed and rotated together, and values (1, kv, n, D) of the rows x."""
        h, kv = self.heads, self.kv_heads
        qkv = F.linear(x, layer.qkv).view(1, x.shape[1], h + 2 * kv, self.head_dim)
        qk = torch.cat([self.norm(qkv[:, :, :h], layer.q_norm), self.norm(qkv[:, :, h: h + kv], layer.k_norm)], dim=2)
        qk = qk.transpose(1, 2)
        return qk * cos + rotate_half(qk) * sin, qkv[:, :, h + kv:].transpose(1, 2)

    def attend_and_mix(self, hidden, layer: _Weights, q, k, v, cache, mask, index: int) -> torch.Tensor:
        if cache is not None:
            k, v = cache.update(k, v, index)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=self.heads != self.kv_heads)
        hidden = hidden + F.linear(out.transpose(1, 2).reshape(1, q.shape[2], -1), layer.o)
        gate, up = F.linear(self.norm(hidden, layer.post_norm), layer.gate_up).chunk(2, dim=-1)
        return hidden + F.linear(F.silu(gate) * up, layer.down)


class FusedBlock(_Fused):
    """DFlashDraftModel.forward (DSpark's backbone too), fused: keys and values from the new context features and the
    block, queries from the block (projected with them in one product and cut out), over a DraftCache."""

    def __call__(self, block: torch.Tensor, target_hidden: torch.Tensor | None, first: int,
                 cache: DraftCache | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        """block (1, q, H) embedded; target_hidden (1, c, F) new context features or None; `first` the position of
        the first new key (context first). Returns the block's final hidden states (1, q, H)."""
        model = self.model
        context = self.norm(F.linear(target_hidden, model.fc.weight), model.hidden_norm.weight) \
            if model.target_features else None
        q_len = block.shape[1]
        cos, sin = self.rope.at(first, q_len + (0 if context is None else context.shape[1]))
        hidden = block
        for index, layer in enumerate(self.layers):
            x = self.norm(hidden, layer.input_norm)
            qk, v = self.projected(x if context is None else torch.cat([context, x], dim=1), layer, cos, sin)
            hidden = self.attend_and_mix(hidden, layer, qk[:, : self.heads, -q_len:], qk[:, self.heads:], v, cache,
                                         mask, index)
        return self.norm(hidden, model.norm.weight)


class FusedEagle3(_Fused):
    """Eagle3DraftModel.forward, fused: every layer reads [input_layernorm(embedding) ; hidden_norm(hidden)]."""

    def __call__(self, input_ids: torch.Tensor, hidden: torch.Tensor, first: int, cache: DraftCache | None = None,
                 mask: torch.Tensor | None = None, one_position: bool = False) -> torch.Tensor:
        """input_ids (1, q) at positions first..first + q − 1 (one_position: all at `first`, a tree's level); hidden
        (1, q, H). Returns the pre-norm outputs."""
        embedded = self.model.embed_tokens(input_ids)
        cos, sin = self.rope.at(first, 1 if one_position else input_ids.shape[1])
        for index, layer in enumerate(self.layers):
            x = torch.cat([self.norm(embedded, layer.input_norm), self.norm(hidden, layer.hidden_norm)], dim=-1)
            qk, v = self.projected(x, layer, cos, sin)
            hidden = self.attend_and_mix(hidden, layer, qk[:, : self.heads], qk[:, self.heads:], v, cache, mask, index)
        return hidden
