"""Drafters for a batch of requests (engine/batch.py): the expensive pass batched, the cheap per-token work per
request with the single-request drafter's own code.

A block drafter's backbone pass (DFlash, DSpark) runs once for the whole batch over a ragged draft cache
(engine/ragged.py); each request's drafts are then read from its rows of that pass by the single-request drafter
(`block_from_hidden`: DFlash's LM head, DSpark's Markov and confidence heads), and its scheduler picks how much
of each request's block to verify. So a batch drafts exactly what each request would have drafted alone, up to
the floating-point order of a batched product.
"""

from __future__ import annotations

import torch

from ..contract.types import EngineError, GenerationConfig
from ..models import new_cache
from ..ragged import RaggedCache
from ..timing import SpanClock
from .base import DraftBlock, NoDrafter
from .dflash import DFlashDrafter


class BatchDrafter:
    """What the batched loop asks of a drafter; `None` entries are requests that draft nothing this step."""

    target_layer_ids: list[int] | None = None
    max_drafts: int | None = None

    def start(self, features: list[torch.Tensor | None], clock: SpanClock) -> None:
        """Begin on the batch's prompts: `features[b]` are the target's features of request b's prompt, (n_b, F)."""

    def propose(self, committed: list[torch.Tensor], ks: list[int], temperature: float,
                generators: list[torch.Generator], clock: SpanClock) -> list[DraftBlock | None]:
        raise NotImplementedError

    def verify_len(self, block: DraftBlock, config: GenerationConfig, clock: SpanClock) -> int:
        return int(block.ids.numel())

    def accept(self, features: list[torch.Tensor | None]) -> None:
        """After verification: request b's anchor and accepted drafts' features (None for drafters that read
        none)."""

    def select(self, rows: list[int]) -> None:
        """Only the requests `rows` go on (the others finished)."""


class NoBatchDrafter(BatchDrafter):
    """The batched baseline: nothing drafted, one target forward writes one token per request."""

    max_drafts = 0
    label = NoDrafter.label

    def propose(self, committed, ks, temperature, generators, clock):
        raise AssertionError("the baseline never drafts")


class BlockBatchDrafter(BatchDrafter):
    """DFlash and DSpark: the block [anchor, MASK × (B − 1)] of every request in one backbone pass, each request's
    new context features appended to its row of one ragged draft cache."""

    def __init__(self, drafter: DFlashDrafter, batch: int, device: torch.device):
        self.drafter = drafter
        self.label = drafter.label
        self.target_layer_ids = drafter.target_layer_ids
        self.max_drafts = drafter.max_drafts
        self.cache = RaggedCache(new_cache(drafter.model), batch, device)
        self.pending: list[torch.Tensor] = []  # per request: target features not yet in the draft cache, (p_b, F)

    def start(self, features, clock) -> None:
        self.pending = list(features)

    def propose(self, committed, ks, temperature, generators, clock):
        with clock.span("draft", f"one parallel pass over {len(committed)} blocks"):
            hidden = self._block_hidden([c[-1] for c in committed])
        return [self.drafter.block_from_hidden(hidden[b], committed[b][-1], k, temperature, generators[b], clock)
                if k else None for b, k in enumerate(ks)]

    def verify_len(self, block, config, clock) -> int:
        return self.drafter.verify_len(block, config, clock)

    def accept(self, features) -> None:
        self.pending = list(features)

    def select(self, rows) -> None:
        self.cache.select(rows)
        self.pending = [self.pending[r] for r in rows]

    def _block_hidden(self, anchors: list[torch.Tensor]) -> torch.Tensor:
        """(B, block, H): every request's block with its new context, one forward; the draft cache then holds
        each request's committed context only (the blocks' own keys and values dropped)."""
        model, cache = self.drafter.model, self.cache
        batch, block_size = len(anchors), model.block_size
        pending = [p.reshape(-1, p.shape[-1]) for p in self.pending]
        width = max(p.shape[0] for p in pending)
        device = pending[0].device
        context = pending[0].new_zeros(batch, width, pending[0].shape[-1])
        for b, p in enumerate(pending):
            context[b, : p.shape[0]] = p  # request b's new context first, padding after
        counts = torch.tensor([p.shape[0] for p in pending])
        cached = torch.tensor(cache.lengths)
        block = torch.full((batch, block_size), model.mask_token_id, dtype=torch.long, device=device)
        block[:, 0] = torch.stack([a.view(()) for a in anchors])
        # keys: the cached context (each request's own), its new context (not the padding), and the whole block,
        # which attends both ways
        context_slots = torch.arange(width)[None, :] < counts[:, None]  # (B, P)
        sees = torch.cat([cache.visible(), context_slots, torch.ones(batch, block_size, dtype=torch.bool)], dim=1)
        positions = torch.cat([cached[:, None] + torch.arange(width)[None, :],
                               (cached + counts)[:, None] + torch.arange(block_size)[None, :]], dim=1)
        every_key = bool(sees.all())  # no padding (one request, say): no mask, as the single-request drafter
        inputs = cache.inputs(None if every_key else sees[:, None, :].expand(-1, block_size, -1), positions)
        hidden = model(self.drafter.embed_tokens(block), context, inputs["position_ids"], cache.cache,
                       attention_mask=inputs.get("attention_mask"))
        cache.keep([list(range(int(n))) for n in counts])
        self.pending = [p[:0] for p in pending]
        return hidden


def batched(drafter, batch: int, device: torch.device) -> BatchDrafter:
    """The batch form of a single-request drafter, or one clear line where a method has none yet."""
    if isinstance(drafter, NoDrafter):
        return NoBatchDrafter()
    if isinstance(drafter, DFlashDrafter):  # DSpark's and DeepSpec's DFlash too (drafters/deepspec.py)
        return BlockBatchDrafter(drafter, batch, device)
    raise EngineError(f"{drafter.label} does not run in a batch yet; the batched lanes are the baseline, "
                      "DFlash and DSpark")
