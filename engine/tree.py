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
    if temperature > 0:
        return _walk_sampled(draft_ids, draft_probs, parents, target_probs, generator)
    ids = list(host_ids) if host_ids is not None else draft_ids.tolist()
    rows = children(parents)
    accept_probs = [0.0] * len(ids)
    path: list[int] = []
    judged: list[int] = []
    greedy_ids = target_probs.argmax(dim=-1).tolist()
    row = 0
    while True:
        chosen = None
        for node in rows[row]:
            judged.append(node)
            accept_probs[node] = float(ids[node] == greedy_ids[row])
            if accept_probs[node]:
                chosen = node
                break
        if chosen is None:
            break
        path.append(chosen)
        row = chosen + 1
    bonus_id = greedy_ids[row]
    device = draft_ids.device
    committed_ids = (*(ids[node] for node in path), bonus_id)
    kept_rows = (0, *(node + 1 for node in path))
    sent = torch.tensor([*accept_probs, *committed_ids, *kept_rows], dtype=torch.float64, device=device)  # one copy
    done = len(ids) + len(committed_ids)
    return Verdict(len(path), bonus_id, sent[: len(ids)].float(), None, path=tuple(path), judged=tuple(judged),
                   committed_ids=committed_ids, committed=sent[len(ids): done].long(), kept_rows=sent[done:].long())


def _walk_sampled(draft_ids: torch.Tensor, draft_probs: torch.Tensor, parents: tuple[int, ...],
                  target_probs: torch.Tensor, generator: torch.Generator) -> Verdict:
    """verify_tree above temperature 0, on the device, read once. Every row's children are judged as if the walk had
    reached that row (a row's judgement depends only on its own distribution and its children's q), all rows
    together, one sibling rank at a time: child k's acceptance against p less its k earlier siblings' residuals.
    The walk then follows, from the anchor, each row's first accepted child; the bonus is drawn from what is left of
    the last row's p. Every uniform a judged child compares with is its own, so drawing those of rows the walk never
    reaches changes nothing in what it commits. One copy brings back the path, the bonus and the nodes' tokens."""
    device = draft_ids.device
    rows = children(parents)
    ranks = [[(r, kids[k]) for r, kids in enumerate(rows) if len(kids) > k] for k in range(max(map(len, rows)))]
    table = torch.tensor([v for rank in ranks for pair in rank for v in pair], dtype=torch.long, device=device)
    p = target_probs / target_probs.sum(dim=-1, keepdim=True)  # each row's p, less its rejected children's share
    tried = torch.zeros(p.shape, dtype=torch.bool, device=device)  # tokens a row's earlier children took out of q
    accept_probs = torch.zeros(len(parents), dtype=p.dtype, device=device)
    draws = torch.zeros(len(parents), dtype=p.dtype, device=device)
    passed = torch.zeros(len(parents), dtype=torch.bool, device=device)
    groups, at = [], 0
    for rank in ranks:  # each row has at most one child of a rank: the rows of a rank are distinct
        pairs = table[at: at + 2 * len(rank)].view(-1, 2)
        at += 2 * len(rank)
        row, node = pairs[:, 0], pairs[:, 1]
        groups.append((row, node))
        x = draft_ids[node]
        q = draft_probs[node].to(p.dtype).masked_fill(tried[row], 0.0)
        q_sum = q.sum(dim=-1, keepdim=True)
        q = torch.where(q_sum > 0, q / q_sum.clamp_min(1e-30), q)
        p_row = p[row]
        p_x, q_x = p_row.gather(1, x[:, None])[:, 0], q.gather(1, x[:, None])[:, 0]
        accept = torch.where(q_x > 0, torch.clamp(p_x / q_x.clamp_min(1e-30), max=1.0), torch.zeros_like(p_x))
        uniform = torch.rand(len(rank), generator=generator, device=device, dtype=p.dtype)
        accept_probs[node], draws[node], passed[node] = accept, uniform, uniform < accept
        residual = torch.clamp(p_row - q, min=0.0)
        residual_sum = residual.sum(dim=-1, keepdim=True)
        p[row] = torch.where(residual_sum > 0, residual / residual_sum.clamp_min(1e-30), p_row)  # rounding guard
        tried.index_put_((row, x), passed.new_ones(len(rank)))  # a device True, not one copied from the host
    chosen = torch.full((len(rows),), -1, dtype=torch.long, device=device)  # each row's first accepted child
    for row, node in reversed(groups):
        chosen[row] = torch.where(passed[node], node, chosen[row])
    depth = max(depths(parents), default=0)
    path = torch.full((depth,), -1, dtype=torch.long, device=device)
    at_row = torch.zeros(1, dtype=torch.long, device=device)  # a tensor index (a 0-d one would be read on the host)
    for d in range(depth):  # once a row accepts none, the walk stays there and the rest of the path is -1
        node = chosen.index_select(0, at_row)
        path[d: d + 1] = node
        at_row = torch.where(node >= 0, node + 1, at_row)
    bonus = sample(p.index_select(0, at_row)[0], generator)
    values = torch.cat([path, bonus.view(1).long(), draft_ids.view(-1).long()]).tolist()
    walked = [n for n in values[:depth] if n >= 0]
    bonus_id, ids = values[depth], values[depth + 1:]
    judged, row = [], 0
    for node in [*walked, None]:  # each row on the walk: its children up to the accepted one, or all of them
        kids = rows[row]
        judged += kids[: kids.index(node) + 1] if node is not None else kids
        row = node + 1 if node is not None else row
    committed_ids = (*(ids[n] for n in walked), bonus_id)
    committed = torch.cat([draft_ids[path[: len(walked)]], bonus.view(1)]).long()
    kept_rows = torch.cat([path.new_zeros(1), path[: len(walked)] + 1])  # the anchor's row, then the path's
    return Verdict(len(walked), bonus_id, accept_probs, draws, path=tuple(walked), judged=tuple(judged),
                   committed_ids=committed_ids, committed=committed, kept_rows=kept_rows)
