"""Text the target writes itself, for training drafters on what they will actually be asked to predict.

Speculative decoding drafts continuations of the target's own output, which differ from human-written
text (at temperature 0 a small target repeats itself a lot). Each sequence here starts from a random
corpus prefix and is continued by the shipped target: half of the batches greedily (what the app shows at
temperature 0), half sampled at temperature 1. Deterministic given the seed.
"""

from __future__ import annotations

import time

import torch

from ..models import forward_logits, new_cache
from .lm import sample_windows

PREFIX_TOKENS = 64
NEW_TOKENS = 192
BATCH = 32


@torch.inference_mode()
def generate_rows(target, stream: torch.Tensor, num_rows: int, seed: int = 0, log=print) -> torch.Tensor:
    """(num_rows, PREFIX_TOKENS + NEW_TOKENS) token ids: corpus prefixes continued by the target."""
    generator = torch.Generator().manual_seed(seed)  # on the CPU: the same rows on any device
    device = next(target.parameters()).device
    rows, start = [], time.perf_counter()
    for batch_index in range(0, num_rows, BATCH):
        ids = sample_windows(stream, BATCH, PREFIX_TOKENS, generator).to(device)
        greedy = (batch_index // BATCH) % 2 == 0
        cache = new_cache(target)
        logits = forward_logits(target, ids, cache, logits_to_keep=1)[:, -1]
        for _ in range(NEW_TOKENS):
            if greedy:
                next_ids = logits.argmax(-1, keepdim=True)
            else:
                next_ids = torch.multinomial(torch.softmax(logits.float(), -1).cpu(), 1, generator=generator).to(device)
            ids = torch.cat([ids, next_ids], dim=1)
            logits = forward_logits(target, next_ids, cache, logits_to_keep=1)[:, -1]
        rows.append(ids.cpu())
        log(f"self-data: {batch_index + BATCH}/{num_rows} rows, {time.perf_counter() - start:.0f} s")
    return torch.cat(rows)[:num_rows]
