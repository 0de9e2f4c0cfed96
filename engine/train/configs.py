"""Architectures of the embedded models, defined once.

Both are transformers Qwen3 models, so the code paths that serve them also serve real Qwen3 targets.
Sizes were picked from measurements on a 2-core CPU (docs/experiments.md). A forward of models this small
costs mostly per layer, so the target is deep and narrow: its depth is what a drafter's depth is compared
with, as a 36-layer Qwen3-4B is with its 1-layer EAGLE-3 or few-layer block drafters.
"""

from __future__ import annotations

from transformers import Qwen3Config

CONTEXT_LENGTH = 512  # max positions of every embedded model; training windows have this length


def _qwen3(vocab_size: int, layers: int, hidden: int, intermediate: int, heads: int, kv_heads: int) -> Qwen3Config:
    return Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=hidden // heads,
        max_position_embeddings=CONTEXT_LENGTH,
        rope_theta=10_000.0,
        tie_word_embeddings=True,  # halves the embedding cost of a 4k-vocab model; DFlash reuses both
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )


def target_config(vocab_size: int) -> Qwen3Config:
    """16 layers of width 192, about 7.7M parameters (the shipped target is this one grown to 24 layers, 11.1M:
    grow.py). Measured with transformers alone on one CPU thread: a
    1-token forward 5.6 ms, a 1-layer model of width 256 under a tenth of that, verifying 8 tokens 1.34
    forwards (8 layers of width 256, the same parameter count: 4.5 ms and 1.48)."""
    return _qwen3(vocab_size, layers=16, hidden=192, intermediate=576, heads=3, kv_heads=1)


def small_lm_config(vocab_size: int) -> Qwen3Config:
    """A 2-layer model of the same family; about 1.6M parameters, a quarter of a target forward."""
    return _qwen3(vocab_size, layers=2, hidden=192, intermediate=512, heads=3, kv_heads=1)
