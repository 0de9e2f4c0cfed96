"""A drafter that tunes itself as it goes: after each verify, a few optimiser steps on what the target just wrote.

The run drafts with a copy of its drafter's network that lives for that run only (the engine's weights are never
touched). Before each draft, the copy takes `steps` Adam steps on the previous step's outcome: the tokens the target
committed after the anchor (the drafts it accepted, then its own token where it rejected one) are the labels of the
drafted positions, free with every verify, and the target's features of the context are the input, as in training
(engine/train). The prefill counts as the first verify: the first draft follows a step on the prompt's last tokens
and the target's first. On the embedded models one step at 1e-4 lifted DFlash past its trained window and left the
others where they were (docs/experiments.md); more steps or a larger rate cost more and did no better. The work is
timed as its own kind, "train", beside draft, verify and host.

The target still decides every token: at temperature 0 the output is the target's greedy text whatever the drafter
proposes, and above it the rejection rule keeps the target's distribution with any drafter (engine/measure/lossless.py
checks it). Only the feature drafters are tuned here: DFlash and DSpark (one block, its positions' labels) and EAGLE-3
(its first draft of every position, the one the target's features feed).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from .contract.types import EngineError
from .drafters.base import BaseDrafter, DraftBlock, window_mask
from .drafters.dflash import DFlashDrafter
from .drafters.eagle3 import Eagle3Drafter
from .timing import SpanClock

STEPS = 1  # optimiser steps after each verify
LEARNING_RATE = 1e-4  # a fifteenth of a from-scratch run's peak (engine/train): small moves on a trained network
FIRST_STRETCH = 8  # a serial drafter's first example: the prompt's last tokens before the target's first
CONTEXT = 512  # at most this many context positions in a step's example (the embedded target's whole context)


def tunable(drafter) -> bool:
    """Whether `drafter` can tune itself: a chain drafter that reads the target's features."""
    return isinstance(drafter, (DFlashDrafter, Eagle3Drafter)) and drafter.target_layer_ids is not None


def tuned_label(label: str, steps: int) -> str:
    return f"{label}, tuning itself ({steps} Adam step{'s' if steps > 1 else ''} a verify)"


