"""When a request stops, and how far it may draft: the rules every loop shares (engine/run.py one request at a
time, engine/batch.py many at once). Plain integers in and out: no tensor, so nothing here waits for a device."""

from __future__ import annotations

from .contract.types import GenerationConfig


def drafts_this_step(config: GenerationConfig, max_drafts: int | None, num_new: int, length: int,
                     context_length: int) -> int:
    """K for a request with `num_new` tokens written and `length` committed, shortened so a step never drafts past
    max_new_tokens, the context (the bonus always fits) or the block a block drafter was trained on."""
    remaining = config.max_new_tokens - num_new
    room = context_length - length
    longest = config.drafts_per_step if max_drafts is None else max_drafts
    return max(0, min(config.drafts_per_step, longest, remaining - 1, room - 1))


def finish_reason(token_id: int, length: int, num_prompt: int, eos_id: int, max_new_tokens: int,
                  context_length: int) -> str | None:
    """Why a request ends with `token_id` committed as its `length`-th token, or None when it goes on."""
    if token_id == eos_id:
        return "eos"
    if length - num_prompt >= max_new_tokens:
        return "length"
    if length >= context_length:
        return "context"
    return None
