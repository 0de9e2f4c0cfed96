"""How much of a DSpark block to verify: the verified length ℓ from the drafter's confidences.

Any rule that looks only at what was drafted keeps the output lossless (the verification rule alone decides what is kept); these two differ in how
many tokens they send to the target.
- static cut (DeepSpec's open evaluator): verify up to the first position whose confidence is below a
  threshold.
- throughput (the DSpark paper): survival a_j = ∏_{i≤j} c_i, expected tokens τ(ℓ) = 1 + Σ_{j≤ℓ} a_j;
  pick ℓ maximising τ(ℓ) · SPS(1 + ℓ), where SPS(n) is measured verify steps per second for a verify
  forward of n tokens; positions are admitted greedily and the search stops at the first one that does not
  improve the objective (the paper's early stop).

SPS comes from a cost model, not from raw timings: a verify forward of n tokens costs t(n) = a + b·n,
fitted by least squares to the median of many timed forwards per n (b ≥ 0: verifying more never costs
less). One noisy timing cannot then make SPS(2) look much slower than SPS(1), which would make the
throughput rule verify nothing at all (ℓ = 0) on every step.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

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


def profile_verify_speed(target, device: torch.device, max_tokens: int, context: int = 128,
                         repeats: int = 9) -> list[float]:
    """SPS(n) for n = 1..max_tokens on this device: timed verify forwards smoothed through the linear cost
    model. Index 0 holds 0.0."""
    return steps_per_s_from_timings(time_verify_forwards(target, device, range(1, max_tokens + 1), context, repeats))


@torch.inference_mode()
def time_verify_forwards(target, device: torch.device, sizes: Sequence[int], context: int = 128,
                         repeats: int = 9) -> list[float]:
    """Seconds per target forward of n new tokens over a `context`-token cache, for each n in `sizes`:
    the median of `repeats` after one warm-up round, sizes interleaved so a burst of load hits all alike."""
    from .models import crop_cache, forward_logits, new_cache

    vocab = target.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    prefix = torch.randint(2, vocab, (1, context), generator=generator).to(device)
    cache = new_cache(target)
    forward_logits(target, prefix, cache, logits_to_keep=1)
    blocks = [torch.randint(2, vocab, (1, n), generator=generator).to(device) for n in sizes]
    times: list[list[float]] = [[] for _ in blocks]
    for r in range(repeats + 1):
        for i, block in enumerate(blocks):
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            forward_logits(target, block, cache)
            if device.type == "cuda":
                torch.cuda.synchronize()
            if r:  # the first round warms up
                times[i].append(time.perf_counter() - start)
            crop_cache(cache, context)
    return [sorted(t)[len(t) // 2] for t in times]
