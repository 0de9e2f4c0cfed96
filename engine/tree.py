"""Draft trees: many candidate continuations, verified by the target in one forward.

A tree draft is a DraftBlock whose `parents` say where each node hangs: `parents[i]` is the index of node i's
parent, or -1 for a child of the anchor (the newest committed token). Nodes are stored parents first, and
siblings in the order the drafter ranks them, likeliest first. A chain is the tree whose node i hangs under
node i − 1.

The target reads the anchor and every node in one forward after its cache: each node attends to the cache, the
anchor, its own ancestors and itself (an ancestor-only mask), at the position its depth gives. Verification then
walks down from the anchor along the one path the target agrees with; that path's tokens are committed and only
their cache entries kept. Rows of the verify forward: row 0 is the anchor, row 1 + i is node i; the target's
distribution at row r is its prediction for the children of that row's token.
"""

from __future__ import annotations

import heapq
import math

import torch

from .contract.types import tree_depths as depths
from .sampling import Verdict, sample


def children(parents: tuple[int, ...]) -> list[list[int]]:
    """For each verify row (0 the anchor, 1 + i node i), the nodes hanging under it, in the drafter's order."""
    rows: list[list[int]] = [[] for _ in range(len(parents) + 1)]
    for node, parent in enumerate(parents):
        rows[parent + 1].append(node)
    return rows


def verify_inputs(parents: tuple[int, ...], num_cached: int, device) -> dict[str, torch.Tensor]:
    """The verify forward's ancestor-only mask (1, 1, 1 + N, num_cached + 1 + N), True = may attend, and its
    positions (1, 1 + N): the anchor at num_cached, each node at num_cached + its depth."""
    n = len(parents)
    sees = torch.zeros(n + 1, n + 1, dtype=torch.bool)
    sees[:, 0] = True  # the anchor, seen by every row
    for node, parent in enumerate(parents):  # a node sees what its parent sees, and itself
        sees[node + 1] = sees[parent + 1]
        sees[node + 1, node + 1] = True
    mask = torch.cat([torch.ones(n + 1, num_cached, dtype=torch.bool), sees], dim=1)
    positions = torch.tensor([0, *depths(parents)]) + num_cached
    return {"attention_mask": mask.to(device)[None, None], "position_ids": positions.to(device)[None]}


def best_first(probs: torch.Tensor, budget: int) -> tuple[list[int], tuple[int, ...]]:
    """The `budget` likeliest prefixes of a block whose positions are drafted independently (one parallel pass:
    position d's distribution does not depend on the tokens before it), as a tree: (token ids, parents).

    A prefix's score is the product of its tokens' probabilities. Best-first: take the likeliest prefix not yet in
    the tree; what may come next is its next sibling (the same position's next likeliest token) and its first
    child (the next position's likeliest token), so a heap of those candidates yields the prefixes in order."""
    depth_limit = probs.shape[0]
    if depth_limit == 0 or budget <= 0:
        return [], ()
    top_p, top_ids = probs.float().topk(min(budget, probs.shape[-1]), dim=-1)
    # one read from the device: the log-probabilities and the token ids (exact in float64) side by side
    both = torch.cat([top_p.log().double(), top_ids.double()], dim=-1).tolist()
    width = top_ids.shape[-1]
    log_p, top_ids = [row[:width] for row in both], [[int(t) for t in row[width:]] for row in both]
    ids: list[int] = []
    parents: list[int] = []
    heap = [(-log_p[0][0], 0, 0, 0, -1, 0.0)]  # (−score, tie-break, depth index, rank, parent node, parent score)
    pushed = 1
    while heap and len(ids) < budget:
        neg_score, _, d, rank, parent, parent_score = heapq.heappop(heap)
        if math.isinf(neg_score):  # only impossible tokens are left
            break
        node = len(ids)
        ids.append(top_ids[d][rank])
        parents.append(parent)
        candidates = []
        if rank + 1 < width:
            candidates.append((parent_score + log_p[d][rank + 1], d, rank + 1, parent, parent_score))
        if d + 1 < depth_limit:
            candidates.append((-neg_score + log_p[d + 1][0], d + 1, 0, node, -neg_score))
        for score, *rest in candidates:
            heapq.heappush(heap, (-score, pushed, *rest))
            pushed += 1
    return ids, tuple(parents)


def verify_tree(temperature: float, draft_ids: torch.Tensor, draft_probs: torch.Tensor, parents: tuple[int, ...],
                target_probs: torch.Tensor, generator: torch.Generator, host_ids: tuple[int, ...] | None = None
                ) -> Verdict:
    """Walk down from the anchor. Temperature 0: go to the child whose token is the target's argmax at this row;
    where none is, the argmax is the bonus — the output equals target-only greedy decoding.

    Above 0, a row's children are tried in order with the recursive rejection rule (SpecInfer, arXiv 2305.09781;
    the rule of EAGLE's reference code): child i, drawn from q (`draft_probs`, its siblings before it taken out of
    q: they were drawn without replacement), is accepted with probability min(1, p(x) / q_i(x)), p the target's
    distribution less what the rejected siblings took (p ← normalize(max(p − q_i, 0)) after each rejection); when
    all are rejected the bonus is drawn from what is left of p. Each committed token is then drawn from the target's
    own distribution. A node proposed with certainty (q a point mass on it: a tree of the drafter's likeliest
    tokens) is accepted with probability p(x), and a rejected one just leaves p. `host_ids`: the nodes' tokens where
    the drafter has them on the host (a tree is grown there), saving a read of `draft_ids`."""
    ids = list(host_ids) if host_ids is not None else draft_ids.tolist()
    rows = children(parents)
    accept_probs = [0.0] * len(ids)
    draws = [0.0] * len(ids)
    path: list[int] = []
    judged: list[int] = []
    greedy_ids = target_probs.argmax(dim=-1).tolist() if temperature == 0 else None
    row, p = 0, None
    while True:
        chosen = None
        if greedy_ids is None:
            p = target_probs[row] / target_probs[row].sum()
            tried: list[int] = []
        for node in rows[row]:
            judged.append(node)
            if greedy_ids is not None:
                accept_probs[node] = float(ids[node] == greedy_ids[row])
                passed = bool(accept_probs[node])
            else:
                q = draft_probs[node].clone()
                q[tried] = 0.0
                q = q / q.sum() if float(q.sum()) > 0 else q
                x = ids[node]
                accept_probs[node] = min(1.0, float(p[x]) / float(q[x])) if float(q[x]) > 0 else 0.0
                draws[node] = float(torch.rand((), generator=generator, device=p.device))
                passed = draws[node] < accept_probs[node]
                if not passed:
                    residual = torch.clamp(p - q, min=0.0)
                    p = residual / residual.sum() if float(residual.sum()) > 0 else p  # rounding guard
                    tried.append(x)
            if passed:
                chosen = node
                break
        if chosen is None:
            break
        path.append(chosen)
        row = chosen + 1
    bonus_id = greedy_ids[row] if greedy_ids is not None else int(sample(p, generator))
    device = draft_ids.device
    committed_ids = (*(ids[node] for node in path), bonus_id)
    return Verdict(len(path), bonus_id, torch.tensor(accept_probs, device=device),
                   None if greedy_ids is not None else torch.tensor(draws, device=device),
                   path=tuple(path), judged=tuple(judged), committed_ids=committed_ids,
                   committed=torch.tensor(committed_ids, device=device))
