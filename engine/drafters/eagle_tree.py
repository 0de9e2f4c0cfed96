"""The AR tree lane: EAGLE-2's dynamic draft tree (Li et al., "EAGLE-2: Faster Inference of Language Models with
Dynamic Draft Trees", arXiv 2406.16858) grown by the EAGLE-3 drafter.

Level 1 is the chain's first draft forward: the distribution after the anchor, whose likeliest WIDTH tokens become
candidate nodes. Each further level is one more draft forward, over the WIDTH likeliest candidates of the newest
level at once (each attending to the drafter's context and its own ancestors only, at the position its depth
gives); each adds its likeliest WIDTH children. A candidate's score is the product of its path's probabilities.
After K levels the likeliest candidates overall, up to the node budget, are the tree the target verifies — an
ancestor never scores below its descendants, so the chosen nodes always hang together.

Every level costs another serial draft forward: the tree grows one level per forward, where DDTree gets every
level from one pass. The drafter's cache gains one entry per expanded candidate while the tree grows; the chain's
`accept` drops them all, as it drops its serial drafts.
"""

from __future__ import annotations

import math

import torch

from ..contract.types import GenerationConfig
from ..sampling import logits_to_probs
from ..timing import SpanClock
from .base import DraftBlock, TreeDrafter

WIDTH = 8  # candidates expanded per level, and children kept per expanded candidate (EAGLE-2's top-k)


def grow(chain, config: GenerationConfig | None) -> "EagleTreeDrafter":
    return EagleTreeDrafter(chain, config.tree_nodes if config is not None else GenerationConfig.tree_nodes)


class _Candidates:
    """Every candidate node grown so far: token, parent (-1: the anchor), depth, log score, the distribution it
    was chosen from."""

    def __init__(self):
        self.ids: list[int] = []
        self.parents: list[int] = []
        self.depths: list[int] = []
        self.scores: list[float] = []
        self.probs: list[torch.Tensor] = []

    def add_children(self, parents: list[int], probs: torch.Tensor) -> list[int]:
        """The likeliest WIDTH tokens of each row of `probs` (one row per parent) as children of that parent, read
        from the device in one copy; returns their indices."""
        top_p, top_ids = probs.topk(min(WIDTH, probs.shape[-1]), dim=-1)
        width = top_ids.shape[-1]
        both = torch.cat([top_p.double(), top_ids.double()], dim=-1).tolist()  # ids exact in float64
        added = []
        for parent, row, parent_probs in zip(parents, both, probs):
            depth = self.depths[parent] + 1 if parent >= 0 else 1
            base = self.scores[parent] if parent >= 0 else 0.0
            for p, token in zip(row[:width], row[width:]):
                if p > 0:
                    added.append(len(self.ids))
                    self.ids.append(int(token))
                    self.parents.append(parent)
                    self.depths.append(depth)
                    self.scores.append(base + math.log(p))
                    self.probs.append(parent_probs)
        return added

    def ancestors(self, node: int) -> list[int]:
        out = []
        while (node := self.parents[node]) >= 0:
            out.append(node)
        return out

    def best(self, nodes: list[int], count: int) -> list[int]:
        """The `count` likeliest of `nodes`; on a tie the shallower (an ancestor before its descendant)."""
        return sorted(nodes, key=lambda c: (-self.scores[c], self.depths[c], c))[:count]


class EagleTreeDrafter(TreeDrafter):
    def __init__(self, chain, nodes: int):
        super().__init__(chain, nodes, "EAGLE-2 dynamic tree")  # the chain: drafters/eagle3.py's Eagle3Drafter

    def propose(self, committed_ids: torch.Tensor, k: int, temperature: float, generator: torch.Generator,
                clock: SpanClock) -> DraftBlock:
        chain, n = self.chain, committed_ids.shape[1]
        assert chain.context_len + chain.pending.shape[1] == n - 1, "draft context out of step"
        grown = _Candidates()
        with clock.span("draft", f"tree level 1/{k}: draft forward ({chain.pending.shape[1]} new target features)"):
            hidden = chain._feed_context(committed_ids)[0, -1]  # the anchor's output: it predicts depth 1
            newest = grown.add_children([-1], logits_to_probs(chain.model.logits(hidden), temperature)[None])
        outputs = {-1: hidden}  # each expanded candidate's output hidden state, which predicts its children
        slots: dict[int, int] = {}  # each expanded candidate's entry in the draft cache
        for level in range(2, k + 1):
            frontier = grown.best(newest, WIDTH)
            with clock.span("draft", f"tree level {level}/{k}: one draft forward over {len(frontier)} nodes"):
                out = self._expand(frontier, grown, outputs, slots, position=n - 3 + level, device=committed_ids.device)
                probs = logits_to_probs(chain.model.logits(out), temperature)
            for row, node in enumerate(frontier):
                outputs[node] = out[row]
            newest = grown.add_children(frontier, probs)
        tree = self._tree(grown, committed_ids.device)
        # its tokens are the likeliest, not draws from q: proposed with certainty (each child chosen by its own
        # value, which the residual rule for drawn siblings would not allow)
        return tree.as_point_masses() if temperature > 0 else tree

    def _expand(self, frontier: list[int], grown: _Candidates, outputs: dict, slots: dict, position: int,
                device) -> torch.Tensor:
        """One draft forward over the frontier: each node's token with its parent's output hidden state, at
        `position`, seeing the drafter's context, its ancestors' entries and itself. Returns (len(frontier), H)."""
        chain = self.chain
        cached, m = chain.cache.get_seq_length(), len(frontier)
        rows = []  # built on the host as plain lists, then sent in one copy with the frontier's tokens
        for row, node in enumerate(frontier):
            sees = [True] * chain.context_len + [False] * (cached - chain.context_len + m)
            for a in grown.ancestors(node):
                sees[slots[a]] = True
            sees[cached + row] = True
            slots[node] = cached + row
            rows.append([*sees, grown.ids[node]])
        sent = torch.tensor(rows, device=device)  # (m, cached + m + 1): the mask, then each node's token
        mask, ids = sent[:, :-1].bool(), sent[:, -1][None]
        hidden = torch.stack([outputs[grown.parents[c]] for c in frontier])[None]
        positions = torch.full((1, m), position, device=device)
        return chain.model(ids, hidden, positions, chain.cache, mask)[0]

    def _tree(self, grown: _Candidates, device) -> DraftBlock:
        """The likeliest candidates up to the node budget, parents first and siblings likeliest first."""
        chosen = grown.best(list(range(len(grown.ids))), self.nodes)
        chosen.sort(key=lambda c: (grown.depths[c], -grown.scores[c], c))
        index = {c: i for i, c in enumerate(chosen)}
        parents = tuple(index[grown.parents[c]] if grown.parents[c] >= 0 else -1 for c in chosen)
        host_ids = tuple(grown.ids[c] for c in chosen)
        return DraftBlock(torch.tensor(host_ids, device=device), torch.stack([grown.probs[c] for c in chosen]), None,
                          parents, host_ids)
