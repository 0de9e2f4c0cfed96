"""The interface every drafter implements, so the speculative loop stays one loop.

A drafter keeps its own state (a KV cache) in step with the committed sequence by explicit lengths:
`start` sees the prompt, `propose` drafts k tokens after the committed ids, `verify_len` says how many of
them to send to the target, `accept` is told how many leading positions are still valid after
verification and drops the rest. Drafters that read the target's hidden states name the layers in
`target_layer_ids`; the loop hands them the features of the prompt (at `start`) and of the anchor and
accepted tokens (at `accept`). The baseline is `NoDrafter`, which drafts nothing.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Protocol

import torch

from ..contract.types import GenerationConfig
from ..timing import SpanClock


@dataclass(frozen=True)
class DraftBlock:
    ids: torch.Tensor  # (k,) drafted token ids
    probs: torch.Tensor  # (k, V) the distribution each token was drawn from (p_draft of the papers)
    confidences: torch.Tensor | None = None  # (k,) P(token survives | earlier ones did), DSpark only
    # A tree (engine/tree.py): each token's parent, -1 for a child of the anchor; None for a chain
    parents: tuple[int, ...] | None = None
    host_ids: tuple[int, ...] | None = None  # the ids on the host too, where the drafter made them there (a tree)
    # a tree's verify rows' parents' rows on the device (0 the anchor's, then 1 + parents[i]), where the drafter has
    # them there: the target builds the tree's positions and mask from them, nothing sent
    parent_rows: torch.Tensor | None = None

    def as_point_masses(self) -> "DraftBlock":
        """The same tokens proposed with certainty: q is 1 on each drafted token (an argmax proposal), which is
        what the rule must divide by for the output to stay the target's."""
        return DraftBlock(self.ids, torch.nn.functional.one_hot(self.ids, self.probs.shape[-1]).to(self.probs.dtype),
                          self.confidences, self.parents, self.host_ids, self.parent_rows)

    def head(self, length: int) -> "DraftBlock":
        """The first `length` tokens: what is sent to the target when a scheduler cuts the block (a chain)."""
        assert self.parents is None, "a scheduler cuts chains only"
        return DraftBlock(self.ids[:length], self.probs[:length], None)

    @functools.cached_property
    def confidence_values(self) -> list[float] | None:
        """The confidences on the host, read from the device once: the scheduler's read and the trace's are one."""
        return self.confidences.tolist() if self.confidences is not None else None

    @property
    def is_tree(self) -> bool:
        return self.parents is not None


class Drafter(Protocol):
    label: str  # which drafter this is, for the lane header ("EAGLE-3, 1 layer")
    target_layer_ids: list[int] | None  # target layers whose hidden states this drafter reads, or None
    max_drafts: int | None  # the longest block it can draft (a block drafter's trained block), None = any

    def prepare(self, config: GenerationConfig) -> None:
        """One-time work before a run's clock starts (e.g. profiling what a scheduler needs)."""

    def start(self, prompt_ids: torch.Tensor, features: torch.Tensor | None, clock: SpanClock) -> None:
        """Begin a run on `prompt_ids` (1, n) with the target's features of those positions."""

    def propose(self, committed_ids: torch.Tensor, k: int, temperature: float, generator: torch.Generator,
                clock: SpanClock) -> DraftBlock:
        """Draft k tokens that follow `committed_ids` (1, n), recording draft spans on `clock`."""

    def for_sampling(self) -> bool:
        """Draft above temperature 0 with what the same weights hold for it (DSpark: a confidence calibration fitted
        at temperature 1); False where they hold nothing of the kind and the drafter stays as it is."""

    def verify_len(self, block: DraftBlock, config: GenerationConfig, clock: SpanClock) -> int:
        """How many leading drafted tokens to send to the target (config: the run's settings).
        Any rule that looks only at what was drafted keeps the output lossless."""

    def accept(self, num_valid: int, features: torch.Tensor | None) -> None:
        """After verification: only the first `num_valid` positions (committed, or drafted and accepted)
        still stand. `features` are the target's features of the verify forward's anchor and accepted
        tokens, in order (None for drafters that read none)."""


class BaseDrafter:
    """Defaults for the parts of the protocol most drafters share."""

    label = "drafter"
    target_layer_ids: list[int] | None = None
    max_drafts: int | None = None
    # The feature drafters' view of the context: the latest `window` positions only (None: all), as serving engines
    # cap a drafter trained on short sequences (GenerationConfig.drafter_window; `window_mask`)
    window: int | None = None

    def prepare(self, config: GenerationConfig) -> None:
        pass

    def for_sampling(self) -> bool:
        return False

    def verify_len(self, block: DraftBlock, config: GenerationConfig, clock: SpanClock) -> int:
        return int(block.ids.numel())  # verify everything drafted


def window_mask(first_query: int, num_queries: int, num_keys: int, window: int | None,
                device=None) -> torch.Tensor | None:
    """(num_queries, num_keys) bool, True = may attend: queries at positions first_query.. over keys at positions
    0..num_keys − 1, each seeing the keys up to its own position and, with a `window`, only the latest `window` of
    them. None where that hides nothing (one query at the newest position, all of the context in its window)."""
    hides_old = window is not None and first_query + num_queries - window > 0  # the last query's oldest key hidden
    if not hides_old and num_queries == 1 and num_keys == first_query + 1:
        return None
    queries = torch.arange(first_query, first_query + num_queries, device=device)[:, None]
    keys = torch.arange(num_keys, device=device)[None, :]
    seen = keys <= queries
    return seen & (keys > queries - window) if hides_old else seen


class NoDrafter(BaseDrafter):
    """The baseline: drafts nothing, so every step is one target forward that writes one token."""

    label = "no drafter"
    max_drafts = 0

    def start(self, prompt_ids, features, clock) -> None:
        pass

    def propose(self, committed_ids, k, temperature, generator, clock) -> DraftBlock:
        raise AssertionError("the baseline never drafts")  # the loop asks for k = 0 and skips propose

    def accept(self, num_valid, features) -> None:
        pass


class TreeDrafter(BaseDrafter):
    """A drafter that grows trees (engine/tree.py) with a chain drafter's network: the chain keeps its own context
    bookkeeping (start, prepare, accept: it is told the accepted path's features as it is told its accepted drafts');
    a subclass's propose drafts the tree, up to `nodes` tokens."""

    def __init__(self, chain, nodes: int, label: str):
        self.chain = chain
        self.nodes = nodes
        self.target_layer_ids = chain.target_layer_ids
        self.max_drafts = chain.max_drafts  # the tree is no deeper than the chain could draft
        self.label = f"{label} over {chain.label}"  # the budget is the run's setting (GenerationConfig.tree_nodes)

    def prepare(self, config: GenerationConfig) -> None:
        self.chain.prepare(config)

    def start(self, prompt_ids: torch.Tensor, features: torch.Tensor | None, clock: SpanClock) -> None:
        self.chain.start(prompt_ids, features, clock)

    def accept(self, num_valid: int, features: torch.Tensor | None) -> None:
        self.chain.accept(num_valid, features)
