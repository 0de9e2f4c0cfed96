"""The fused Qwen3 forward every fused target runs (one request's, engine/target/request.py; a batch's,
engine/target/batch.py; the graphs', engine/target/graphs.py): the query, key and value projections as one product
and the MLP's gate and up projections as another, RoPE applied to queries and keys together, norms as one operation
each, and each layer's new keys and values written where the caller's cache says (`_cached`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import DynamicCache

FUSED_ATTENTION_DEVICES = ("cuda",)  # where a masked attention folds grouped heads into rows (attend): one kernel


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """transformers' rotate_half: the second half of the last dimension, negated, before the first."""
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class _Layer:
    """One Qwen3 decoder layer's weights as the fused forward reads them."""

    def __init__(self, layer: nn.Module):
        attn, mlp = layer.self_attn, layer.mlp
        self.qkv = _joined([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
        self.o = attn.o_proj.weight
        self.gate_up = _joined([mlp.gate_proj.weight, mlp.up_proj.weight])
        self.down = mlp.down_proj.weight
        self.q_norm, self.k_norm = attn.q_norm.weight, attn.k_norm.weight
        self.input_norm, self.post_norm = layer.input_layernorm.weight, layer.post_attention_layernorm.weight
        self.scaling = attn.scaling


def _joined(weights: list[torch.Tensor]) -> torch.Tensor:
    """Linear weights stacked along their outputs, one product for all of them, in the layout the first one has
    (engine/cpu/layout.py lays float32 CPU weights out column by column). Off the CPU the model's own weights become
    views of the stacked one, so it costs no memory (a Qwen3-4B's projections would otherwise take 4.7 GB more); on
    the CPU they stay as they are, laid out for transformers' own forward too."""
    joined = torch.cat([w.detach() for w in weights], dim=0)
    first = weights[0]
    if first.dim() == 2 and first.shape[1] > 1 and first.stride() == (1, first.shape[0]):  # column-major
        joined = joined.t().contiguous().t()
    elif first.device.type != "cpu":
        at = 0
        for weight in weights:
            weight.data = joined[at: at + weight.shape[0]]
            at += weight.shape[0]
    return joined


class FusedQwen3:
    """A transformers Qwen3ForCausalLM's weights, arranged for the fused forward; built once per engine and shared
    by every run's Target. The model itself is kept: its embedding, rotary embedding, final norm and LM head (and
    any CPU layout given them) are called as they are."""

    def __init__(self, model: nn.Module):
        config = model.config
        self.model = model
        self.layers = [_Layer(layer) for layer in model.model.layers]
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.eps = config.rms_norm_eps
        self.num_layers = len(self.layers)

    @staticmethod
    def supports(model: nn.Module) -> bool:
        """A Qwen3 causal LM with full attention everywhere and no attention bias: what `forward` computes."""
        config = getattr(model, "config", None)
        return (type(model).__name__ == "Qwen3ForCausalLM" and not getattr(config, "attention_bias", False)
                and not getattr(config, "use_sliding_window", False)
                and all(t == "full_attention" for t in (getattr(config, "layer_types", None) or ["full_attention"])))

    def new_cache(self, capacity: int, batch: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values for `capacity` positions, every layer: (layers, batch, kv_heads, capacity, head_dim)."""
        weight = self.layers[0].o
        shape = (self.num_layers, batch, self.kv_heads, capacity, self.head_dim)
        return (torch.zeros(shape, dtype=weight.dtype, device=weight.device),
                torch.zeros(shape, dtype=weight.dtype, device=weight.device))

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                start: "int | torch.Tensor | RowSlots", mask: torch.Tensor | None, causal: bool,
                layer_ids: list[int] | None,
                logits_at: int | torch.Tensor = 0, cache: DynamicCache | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Read `ids` (B, S) at `positions` (B, S), their keys and values written to the cache's slots
        start..start + S − 1, each query seeing the slots before `start` and the new ones `mask` (B, 1, S,
        start + S; True = may attend) allows, or with no mask all of them (`causal`: each new token only those up
        to itself). Returns logits at `logits_at` (0: every row; an int k > 0: the last k; a tensor: those rows)
        and the features of `layer_ids` (B, S, len · H), or None.

        With `start` a tensor of slots (S,) instead, every shape is fixed by the inputs' alone, with no host integer
        (what a CUDA graph replays): row r's key and value are written to slot start[r], and each query attends the
        whole cache as `mask` (B, 1, S, capacity) allows.

        With `start` a RowSlots (a batch, BatchTarget), row b's new keys and values are written to its own slots
        of the cache rows it names, and each query attends its row's slots before `start.end` as `mask` (B, 1, S,
        end) allows.

        With a transformers `cache` instead (a drafter's ragged cache in a batch, engine/ragged.py), each layer's
        new keys and values are appended to it and every query attends all of its entries as `mask` allows (`keys`,
        `values` and `start` unused)."""
        model = self.model.model
        batch, length = ids.shape
        end = start + length if isinstance(start, int) else None
        hidden = model.embed_tokens(ids)
        cos, sin = model.rotary_emb(hidden, positions)
        cos, sin = cos[:, None], sin[:, None]  # (B, 1, S, D): one rotation for every head
        wanted = set(layer_ids or ())
        features = {}  # layer index -> its output (transformers' hidden_states[index + 1])
        h, kv, d = self.heads, self.kv_heads, self.head_dim
        fold = mask is not None and hidden.device.type in FUSED_ATTENTION_DEVICES  # one kernel, masked (attend)
        if fold:
            mask = folded_mask(mask, h // kv, hidden.dtype)
        for index, layer in enumerate(self.layers):
            x = F.rms_norm(hidden, (hidden.shape[-1],), layer.input_norm, self.eps)
            qkv = F.linear(x, layer.qkv).view(batch, length, h + 2 * kv, d)
            q = F.rms_norm(qkv[:, :, :h], (d,), layer.q_norm, self.eps)
            k = F.rms_norm(qkv[:, :, h: h + kv], (d,), layer.k_norm, self.eps)
            qk = torch.cat([q, k], dim=2).transpose(1, 2)  # (B, h + kv, S, D)
            qk = qk * cos + rotate_half(qk) * sin
            every_key, every_value = _cached(index, qk[:, h:], qkv[:, :, h + kv:].transpose(1, 2), keys, values,
                                             start, end, cache)
            attended = attend(qk[:, :h], every_key, every_value, mask, causal, layer.scaling, fold)
            hidden = hidden + F.linear(attended.transpose(1, 2).reshape(batch, length, h * d), layer.o)
            x = F.rms_norm(hidden, (hidden.shape[-1],), layer.post_norm, self.eps)
            gate, up = F.linear(x, layer.gate_up).chunk(2, dim=-1)
            hidden = hidden + F.linear(F.silu(gate) * up, layer.down)
            if index in wanted:
                features[index] = hidden
        if isinstance(logits_at, int):
            kept = hidden[:, -logits_at:] if logits_at > 0 else hidden
        else:
            kept = hidden[:, logits_at]
        logits = self.model.lm_head(model.norm(kept))
        if layer_ids is None:
            return logits, None
        return logits, torch.cat([features[i] for i in layer_ids], dim=-1)


def folded_mask(mask: torch.Tensor, groups: int, dtype: torch.dtype) -> torch.Tensor:
    """A boolean mask (B, 1, S, K), True = may attend, as `attend` reads it folded: additive (0 or −inf) in the
    queries' dtype, its S rows repeated for each of the `groups` query heads that share a key head. Built once a
    forward, not once a layer (SDPA would convert a boolean mask in every call)."""
    additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))
    return additive.repeat(1, 1, groups, 1)


def attend(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None, causal: bool,
           scale: float, fold: bool) -> torch.Tensor:
    """Queries (B, h, S, D) over keys and values (B, kv, K, D), kv dividing h. Unmasked (a prefill, `causal`; a
    step that sees everything), SDPA reads the shared key heads itself (`enable_gqa`), which its flash kernel
    does on CUDA. With a mask, CUDA's fused kernels take no grouped heads (torch would fall back to its math
    kernel, about ten kernels a layer), so with `fold` the h / kv query heads that share a key head are stacked
    along the rows instead, (B, kv, h / kv · S, D), equal heads under a mask of as many rows (folded_mask): what
    the memory-efficient kernel runs in one call, every query row computed as before. The CPU keeps the grouped
    call, whose numbers transformers' SDPA path gives too."""
    batch, heads, rows, dim = q.shape
    if not fold:
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, is_causal=causal and mask is None
                                              and rows > 1, scale=scale, enable_gqa=heads != keys.shape[1])
    stacked = q.reshape(batch, keys.shape[1], heads // keys.shape[1] * rows, dim)
    return F.scaled_dot_product_attention(stacked, keys, values, attn_mask=mask, scale=scale).view(
        batch, heads, rows, dim)


class RowSlots:
    """Where a batch's new keys and values go in a cache preallocated for many rows (BatchTarget): the cache rows
    `rows` (a slice), row b's new entry j at slot `slots[b, j]`; queries attend each row's slots before `end` (a host
    integer), as the mask allows."""

    def __init__(self, rows: slice, slots: torch.Tensor, end: int):
        self.rows, self.slots, self.end = rows, slots, end
        self.row_index = torch.arange(slots.shape[0], device=slots.device)[:, None].expand_as(slots)


def _cached(index: int, new_keys: torch.Tensor, new_values: torch.Tensor, keys: torch.Tensor | None,
            values: torch.Tensor | None, start: int | torch.Tensor | RowSlots, end: int | None,
            cache: DynamicCache | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer `index`'s new keys and values written to the cache FusedQwen3.forward was given (transformers' `cache`;
    else the preallocated `keys` and `values`, at the slots `start` holds, or at start..end), and every key and value
    its queries may attend."""
    if cache is not None:
        return cache.update(new_keys, new_values, index)
    if isinstance(start, RowSlots):  # a batch: (B, kv, S, D) new entries, each row at slots of its own
        layer_keys, layer_values = keys[index, start.rows], values[index, start.rows]
        layer_keys[start.row_index, :, start.slots] = new_keys.transpose(1, 2)
        layer_values[start.row_index, :, start.slots] = new_values.transpose(1, 2)
        return layer_keys[:, :, : start.end], layer_values[:, :, : start.end]
    if end is None:  # fixed shapes: the slots are a tensor, and the whole cache is attended under the mask
        keys[index].index_copy_(2, start, new_keys)
        values[index].index_copy_(2, start, new_values)
        return keys[index], values[index]
    keys[index, :, :, start:end] = new_keys
    values[index, :, :, start:end] = new_values
    return keys[index, :, :, :end], values[index, :, :, :end]
