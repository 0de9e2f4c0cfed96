"""The verify's speed, as DSpark's scheduler (engine/scheduler.py) reads it: steps per second of one request's
target for each verified length, and the cost of a batch's verify per token, both timed on the device."""

from __future__ import annotations

import torch
from torch import nn

from .scheduler import BATCH_PROFILE_SIZES, batch_cost_from_timings, steps_per_s_from_timings
from .target import FusedQwen3, Target, batch_target_for


def profile_verify_speed(target, vocab_size: int, max_tokens: int, context: int = 128) -> list[float]:
    """SPS(n), verify steps per second for n = 1..max_tokens tokens, of a run's `target` (a fresh one: its cache is
    written over) after a `context`-token prompt, smoothed through the linear cost model; index 0 holds 0.0."""
    return steps_per_s_from_timings(time_verifies(target, vocab_size, range(1, max_tokens + 1), context))


@torch.inference_mode()
def time_verifies(target, vocab_size: int, sizes, context: int = 128, repeats: int = 9) -> list[float]:
    """Seconds per `target.verify` of n tokens after a `context`-token prompt, for each n in `sizes` (median_times;
    the cache is rolled back to the prompt after each). What DSpark's scheduler and the device check read as the
    verify's cost."""
    device = _device_of(target)
    generator = torch.Generator().manual_seed(0)
    target.prefill(torch.randint(2, vocab_size, (1, context), generator=generator).to(device))
    blocks = [torch.randint(2, vocab_size, (1, n), generator=generator).to(device) for n in sizes]
    return median_times(device, [(lambda b=block: target.verify(b), lambda: target.keep(context)) for block in blocks],
                        repeats)


def median_times(device: torch.device, calls, repeats: int) -> list[float]:
    """Seconds per `run()` of each (run, reset) in `calls`, `reset()` after each run, untimed: the median of
    `repeats` after one warm-up round, the calls interleaved so a burst of load hits all alike."""
    import time

    times: list[list[float]] = [[] for _ in calls]
    for r in range(repeats + 1):
        for i, (run, reset) in enumerate(calls):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            run()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if r:
                times[i].append(time.perf_counter() - start)
            reset()
    return [sorted(t)[len(t) // 2] for t in times]


def profile_batch_verify_speed(model: nn.Module, fused: FusedQwen3 | None, device: torch.device, context: int = 128,
                               repeats: int = 5) -> tuple[float, float]:
    """(a, b) of t(N) = a + b·N: seconds per verify of B rows of S new tokens (N = B · S) by the batch's own target
    (batch_target_for: the fused forward over a preallocated cache where `fused` computes the model) over
    `context`-token requests, the median of `repeats` for each (B, S) in BATCH_PROFILE_SIZES, fitted by least
    squares (engine/scheduler.py batch_cost_from_timings). What DSpark's scheduler reads as a batch's cost."""
    shapes = BATCH_PROFILE_SIZES
    return batch_cost_from_timings(shapes, time_batch_verifies(model, fused, device, shapes, context, repeats))


@torch.inference_mode()
def time_batch_verifies(model: nn.Module, fused: FusedQwen3 | None, device: torch.device, shapes,
                        context: int = 128, repeats: int = 5) -> list[float]:
    """Seconds per batch verify of each (rows, new tokens) in `shapes` after `context`-token prompts (median_times).
    A verify keeps nothing, so each finds the same cache."""
    vocab = model.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    batches = {}
    for rows in sorted({r for r, _ in shapes}):
        batches[rows] = batch_target_for(model, fused, None, device, rows, capacity=context + max(s for _, s in shapes))
        batches[rows].join(torch.randint(2, vocab, (rows, context), generator=generator).tolist())
    blocks = [torch.randint(2, vocab, shape, generator=generator).to(device) for shape in shapes]
    return median_times(device, [(lambda b=block: batches[b.shape[0]].verify(b, [b.shape[1]] * b.shape[0]),
                                  lambda b=block: batches[b.shape[0]].keep([[] for _ in range(b.shape[0])]))
                                 for block in blocks], repeats)


def _device_of(target) -> torch.device:
    return target.keys.device if isinstance(target, Target) else next(target.model.parameters()).device
