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

import torch

from ..contract.types import GenerationConfig
from ..sampling import logits_to_probs
from ..timing import SpanClock
from .base import DraftBlock, TreeDrafter

WIDTH = 8  # candidates expanded per level, and children kept per expanded candidate (EAGLE-2's top-k)


def grow(chain, config: GenerationConfig | None) -> "EagleTreeDrafter":
    return EagleTreeDrafter(chain, config.tree_nodes if config is not None else GenerationConfig.tree_nodes)


class EagleTreeDrafter(TreeDrafter):
    """The tree is grown on the device: candidates' tokens, parents, scores and distributions are tensors, each
    level's frontier is chosen there and its attention mask built there from its parents' rows, so growing K levels
    reads nothing back; the finished tree comes to the host in one copy (its tokens and shape)."""

    def __init__(self, chain, nodes: int):
        super().__init__(chain, nodes, "EAGLE-2 dynamic tree")  # the chain: drafters/eagle3.py's Eagle3Drafter

    def propose(self, committed_ids: torch.Tensor, k: int, temperature: float, generator: torch.Generator,
                clock: SpanClock) -> DraftBlock:
        chain, n = self.chain, committed_ids.shape[1]
        device = committed_ids.device
        assert chain.context_len + chain.pending.shape[1] == n - 1, "draft context out of step"
        with clock.span("draft", f"tree level 1/{k}: draft forward ({chain.pending.shape[1]} new target features)"):
            hidden = chain._feed_context(committed_ids)[0, -1]  # the anchor's output: it predicts depth 1
            probs = logits_to_probs(chain.model.logits(hidden), temperature)[None]
        grown = _Grown(device)
        anchor = torch.full((1,), -1, dtype=torch.long, device=device)
        newest = grown.add_children(anchor, torch.zeros(1, device=device), probs)
        outputs = hidden[None]  # each expanded candidate's output hidden state, a row of `sees`' (0: the anchor's)
        cached = chain.cache.get_seq_length()
        # which cache slots each expanded candidate sees: the drafter's context, its ancestors' entries and its own
        width_max = cached + WIDTH * max(k - 1, 0)
        context = torch.arange(width_max, device=device) < chain.context_len
        sees = context[None].clone()  # each expanded candidate's view, a row (row 0: the anchor's, the context)
        row_of = torch.zeros(grown.size, dtype=torch.long, device=device)  # candidate -> its row once expanded
        for level in range(2, k + 1):
            with clock.span("draft", f"tree level {level}/{k}: one draft forward over {WIDTH} nodes"):
                order = torch.sort(-grown.score[newest], stable=True).indices[:WIDTH]  # likeliest first; ties: first
                frontier = newest[order]
                m = frontier.numel()
                parent = grown.parent[frontier]
                parent_rows = torch.where(parent >= 0, row_of.index_select(0, parent.clamp_min(0)), 0)
                own = torch.arange(cached, cached + m, device=device)
                view = sees.index_select(0, parent_rows)
                view.index_put_((torch.arange(m, device=device), own), context.new_ones(m))  # a device True
                row_of[frontier] = torch.arange(sees.shape[0], sees.shape[0] + m, device=device)
                sees = torch.cat([sees, view])
                parent_hidden = outputs.index_select(0, parent_rows)
                positions = torch.full((1, m), n - 3 + level, device=device)
                out = chain.forward(grown.ids[frontier][None], parent_hidden[None], n - 3 + level, positions[0],
                                    view[:, : cached + m], one_position=True)[0]
                outputs = torch.cat([outputs, out])
                cached += m
                probs = logits_to_probs(chain.model.logits(out), temperature)
                newest = grown.add_children(frontier, grown.score[frontier], probs)
                row_of = torch.cat([row_of, row_of.new_zeros(newest.numel())])
        tree = grown.tree(self.nodes, device)
        # its tokens are the likeliest, not draws from q: proposed with certainty (each child chosen by its own
        # value, which the residual rule for drawn siblings would not allow)
        return tree.as_point_masses() if temperature > 0 else tree


class _Grown:
    """Every candidate node grown so far, on the device: token, parent (-1: the anchor), depth, log score, and the
    distribution it was chosen from."""

    def __init__(self, device):
        self.ids = torch.zeros(0, dtype=torch.long, device=device)
        self.parent = torch.zeros(0, dtype=torch.long, device=device)
        self.depth = torch.zeros(0, dtype=torch.long, device=device)
        self.score = torch.zeros(0, device=device)
        self.probs: list[torch.Tensor] = []  # one (rows, V) tensor a level; candidate c's is row c // WIDTH of all

    @property
    def size(self) -> int:
        return self.ids.numel()

    def add_children(self, parents: torch.Tensor, parent_scores: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
        """The likeliest WIDTH tokens of each row of `probs` (one row per parent) as children of that parent;
        returns their indices. A token of probability 0 scores -inf: never chosen before a possible one."""
        top_p, top_ids = probs.topk(WIDTH, dim=-1)
        rows = probs.shape[0]
        first = self.size
        depth = torch.where(parents >= 0, self.depth.index_select(0, parents.clamp_min(0)) + 1
                            if self.size else torch.ones_like(parents), 1)
        self.ids = torch.cat([self.ids, top_ids.reshape(-1)])
        self.parent = torch.cat([self.parent, parents.repeat_interleave(WIDTH)])
        self.depth = torch.cat([self.depth, depth.repeat_interleave(WIDTH)])
        self.score = torch.cat([self.score, (parent_scores[:, None] + top_p.float().log()).reshape(-1)])
        self.probs.append(probs)
        return torch.arange(first, first + rows * WIDTH, device=self.ids.device)

    def tree(self, budget: int, device) -> DraftBlock:
        """The likeliest candidates up to the node budget (an ancestor never scores below its descendants, so they
        hang together), parents first and siblings likeliest first: chosen and ordered on the device, read once. The
        tree holds min(budget, candidates) nodes whatever their scores: a token of probability 0 comes last and is
        judged as any other (the target's argmax at temperature 0, p(x) against its point mass above)."""
        by_score = torch.sort(-self.score, stable=True).indices[:budget]  # ties: the earlier, so the shallower
        chosen = by_score.sort().values  # then ordered by depth, score, index: stable sorts, last key first
        chosen = chosen[torch.sort(-self.score[chosen], stable=True).indices]
        chosen = chosen[torch.sort(self.depth[chosen], stable=True).indices]
        position = torch.full((self.size,), -1, dtype=torch.long, device=device)
        position[chosen] = torch.arange(chosen.numel(), device=device)
        parent = self.parent[chosen]
        parents = torch.where(parent >= 0, position.index_select(0, parent.clamp_min(0)), -1)
        ids = self.ids[chosen]
        values = torch.cat([ids, parents]).tolist()  # the tree's one read
        count = chosen.numel()
        parent_rows = torch.cat([parents.new_zeros(1), parents + 1])  # the verify's rows' parents' rows
        all_probs = torch.cat(self.probs)
        return DraftBlock(ids, all_probs[chosen // WIDTH], None, tuple(values[count:]), tuple(values[:count]),
                          parent_rows)
