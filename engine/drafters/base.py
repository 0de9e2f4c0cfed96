"""The interface every drafter implements, so the speculative loop stays one loop.

A drafter keeps its own state (a KV cache) in step with the committed sequence by explicit lengths:
`start` sees the prompt, `propose` drafts K tokens after the committed ids, `rollback` is told how many
leading positions are still valid after verification and drops the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from ..timing import SpanClock


@dataclass(frozen=True)
class DraftBlock:
    ids: torch.Tensor  # (K,) drafted token ids
    probs: torch.Tensor  # (K, V) the distribution each token was drawn from (p_draft of the papers)


class Drafter(Protocol):
    def start(self, prompt_ids: torch.Tensor, clock: SpanClock) -> None:
        """Begin a run on `prompt_ids` (1, n): reset state and prefill it."""

    def propose(self, committed_ids: torch.Tensor, k: int, temperature: float, generator: torch.Generator,
                clock: SpanClock) -> DraftBlock:
        """Draft k tokens that follow `committed_ids` (1, n), recording draft spans on `clock`."""

    def rollback(self, num_valid: int) -> None:
        """Keep only state for the first `num_valid` positions of the sequence (committed, or drafted and
        accepted); everything after them was rejected or never verified."""
