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

from engine.contract.methods import DFLASH, DFLASH_TREE, EAGLE3
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


# --- draft trees: what a verified node and a draft forward cost, measured by the budget sweep ---------------

def verify_line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(ms at no node, ms per verified node): the least-squares line through (verified nodes per step, verify ms per
    step) points, the formula's verify term as this machine pays it; a flat line when every point has the same nodes."""
    n = len(points)
    mean_x, mean_y = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else 0.0
    return mean_y - slope * mean_x, slope


def tree_costs(sweep: dict) -> dict:
    """From a budget sweep (engine/measure/sweep.py budget_sweep): the verify line over every tree lane's budgets
    ("verify": (ms at none, ms per node)), and per tree lane its draft forwards a step ("forwards"), one draft
    forward's ms ("forward_ms", at the largest budget) and that forward in verified nodes' worth ("forward_nodes")."""
    points = [(row["verified_per_step"], row["verify_ms_per_step"])
              for lane in sweep["lanes"].values() for row in lane["rows"].values()]
    base_ms, node_ms = verify_line(points)
    lanes = {}
    for tree, lane in sweep["lanes"].items():
        largest = lane["rows"][max(lane["rows"], key=int)]
        forwards = lane["draft_forwards_per_step"] or 1.0
        forward_ms = largest["draft_ms_per_step"] / forwards
        lanes[tree] = {"forwards": forwards, "forward_ms": forward_ms,
                       "forward_nodes": forward_ms / node_ms if node_ms > 0 else float("inf")}
    return {"verify": (base_ms, node_ms), "lanes": lanes}


@dataclass(frozen=True)
class PublishedTree:
    """A published chain against its tree (the tree at its best node budget), with where it comes from."""

    setting: str  # target, benchmark, temperature
    chain: str
    chain_speedup: float
    chain_tau: float
    tree: str
    tree_speedup: float
    tree_tau: float
    source: str


# DDTree's Table 1 (Ringel & Romano, arXiv 2604.12989; liranringel.github.io/ddtree): DFlash against DFlash + DDTree,
# T = 0, DDTree at its best node budget of 16 to 1024. Its project page: "On MATH-500, acceptance length rises steadily
# as the DDTree node budget grows, but speedup peaks at an intermediate budget once verifier cost becomes dominant."
PUBLISHED_TREES = (
    PublishedTree("Qwen3-Coder-30B-A3B, HumanEval, T = 0, GPU", DFLASH, 6.09, 8.02, DFLASH_TREE, 8.22, 10.72,
                  "DDTree paper, Table 1"),
    PublishedTree("Qwen3-8B, MATH-500, T = 0, GPU", DFLASH, 5.56, 7.79, DFLASH_TREE, 7.52, 10.73,
                  "DDTree paper, Table 1"),
)
DDTREE_BUDGETS = (16, 1024)  # the node budgets DDTree's Table 1 chose from


@dataclass(frozen=True)
class PublishedLoad:
    """A published speedup against how many requests run at once, with its hardware and where it comes from."""

    setting: str  # drafter, target, hardware, serving stack
    method: str  # the lane of ours it stands beside
    speedups: tuple[tuple[int, float], ...]  # (concurrency, speedup over the same server without speculation)
    source: str


# Speedups under load as their authors report them (GPUs, production servers): the fall with concurrency is the
# shape to compare, not the heights (another model, another machine).
PUBLISHED_LOAD = (
    PublishedLoad("DFlash, Qwen3.5-4B, block 16, B200, SGLang", DFLASH, ((1, 3.5), (8, 3.0), (16, 2.3), (32, 1.8)),
                  "z-lab's Qwen3.5-4B DFlash model card"),
    PublishedLoad("DFlash 2, one H200, SGLang", DFLASH, ((1, 3.43), (8, 2.84), (32, 1.45)),
                  "SGLang's DFlash 2 benchmark"),
    PublishedLoad("EAGLE-3, batch 64, SGLang", EAGLE3, ((64, 1.38),), "EAGLE-3 paper"),
)
