"""The DFlash lane: the whole block drafted in one parallel forward, conditioned on target features.
Kind "dflash" in methods.py: z-lab's checkpoint format (`dflash_config`), where position 0 of the block is
the anchor and the mask positions 1..B−1 predict the drafted tokens.

Faithful to the reference: the drafter always runs the checkpoint's whole block [anchor, MASK × (B − 1)]
and keeps the first k drafts. In-block attention is bidirectional, so a shorter block would change every
hidden state (and the drafts), not just drop the tail.

Draft cache bookkeeping: the cache holds keys and values of the projected context features of committed
positions only. A propose feeds the features new since the last step plus the block, then crops the
cache back to the context, dropping the block's own keys and values. After verification the target's
features of the anchor and the accepted tokens become the next step's new context. A drafter trained without
target features (dflash_model.py) reads none: the loop computes none for it, and each block is drafted alone.
With a window (GenerationConfig.drafter_window) the block attends to the latest `window` context positions only; the
cache still holds them all, masked.
"""

from __future__ import annotations

import torch

from ..models import new_cache
from ..sampling import logits_to_probs, pick
from ..timing import SpanClock
from .base import BaseDrafter, DraftBlock
from .dflash_model import DFlashDraftModel, load_block_model, share_target_embeddings
from .fused import DraftCache, FusedBlock, kept, roll_back


def recognises(config: dict) -> bool:
    return "dflash_config" in config or "DFlashDraftModel" in (config.get("architectures") or [])


def load(path: str, device: torch.device, dtype: torch.dtype, **hub):
    return load_block_model(DFlashDraftModel, path, device, dtype, **hub)


def owns(model) -> bool:
    return type(model) is DFlashDraftModel


def build(model, engine) -> "DFlashDrafter":
    return DFlashDrafter(model, engine.target)


def block_words(n: int) -> str:
    """A block drafter's block in the lane headers' one convention: the tokens it drafts, the anchor not counted."""
    return f"{n} drafts per block"


class DFlashDrafter(BaseDrafter):
    def __init__(self, model, target, fused: bool = True):
        self.model = model
        # the fused forward over a cache of its own (fused.py); fused=False, or a network it does not fit: the model's
        # own forward over a transformers cache, cropped after every block
        self.fused = FusedBlock(model) if fused and FusedBlock.supports(model) else None
        # The target's embedding and LM head, unless the checkpoint carries its own different copies.
        share_target_embeddings(model, target)
        self.embed_tokens = model.embed_tokens if model.embed_tokens is not None else target.get_input_embeddings()
        self.lm_head = model.lm_head if model.lm_head is not None else target.get_output_embeddings()
        self.target_layer_ids = model.target_layer_ids if model.target_features else None  # None: the loop computes none
        self.mask_token_id = model.mask_token_id
        self.max_drafts = model.block_size - 1  # the anchor takes one place in the block
        # z-lab's block size counts the anchor (the last committed token), DeepSpec's does not: every lane header
        # says how many tokens a block drafts, one convention for all (block_words)
        self.label = f"DFlash, {model.config.num_hidden_layers} layers, {block_words(self.max_drafts)}"
        self.cache = None
        self.pending: torch.Tensor | None = None  # target features not yet in the cache

    def start(self, prompt_ids: torch.Tensor, features: torch.Tensor | None, clock: SpanClock) -> None:
        self.fused = kept(self.fused, self.model)
        self.cache = DraftCache.for_model(self.model, prompt_ids.shape[1]) if self.fused else new_cache(self.model)
        self.pending = features  # the whole prompt is context for the first block

    def propose(self, committed_ids: torch.Tensor, k: int, temperature: float, generator: torch.Generator,
                clock: SpanClock) -> DraftBlock:
        with clock.span("draft", f"one parallel pass over the block, keep {k}"):
            return self.block_from_hidden(self.block_hidden(committed_ids), committed_ids[0, -1], k, temperature,
                                          generator, clock)

    def block_from_hidden(self, hidden: torch.Tensor, anchor_id: torch.Tensor, k: int, temperature: float,
                          generator: torch.Generator, clock: SpanClock) -> DraftBlock:
        """The k drafts read from one block's hidden states (B, H): `blocks_from_hidden` for a batch of one."""
        return self.blocks_from_hidden(hidden[None], anchor_id.view(1), [k], temperature, [generator], clock)[0]

    def blocks_from_hidden(self, hidden: torch.Tensor, anchor_ids: torch.Tensor, ks: list[int], temperature: float,
                           generators: list[torch.Generator], clock: SpanClock) -> list[DraftBlock | None]:
        """R blocks' drafts from their hidden states (R, B, H), one LM head over all of them: request r's first
        ks[r] drafts, drawn with its own generator (None where ks[r] = 0)."""
        probs = logits_to_probs(self.lm_head(hidden[:, 1: max(ks) + 1]), temperature)  # masks predict themselves
        return [DraftBlock(pick(probs[r, :k], temperature, generator), probs[r, :k]) if k else None
                for r, (k, generator) in enumerate(zip(ks, generators))]

    def position_probs(self, committed_ids: torch.Tensor, k: int, temperature: float) -> torch.Tensor:
        """(k, V): the distribution of each of the block's first k drafted positions, from one parallel pass. Each
        is drafted independently of the tokens before it in the block (a tree can be grown from them)."""
        hidden = self.block_hidden(committed_ids)
        return logits_to_probs(self.lm_head(hidden[1: k + 1]), temperature)  # mask positions predict themselves

    def block_hidden(self, committed_ids: torch.Tensor) -> torch.Tensor:
        """One forward over the whole block [anchor, MASK × (B − 1)] with the new context; returns the
        block's hidden states (B, H) and leaves the cache holding the committed context only."""
        block_size = self.model.block_size
        anchor_position = committed_ids.shape[1] - 1
        block = torch.full((1, block_size), self.mask_token_id, dtype=committed_ids.dtype, device=committed_ids.device)
        block[0, 0] = committed_ids[0, -1]
        if self.target_layer_ids is None:  # no target features: the block alone, no context, nothing cached
            return self.forward(self.embed_tokens(block), None, anchor_position, None, None)[0]
        cached = self.cache.get_seq_length()
        assert cached + self.pending.shape[1] == anchor_position, "draft context out of step"
        hidden = self.forward(self.embed_tokens(block), self.pending, cached, self.cache,
                              self.window_mask(anchor_position, block_size, committed_ids.device))
        roll_back(self.cache, anchor_position)  # keep the context, drop the block's keys and values
        self.pending = self.pending[:, :0]
        return hidden[0]

    def forward(self, block: torch.Tensor, context: torch.Tensor | None, first: int, cache, mask) -> torch.Tensor:
        """The network over the embedded block and new context features whose first key is at position `first`."""
        if self.fused is not None:
            return self.fused(block, context, first, cache, mask)
        positions = torch.arange(first, first + block.shape[1] + (0 if context is None else context.shape[1]),
                                 device=block.device)
        return self.model(block, context, positions[None], cache, mask)

    def window_mask(self, anchor_position: int, block_size: int, device) -> torch.Tensor | None:
        """With a window (BaseDrafter.window): every query of the block sees the whole block and the context's latest
        `window` positions before the anchor, (1, keys) bool; None without one or while the context fits in it."""
        if self.window is None or anchor_position <= self.window:
            return None
        return (torch.arange(anchor_position + block_size, device=device) >= anchor_position - self.window)[None]

    def accept(self, num_valid: int, features: torch.Tensor | None) -> None:
        self.pending = features
