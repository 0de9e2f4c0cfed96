"""A tree step drawn: the draft tree of one step as an SVG, the accepted path and the target's bonus marked.

Columns are depths (the anchor, the newest committed token, on the left); each leaf takes a row of its own and a
node sits on its first child's row, so the likeliest continuation (every node's first child) runs along the top.
Colours and second cues are the tokens' everywhere: accepted green, rejected vermillion and struck through,
never judged grey and dashed, the bonus blue and bold.

A tree read from a file may be any shape: at most MAX_DRAWN_NODES nodes and MAX_DRAWN_DEPTH levels are drawn (four
and one times the engine's own node budget), the rest counted in one line under the tree, and nothing here
recurses, so a chain thousands deep or a node with forty thousand children costs no more than a tree the engine
makes.
"""

from __future__ import annotations

import html

from engine.contract.types import MAX_TREE_NODES, Step, tree_depths

from ..words import probability
from .render import visible_ghost
from .theme import ACCEPTED, BONUS, REJECTED, UNVERIFIED

COLUMN = 96  # px between depths
ROW = 26  # px between rows
BOX_W, BOX_H = 84, 20
MAX_CHARS = 10  # a token's text is cut to this many characters in its box (the hover shows it whole)
STYLE = {  # verdict → (fill, stroke, dash, text decoration, weight)
    "accepted": (f"{ACCEPTED}33", ACCEPTED, "", "none", 400),
    "rejected": (f"{REJECTED}1a", REJECTED, "", "line-through", 400),
    "unverified": ("#ffffff", UNVERIFIED, "3 2", "none", 400),
    "bonus": ("#ffffff", BONUS, "", "none", 700),
}
MAX_DRAWN_NODES = 4 * MAX_TREE_NODES  # nodes of one tree drawn (the engine's trees have at most MAX_TREE_NODES)
MAX_DRAWN_DEPTH = MAX_TREE_NODES  # levels drawn


def drawn_nodes(parents: tuple[int, ...], most: int = MAX_DRAWN_NODES, deepest: int = MAX_DRAWN_DEPTH) -> list[int]:
    """The nodes drawn: in order, each whose parent is drawn, at most `deepest` deep, at most `most` of them (parents
    come before their children, so the anchor's subtree is kept whole down from the top)."""
    depth, kept = tree_depths(parents), set()
    for node, parent in enumerate(parents):
        if len(kept) >= most:
            break
        if (parent < 0 or parent in kept) and depth[node] <= deepest:
            kept.add(node)
    return sorted(kept)


def layout(parents: tuple[int, ...]) -> tuple[list[int], list[int]]:
    """Each node's (depth, row): depth 1 under the anchor; rows by a walk that gives each leaf its own row and
    each node its first child's (an explicit stack: no recursion, whatever the depth)."""
    kids: list[list[int]] = [[] for _ in range(len(parents) + 1)]
    for node, parent in enumerate(parents):
        kids[parent + 1].append(node)
    row = [0] * len(parents)
    next_row = 0
    stack = [(child, False) for child in reversed(kids[0])]
    while stack:
        node, placed_children = stack.pop()
        children = kids[node + 1]
        if not children:
            row[node], next_row = next_row, next_row + 1
        elif placed_children:
            row[node] = row[children[0]]
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(children))
    return tree_depths(parents), row


def summary(step: Step) -> str:
    """What became of the tree, in words."""
    verdicts = [t.verdict for t in step.drafted]
    deepest = step.reach
    rejected, unjudged = verdicts.count("rejected"), verdicts.count("unverified")
    words = [f"a tree of {len(verdicts)} nodes, {deepest} deep",
             f"the target walked {step.num_accepted} deep along the green path"]
    if rejected:
        words.append(f"turned down {rejected} sibling{'s' if rejected != 1 else ''} on the way")
    if unjudged:
        words.append(f"{unjudged} in other branches never judged")
    return ", ".join(words)


