"""Attention for transformers models on the CPU: the numbers of transformers' own SDPA path, less work per forward.

Every forward the engine makes is [cached tokens ; new tokens], batch 1, no padding: the prefill (a plain
causal square), a one-token step (the token sees every key), and a verify of the anchor and K drafts (each new
token sees the cache and the new tokens up to itself). transformers' SDPA path builds the verify's mask from a
general mask function and, because a mask is present, copies the shared key/value heads once per query head
(`repeat_kv`) in every layer, which on a small CPU model is a measurable share of a forward.

Here the mask of that one shape is built directly (two aranges and a comparison) and SDPA reads grouped key/value
heads itself (`enable_gqa`). Logits and hidden states are bit-identical to transformers' SDPA path
(tests/engine/test_attention.py); any other case (a padding mask, sliding windows, a position bias, a non-CPU device)
is handed to transformers' own functions unchanged. What it saves is measured in docs/benchmarks.md
(`scripts/forward_times.py`) and docs/experiments.md.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import AttentionInterface, GenerationMixin
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, causal_mask_function, sdpa_mask

NAME = "speclab_sdpa"


def causal_mask(batch_size: int, q_length: int, kv_length: int, q_offset=0, kv_offset=0,
                mask_function=causal_mask_function, attention_mask: torch.Tensor | None = None,
                allow_is_causal_skip: bool = True, device="cpu", **kwargs) -> torch.Tensor | None:
    """The boolean mask (batch, 1, q_length, kv_length) of a causal forward over a cache, True = may attend;
    None where SDPA needs none: one query over keys that all precede it, or a plain causal square."""
    plain = (mask_function is causal_mask_function and attention_mask is None and not kwargs.get("local_size")
             and isinstance(q_offset, int) and isinstance(kv_offset, int))
    if not plain:
        return sdpa_mask(batch_size, q_length, kv_length, q_offset, kv_offset, mask_function, attention_mask,
                         allow_is_causal_skip=allow_is_causal_skip, device=device, **kwargs)
    if allow_is_causal_skip:
        if kv_offset + kv_length - 1 <= q_offset:  # every key at or before the first query: all visible
            return None
        if q_offset == kv_offset and q_length == kv_length:  # a square: SDPA's is_causal
            return None
    query_positions = torch.arange(q_offset, q_offset + q_length, device=device)
    key_positions = torch.arange(kv_offset, kv_offset + kv_length, device=device)
    return (key_positions[None, :] <= query_positions[:, None]).expand(batch_size, 1, -1, -1)


def grouped_sdpa(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                 is_causal: bool | None = None, **kwargs):
    """transformers' attention signature: (batch, heads, q, d) queries over (batch, kv_heads, kv, d) keys and
    values; returns (batch, q, heads, d) and no weights."""
    if (query.device.type != "cpu" or kwargs.get("position_bias") is not None or kwargs.get("softcap") is not None
            or kwargs.get("output_attentions")):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs)
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout,
                                         scale=scaling, is_causal=query.shape[2] > 1 and attention_mask is None and causal,
                                         enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(NAME, grouped_sdpa)
AttentionMaskInterface.register(NAME, causal_mask)


def use_lean_attention(model) -> bool:
    """Switch a transformers language model on the CPU from SDPA to the functions above; returns whether it did.
    Other models (drafter networks with their own attention, models on a GPU, eager attention) stay as they are."""
    config = getattr(model, "config", None)
    if (not isinstance(model, GenerationMixin) or getattr(config, "_attn_implementation", None) != "sdpa"
            or model.device.type != "cpu"):
        return False
    model.set_attn_implementation(NAME)
    return model.config._attn_implementation == NAME
