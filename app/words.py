"""Words chosen from numbers: every direction or comparison the pages state in a sentence comes from here.

A caption or a takeaway that says "rises", "costs more" or "pays" says it because the numbers beside it do;
fed the opposite numbers, it says the opposite. Plain functions, no gradio, no plotly.
"""

from __future__ import annotations

import math

TOLERANCE = 0.02  # relative: closer than this, two figures read as level (a measurement's own jitter)


def _close(a: float, b: float, tolerance: float) -> bool:
    return abs(a - b) <= tolerance * max(abs(a), abs(b), 1e-12)


def _compare(a: float, b: float, tolerance: float, higher: str, lower: str, level: str) -> str:
    """`higher` when `a` exceeds `b` by more than `tolerance` (relative), `lower` when it falls short, else `level`."""
    if _close(a, b, tolerance):
        return level
    return higher if a > b else lower


def trend(first: float, last: float, tolerance: float = TOLERANCE) -> str:
    """"rises", "falls" or "holds": how a figure moves from `first` to `last`."""
    return _compare(last, first, tolerance, "rises", "falls", "holds")


def versus(a: float, b: float, tolerance: float = TOLERANCE) -> str:
    """"ahead of", "behind" or "level with": where `a` stands against `b` (larger is ahead)."""
    return _compare(a, b, tolerance, "ahead of", "behind", "level with")


def more_or_less(a: float, b: float, tolerance: float = TOLERANCE) -> str:
    """"more than", "less than" or "about as much as": `a` against `b`."""
    return _compare(a, b, tolerance, "more than", "less than", "about as much as")


def above_or_below(a: float, b: float, tolerance: float = TOLERANCE) -> str:
    """"above", "below" or "level with": `a` against `b`."""
    return _compare(a, b, tolerance, "above", "below", "level with")


def interval_versus(ratio: dict, level: float = 1.0) -> str:
    """"ahead of", "behind" or "level with": a ratio with its interval ({"mean", "low", "high"}) against `level`,
    apart only where the interval leaves it out."""
    if ratio["low"] > level:
        return "ahead of"
    if ratio["high"] < level:
        return "behind"
    return "level with"


def interval_trend(start: dict, end: dict) -> str:
    """"rises" or "falls" when two figures with intervals ({"mean", "low", "high"}) are apart by more than their
    intervals allow, else "holds"."""
    if end["low"] > start["high"]:
        return "rises"
    if end["high"] < start["low"]:
        return "falls"
    return "holds"


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


def probability(p: float | None) -> str:
    """A probability as every page prints it: 3 decimals, 2 significant digits below 0.01 (never "0.000" beside a
    ratio far from 0, so the arithmetic shown holds; in decimals down to 0.00001), "—" for none."""
    if p is None:
        return "—"
    if p >= 0.01 or p <= 0:
        return f"{p:.3f}"
    if p < 1e-5:
        return f"{p:.2g}"  # 4.4e-07
    return f"{p:.{1 - math.floor(math.log10(p))}f}"  # two significant digits, in decimals: 0.000038


CODE_MARKS = set("()[]{}=:#<>_\"'`\\")  # characters prose seldom has and Python source has on nearly every line
PROSE_NOTE = (" The embedded models were trained only on Python source (the standard library's), so a prompt in "
              "plain words gets Python-like text back: comments, names, fragments. Every method still writes exactly "
              "the target's tokens at temperature 0.")


def looks_like_prose(prompt: str) -> bool:
    """Whether a prompt reads as sentences rather than code: several words, and almost none of the characters that
    mark code."""
    words = prompt.split()
    marks = sum(ch in CODE_MARKS for ch in prompt)
    return len(words) >= 4 and marks <= len(prompt) // 50 and sum(w.isalpha() for w in words) >= 0.7 * len(words)


def prose_note(prompt: str) -> str:
    """One line for a prose prompt saying what the embedded models know; "" for code."""
    return PROSE_NOTE if looks_like_prose(prompt) else ""
