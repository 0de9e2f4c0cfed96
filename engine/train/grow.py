"""Growing the target deeper without changing what it computes (`python -m engine.train target --grow-layers N`).

On a CPU a forward of these small models costs mostly per layer, so what sets a drafter's cost against a
verify is the ratio of their depths (configs.py). The real pairs are far more lopsided than a 16-layer target
beside a 3-layer block drafter: Qwen3-8B has 36 layers beside DFlash's 5. Growing the trained target to N
layers and training on brings ours nearer that ratio for a fraction of a fresh run's time.

A new layer is a copy of the layer below it with its two output projections (attention `o_proj`, MLP
`down_proj`) set to zero: both branches add nothing to the residual stream, so the grown model's hidden states
and logits equal the old model's exactly, and training then starts from the old function, not from scratch.
The copies give the zeroed projections non-zero inputs, so they receive gradient from the first step.

Where the new layers go is chosen so that, growing the 16-layer target, the block drafters' default feature
layers of the grown one (evenly spaced from layer 1 to N − 3) are the images of the old ones, and EAGLE-3's
(1 to N − 2) too at 20 or 24 layers: a drafter trained on the old target then reads the same hidden states from the
grown one, before the grown one trains on (tests/engine/test_train.py checks both).

A block drafter grows the same way (`dflash|dspark --self-distill --grow-layers N`, grow_drafter): its old
layers spread evenly over the new depth, the first and last in place, each gap filled by a zero-output copy of
the layer below. What the drafter drafts is unchanged until it trains on; the added depth is its extra capacity.
"""

from __future__ import annotations

import copy

import torch


def layer_map(old: int, new: int) -> list[int]:
    """New index of every old layer: layers 0 and 1 stay, layers 1 … old − 3 are stretched evenly over
    1 … new − 3 (rounded down), the last three keep their distance to the top. New layers fill the gaps."""
    if new < old or old < 5:
        raise ValueError(f"can grow a target of at least 5 layers to as many or more, not {old} to {new}")
    stretch = lambda i: 1 + (i - 1) * (new - 4) // (old - 4)  # noqa: E731
    mapping = [i if i <= 1 else stretch(i) if i <= old - 3 else i + new - old for i in range(old)]
    assert all(b > a for a, b in zip(mapping, mapping[1:])), mapping
    return mapping


def _deepened(layers, config, mapping: list[int], new_layers: int) -> tuple[torch.nn.ModuleList, list[str]]:
    """`layers` placed at `mapping`'s new indices, each gap a copy of the layer below it with its output projections
    (attention `o_proj`, MLP `down_proj`) zeroed, every layer renumbered for the cache slot it writes; and the new
    layer types (a copy attends as its original)."""
    old_at = {j: i for i, j in enumerate(mapping)}
    old_types = getattr(config, "layer_types", None) or ["full_attention"] * len(layers)
    grown, types = [], []
    for j in range(new_layers):
        if j in old_at:
            grown.append(layers[old_at[j]])
            types.append(old_types[old_at[j]])
        else:
            layer = copy.deepcopy(grown[-1])
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
            grown.append(layer)
            types.append(types[-1])
    for j, layer in enumerate(grown):
        layer.self_attn.layer_idx = j
    return torch.nn.ModuleList(grown), types


@torch.no_grad()
def grow(model, new_layers: int) -> list[int]:
    """Deepen a Qwen3 causal LM in place to `new_layers` layers, computing the same function; returns
    layer_map(old, new). Each new layer is the layer below it with its output projections zeroed."""
    mapping = layer_map(len(model.model.layers), new_layers)
    model.model.layers, types = _deepened(model.model.layers, model.config, mapping, new_layers)
    model.config.num_hidden_layers, model.config.layer_types = new_layers, types
    return mapping


def drafter_layer_map(old: int, new: int) -> list[int]:
    """New index of every old layer of a drafter: spread evenly from 0 to new − 1 (rounded down), in order."""
    if new < old or old < 1:
        raise ValueError(f"can grow a drafter of at least 1 layer to as many or more, not {old} to {new}")
    return [0] if old == 1 else [i * (new - 1) // (old - 1) for i in range(old)]


@torch.no_grad()
def grow_drafter(drafter, new_layers: int) -> list[int]:
    """Deepen a DFlash or DSpark drafter in place to `new_layers` layers, drafting the same; returns
    drafter_layer_map(old, new). A new layer is the layer below it with its output projections zeroed: its
    attention still reads the target's features through its own key and value projections."""
    mapping = drafter_layer_map(len(drafter.layers), new_layers)
    drafter.layers, types = _deepened(drafter.layers, drafter.config, mapping, new_layers)
    drafter.config.num_hidden_layers, drafter.config.layer_types = new_layers, types
    return mapping
