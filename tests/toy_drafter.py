"""A drafter kind with no weights, for the test that adds a method the way the docs say: this module and one
registry entry. It proposes the newest committed token again, K times, each as a point mass (q = 1 on it), which
the target's verify then judges like any draft: the output stays the target's."""

from __future__ import annotations

import torch

from engine.drafters.base import BaseDrafter, DraftBlock


class Repeater(torch.nn.Module):
    """The kind's whole "model": nothing to load, only the vocabulary size it learns from the target."""


def recognises(config: dict) -> bool:
    return False  # no checkpoint is of this kind


def load(path, device: torch.device, dtype: torch.dtype) -> Repeater:
    return Repeater()


def owns(model) -> bool:
    return isinstance(model, Repeater)


def build(model: Repeater, engine) -> "RepeatDrafter":
    return RepeatDrafter(engine.target.config.vocab_size)


class RepeatDrafter(BaseDrafter):
    label = "repeat the last token"

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size

    def start(self, prompt_ids, features, clock) -> None:
        pass

    def propose(self, committed_ids, k, temperature, generator, clock) -> DraftBlock:
        with clock.span("draft", "repeat"):
            ids = committed_ids[0, -1:].repeat(k)
            return DraftBlock(ids, torch.nn.functional.one_hot(ids, self.vocab_size).float())

    def accept(self, num_valid, features) -> None:
        pass
