"""How much of a DSpark block to verify: the verified length ℓ from the drafter's confidences.

Any rule that looks only at what was drafted keeps the output lossless (the verification rule alone decides what is kept); these two differ in how
many tokens they send to the target.
- static cut (DeepSpec's open evaluator): verify up to the first position whose confidence is below a
  threshold.
- throughput (the DSpark paper): survival a_j = ∏_{i≤j} c_i, expected tokens τ(ℓ) = 1 + Σ_{j≤ℓ} a_j;
  pick ℓ maximising τ(ℓ) · SPS(1 + ℓ), where SPS(n) is measured verify steps per second for a verify
  forward of n tokens; positions are admitted greedily and the search stops at the first one that does not
  improve the objective (the paper's early stop).

In a batch (engine/batch.py) the cost is the batch's: one verify forward reads every request's anchor and drafts,
each row as wide as the longest (the rows are padded), so its time grows with B · (1 + ℓ), and verifying a token
more for one request costs the whole batch. `batch_cut` picks the verified length ℓ per step over the batch:
each request verifies min(ℓ, its drafts), ℓ maximising the batch's expected tokens Σ_b τ_b(ℓ) per second of a step
that costs c + b · B · (1 + ℓ) (a shorter row would save nothing: the padding is computed anyway). b, the time of
one more verified token, comes from `profile_batch_verify_speed` (engine/speed.py: the batch's own verify of B
rows of S tokens timed once per target and device, fitted to t(N) = a + b·N in N = B · S); c, everything a step costs whatever ℓ is (drafting, the
verify's work per request over its cache, the host's), from the run itself: the last drafting step's time less b
times the tokens it verified.

ℓ = 0 for every request saves more than the verify: with nothing to verify the drafter's pass need not run either.
`DraftGate` decides that before each step of a batch, from what drafting and not drafting measurably commit per
second at the batch's size on this machine: under heavy load a step of the target alone can commit more (a serving
engine's speculation switched off at its highest throughput), and the gate then leaves drafting off, trying it again
now and then.

SPS comes from a cost model, not from raw timings: a verify forward of n tokens costs t(n) = a + b·n,
fitted by least squares to the median of many timed forwards per n (b ≥ 0: verifying more never costs
less). One noisy timing cannot then make SPS(2) look much slower than SPS(1), which would make the
throughput rule verify nothing at all (ℓ = 0) on every step.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from .contract.survival import survival


def static_cut(confidences: Sequence[float], threshold: float) -> int:
    for position, c in enumerate(confidences):
        if c < threshold:
            return position
    return len(confidences)


def throughput_cut(confidences: Sequence[float], steps_per_s: Sequence[float]) -> int:
    """steps_per_s[n] is SPS for a verify forward of n tokens (index 0 unused)."""
    best_len, best_value, expected_tokens = 0, steps_per_s[1], 1.0
    for length, alive in enumerate(survival(confidences), start=1):
        expected_tokens += alive
        value = expected_tokens * steps_per_s[min(1 + length, len(steps_per_s) - 1)]
        if value <= best_value:
            break
        best_len, best_value = length, value
    return best_len


def batch_cut(confidences: Sequence[Sequence[float]], cost: tuple[float, float]) -> int:
    """The verified length ℓ for a whole batch: each request b verifies min(ℓ, len(confidences[b])). `cost` is
    (a, b): a step of N verified tokens takes a + b·N seconds; ℓ maximises Σ_b τ_b(ℓ) / (a + b · B · (1 + ℓ)),
    admitted greedily with the early stop of `throughput_cut`."""
    a, b = cost
    batch = len(confidences)
    alive = [survival(c) for c in confidences]
    expected = float(batch)  # every request commits at least the target's own token
    best_len, best_value = 0, expected / (a + b * batch)
    for length in range(1, max((len(c) for c in confidences), default=0) + 1):
        expected += sum(s[length - 1] for s in alive if len(s) >= length)
        value = expected / (a + b * batch * (1 + length))
        if value <= best_value:
            break
        best_len, best_value = length, value
    return best_len


class DraftGate:
    """Whether a batch's step should draft at all: the limit of verifying less, ℓ = 0 for every request, where the
    drafter's pass is saved too (a serving engine turning speculation off under heavy load).

    It keeps, for each batch size, what a step that drafted and a step of the target alone cost and committed on
    this machine (moving averages of the measured seconds and of the tokens), and drafts while drafting commits more
    tokens a second. The first steps at a batch size try both; after that the losing kind is tried again now and
    then, so a change of load or of text is noticed: once the winning kind has run long enough that the try costs
    about PROBE_COST of the time (a try loses its step's seconds times the margin between the two rates), and never
    sooner than PROBE_STEPS[0] steps nor later than PROBE_STEPS[1]. A request alone has no batch to share a step
    with, and the gate is not consulted (engine/drafters/batched.py)."""

    SMOOTHING = 0.5  # weight of the newest step in the moving averages (text changes fast: so must the estimate)
    PROBE_COST = 0.01  # what the tries of the losing kind may cost, as a share of the time
    PROBE_STEPS = (8, 64)  # the fewest and most steps of the winning kind between two tries

    def __init__(self):
        self.measured: dict[tuple[int, bool], tuple[float, float]] = {}  # (batch, drafted) -> (seconds, tokens)
        self.streak: dict[int, tuple[bool, int]] = {}  # batch -> (the kind chosen last, steps of it in a row)
        self.unsettled: set[int] = set()  # batch sizes whose last step drafted but was not a steady one

    def rate(self, batch: int, drafted: bool) -> float | None:
        """Committed tokens per second of a step of that kind at that batch size (None: none measured yet)."""
        seconds, tokens = self.measured.get((batch, drafted), (0.0, 0.0))
        return tokens / seconds if seconds > 0 else None

    def should_draft(self, batch: int) -> bool:
        drafting, plain = self.rate(batch, True), self.rate(batch, False)
        if batch in self.unsettled:
            choice = True  # the last step drafted after steps that did not: the next one is a steady one, measured
        elif drafting is None or plain is None:
            choice = drafting is None  # try drafting first, then the target alone
        else:
            choice = drafting >= plain
            last, run = self.streak.get(batch, (choice, 0))
            if last == choice and run >= self._patience(batch, choice, abs(drafting - plain) / max(drafting, plain)):
                choice = not choice  # the other kind, once, to see whether it still loses
        last, run = self.streak.get(batch, (choice, 0))
        self.streak[batch] = (choice, run + 1 if last == choice else 1)
        return choice

    def _patience(self, batch: int, winner: bool, margin: float) -> int:
        """Steps of the winning kind before the losing one is tried again."""
        win_s, lose_s = self.measured[(batch, winner)][0], self.measured[(batch, not winner)][0]
        steps = lose_s * margin / self.PROBE_COST / win_s
        return int(min(max(steps, self.PROBE_STEPS[0]), self.PROBE_STEPS[1]))

    def record(self, batch: int, drafted: bool, seconds: float, tokens: float, settled: bool = True) -> None:
        """A finished step: its batch size, whether it drafted, its measured seconds and the tokens it committed (a
        drafting step: those it was expected to commit, engine/drafters/batched.py). Not `settled`: a drafting step
        whose pass also read the context of steps that drafted nothing, dearer than drafting step after step; not
        counted, and the next step drafts again to be measured."""
        self.unsettled.discard(batch)
        if not settled:
            self.unsettled.add(batch)
            return
        old = self.measured.get((batch, drafted))
        w = self.SMOOTHING
        self.measured[(batch, drafted)] = ((seconds, float(tokens)) if old is None else
                                           ((1 - w) * old[0] + w * seconds, (1 - w) * old[1] + w * tokens))


def verify_len(scheduler: str, confidences: Sequence[float], threshold: float,
               steps_per_s: Sequence[float] | None) -> int:
    if scheduler == "static":
        return static_cut(confidences, threshold)
    if scheduler == "throughput":
        return throughput_cut(confidences, steps_per_s)
    return len(confidences)


def fit_verify_cost(seconds: Sequence[float]) -> tuple[float, float]:
    """Least-squares fit of t(n) = a + b·n to seconds[n − 1] (n = 1..len), with b ≥ 0 and a > 0."""
    ns = list(range(1, len(seconds) + 1))
    if len(ns) == 1:
        return seconds[0], 0.0
    mean_n, mean_t = sum(ns) / len(ns), sum(seconds) / len(seconds)
    var = sum((n - mean_n) ** 2 for n in ns)
    b = max(0.0, sum((n - mean_n) * (t - mean_t) for n, t in zip(ns, seconds)) / var)
    a = mean_t - b * mean_n
    if a <= 0:  # cost proportional to n (never seen, but keep SPS finite and monotone)
        a, b = min(seconds), max(0.0, (max(seconds) - min(seconds)) / len(seconds))
    return a, b


def steps_per_s_from_timings(seconds: Sequence[float]) -> list[float]:
    """SPS(n) = 1 / (a + b·n) from the fitted cost model; index 0 holds 0.0."""
    a, b = fit_verify_cost(seconds)
    return [0.0] + [1.0 / (a + b * n) for n in range(1, len(seconds) + 1)]


BATCH_PROFILE_SIZES = ((1, 1), (1, 8), (4, 1), (4, 4), (8, 8), (16, 2), (32, 1), (32, 4), (32, 8))


def batch_cost_from_timings(shapes: Sequence[tuple[int, int]], seconds: Sequence[float]) -> tuple[float, float]:
    """(a, b) of t(N) = a + b·N, fitted by least squares (b ≥ 0) to the seconds of verify forwards of B rows of S
    new tokens each, N = B · S, one for each (B, S) in `shapes`."""
    tokens = [rows * width for rows, width in shapes]
    mean_n, mean_t = sum(tokens) / len(tokens), sum(seconds) / len(seconds)
    b = max(0.0, sum((n - mean_n) * (t - mean_t) for n, t in zip(tokens, seconds))
            / sum((n - mean_n) ** 2 for n in tokens))
    return max(mean_t - b * mean_n, min(seconds) / 2), b


def stored_measurement(name: str, key: str, measure: Callable[[], tuple[float, ...]]) -> tuple[float, ...]:
    """A measurement of this machine kept across processes: read from SPECLAB_CACHE/<name>.json (default
    ~/.cache/speclab) under `key`, else measured now and written there. An unreadable or unwritable file only
    means measuring again."""
    folder = Path(os.environ.get("SPECLAB_CACHE") or Path.home() / ".cache" / "speclab")
    path = folder / f"{name}.json"
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        value = stored.get(key) if isinstance(stored, dict) else None
        if isinstance(value, list) and value and all(isinstance(v, (int, float)) and v >= 0 for v in value):
            return tuple(float(v) for v in value)
    except (OSError, ValueError):
        stored = {}
    value = tuple(measure())
    try:
        folder.mkdir(parents=True, exist_ok=True)
        stored = stored if isinstance(stored, dict) else {}
        path.write_text(json.dumps({**stored, key: list(value)}, indent=1) + "\n", encoding="utf-8")
    except OSError:
        pass
    return value
