"""The seed's argument as arithmetic: expected tokens per step and speedup from acceptance and costs.

Pure Python (no torch, no plotly), so the Why tab, its tests and anyone reading can check every number:

- τ(K) = 1 + Σ_{k=1..K} Π_{i≤k} p_i: the bonus plus the expected accepted drafts, with p_i the
  per-position acceptance (P(position i accepted | 1..i−1 accepted)).
- speedup ≈ τ / (1 + cost_draft / cost_target) ; a serial drafter pays K forwards, so its
  cost_draft = K · c with c one draft forward's cost over a verify forward's; a one-pass drafter pays one
  forward whatever K, so cost_draft = c_block.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.contract.survival import expected_tokens

MAX_K = 16


def expected_tau(acceptance: Sequence[float], k: int) -> float:
    """τ(K) for per-position acceptances (the last one repeats past the list's end)."""
    return expected_tokens(acceptance, k)


def speedup(tau: float, draft_cost: float) -> float:
    """The seed's formula: τ / (1 + cost_draft / cost_target)."""
    return tau / (1.0 + draft_cost)


def serial_curve(acceptance: Sequence[float], cost_per_forward: float, max_k: int = MAX_K) -> list[float]:
    """Predicted speedup for K = 1..max_k of a drafter that pays K serial forwards."""
    return [speedup(expected_tau(acceptance, k), k * cost_per_forward) for k in range(1, max_k + 1)]


def one_pass_curve(acceptance: Sequence[float], cost_per_block: float, max_k: int = MAX_K) -> list[float]:
    """Predicted speedup for K = 1..max_k of a drafter that drafts the whole block in one forward."""
    return [speedup(expected_tau(acceptance, k), cost_per_block) for k in range(1, max_k + 1)]


def best_k(curve: Sequence[float]) -> int:
    """The K (1-based) where a curve peaks."""
    return max(range(len(curve)), key=curve.__getitem__) + 1


@dataclass(frozen=True)
class Published:
    """A published measurement, with where it comes from."""

    method: str
    setting: str
    speedup: float
    tau: float
    source: str

    @property
    def implied_draft_cost(self) -> float:
        """The cost ratio the formula needs to turn this τ into this speedup: τ / speedup − 1."""
        return self.tau / self.speedup - 1.0


# Datacenter-GPU figures, copied from the papers and READMEs named in each entry (T = 0, transformers backend).
PUBLISHED = (
    Published("EAGLE-3 (16)", "Qwen3-8B, H200, average of 7 benchmarks", 1.76, 2.96, "DFlash paper, Table 1"),
    Published("EAGLE-3 (60)", "Qwen3-8B, H200, average of 7 benchmarks", 2.02, 3.40, "DFlash paper, Table 1"),
    Published("DFlash (16)", "Qwen3-8B, H200, average of 7 benchmarks", 4.86, 6.49, "DFlash paper, Table 1"),
    Published("DFlash b16", "Qwen3-4B, HumanEval, H200/B200", 5.26, 6.63, "z-lab/dflash README"),
    Published("DFlash b16", "Qwen3-4B, GSM8K, H200/B200", 5.17, 6.50, "z-lab/dflash README"),
)
