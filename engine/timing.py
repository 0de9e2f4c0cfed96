"""Timed spans of draft, verify and host work, measured, never estimated.

On the CPU the host clock is the device clock. On CUDA the device is synchronised before each clock read,
so a span covers the kernels it launched and not only their launch. The engine returns spans; it never
prints them.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import torch

from .types import Span


class SpanClock:
    def __init__(self, device: torch.device):
        self._sync = device.type == "cuda"
        self._spans: list[Span] = []
        self._t0 = time.perf_counter()

    def now(self) -> float:
        if self._sync:
            torch.cuda.synchronize()
        return time.perf_counter() - self._t0

    @contextmanager
    def span(self, lane: str, label: str = ""):
        start = self.now()
        try:
            yield
        finally:
            self._spans.append(Span(lane, start, self.now(), label))

    def fork(self, sync: bool = True) -> "SpanClock":
        """A clock on the same time origin with its own span list, for work done in another thread;
        sync=False never waits for the device (for host-only work that must not stall on it)."""
        other = SpanClock.__new__(SpanClock)
        other._sync, other._spans, other._t0 = self._sync and sync, [], self._t0
        return other

    def take(self) -> tuple[Span, ...]:
        """The spans recorded since the last take, in order."""
        spans, self._spans = tuple(self._spans), []
        return spans
