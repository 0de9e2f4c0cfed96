"""One transformers KV cache for many requests of different lengths: a batch's drafters (drafters/batched.py), and its
target where the fused forward does not compute it (target/batch.py RaggedBatchTarget; the fused target's batch cache is
preallocated instead: target/batch.py BatchTarget).

A transformers DynamicCache holds one tensor per layer, (batch, heads, slots, head_dim), and every forward appends
the same number of slots to every request. Requests in a speculative batch are ragged: each has its own committed
length, drafts a different number of tokens and accepts a different number. So each request's entries are kept
right-aligned: request b's n_b entries fill the last n_b of the cache's W slots and the slots before them are
padding that no query may see (the attention mask says so; positions are given explicitly, so a request's tokens
sit at their own positions whatever the padding).

A forward appends S new slots to every request, of which each request uses its own first few (the rest padding);
`keep` then says which of the new slots each request keeps (an anchor and its accepted drafts, or a prompt's
tokens) and re-aligns the cache with one gather per layer. Only the mask and the alignment are new: the model,
its weights and its arithmetic are the single-request ones.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from .models import cache_tensors, crop_cache


def padded(rows: list, device: torch.device) -> torch.Tensor:
    """Rows of different lengths (token ids, or (n, F) features) as one (B, longest, ...) tensor, each row's padding
    after it as zeros (never seen: the masks hide it)."""
    tensors = [r if torch.is_tensor(r) else torch.tensor(r, dtype=torch.long) for r in rows]
    return torch.nn.utils.rnn.pad_sequence(tensors, batch_first=True).to(device)


class RaggedCache:
    """A DynamicCache for `batch` requests, request b's `lengths[b]` entries right-aligned in its row."""

    def __init__(self, cache: DynamicCache, batch: int, device: torch.device):
        self.cache = cache
        self.lengths = [0] * batch
        self.device = device
        self._width_before = 0  # the cache's width when the pending forward's slots were appended

    @property
    def width(self) -> int:
        """Slots per request row: the longest request's entries."""
        return max(self.lengths, default=0)

    def visible(self) -> torch.Tensor:
        """(B, W) bool: which of the cached slots hold each request's own entries (the rest is padding)."""
        width = self.width
        slots = torch.arange(width)
        return slots[None, :] >= width - torch.tensor(self.lengths)[:, None]

    def causal_inputs(self, counts: list[int]) -> dict[str, torch.Tensor]:
        """The mask and positions of a causal forward that appends S = max(counts) slots, request b's first
        counts[b] of them its own tokens (a prompt, or an anchor and its drafts), each seeing its request's cached
        entries and its own new tokens up to itself. Padding queries repeat their request's last token's view, so
        every row of the softmax has a key and the numbers stay finite; their outputs are never read."""
        slots = max(counts)
        if len(set(self.lengths)) == 1 and len(set(counts)) == 1:  # no padding anywhere (one request, say): the
            return self.inputs(None, torch.arange(slots)[None, :] + self.lengths[0])  # model's own causal mask
        query = torch.arange(slots)
        last = torch.minimum(query[None, :], (torch.tensor(counts) - 1).clamp_min(0)[:, None])  # (B, S)
        new = torch.arange(slots)[None, None, :] <= last[:, :, None]  # (B, S, S)
        cached = self.visible()[:, None, :].expand(-1, slots, -1)  # (B, S, W)
        positions = torch.tensor(self.lengths)[:, None] + last
        return self.inputs(torch.cat([cached, new], dim=2), positions)

    def inputs(self, mask: torch.Tensor | None, positions: torch.Tensor) -> dict[str, torch.Tensor]:
        """A forward's attention_mask (B, 1, S, W + S; None: the model's own causal one) and position_ids (B, S),
        as the model takes them; notes the width the forward appends to, for `keep`."""
        self._width_before = self.width
        inputs = {"position_ids": positions.expand(len(self.lengths), -1).to(self.device)}
        if mask is not None:
            inputs["attention_mask"] = mask[:, None].to(self.device)
        return inputs

    def keep(self, kept: list[list[int]]) -> None:
        """After a forward: request b keeps the new slots kept[b] (offsets among the slots that forward appended,
        ascending) after its earlier entries; everything else is dropped and the rows re-aligned."""
        before = self._width_before
        lengths = [n + len(k) for n, k in zip(self.lengths, kept)]
        if all(k == list(range(len(kept[0]))) for k in kept):  # each keeps its first c: the rows stay aligned
            crop_cache(self.cache, before + len(kept[0]))
            self.lengths = lengths
            return
        width = max(lengths, default=0)
        index = torch.zeros(len(lengths), width, dtype=torch.long)
        for b, (n, offsets) in enumerate(zip(self.lengths, kept)):
            sources = [*range(before - n, before), *(before + o for o in offsets)]
            if sources:
                index[b, width - len(sources):] = torch.tensor(sources)
        self._gather(index)
        self.lengths = lengths

    def truncate(self, lengths: list[int]) -> None:
        """Keep request b's first lengths[b] entries (at most what it holds), dropping its newest: a serial
        drafter's rollback after verification."""
        width = self.width
        new_width = max(lengths, default=0)
        index = torch.zeros(len(lengths), new_width, dtype=torch.long)
        for b, (n, keep) in enumerate(zip(self.lengths, lengths)):
            assert keep <= n, "a cache is truncated, never grown"
            if keep:
                index[b, new_width - keep:] = torch.arange(width - n, width - n + keep)
        self._gather(index)
        self.lengths = list(lengths)

    def select(self, rows: list[int]) -> None:
        """Keep only the requests `rows` (in that order): the others have finished and leave the batch. Rows stay
        right-aligned, so this is one row selection per layer and a slice: no per-slot gather."""
        lengths = [self.lengths[r] for r in rows]
        width, old = max(lengths, default=0), self.width
        index = torch.tensor(rows, device=self.device, dtype=torch.long)
        for tensor, put in cache_tensors(self.cache):
            put(tensor.index_select(0, index)[:, :, old - width:])
        self.lengths = lengths

    def extend(self, other: "RaggedCache") -> None:
        """Append `other`'s requests after this cache's, as rows of their own (requests joining a running batch):
        both sides left-padded to the wider one, so every row stays right-aligned. A cache never written to (new,
        or a drafter's that fills at its first pass) contributes rows of padding only."""
        mine, theirs = cache_tensors(self.cache), cache_tensors(other.cache)
        width = max(self.width, other.width)
        if theirs and not mine:  # this side was never written: other's tensors, below rows of padding for ours
            for tensor, put in theirs:
                put(torch.cat([_empty_rows(tensor, len(self.lengths), width), _left_padded(tensor, width)]))
            self.cache = other.cache
        elif mine:
            others = [tensor for tensor, _ in theirs] or [None] * len(mine)
            for (tensor, put), their in zip(mine, others):
                their = _empty_rows(tensor, len(other.lengths), width) if their is None else _left_padded(their, width)
                put(torch.cat([_left_padded(tensor, width), their]))
        self.lengths = self.lengths + other.lengths

    def _gather(self, index: torch.Tensor) -> None:
        """Every row re-built from its slots `index[b]` (B, W'): one row selection over each layer's tensor seen
        as (B·heads·W, dim), a copy of whole head vectors (a `gather` over the slot axis reads an index per number
        and costs about three times as much here)."""
        index = index.to(self.device)
        flat, shape = None, None
        for tensor, put in cache_tensors(self.cache):
            batch, heads, width, dim = tensor.shape
            if tensor.shape[:3] != shape:  # once: every layer's tensors have the same shape
                shape = tensor.shape[:3]
                starts = torch.arange(batch * heads, device=self.device).view(batch, heads, 1) * width
                flat = (starts + index[:, None, :]).reshape(-1)
            put(tensor.reshape(-1, dim).index_select(0, flat).view(batch, heads, index.shape[1], dim))


def _left_padded(tensor: torch.Tensor, width: int) -> torch.Tensor:
    """A (B, heads, slots, dim) cache tensor widened to `width` slots by padding on the left."""
    missing = width - tensor.shape[2]
    if missing == 0:
        return tensor
    return torch.cat([tensor.new_zeros(tensor.shape[0], tensor.shape[1], missing, tensor.shape[3]), tensor], dim=2)


def _empty_rows(like: torch.Tensor, rows: int, width: int) -> torch.Tensor:
    """`rows` rows of padding shaped as `like`'s, `width` slots wide."""
    return like.new_zeros(rows, like.shape[1], width, like.shape[3])
