"""The interface every drafter implements, so the speculative loop stays one loop.

A drafter keeps its own state (a KV cache) in step with the committed sequence by explicit lengths:
`start` sees the prompt, `propose` drafts k tokens after the committed ids, `accept` is told how many
leading positions are still valid after verification and drops the rest. Block drafters also read the
target's hidden states: they name the layers in `target_layer_ids`, and the loop hands them the features
of the prompt (at `start`) and of the anchor and accepted tokens (at `accept`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from ..timing import SpanClock


@dataclass(frozen=True)
class DraftBlock:
    ids: torch.Tensor  # (k,) drafted token ids
    probs: torch.Tensor  # (k, V) the distribution each token was drawn from (p_draft of the papers)
    confidences: torch.Tensor | None = None  # (k,) P(token survives | earlier ones did), DSpark only

    def head(self, length: int) -> "DraftBlock":
        """The first `length` tokens: what is sent to the target when a scheduler cuts the block."""
        return DraftBlock(self.ids[:length], self.probs[:length], None)


class Drafter(Protocol):
    target_layer_ids: list[int] | None  # target layers whose hidden states this drafter reads, or None

    def start(self, prompt_ids: torch.Tensor, features: torch.Tensor | None, clock: SpanClock) -> None:
        """Begin a run on `prompt_ids` (1, n) with the target's features of those positions."""

    def propose(self, committed_ids: torch.Tensor, k: int, temperature: float, generator: torch.Generator,
                clock: SpanClock) -> DraftBlock:
        """Draft k tokens that follow `committed_ids` (1, n), recording draft spans on `clock`."""

    def accept(self, num_valid: int, features: torch.Tensor | None) -> None:
        """After verification: only the first `num_valid` positions (committed, or drafted and accepted)
        still stand. `features` are the target's features of the verify forward's anchor and accepted
        tokens, in order (None for drafters that read none)."""
