"""Timed spans of draft, verify and host work (and a self-tuning drafter's "train", engine/online.py), measured, never
estimated.

On the CPU the host clock is the device clock: a span is two `perf_counter` reads, and two reads of the
thread's own CPU time (`time.thread_time`), which a second process on the same core does not inflate: the
app's speedups on the CPU come from that compute time, steadier on a shared machine than the wall time. On CUDA a span of
device work is two CUDA events recorded on the current stream, so it covers the kernels the work
launched, not only their launch, without making the host wait at every span boundary: the device loop
keeps launching ahead, and the events are resolved later (`resolve`, called with the step's host work,
which waits for the step's last event only). Host work (`fork(sync=False)`) is timed on the host clock,
whose origin is aligned with the first event's. The engine returns spans; it never prints them.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import torch

from .contract.types import Span


class SpanClock:
    def __init__(self, device: torch.device):
        self._events = device.type == "cuda"
        self._spans: list = []  # Span, or (work, start event, end event, label) awaiting resolve
        if self._events:
            torch.cuda.synchronize(device)
            self._origin = torch.cuda.Event(enable_timing=True)
            self._origin.record()
        self._t0 = time.perf_counter()

    def now(self) -> float:
        """Seconds since the origin on the host clock."""
        return time.perf_counter() - self._t0

    @contextmanager
    def span(self, work: str, label: str = ""):
        if self._events:
            start = torch.cuda.Event(enable_timing=True)
            start.record()
            try:
                yield
            finally:
                end = torch.cuda.Event(enable_timing=True)
                end.record()
                self._spans.append((work, start, end, label))
            return
        start_s, start_cpu = self.now(), time.thread_time()
        try:
            yield
        finally:
            self._spans.append(Span(work, start_s, self.now(), label, time.thread_time() - start_cpu))

    def fork(self, sync: bool = True) -> "SpanClock":
        """A clock on the same time origin with its own span list, for work done in another thread;
        sync=False times on the host clock (host-only work, which must not wait for the device)."""
        other = SpanClock.__new__(SpanClock)
        other._events, other._spans, other._t0 = self._events and sync, [], self._t0
        if self._events:
            other._origin = self._origin  # to resolve the device clock's spans in the other thread
        return other

    def take(self) -> tuple:
        """The spans recorded since the last take, in order; on CUDA still unresolved (see `resolve`)."""
        spans, self._spans = tuple(self._spans), []
        return spans

    def resolve(self, taken: tuple) -> tuple[Span, ...]:
        """Plain spans from what `take` returned: waits for the last event of `taken` to complete."""
        pending = [s for s in taken if not isinstance(s, Span)]
        if not pending:
            return taken
        pending[-1][2].synchronize()
        origin = self._origin
        return tuple(s if isinstance(s, Span) else
                     Span(s[0], origin.elapsed_time(s[1]) / 1e3, origin.elapsed_time(s[2]) / 1e3, s[3])
                     for s in taken)
