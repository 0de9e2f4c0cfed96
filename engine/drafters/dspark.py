"""The DSpark lane: one parallel backbone pass, then the Markov head samples the block left to right and
the confidence head scores each token; the loop then verifies only as much as the scheduler chooses.

Cache bookkeeping is DFlash's (the draft cache holds committed context only). The distribution each token
was drawn from, p_k ∝ exp(U_k + B(x_{k−1}, ·)), is the p_draft the rejection rule uses.
"""

from __future__ import annotations

import torch

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
            hidden = self.block_hidden(committed_ids, k)  # k inputs give k tokens: the anchor predicts the first
            base_logits = self.lm_head(hidden)
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
