"""The target model of one run and the KV cache it owns: prefill, verify, keep.

Every speculative loop asks the same three things of the target (engine/run.py):

- `prefill(ids)`: read the prompt; the logits of its last position and the features block drafters read;
- `verify(ids, parents=None)`: read the anchor and the drafted tokens after the cache, a chain (each token sees
  those before it) or a tree (`parents`: each node sees its own ancestors only, at the position its depth gives);
  the logits and features of every row;
- `keep(length, rows)`: after verification, keep the cache's first `length` entries and then the verify's rows
  `rows` (a chain: the anchor and the accepted drafts, its first rows; a tree: the anchor and the accepted path).

The cache's length is a host integer, counted here, never read back from the device.

`Target` runs Qwen3-architecture models (the embedded family and the Qwen3 presets) with a forward of its own over
a cache preallocated for the run (one key and one value tensor per layer, written in place), with the query, key
and value projections as one product and the MLP's gate and up projections as another, RoPE applied to queries and
keys together, and norms as one operation each: the arithmetic of transformers' Qwen3 layers in about a third of
its dispatched operations (tests/engine/test_target.py counts them and checks its greedy output against
transformers'). A chain's rollback is a new length, nothing copied; a tree's keeps its path with one index for
every layer. Any other architecture runs through transformers' own forward and cache (`TransformersTarget`), with
the same three calls.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import DynamicCache

from ..contract.types import MAX_DRAFTS, MAX_TREE_NODES, EngineError, tree_depths
from ..models import crop_cache, forward_with_features, keep_cache_entries, new_cache
from ..tree import verify_inputs
from .fused import FusedQwen3


# Rows of every fixed-width verify: the smallest power of two that holds the anchor and the largest tree (or block) any
# lane may send, so the baseline's one-token steps, every chain and every tree run the same shapes, and a row's
# numbers cannot depend on the lane (another GEMM height may pick another kernel, another order of sums).
VERIFY_WIDTH = 1 << max(MAX_TREE_NODES, MAX_DRAFTS).bit_length()
TREE_ROOM = VERIFY_WIDTH + 8  # cache positions a run keeps free past its longest output: a fixed-width verify


class Target:
    """One run's target: the fused Qwen3 forward over a cache of its own, preallocated for `capacity` positions
    (grown, by copying into a larger one, should a run need more).

    `width`: None verifies exactly the rows it is given (the CPU's way: its cost grows with every row). A number W
    pads every verify to that fixed width (VERIFY_WIDTH holds the largest tree and block; a wider verify is refused)
    over the whole cache with a mask, so every verify of every run, the baseline's one-token steps included, runs
    the same kernels on the same shapes: a row's numbers do not depend on how many rows were verified beside it,
    and a GPU can replay the forward as a CUDA graph (`graphs`: the engine's captured graphs, shared by its runs
    with `cache`, the engine's one cache they were captured over)."""

    def __init__(self, fused: FusedQwen3, layer_ids: list[int] | None, capacity: int, width: int | None = None,
                 graphs: "GraphedVerifies | None" = None):
        self.fused = fused
        self.layer_ids = layer_ids
        self.width = width
        self.graphs = graphs
        if graphs is not None:  # the cache the graphs read and write: the engine's, of a fixed size
            self.keys, self.values = graphs.keys, graphs.values
        else:
            self.keys, self.values = fused.new_cache(capacity)
        self.length = 0  # cache entries that stand: a host integer, never read back from the device
        self._arange = torch.arange(self.capacity, device=self.keys.device)

    @property
    def capacity(self) -> int:
        return self.keys.shape[3]

    def _reserve(self, end: int) -> None:
        if end <= self.capacity:
            return
        if self.graphs is not None:
            raise ValueError(f"a graphed target holds {self.capacity} positions; {end} asked for")
        capacity = max(end, 2 * self.capacity)
        keys, values = self.fused.new_cache(capacity)
        keys[:, :, :, : self.length] = self.keys[:, :, :, : self.length]
        values[:, :, :, : self.length] = self.values[:, :, :, : self.length]
        self.keys, self.values = keys, values
        self._arange = torch.arange(capacity, device=keys.device)

    def prefill(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The prompt (1, n) into an empty cache: logits of its last position (1, 1, V) and the features of every
        position (1, n, F) or None."""
        n = ids.shape[1]
        self._reserve(n + (self.width or 0))
        self.length = 0
        positions = self._arange[:n][None]
        logits, features = self.fused.forward(ids, positions, self.keys, self.values, 0, None, True, self.layer_ids,
                                              logits_at=1)
        self.length = n
        return logits, features

    def verify(self, ids: torch.Tensor, parents: tuple[int, ...] | None = None,
               parent_rows: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Rows (1, 1 + N) after the cache: the anchor, then a chain of drafts or, with `parents`, a tree's nodes
        (engine/tree.py; `parent_rows`: each row's parent's row on the device, where the drafter has them there).
        Logits (1, 1 + N, V) and features (1, 1 + N, F) of every row. The rows' entries are written after the
        cache's; `keep` says which of them stand."""
        if self.width is not None:
            return self._verify_fixed(ids, parents, parent_rows)
        start, rows = self.length, ids.shape[1]
        end = start + rows
        self._reserve(end)
        if parents is None:  # a chain: row r sits at start + r and sees every key up to its own
            positions = self._arange[start:end][None]
            mask = None if rows == 1 else (self._arange[:end][None, :] <= positions[0][:, None])[None, None]
        else:
            positions, sees = self._tree_inputs(parents, start, parent_rows)
            mask = torch.cat([sees.new_ones(rows, start), sees], dim=1)[None, None]
        return self.fused.forward(ids, positions, self.keys, self.values, start, mask, False, self.layer_ids)

    def _verify_fixed(self, ids: torch.Tensor, parents: tuple[int, ...] | None, parent_rows: torch.Tensor | None):
        """The verify at a fixed width: `rows` real rows, then padding rows (token 0, each at the slot after the
        last, seeing every slot up to its own) whose entries land past the cache's length and are never kept."""
        start, rows = self.length, ids.shape[1]
        width = self.width
        if rows > width:
            raise EngineError(f"a verify of {rows} rows is wider than this target's fixed width of {width}")
        self._reserve(start + width)
        slots = self._arange[start: start + width]
        mask = self._arange[None, :] <= slots[:, None]  # (width, capacity): a chain, padding rows alike
        positions = slots.clone()
        if parents is not None:
            tree_positions, sees = self._tree_inputs(parents, start, parent_rows)
            positions[:rows] = tree_positions[0]
            mask[:rows, start: start + rows] = sees
        padded = ids.new_zeros(1, width)
        padded[:, :rows] = ids
        if self.graphs is not None:
            logits, features = self.graphs.replay(self.layer_ids, padded, positions[None], slots, mask[None, None])
        else:
            logits, features = self.fused.forward(padded, positions[None], self.keys, self.values, slots,
                                                  mask[None, None], False, self.layer_ids)
        return logits[:, :rows], features[:, :rows] if features is not None else None

    def _tree_inputs(self, parents: tuple[int, ...], start: int, parent_rows: torch.Tensor | None = None
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        """A tree verify's positions (1, 1 + N) and which of its own rows each row sees (1 + N, 1 + N), built on the
        device from each row's parent's row (`parent_rows`, the drafter's, else one small tensor sent from
        `parents`): a row sees the anchor, its ancestors and itself, and sits at the position its depth gives.
        Every row walks up one level at a time, all rows together."""
        n = len(parents)
        device = self.keys.device
        if parent_rows is None:  # row r's parent's row; 0: the anchor
            parent_rows = torch.tensor([0, *(p + 1 for p in parents)], device=device)
        rows = self._arange[: n + 1]
        sees = torch.eye(n + 1, dtype=torch.bool, device=device)
        seen = sees.new_ones(n + 1)  # the values written, made on the device (a Python True would be copied there)
        depth = torch.zeros(n + 1, dtype=torch.long, device=device)
        ancestor = rows
        for _ in range(max(tree_depths(parents), default=0)):
            depth += ancestor != 0
            ancestor = parent_rows[ancestor]
            sees.index_put_((rows, ancestor), seen)
        return (depth + start)[None], sees

    def keep(self, length: int, rows: list[int] | None = None, index: torch.Tensor | None = None) -> None:
        """Keep the cache's first `length` entries and then the last verify's rows `rows` (offsets from its anchor,
        ascending; None: none). A chain keeps its first rows, already in place, so only the length changes; a
        tree's path is copied down behind the context with one index for every layer (`index`: `rows` already on
        the device, where the caller has them there, so nothing more is sent)."""
        rows = rows or []
        if length == self.length and rows == list(range(len(rows))):  # in place
            self.length = length + len(rows)
            return
        if rows:
            source = (index if index is not None else torch.tensor(rows, device=self.keys.device)) + self.length
            for tensor in (self.keys, self.values):
                tensor[:, :, :, length: length + len(rows)] = tensor.index_select(3, source)
        self.length = length + len(rows)


class TransformersTarget:
    """The same three calls over transformers' own forward and DynamicCache: any architecture FusedQwen3 does not
    compute."""

    def __init__(self, model: nn.Module, layer_ids: list[int] | None):
        self.model = model
        self.layer_ids = layer_ids
        self.cache: DynamicCache = new_cache(model)
        self.length = 0

    def prefill(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        self.cache = new_cache(self.model)
        logits, features = forward_with_features(self.model, ids, self.cache, self.layer_ids, logits_to_keep=1)
        self.length = ids.shape[1]
        return logits, features

    def verify(self, ids: torch.Tensor, parents: tuple[int, ...] | None = None,
               parent_rows: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        device = ids.device
        inputs = verify_inputs(parents, self.length, device) if parents is not None else {}
        return forward_with_features(self.model, ids, self.cache, self.layer_ids, **inputs)

    def keep(self, length: int, rows: list[int] | None = None, index: torch.Tensor | None = None) -> None:
        rows = rows or []
        if length == self.length and rows == list(range(len(rows))):
            crop_cache(self.cache, length + len(rows))
        else:
            keep_cache_entries(self.cache, length, [self.length + r for r in rows])
        self.length = length + len(rows)


def fused_forward(model: nn.Module) -> FusedQwen3 | None:
    """`model`'s fused forward, built once and kept on the model (a drafter's small LM: every run's drafter reads
    the same weights), or None where FusedQwen3 does not compute it."""
    if not FusedQwen3.supports(model):
        return None
    fused = model.__dict__.get("_speclab_fused")
    if fused is None:
        fused = model.__dict__["_speclab_fused"] = FusedQwen3(model)
    return fused


def target_for(model: nn.Module, fused: FusedQwen3 | None, layer_ids: list[int] | None, capacity: int,
               width: int | None = None, graphs: "GraphedVerifies | None" = None):
    """One run's target over `model`: the fused forward where it has one (`fused`; at a fixed `width`, replayed
    from `graphs` where given), else transformers'."""
    if fused is not None:
        return Target(fused, layer_ids, capacity, width, graphs)
    return TransformersTarget(model, layer_ids)
