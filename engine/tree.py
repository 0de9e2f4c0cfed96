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


def best_first(probs: torch.Tensor, budget: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The `budget` likeliest prefixes of a block whose positions are drafted independently (one parallel pass:
    position d's distribution does not depend on the tokens before it), as a tree built on the device at shapes the
    host knows beforehand: (token ids, parents, each node's position in the block), N = min(budget, prefixes) each.

    A prefix's score is the sum of its tokens' log-probabilities, never above its parent's: the likeliest prefixes
    hang together. So each depth keeps its `budget` likeliest among the children of the depth above's kept ones
    (each child one of its position's likeliest tokens), and the tree is the likeliest of all depths' kept ones, a
    tie between depths going to the shallower (so a parent always before a child of the same score). Nodes are
    listed by depth, then likeliest first: parents first, siblings likeliest first."""
    depth_limit, vocab = probs.shape
    width = min(budget, vocab)
    counts = [width]  # candidates each depth keeps: known before anything is computed
    for _ in range(1, depth_limit):
        counts.append(min(budget, counts[-1] * width))
    total, device = sum(counts), probs.device
    top_p, top_ids = probs.float().topk(width, dim=-1)
    log_p = top_p.log()
    # each candidate's depth, parent and rank in one integer: depth · stride + (parent + 1) · width + rank
    stride = width * (total + 1)
    scores, codes = [log_p[0]], [torch.arange(width, device=device)]
    start = 0  # the depth above's first candidate
    for d in range(1, depth_limit):
        candidates = (scores[-1][:, None] + log_p[d][None, :]).view(-1)  # (parent, rank)
        best, kept = candidates.topk(counts[d])  # ties within a depth: either may be kept, the tree stays whole
        scores.append(best)
        codes.append(kept + (d * stride + (start + 1) * width))
        start += counts[d - 1]
    scores, codes = torch.cat(scores), torch.cat(codes)
    n = min(budget, total)
    chosen = torch.sort(scores, descending=True, stable=True).indices[:n].sort().values  # by depth, then score
    code = codes[chosen]
    position, rest = code // stride, code % stride
    node_of = torch.full((total,), -1, dtype=torch.long, device=device)
    node_of[chosen] = torch.arange(n, device=device)
    up = rest // width - 1
    parents = torch.where(up >= 0, node_of.index_select(0, up.clamp_min(0)), -1)
    return top_ids.view(-1)[position * width + rest % width], parents, position


def sibling_ranks(node_rows: torch.Tensor) -> torch.Tensor:
    """Each node's rank among its siblings (0 the first listed), on the device, from each node's parent's row."""
    n = node_rows.numel()
    same = node_rows[None, :] == node_rows[:, None]
    earlier = torch.ones(n, n, dtype=torch.bool, device=node_rows.device).tril(-1)
    return (same & earlier).sum(dim=1)


def by_rank(node_rows: torch.Tensor) -> torch.Tensor:
    """The nodes ordered by their rank among siblings, then by their parent's row: the first `r` of them are each
    parent row's first child, rows ascending, where r rows have children."""
    return torch.sort(sibling_ranks(node_rows) * (node_rows.numel() + 1) + node_rows, stable=True).indices


def row_table(parents: tuple[int, ...], device) -> torch.Tensor:
    """Each verify row's parent's row (0 the anchor's, then 1 + parents[i]), for a caller that holds the shape on the
    host only: one small tensor sent. The lanes' drafters make it on the device."""
    return torch.tensor([0, *(p + 1 for p in parents)], dtype=torch.long, device=device)


def judged_nodes(parent_rows: torch.Tensor, kept_rows: torch.Tensor, count: int) -> torch.Tensor:
    """The `count` nodes a walk judged, ascending, on the device: the children of each row on its path (the rows
    `kept_rows`) up to the one accepted there, all of the last row's."""
    n = parent_rows.numel() - 1
    limit = torch.full((n + 1,), -1, dtype=torch.long, device=parent_rows.device)  # the last child judged under a row
    limit.index_fill_(0, kept_rows, n)
    limit.index_copy_(0, kept_rows[:-1], kept_rows[1:] - 1)
    judged = torch.arange(n, device=parent_rows.device) <= limit.index_select(0, parent_rows[1:])
    return torch.sort((~judged).long(), stable=True).indices[:count]


def verify_tree(temperature: float, draft_ids: torch.Tensor, draft_probs: torch.Tensor, parents: tuple[int, ...],
                target_probs: torch.Tensor, generator: torch.Generator, host_ids: tuple[int, ...] | None = None,
                parent_rows: torch.Tensor | None = None) -> Verdict:
    """Walk down from the anchor. Temperature 0: go to the child whose token is the target's argmax at this row (the
    first such, in the drafter's order); where none is, the argmax is the bonus — the output equals target-only greedy
    decoding.

    Above 0, a row's children are tried in order with the recursive rejection rule (SpecInfer, arXiv 2305.09781;
    the rule of EAGLE's reference code): child i, drawn from q (`draft_probs`, its siblings before it taken out of
    q: they were drawn without replacement), is accepted with probability min(1, p(x) / q_i(x)), p the target's
    distribution less what the rejected siblings took (p ← normalize(max(p − q_i, 0)) after each rejection); when
    all are rejected the bonus is drawn from what is left of p. Each committed token is then drawn from the target's
    own distribution. A node proposed with certainty (q a point mass on it: a tree of the drafter's likeliest
    tokens) is accepted with probability p(x), and a rejected one just leaves p.

    Both run on the device, every row judged at once as if the walk had reached it, the walk then following each
    row's first accepted child from the anchor; one copy brings back the path and the bonus (and the nodes' tokens,
    unless the drafter has them on the host: `host_ids`). `parent_rows`: each verify row's parent's row on the
    device (0 the anchor's, then 1 + parents[i]), the drafter's; without it one small tensor is sent."""
    if parent_rows is None:
        parent_rows = row_table(parents, draft_ids.device)
    if temperature > 0:
        chosen, accept_probs, draws, p = _judge_sampled(draft_ids, draft_probs, parents, parent_rows, target_probs,
                                                        generator)
        return _walk(chosen, lambda row: sample(p.index_select(0, row)[0], generator).view(1), draft_ids, parents,
                     host_ids, accept_probs, draws)
    n = len(parents)
    greedy = target_probs.argmax(dim=-1)  # each row's: what its child must be to be accepted
    accepted = draft_ids.view(-1) == greedy.index_select(0, parent_rows[1:])
    nodes = torch.arange(n, device=draft_ids.device)
    first = torch.full((n + 1,), n, dtype=torch.long, device=draft_ids.device)  # each row's first accepted child
    first.scatter_reduce_(0, parent_rows[1:], torch.where(accepted, nodes, n), "amin")  # siblings: drafter's order
    chosen = torch.where(first < n, first, -1)
    return _walk(chosen, lambda row: greedy.index_select(0, row), draft_ids, parents, host_ids,
                 accepted.to(target_probs.dtype), None)


def _walk(chosen: torch.Tensor, bonus_at, draft_ids: torch.Tensor, parents: tuple[int, ...],
          host_ids: tuple[int, ...] | None, accept_probs: torch.Tensor, draws: torch.Tensor | None) -> Verdict:
    """From the anchor, each row's chosen child (`chosen`, -1: none) down to a row with none, whose bonus
    `bonus_at(row)` gives, on the device at the tree's depth; then the verdict's one read."""
    device = draft_ids.device
    depth = max(depths(parents), default=0)
    path = torch.full((depth,), -1, dtype=torch.long, device=device)
    at_row = torch.zeros(1, dtype=torch.long, device=device)  # a tensor index (a 0-d one would be read on the host)
    for d in range(depth):  # once a row accepts none, the walk stays there and the rest of the path is -1
        node = chosen.index_select(0, at_row)
        path[d: d + 1] = node
        at_row = torch.where(node >= 0, node + 1, at_row)
    bonus = bonus_at(at_row).view(1).long()
    pieces = [path, bonus] if host_ids is not None else [path, bonus, draft_ids.view(-1).long()]
    values = torch.cat(pieces).tolist()  # the verdict's one read
    walked = [n for n in values[:depth] if n >= 0]
    bonus_id = values[depth]
    ids = host_ids if host_ids is not None else values[depth + 1:]
    rows = children(parents)
    judged, row = [], 0
    for node in [*walked, None]:  # each row on the walk: its children up to the accepted one, or all of them
        kids = rows[row]
        judged += kids[: kids.index(node) + 1] if node is not None else kids
        row = node + 1 if node is not None else row
    committed_ids = (*(ids[n] for n in walked), bonus_id)
    committed = torch.cat([draft_ids.view(-1)[path[: len(walked)]].long(), bonus])
    kept_rows = torch.cat([path.new_zeros(1), path[: len(walked)] + 1])  # the anchor's row, then the path's
    return Verdict(len(walked), bonus_id, accept_probs, draws, path=tuple(walked), judged=tuple(judged),
                   committed_ids=committed_ids, committed=committed, kept_rows=kept_rows)


def _judge_sampled(draft_ids: torch.Tensor, draft_probs: torch.Tensor, parents: tuple[int, ...],
                   parent_rows: torch.Tensor, target_probs: torch.Tensor, generator: torch.Generator):
    """verify_tree's judgement above temperature 0, every row at once (a row's judgement depends only on its own
    distribution and its children's q), one sibling rank at a time: child k's acceptance against p less its k
    earlier siblings' residuals. Every uniform a judged child compares with is its own, so drawing those of rows the
    walk never reaches changes nothing in what it commits. Returns each row's first accepted child (-1: none), the
    accept probabilities, the draws, and each row's p less its rejected children's share (the bonus's)."""
    device = draft_ids.device
    rows = children(parents)
    per_rank = [sum(len(kids) > k for kids in rows) for k in range(max(map(len, rows)))]  # rows with a k-th child
    node_rows = parent_rows[1:]
    order = by_rank(node_rows)  # the nodes by sibling rank, then row: each rank's rows are distinct
    p = target_probs / target_probs.sum(dim=-1, keepdim=True)  # each row's p, less its rejected children's share
    tried = torch.zeros(p.shape, dtype=torch.bool, device=device)  # tokens a row's earlier children took out of q
    accept_probs = torch.zeros(len(parents), dtype=p.dtype, device=device)
    draws = torch.zeros(len(parents), dtype=p.dtype, device=device)
    passed = torch.zeros(len(parents), dtype=torch.bool, device=device)
    groups, at = [], 0
    for size in per_rank:
        node = order[at: at + size]
        at += size
        row = node_rows.index_select(0, node)
        groups.append((row, node))
        x = draft_ids[node]
        q = draft_probs[node].to(p.dtype).masked_fill(tried[row], 0.0)
        q_sum = q.sum(dim=-1, keepdim=True)
        q = torch.where(q_sum > 0, q / q_sum.clamp_min(1e-30), q)
        p_row = p[row]
        p_x, q_x = p_row.gather(1, x[:, None])[:, 0], q.gather(1, x[:, None])[:, 0]
        accept = torch.where(q_x > 0, torch.clamp(p_x / q_x.clamp_min(1e-30), max=1.0), torch.zeros_like(p_x))
        uniform = torch.rand(size, generator=generator, device=device, dtype=p.dtype)
        accept_probs[node], draws[node], passed[node] = accept, uniform, uniform < accept
        residual = torch.clamp(p_row - q, min=0.0)
        residual_sum = residual.sum(dim=-1, keepdim=True)
        p[row] = torch.where(residual_sum > 0, residual / residual_sum.clamp_min(1e-30), p_row)  # rounding guard
        tried.index_put_((row, x), passed.new_ones(size))  # a device True, not one copied from the host
    chosen = torch.full((len(rows),), -1, dtype=torch.long, device=device)  # each row's first accepted child
    for row, node in reversed(groups):
        chosen[row] = torch.where(passed[node], node, chosen[row])
    return chosen, accept_probs, draws, p
