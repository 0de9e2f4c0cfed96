"""Weight layout for the CPU's matrix products: linear weights stored transposed in memory (same shape, same
values), and LM heads packed for oneDNN.

`nn.Linear` computes x @ Wᵀ with W of shape (out, in). A checkpoint stores W row by row, so the CPU's matrix
product reads it transposed. Stored column by column instead (a view `W_t.t()` of a contiguous (in, out) copy),
the same product reads a plain (in, out) matrix, and for the few rows the engine's forwards carry this is the
faster kernel on the CPU, above all when the weights come from memory rather than cache, as in a deep forward
(`use_column_major_weights`).

Vocabulary-wide products (an LM head, DSpark's Markov head) keep the checkpoint's layout: there the row-major
kernel is the faster one at the 7-8 rows of a draft or a verify. So do weights shared with an embedding table (a
tied LM head): transformers' save_pretrained needs them contiguous. For 4 rows or more they get a faster product
still (`use_packed_vocab_products`): oneDNN's linear over a copy of the weight packed for it, whose results are
those of `F.linear` bit for bit from 4 rows on (checked on the running CPU for each weight before it is used). One
to three rows (the baseline's step) keep `F.linear` and its numbers.

Numbers: the results equal the row-major layout's to float32 rounding. On some CPUs they are bit-identical from 4
rows on (the prefill, a verify of 3 drafts or more); on others (seen with AMX) oneDNN picks a kernel by the number of
rows whose rounding differs in the last bits for some sizes, as a product of 1-3 rows does everywhere. The engine's
lanes all run the same weights, so identity between them is unaffected (tests/engine/test_layout.py checks the greedy
output and the closeness of every forward on a tiny model). What the layout saves is measured in docs/benchmarks.md
(`scripts/forward_times.py`); how it was chosen, in docs/experiments.md.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

PACKED_MIN_ROWS = 4  # from here on oneDNN's packed product equals F.linear bit for bit (1-3 rows: it does not)


def _vocab_size(model: nn.Module) -> int | None:
    return getattr(getattr(model, "config", None), "vocab_size", None)


def is_column_major(weight: torch.Tensor) -> bool:
    return weight.dim() == 2 and weight.stride() == (1, weight.shape[0])


def use_column_major_weights(model: nn.Module) -> int:
    """Lay out the weight of every `nn.Linear` of a float32 model on the CPU column by column (in place), but
    vocabulary-wide ones and those tied to an embedding; returns how many weights it changed. The Parameters stay
    (only their storage changes). Models on other devices, or in other dtypes, are left alone."""
    vocab_size = _vocab_size(model)
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


def _packed_ops_available() -> bool:
    mkldnn = getattr(torch.ops, "mkldnn", None)
    return (torch.backends.mkldnn.is_available() and hasattr(mkldnn, "_reorder_linear_weight")
            and hasattr(mkldnn, "_linear_pointwise"))


def _packed_product(packed: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")


class _Packed:
    """A weight's packed copy and which weight (storage, version) it was made from. Copies and pickles of a model
    drop it (oneDNN's packed tensors have no storage to copy); their heads then compute with F.linear."""

    def __init__(self, tensor: torch.Tensor | None = None, source: tuple | None = None):
        self.tensor, self.source = tensor, source

    def __deepcopy__(self, memo):
        return _Packed()

    def __reduce__(self):
        return _Packed, ()


class PackedVocabLinear(nn.Linear):
    """An nn.Linear (same Parameters, same state dict) whose products of 4 rows or more go through its packed
    copy where that gives the same numbers: float32 on the CPU, no gradient wanted, the weight unchanged since it
    was packed. Anything else is F.linear itself."""

    _packed = _Packed()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight, packed = self.weight, self._packed
        if (packed.tensor is not None and x.numel() >= PACKED_MIN_ROWS * self.in_features
                and x.dtype == torch.float32 and x.device.type == "cpu" and not torch.is_grad_enabled()
                and packed.source == (weight.data_ptr(), weight._version)):
            return _packed_product(packed.tensor, x)
        return F.linear(x, weight, self.bias)


def use_packed_vocab_products(model: nn.Module) -> int:
    """Make every vocabulary-wide `nn.Linear` (no bias, float32, on the CPU) of `model` a PackedVocabLinear, where
    this CPU's oneDNN reproduces F.linear bit for bit (checked here on the weight itself, at 4 to 16 rows); returns
    how many it switched. Saving, tying and loading are unaffected: the Parameter stays, the copy is a plain
    attribute, and a weight changed later is used as it is."""
    vocab_size = _vocab_size(model)
    if vocab_size is None or not _packed_ops_available():
        return 0
    switched = 0
    for module in model.modules():
        if (type(module) is not nn.Linear or module.out_features != vocab_size or module.bias is not None):
            continue
        weight = module.weight
        if (weight.device.type != "cpu" or weight.dtype != torch.float32 or not weight.is_contiguous()
                or weight.is_inference()):  # an inference tensor keeps no version counter to notice changes by
            continue
        try:  # private operators: a torch release that lacks them or takes other arguments keeps F.linear
            with torch.no_grad():
                packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), 8)
                probe = torch.randn(16, module.in_features, generator=torch.Generator().manual_seed(0))
                same = all(torch.equal(_packed_product(packed, probe[:n]), F.linear(probe[:n], weight))
                           for n in range(PACKED_MIN_ROWS, 17))
        except (RuntimeError, TypeError, AttributeError):
            same = False
        if not same:
            continue
        module.__class__ = PackedVocabLinear
        module._packed = _Packed(packed, (weight.data_ptr(), weight._version))
        switched += 1
    return switched
