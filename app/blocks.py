"""The block control's start on a page: a one-pass drafter drafts at the block it was trained on, read from its
checkpoint's config by the engine (`max_drafts`: a block-16 drafter drafts 15), unless the visitor asks for less.

The slider is shared by every one-pass lane and stops at the longest block a loaded drafter can draft; it starts
there too, and a lane whose drafter was trained on a shorter block drafts its own (the run's end says so). A page
whose drafters have no trained block starts at the settings' default."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.contract.methods import METHOD_REGISTRY
from engine.contract.types import MAX_DRAFTS


def trained_block(methods: Sequence[str], caps: Mapping[str, int | None]) -> int | None:
    """The most drafts per block any loaded one-pass drafter was trained for (None: none has a trained block)."""
    blocks = [caps[m] for m in methods if METHOD_REGISTRY[m].one_pass and METHOD_REGISTRY[m].drafts and caps.get(m)]
    return min(MAX_DRAFTS, max(blocks)) if blocks else None


def block_default(methods: Sequence[str], caps: Mapping[str, int | None], asked: int) -> int:
    """The block slider's starting value: the loaded drafters' trained block, else `asked` (the settings' default)."""
    trained = trained_block(methods, caps)
    return asked if trained is None else trained
