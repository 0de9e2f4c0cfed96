"""The DSpark lane: one parallel backbone pass, then the Markov head samples the block left to right and
the confidence head scores each token; the loop then verifies only as much as the scheduler chooses.

Cache bookkeeping is DFlash's (the draft cache holds committed context only). The distribution each token
was drawn from, p_k ∝ exp(U_k + B(x_{k−1}, ·)), is the p_draft the rejection rule uses.
"""

from __future__ import annotations

import torch

from ..models import crop_cache
from ..sampling import logits_to_probs, pick
from ..timing import SpanClock
from .base import DraftBlock
from .dflash import DFlashDrafter


class DSparkDrafter(DFlashDrafter):
    def __init__(self, model, target):
        super().__init__(model, target)
        self.max_draft_len = model.block_size  # the anchor's own state predicts the first token

    def propose(self, committed_ids: torch.Tensor, k: int, temperature: float, generator: torch.Generator,
                clock: SpanClock) -> DraftBlock:
        with clock.span("draft", f"one parallel backbone pass for {k}"):
            anchor_position = committed_ids.shape[1] - 1
            cached = self.cache.get_seq_length()
            assert cached + self.pending.shape[1] == anchor_position, "draft context out of step"
            block = torch.full((1, k), self.mask_token_id, dtype=committed_ids.dtype, device=committed_ids.device)
            block[0, 0] = committed_ids[0, -1]
            positions = torch.arange(cached, anchor_position + k, device=committed_ids.device).unsqueeze(0)
            hidden = self.model(self.embed_tokens(block), self.pending, positions, self.cache)[0]  # (k, H)
            crop_cache(self.cache, anchor_position)
            self.pending = self.pending[:, :0]
            base_logits = self.lm_head(hidden)  # (k, V)
        with clock.span("draft", f"Markov head: {k} cheap serial steps"):
            ids, probs = markov_sample(base_logits, committed_ids[0, -1], self.model.markov_bias, temperature,
                                       generator)
            confidences = None
            if self.model.confidence_head is not None:
                prev_ids = torch.cat([committed_ids[0, -1:], ids[:-1]])  # the token before each drafted one
                confidences = self.model.calibrated_confidence(self.model.confidence_logits(hidden, prev_ids))
        return DraftBlock(ids, probs, confidences)


def markov_sample(base_logits: torch.Tensor, anchor_id: torch.Tensor, markov_bias, temperature: float,
                  generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample the block left to right: p_k ∝ exp(U_k + B(x_{k−1}, ·)) with x_0 the anchor.
    Returns the ids (k,) and the distributions they were drawn from (k, V)."""
    prev, ids, probs = anchor_id, [], []
    for row in base_logits:
        step_probs = logits_to_probs(row + markov_bias(prev), temperature)
        prev = pick(step_probs, temperature, generator)
        ids.append(prev)
        probs.append(step_probs)
    return torch.stack(ids), torch.stack(probs)
