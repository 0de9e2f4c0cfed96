"""Words chosen from numbers: every direction or comparison the pages state in a sentence comes from here.

A caption or a takeaway that says "rises", "costs more" or "pays" says it because the numbers beside it do;
fed the opposite numbers, it says the opposite. Plain functions, no gradio, no plotly.
"""

from __future__ import annotations

TOLERANCE = 0.02  # relative: closer than this, two figures read as level (a measurement's own jitter)


def _close(a: float, b: float, tolerance: float) -> bool:
    return abs(a - b) <= tolerance * max(abs(a), abs(b), 1e-12)


def trend(first: float, last: float, tolerance: float = TOLERANCE) -> str:
    """"rises", "falls" or "holds": how a figure moves from `first` to `last`."""
    if _close(first, last, tolerance):
        return "holds"
    return "rises" if last > first else "falls"


def versus(a: float, b: float, tolerance: float = TOLERANCE) -> str:
    """"ahead of", "behind" or "level with": where `a` stands against `b` (larger is ahead)."""
    if _close(a, b, tolerance):
        return "level with"
    return "ahead of" if a > b else "behind"


def more_or_less(a: float, b: float, tolerance: float = TOLERANCE) -> str:
    """"more than", "less than" or "about as much as": `a` against `b`."""
    if _close(a, b, tolerance):
        return "about as much as"
    return "more than" if a > b else "less than"


def above_or_below(a: float, b: float, tolerance: float = TOLERANCE) -> str:
    """"above", "below" or "level with": `a` against `b`."""
    if _close(a, b, tolerance):
        return "level with"
    return "above" if a > b else "below"


def survival(conditional) -> list[float]:
    """Survival along a block from conditional per-position acceptance: position k survives when positions
    1..k all pass, the running product of the conditional rates (stopping at the first position no step
    reached)."""
    out, alive = [], 1.0
    for rate in conditional:
        if rate is None:
            break
        alive *= rate
        out.append(alive)
    return out


def span(values) -> str:
    """"1.17" for one value, "0.99–1.17" for several: the range of a set of figures, two decimals."""
    low, high = min(values), max(values)
    return f"{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}–{high:.2f}"
