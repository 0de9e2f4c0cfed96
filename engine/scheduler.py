"""How much of a DSpark block to verify: the verified length ℓ from the drafter's confidences.

Any rule that looks only at what was drafted keeps the output lossless (SPEC §2); these two differ in how
many tokens they send to the target.
- static cut (DeepSpec's open evaluator): verify up to the first position whose confidence is below a
  threshold.
- throughput (the DSpark paper): survival a_j = ∏_{i≤j} c_i, expected tokens τ(ℓ) = 1 + Σ_{j≤ℓ} a_j;
  pick ℓ maximising τ(ℓ) · SPS(1 + ℓ), where SPS(n) is measured verify steps per second for a verify
  forward of n tokens; positions are admitted greedily and the search stops at the first one that does not
  improve the objective (the paper's early stop).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch


def survival(confidences: Sequence[float]) -> list[float]:
    out, alive = [], 1.0
    for c in confidences:
        alive *= c
        out.append(alive)
    return out


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


@torch.inference_mode()
def profile_verify_speed(target, device: torch.device, max_tokens: int, context: int = 128,
                         repeats: int = 7) -> list[float]:
    """SPS(n) for n = 1..max_tokens: verify forwards of n tokens over a `context`-token cache, timed on
    this device (median of `repeats`, after one warm-up). Index 0 holds 0.0."""
    from .models import crop_cache, forward_logits, new_cache

    vocab = target.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    prefix = torch.randint(2, vocab, (1, context), generator=generator).to(device)
    cache = new_cache(target)
    forward_logits(target, prefix, cache, logits_to_keep=1)
    sps = [0.0]
    for n in range(1, max_tokens + 1):
        block = torch.randint(2, vocab, (1, n), generator=generator).to(device)
        times = []
        for r in range(repeats + 1):
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            forward_logits(target, block, cache)
            if device.type == "cuda":
                torch.cuda.synchronize()
            if r:
                times.append(time.perf_counter() - start)
            crop_cache(cache, context)
        times.sort()
        sps.append(1.0 / times[len(times) // 2])
    return sps
