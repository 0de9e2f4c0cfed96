"""Survival along a drafted block: plain arithmetic, no torch, shared by DSpark's scheduler, the app's
charts and the Why tab's formula.

With c_i = P(position i is accepted | positions 1..i−1 were), the block survives to position j with
probability a_j = ∏_{i≤j} c_i, and a step that verifies ℓ positions commits on average
τ(ℓ) = 1 + Σ_{j≤ℓ} a_j tokens: the accepted drafts plus the target's own bonus token.
"""

from __future__ import annotations

from collections.abc import Sequence


def survival(rates: Sequence[float]) -> list[float]:
    """a_j = ∏_{i≤j} c_i for j = 1..len(rates)."""
    out, alive = [], 1.0
    for c in rates:
        alive *= c
        out.append(alive)
    return out


def expected_tokens(rates: Sequence[float], length: int | None = None) -> float:
    """τ(ℓ) = 1 + Σ_{j≤ℓ} a_j, with ℓ = `length` (default: every rate); past the list's end its last rate
    repeats, so one per-position acceptance p gives τ(K) for any K."""
    length = len(rates) if length is None else length
    if not rates:
        return 1.0
    padded = [rates[min(i, len(rates) - 1)] for i in range(length)]
    return 1.0 + sum(survival(padded))
