"""Weight layout for the CPU: every linear layer's weight stored transposed in memory, same shape, same values.

`nn.Linear` computes x @ Wᵀ with W of shape (out, in). A checkpoint stores W row by row, so the CPU's matrix
product reads it transposed. Stored column by column instead (a view `W_t.t()` of a contiguous (in, out) copy),
the same product reads a plain (in, out) matrix, and for the few rows the engine's forwards carry this is the
faster kernel on these CPUs. Embedded target over a 200-token cache, 100 interleaved repetitions: one token
13.10 -> 12.21 ms, a verify of 8 tokens 16.96 -> 15.53 ms; the prefill (190 tokens) no slower.

Vocabulary-wide products (an LM head, DSpark's Markov head) keep the checkpoint's layout: with 4096 outputs the
row-major kernel is the faster one at the 7-8 rows of a draft or a verify (8 rows: 211 against 252 us). So do
weights shared with an embedding table (a tied LM head): transformers' save_pretrained needs them contiguous.

Numbers: with 5 or more rows (the prefill, a verify of 4 drafts or more) the results are bit-identical to the
row-major layout; a one- or two-row product takes a matrix-vector kernel whose rounding may differ in the last
bit. The engine's lanes all run the same weights, so identity between them is unaffected; on the 65 held-out
prompts the target's greedy output (64 tokens) was the same in both layouts (tests/test_layout.py checks the
equality properties on a tiny model).
"""

from __future__ import annotations

import torch
from torch import nn


def is_column_major(weight: torch.Tensor) -> bool:
    return weight.dim() == 2 and weight.stride() == (1, weight.shape[0])


def use_column_major_weights(model: nn.Module) -> int:
    """Lay out the weight of every `nn.Linear` of a float32 model on the CPU column by column (in place), but
    vocabulary-wide ones and those tied to an embedding; returns how many weights it changed. The Parameters stay
    (only their storage changes). Models on other devices, or in other dtypes, are left alone."""
    vocab_size = getattr(getattr(model, "config", None), "vocab_size", None)
    tied = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    changed = 0
    for module in model.modules():
        if not isinstance(module, nn.Linear):
            continue
        weight = module.weight
        if (weight.device.type != "cpu" or weight.dtype != torch.float32 or is_column_major(weight)
                or module.out_features == vocab_size or id(weight) in tied):
            continue
        with torch.no_grad():
            weight.data = weight.data.t().contiguous().t()
        changed += 1
    return changed
