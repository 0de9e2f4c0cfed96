"""A batch's targets (engine/batch.py): the fused forward over a cache preallocated for many requests
(`BatchTarget`), or transformers' over a ragged one (`RaggedBatchTarget`, engine/ragged.py)."""

from __future__ import annotations

import torch
from torch import nn

from ..models import forward_with_features, new_cache
from ..ragged import RaggedCache, padded
from .fused import FusedQwen3, RowSlots


class BatchTarget:
    """The target of a batch of requests (engine/batch.py), with the fused forward over a cache preallocated for
    `rows` requests (grown, by copying into a longer one, should they need more positions). Row b holds request b's
    entries from slot 0, its length a host integer: a step writes each request's anchor and drafts at its own slots
    and keeps what it accepts by a new length, nothing copied. Requests join (their prompts read straight into rows
    of their own), each step verifies every request's anchor and drafts in one forward, `keep` says what each
    request keeps, and `select` lets finished requests leave (the one copy: the staying rows moved up)."""

    def __init__(self, fused: FusedQwen3, layer_ids: list[int] | None, device: torch.device, rows: int,
                 capacity: int = 256):
        self.fused = fused
        self.layer_ids = layer_ids
        self.device = device
        self.keys, self.values = fused.new_cache(capacity, rows)
        self.lengths: list[int] = []

    @property
    def size(self) -> int:
        return len(self.lengths)

    def join(self, prompts: list[list[int]]) -> tuple[torch.Tensor, list[int], torch.Tensor | None]:
        """Read the joining requests' prompts in one forward into rows after the batch's. Returns the logits at the
        distinct prompt ends (J, E, V), those ends (positions, ascending), and the features of every prompt position
        (J, longest, F) or None."""
        counts = [len(p) for p in prompts]
        ends = sorted({n - 1 for n in counts})
        first = self.size
        self.lengths += [0] * len(prompts)
        logits, features = self._forward(first, padded(prompts, self.device), counts,
                                         torch.tensor(ends, device=self.device))
        self._keep(first, [range(n) for n in counts])
        return logits, ends, features

    def verify(self, tokens: torch.Tensor, counts: list[int]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Every request's anchor and drafts after its entries, in one forward: `tokens` (B, S) on the device, row
        b's first counts[b] real. The logits (B, S, V) and features (B, S, F) of every slot."""
        return self._forward(0, tokens, counts)

    def keep(self, kept: list[list[int]]) -> None:
        """Request b keeps its last forward's first len(kept[b]) slots (an anchor and its accepted drafts: a new
        length each, nothing moved)."""
        self._keep(0, kept)

    def _keep(self, first: int, kept) -> None:
        for b, offsets in enumerate(kept, start=first):
            if list(offsets) != list(range(len(offsets))):
                raise ValueError("a batch keeps the first slots of each request's verify")
            self.lengths[b] += len(offsets)

    def select(self, rows: list[int]) -> None:
        """Keep only the requests `rows` (in that order), moved up to the first rows: the others have finished."""
        if rows == list(range(len(rows))):
            self.lengths = self.lengths[: len(rows)]
            return
        width = max((self.lengths[r] for r in rows), default=0)
        index = torch.tensor(rows, device=self.device)
        for tensor in (self.keys, self.values):
            tensor[:, : len(rows), :, :width] = tensor[:, :, :, :width].index_select(1, index)
        self.lengths = [self.lengths[r] for r in rows]

    def _reserve(self, rows: int, end: int) -> None:
        """Room for `rows` requests and `end` positions each: a larger cache, the entries copied over, when not."""
        have_rows, have = self.keys.shape[1], self.keys.shape[3]
        if rows <= have_rows and end <= have:
            return
        keys, values = self.fused.new_cache(max(end, 2 * have) if end > have else have, max(rows, have_rows))
        width = max(self.lengths, default=0)
        keys[:, :have_rows, :, :width] = self.keys[:, :, :, :width]
        values[:, :have_rows, :, :width] = self.values[:, :, :, :width]
        self.keys, self.values = keys, values

    def _forward(self, first: int, tokens: torch.Tensor, counts: list[int], logits_at=0):
        """Rows first..first + B − 1 read `tokens` (B, S), row b's first counts[b] its own: new entry j of row b at
        slot lengths[b] + j, at position lengths[b] + j, seeing its row's entries and its own new ones up to itself.
        Padding slots (j ≥ counts[b]) repeat the last real one's position and view, so every softmax row has a key;
        they are written past the row's length, never kept. Lengths and counts reach the device in one copy."""
        batch, slots = tokens.shape
        lengths = self.lengths[first: first + batch]
        end = max(lengths) + slots
        self._reserve(first + batch, end)
        host = torch.tensor([lengths, counts])
        if self.device.type == "cuda":
            host = host.pin_memory()
        sizes = host.to(self.device, non_blocking=True)  # (2, B): lengths, counts
        offsets = torch.arange(slots, device=self.device)
        last = torch.minimum(offsets[None, :], (sizes[1] - 1).clamp_min(0)[:, None])  # (B, S)
        positions = sizes[0][:, None] + last
        mask = torch.arange(end, device=self.device)[None, None, :] <= positions[:, :, None]  # (B, S, end)
        where = RowSlots(slice(first, first + batch), sizes[0][:, None] + offsets[None, :], end)
        return self.fused.forward(tokens, positions, self.keys, self.values, where, mask[:, None], False,
                                  self.layer_ids, logits_at)


class RaggedBatchTarget:
    """The same calls over transformers' own forward and a ragged DynamicCache (engine/ragged.py): a batch of any
    architecture FusedQwen3 does not compute."""

    def __init__(self, model: nn.Module, layer_ids: list[int] | None, device: torch.device):
        self.model = model
        self.layer_ids = layer_ids
        self.device = device
        self.cache = RaggedCache(new_cache(model), 0, device)

    @property
    def size(self) -> int:
        return len(self.cache.lengths)

    def join(self, prompts: list[list[int]]) -> tuple[torch.Tensor, list[int], torch.Tensor | None]:
        counts = [len(p) for p in prompts]
        ends = sorted({n - 1 for n in counts})
        joining = RaggedCache(new_cache(self.model), len(prompts), self.device)
        logits, features = ragged_forward(self.model, None, joining, padded(prompts, self.device), counts,
                                          self.layer_ids, torch.tensor(ends, device=self.device))
        joining.keep([list(range(n)) for n in counts])
        self.cache.extend(joining)
        return logits, ends, features

    def verify(self, tokens: torch.Tensor, counts: list[int]) -> tuple[torch.Tensor, torch.Tensor | None]:
        return ragged_forward(self.model, None, self.cache, tokens, counts, self.layer_ids)

    def keep(self, kept: list[list[int]]) -> None:
        self.cache.keep(kept)

    def select(self, rows: list[int]) -> None:
        self.cache.select(rows)


def batch_target_for(model: nn.Module, fused: FusedQwen3 | None, layer_ids: list[int] | None,
                     device: torch.device, rows: int, capacity: int = 256):
    """A batch's target over `model`: the fused forward over a cache preallocated for `rows` requests of `capacity`
    positions where it has one, else transformers' over a ragged one."""
    if fused is not None:
        return BatchTarget(fused, layer_ids, device, rows, capacity)
    return RaggedBatchTarget(model, layer_ids, device)


def ragged_forward(model: nn.Module, fused: FusedQwen3 | None, cache: RaggedCache, tokens: torch.Tensor,
                   counts: list[int], layer_ids: list[int] | None, logits_at=0):
    """One forward of a batch's new tokens (B, S), row b's first counts[b] real, appended to its ragged `cache`
    (engine/ragged.py): the fused forward where there is one, else transformers'. Logits (and features of
    `layer_ids`) of every slot, or at `logits_at`."""
    inputs = cache.causal_inputs(counts)
    if fused is None:
        return forward_with_features(model, tokens, cache.cache, layer_ids, logits_at, **inputs)
    mask = inputs.get("attention_mask")
    width, slots = cache._width_before, tokens.shape[1]
    if mask is None and slots > 1:  # no padding anywhere: each new token sees the cache and itself, causally
        keys = torch.arange(width + slots, device=tokens.device)
        mask = (keys[None, :] <= width + torch.arange(slots, device=tokens.device)[:, None])[None, None]
    return fused.forward(tokens, inputs["position_ids"], None, None, 0, mask, False, layer_ids, logits_at,
                         cache=cache.cache)
