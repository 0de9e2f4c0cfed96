"""The DFlash tree lane: DDTree (Ringel and Romano, "Accelerating Speculative Decoding with Block Diffusion Draft
Trees", arXiv 2604.12989) over the DFlash drafter.

One parallel DFlash pass gives a distribution for each position of the block, each independent of the tokens
before it. The likeliest prefixes under the node budget (best first on the product of their tokens' probabilities:
engine/tree.py, best_first) form the tree; the target verifies all of it in one forward. Above temperature 0 the
tree keeps that shape and its tokens are drawn from the drafter's distributions (sample_siblings), so the residual
rule accepts each as often as a chain's sampled token. Many candidates for the
price of the one draft forward the chain already pays. The drafter's context bookkeeping is the chain's own: it is
told the accepted path's features as the chain is told its accepted tokens'.
"""

from __future__ import annotations

import torch

from ..contract.types import GenerationConfig
from ..timing import SpanClock
from ..tree import best_first, children, depths
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
            ids, parents = best_first(probs, self.nodes)
            n = len(parents)
            # each node's position in the block, and the verify rows' parents' rows (the target's tree inputs)
            sent = [*(d - 1 for d in depths(parents)), 0, *(p + 1 for p in parents)]
            if temperature > 0:  # the same shape, its tokens drawn from q
                # every token kept possible, so any node can draw its children distinct (the rule reads this same q)
                probs = probs.clamp_min(1e-12)
                probs = probs / probs.sum(dim=-1, keepdim=True)
                drawn, table = sample_siblings(probs, parents, generator, sent)
                return DraftBlock(drawn, probs[table[:n]], None, parents, None, table[n:])
            table = torch.tensor([*ids, *sent], dtype=torch.long, device=probs.device)  # one copy there
        return DraftBlock(table[:n], probs[table[n: 2 * n]], None, parents, tuple(ids), table[2 * n:])


def sample_siblings(probs: torch.Tensor, parents: tuple[int, ...], generator: torch.Generator,
                    also: list[int] = ()) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Tokens for a tree of the shape `parents`, on the device: each node's children drawn from their position's
    distribution without replacement, in the order drawn, every row's children in one draw. The shape comes from the
    likeliest tokens (best_first), never from the drawn ones, so how many children a node has does not depend on
    what they are: what the residual rule (tree.verify_tree) needs to keep the output the target's. `also`: host
    integers sent in the same copy, returned beside the tokens as a device tensor."""
    depth_of, rows = depths(parents), children(parents)
    parent_rows = [row for row in rows if row]
    most = max(len(row) for row in parent_rows)
    depth_index = [depth_of[row[0]] - 1 for row in parent_rows]  # each row's children's position in the block
    slots = [r * most + k for r, row in enumerate(parent_rows) for k in range(len(row))]
    order = [node for row in parent_rows for node in row]  # the nodes, in the order their slots are listed
    table = torch.tensor([*depth_index, *slots, *order, *also], device=probs.device)  # one copy to the device
    depth_index, slots, order, extra = table.split([len(depth_index), len(slots), len(order), len(also)])
    # every row with children draws `most` tokens without replacement; its first len(row) are its children's
    drawn = torch.multinomial(probs[depth_index], most, replacement=False, generator=generator)
    ids = torch.empty(len(parents), dtype=torch.long, device=probs.device)
    ids[order] = drawn.view(-1)[slots]
    return (ids, extra) if also else ids
