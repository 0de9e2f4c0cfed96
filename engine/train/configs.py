"""Architectures of the embedded models, defined once.

Both are transformers Qwen3 models, so the code paths that serve them also serve real Qwen3 targets.
Sizes were picked from measurements on a 2-core CPU (docs/benchmarks.md): the target decodes at a few
hundred tokens/s and trains in about an hour; the AR drafter costs about a quarter of a target forward.
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
    """8 layers so block drafters can read 5 distinct target layers; about 7.3M parameters."""
    return _qwen3(vocab_size, layers=8, hidden=256, intermediate=768, heads=4, kv_heads=2)


def ar_drafter_config(vocab_size: int) -> Qwen3Config:
    """A 2-layer model of the same family; about 1.6M parameters, a quarter of a target forward."""
    return _qwen3(vocab_size, layers=2, hidden=192, intermediate=512, heads=3, kv_heads=1)
