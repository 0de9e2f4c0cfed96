"""The AR lane: a small causal LM with the target's tokenizer drafts K tokens, one forward each.

Drafting cost grows linearly with K: this is the serial loop the block drafters remove.
"""

from __future__ import annotations

import torch

from ..models import crop_cache, forward_logits, new_cache
from ..sampling import logits_to_probs, pick
from ..timing import SpanClock
from .base import DraftBlock


class ARDrafter:
    target_layer_ids = None  # reads only tokens

    def __init__(self, model):
        self.model = model
        self.cache = None

    def start(self, prompt_ids: torch.Tensor, features: torch.Tensor | None, clock: SpanClock) -> None:
        self.cache = new_cache(self.model)
        with clock.span("draft", "drafter prefill"):
            forward_logits(self.model, prompt_ids, self.cache, logits_to_keep=1)

    def propose(self, committed_ids: torch.Tensor, k: int, temperature: float, generator: torch.Generator,
                clock: SpanClock) -> DraftBlock:
        # Feed what the cache has not seen yet: the last bonus, and after a fully accepted block the last
        # drafted token too (it was sampled but never fed).
        inputs = committed_ids[:, self.cache.get_seq_length():]
        ids, probs = [], []
        for i in range(k):
            with clock.span("draft", f"draft forward {i + 1}/{k}"):
                logits = forward_logits(self.model, inputs, self.cache, logits_to_keep=1)[0, -1]
                token_probs = logits_to_probs(logits, temperature)
                token = pick(token_probs, temperature, generator)
            ids.append(token)
            probs.append(token_probs)
            inputs = token.view(1, 1)
        return DraftBlock(torch.stack(ids), torch.stack(probs))

    def accept(self, num_valid: int, features: torch.Tensor | None) -> None:
        crop_cache(self.cache, num_valid)
