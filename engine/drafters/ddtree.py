"""The DFlash tree lane: DDTree (Ringel and Romano, "Accelerating Speculative Decoding with Block Diffusion Draft
Trees", arXiv 2604.12989) over the DFlash drafter.

One parallel DFlash pass gives a distribution for each position of the block, each independent of the tokens
before it. The likeliest prefixes under the node budget (best first on the product of their tokens' probabilities:
engine/tree.py, best_first) form the tree, chosen on the device and read once (its tokens and shape; the verify's
rows' parents' rows and the nodes' positions stay there, so nothing is sent back); the target verifies all of it in
one forward. Above temperature 0 the tree keeps that shape and its tokens are drawn from the drafter's distributions
(sample_siblings), so the residual rule accepts each as often as a chain's sampled token. Many candidates for the
price of the one draft forward the chain already pays. The drafter's context bookkeeping is the chain's own: it is
told the accepted path's features as the chain is told its accepted tokens'.
"""

from __future__ import annotations

import torch

from ..contract.types import GenerationConfig
from ..timing import SpanClock
from ..tree import best_first, by_rank, children, depths, sibling_ranks
from .base import DraftBlock, TreeDrafter


def grow(chain, config: GenerationConfig | None) -> "DDTreeDrafter":
    return DDTreeDrafter(chain, config.tree_nodes if config is not None else GenerationConfig.tree_nodes)


class DDTreeDrafter(TreeDrafter):
    def __init__(self, chain, nodes: int):
        super().__init__(chain, nodes, "DDTree")  # the chain: a DFlash drafter (drafters/dflash.py, or DeepSpec's
        # format without a Markov head), which gives each position's distribution from one pass

    def propose(self, committed_ids: torch.Tensor, k: int, temperature: float, generator: torch.Generator,
                clock: SpanClock) -> DraftBlock:
        with clock.span("draft", f"one parallel pass over the block, the {self.nodes} likeliest prefixes of {k}"):
            probs = self.chain.position_probs(committed_ids, k, temperature)
            ids, parents, position = best_first(probs, self.nodes)  # on the device
            n = ids.numel()
            parent_rows = torch.cat([parents.new_zeros(1), parents + 1])  # the verify rows' parents' rows
            values = torch.cat([ids, parents]).tolist()  # the tree's one read: its tokens and shape
            host_ids, host_parents = tuple(values[:n]), tuple(values[n:])
            if temperature > 0:  # the same shape, its tokens drawn from q
                # every token kept possible, so any node can draw its children distinct (the rule reads this same q)
                probs = probs.clamp_min(1e-12)
                probs = probs / probs.sum(dim=-1, keepdim=True)
                drawn = sample_siblings(probs, host_parents, generator, parent_rows, position)
                return DraftBlock(drawn, probs[position], None, host_parents, None, parent_rows)
        return DraftBlock(ids, probs[position], None, host_parents, host_ids, parent_rows)


def sample_siblings(probs: torch.Tensor, parents: tuple[int, ...], generator: torch.Generator,
                    parent_rows: torch.Tensor | None = None, position: torch.Tensor | None = None) -> torch.Tensor:
    """Tokens for a tree of the shape `parents`, on the device: each node's children drawn from their position's
    distribution without replacement, in the order drawn, every row's children in one draw. The shape comes from the
    likeliest tokens (best_first), never from the drawn ones, so how many children a node has does not depend on
    what they are: what the residual rule (tree.verify_tree) needs to keep the output the target's. `parent_rows`
    and `position`: the tree's verify rows' parents' rows and its nodes' positions in the block, on the device (the
    drafter's); without them one small tensor is sent."""
    n = len(parents)
    if parent_rows is None or position is None:
        table = torch.tensor([0, *(p + 1 for p in parents), *(d - 1 for d in depths(parents))],
                             device=probs.device)  # one copy to the device
        parent_rows, position = table[: n + 1], table[n + 1:]
    rows = children(parents)
    most = max(len(row) for row in rows)
    with_children = sum(1 for row in rows if row)
    node_rows = parent_rows[1:]
    first = by_rank(node_rows)[:with_children]  # each parent row's first child, rows ascending
    slot = torch.zeros(n + 1, dtype=torch.long, device=probs.device)  # each parent row's row of the draws
    slot.index_copy_(0, node_rows.index_select(0, first), torch.arange(with_children, device=probs.device))
    # every row with children draws `most` tokens without replacement; its first len(row) are its children's
    drawn = torch.multinomial(probs[position.index_select(0, first)], most, replacement=False, generator=generator)
    return drawn[slot.index_select(0, node_rows), sibling_ranks(node_rows)]