def _box(x: float, y: float, text: str, verdict: str, hover: str) -> str:
    fill, stroke, dash, decoration, weight = STYLE[verdict]
    shown = text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"
    return (f'<g class="tree-node" data-verdict="{verdict}"><title>{html.escape(hover)}</title>'
            f'<rect x="{x:.0f}" y="{y - BOX_H / 2:.0f}" width="{BOX_W}" height="{BOX_H}" rx="4" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="1.5"' + (f' stroke-dasharray="{dash}"' if dash else "") + "/>"
            f'<text x="{x + BOX_W / 2:.0f}" y="{y + 4:.0f}" text-anchor="middle" font-size="12" '
            f'font-family="ui-monospace, monospace" text-decoration="{decoration}" font-weight="{weight}">'
            f"{visible_ghost(shown)}</text></g>")


def tree_svg(step: Step, anchor_text: str = "") -> str:
    """Step `step`'s draft tree (step.parents set) as an SVG element, with the bonus after the accepted path; a tree
    larger than MAX_DRAWN_NODES or MAX_DRAWN_DEPTH drawn in part, with a line counting what is not."""
    kept = drawn_nodes(step.parents)
    index = {node: i for i, node in enumerate(kept)}
    parents = tuple(index.get(step.parents[node], -1) for node in kept)
    drafted = tuple(step.drafted[node] for node in kept)
    left_out = len(step.parents) - len(kept)
    depth, row = layout(parents)
    path = [i for i, t in enumerate(drafted) if t.verdict == "accepted"]
    bonus = next((t for t in step.committed if t.source == "bonus"), None)
    rows = max(row, default=0) + 1 + (bonus is not None) + (left_out > 0)  # the bonus, the count: rows of their own
    width = (max(depth, default=0) + 2) * COLUMN + BOX_W
    height = rows * ROW + 8

    def at(node: int) -> tuple[float, float]:  # a node's box's left edge and middle (-1: the anchor)
        return (8, 4 + ROW / 2) if node < 0 else (8 + depth[node] * COLUMN, 4 + ROW / 2 + row[node] * ROW)

    edges, boxes = [], []
    for node, parent in enumerate(parents):
        (x0, y0), (x1, y1) = at(parent), at(node)
        on_path = node in path
        edges.append(f'<path d="M{x0 + BOX_W:.0f},{y0:.0f} C{x0 + BOX_W + 8:.0f},{y0:.0f} {x1 - 8:.0f},{y1:.0f} '
                     f'{x1:.0f},{y1:.0f}" fill="none" stroke="{ACCEPTED if on_path else "#bbbbbb"}" '
                     f'stroke-width="{2.5 if on_path else 1}"/>')
        token = drafted[node]
        judged = (f", target p {probability(token.target_prob)}" if token.target_prob is not None else ", never judged")
        boxes.append(_box(x1, y1, token.text, token.verdict,
                          f"{token.text!r} at depth {depth[node]}: {token.verdict} (drafter p {probability(token.draft_prob)}"
                          f"{judged})"))
    boxes.insert(0, _box(*at(-1), anchor_text or "anchor", "accepted" if anchor_text else "unverified",
                         "the anchor: the newest committed token, the root every draft hangs under"))
    if bonus is not None:
        x, y = at(path[-1]) if path else at(-1)
        bx, by = x + COLUMN, 4 + ROW / 2 + (rows - 1) * ROW
        edges.append(f'<path d="M{x + BOX_W:.0f},{y:.0f} C{x + BOX_W + 8:.0f},{y:.0f} {bx - 8:.0f},{by:.0f} '
                     f'{bx:.0f},{by:.0f}" fill="none" stroke="{BONUS}" stroke-width="2" stroke-dasharray="4 2"/>')
        boxes.append(_box(bx, by, bonus.text, "bonus", f"the bonus: {bonus.text!r}, written by the target"))
        width = max(width, bx + BOX_W + 8)
    if left_out:
        y = 4 + ROW / 2 + (rows - 1 - (bonus is not None)) * ROW + 4
        boxes.append(f'<text class="tree-left-out" x="8" y="{y:.0f}" font-size="12">{left_out:,} more '
                     f'node{"s" if left_out != 1 else ""} not drawn: a tree of the engine has at most '
                     f'{MAX_TREE_NODES}</text>')
    return (f'<svg class="draft-tree" role="img" aria-label="{html.escape(summary(step))}" width="{width:.0f}" '
            f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" xmlns="http://www.w3.org/2000/svg">'
            + "".join(edges) + "".join(boxes) + "</svg>")