class SelfTuning(BaseDrafter):
    """`inner` (a DFlash, DSpark or EAGLE-3 drafter) drafting with its own copy of the network, trained between
    steps. It keeps the target's features of every committed position but the newest (its training input)."""

    def __init__(self, inner, steps: int = STEPS, lr: float = LEARNING_RATE):
        self.inner = inner
        inner.model = copy.deepcopy(inner.model)  # this run's copy: the engine's network stays as loaded
        frozen = {id(p) for name in ("embed_tokens", "lm_head") if getattr(inner.model, name, None) is not None
                  for p in getattr(inner.model, name).parameters()}
        self.params = [p for p in inner.model.parameters() if id(p) not in frozen]
        self.steps, self.lr = steps, lr
        self.optimiser = None  # made on the first step, outside inference mode
        self.label = tuned_label(inner.label, steps)
        self.target_layer_ids, self.max_drafts, self.window = inner.target_layer_ids, inner.max_drafts, inner.window
        self.features: torch.Tensor | None = None  # (1, n − 1, F): positions 0..n − 2 of the n committed
        self.anchor: int | None = None  # the last draft's anchor position
        self.losses: list[float] = []  # each step's loss before its update, for a report

    def prepare(self, config) -> None:
        self.inner.prepare(config)
        self.label = tuned_label(self.inner.label, self.steps)  # as the inner drafter's prepare left it

    def verify_len(self, block: DraftBlock, config, clock: SpanClock) -> int:
        return self.inner.verify_len(block, config, clock)

    def start(self, prompt_ids: torch.Tensor, features: torch.Tensor | None, clock: SpanClock) -> None:
        self.features, self.anchor = features, None
        self.inner.start(prompt_ids, features, clock)

    def accept(self, num_valid: int, features: torch.Tensor | None) -> None:
        self.features = torch.cat([self.features, features], dim=1)
        self.inner.accept(num_valid, features)

    def propose(self, committed_ids: torch.Tensor, k: int, temperature: float, generator: torch.Generator,
                clock: SpanClock) -> DraftBlock:
        n = committed_ids.shape[1]
        if self.anchor is None:  # the prefill was the first verify: the prompt's last tokens and the target's first
            self.anchor = max(1, n - 1 - (self.inner.max_drafts or FIRST_STRETCH))
        if self.anchor < n - 1:
            with clock.span("train", f"{self.steps} Adam step{'s' if self.steps > 1 else ''} on the "
                                     f"{n - 1 - self.anchor} tokens the target just wrote"):
                self.learn(committed_ids)
        self.anchor = n - 1
        return self.inner.propose(committed_ids, k, temperature, generator, clock)

    def learn(self, committed_ids: torch.Tensor) -> None:
        """`steps` optimiser steps on the tokens written since the last anchor (the labels) after its context."""
        with torch.inference_mode(False), torch.enable_grad():
            ids = committed_ids.clone()  # out of inference mode: tensors autograd may save
            features = self.features.clone()
            if self.optimiser is None:
                for p in self.params:
                    p.requires_grad_(True)
                self.optimiser = torch.optim.Adam(self.params, lr=self.lr)
            loss_of = self._eagle_loss if isinstance(self.inner, Eagle3Drafter) else self._block_loss
            for _ in range(self.steps):
                self.optimiser.zero_grad(set_to_none=True)
                loss = loss_of(ids, features, self.anchor)
                loss.backward()
                self.optimiser.step()
                self.losses.append(float(loss.detach()))

    def _context_start(self, anchor: int) -> int:
        view = min(CONTEXT, self.window) if self.window is not None else CONTEXT
        return max(0, anchor - view)

    def _block_loss(self, ids: torch.Tensor, features: torch.Tensor, anchor: int) -> torch.Tensor:
        """DFlash and DSpark: the block [anchor, MASK …] after its context; each drafted position's label is the
        token the target committed there (DSpark: the anchor's own state predicts the first, with its Markov bias)."""
        inner, model = self.inner, self.inner.model
        block_size, start = model.block_size, self._context_start(anchor)
        labels = ids[0, anchor + 1: anchor + 1 + inner.max_drafts]
        block = torch.full((1, block_size), inner.mask_token_id, dtype=ids.dtype, device=ids.device)
        block[0, 0] = ids[0, anchor]
        positions = torch.arange(start, anchor + block_size, device=ids.device).unsqueeze(0)
        hidden = model(inner.embed_tokens(block), features[:, start:anchor], positions)[0]
        first = 1 if inner.max_drafts == block_size - 1 else 0  # z-lab's DFlash: mask positions predict themselves
        hidden = hidden[first: first + labels.numel()]
        logits = inner.lm_head(hidden)
        head = getattr(model, "markov_head", None)
        if head is not None and getattr(inner, "use_markov_head", False):
            prev = torch.cat([ids[0, anchor: anchor + 1], labels[:-1]])
            logits = logits + head.block_bias(prev, hidden)
        return F.cross_entropy(logits.float(), labels)

    def _eagle_loss(self, ids: torch.Tensor, features: torch.Tensor, anchor: int) -> torch.Tensor:
        """EAGLE-3: (f_p, t_{p+1}) at position p predicts t_{p+2}; the labels are the tokens after the anchor, fed
        causally after their context, each position seeing what it sees when drafting (the window, if any)."""
        model, n = self.inner.model, ids.shape[1]
        first, start = anchor - 1, self._context_start(anchor - 1)  # t_{anchor+1} is predicted at position anchor − 1
        positions = torch.arange(start, n - 2, device=ids.device).unsqueeze(0)
        mask = window_mask(0, n - 2 - start, n - 2 - start, self.window, ids.device)  # keys and queries from `start`
        hidden = model(ids[:, start + 1: n - 1], model.fc(features[:, start: n - 2]), positions, None, mask)
        logits = model.logits(hidden[0, first - start:])
        return F.cross_entropy(logits.float(), ids[0, anchor + 1: n])


def long_output_options(drafter, config):
    """`drafter` with the run's drafter window and self-tuning (GenerationConfig); one clear line where its lane
    cannot take them (the trees, the batched loop, drafters that read no target features)."""
    options = " and ".join(name for name, on in (("a drafter window", config.drafter_window is not None),
                                                 ("self-tuning", config.self_tuning)) if on)
    if not tunable(drafter):
        raise EngineError(f"{options} applies to the chain drafters that read the target's features (DFlash, "
                          f"DSpark, EAGLE-3), not to {drafter.label}")
    if config.requests_at_once > 1:
        raise EngineError(f"{options} runs one request at a time, not {config.requests_at_once} at once")
    drafter.window = config.drafter_window
    return SelfTuning(drafter) if config.self_tuning else drafter
