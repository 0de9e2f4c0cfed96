"""Counting what would stall a GPU, on any device: the operations after which the host waits for the device.

On a GPU the host queues kernels and runs ahead of them; it stops and waits whenever it needs a value the device
computes, and each wait drains the queue (a bubble on the timeline). The operations that make it wait:

- `read`: a device value read on the host: `.item()`, `int(t)`, `float(t)`, `bool(t)`, `.tolist()`;
- `to_device`: a tensor built from host values (`torch.tensor(list)`, a list used as an index), copied to the device;
- `nonzero`: `nonzero`, or indexing with a boolean mask, whose result's size only the device knows.

A census counts them while code runs, by watching the operations torch dispatches (and `Tensor.tolist`, which
dispatches none), so it runs on the CPU as well: the test suite holds each lane's count per step to a ceiling
(tests/engine/test_census.py), and the device check counts the same on a GPU.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode

KINDS = ("read", "to_device", "nonzero")


class _Watch(TorchDispatchMode):
    def __init__(self, counts: collections.Counter):
        super().__init__()
        self.counts = counts

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in ("_local_scalar_dense", "item", "is_nonzero"):  # `item`, `bool` under inference mode
            self.counts["read"] += 1
        elif name == "lift_fresh":
            self.counts["to_device"] += 1
        elif name in ("nonzero", "masked_select", "nonzero_static"):
            self.counts["nonzero"] += 1
        elif name in ("index", "index_put", "index_put_") and _boolean_index(args):
            self.counts["nonzero"] += 1
        return func(*args, **(kwargs or {}))


def _boolean_index(args) -> bool:
    indices = args[1] if len(args) > 1 else ()
    return any(torch.is_tensor(i) and i.dtype == torch.bool for i in (indices or ()) if i is not None)


_tolist_lock = threading.Lock()
_counters: list[collections.Counter] = []  # censuses open now, each counting `tolist` on its own thread
_real_tolist = torch.Tensor.tolist


def _counting_tolist(self):
    for counts in _counters:
        if counts.get("_thread") == threading.get_ident():
            counts["read"] += 1
    return _real_tolist(self)


@contextmanager
def census() -> Iterator[collections.Counter]:
    """Count, on this thread, the operations that stall a GPU while the block runs: a Counter of KINDS."""
    counts = collections.Counter({"_thread": threading.get_ident()})
    with _tolist_lock:
        if not _counters:
            torch.Tensor.tolist = _counting_tolist
        _counters.append(counts)
    try:
        with _Watch(counts):
            yield counts
    finally:
        with _tolist_lock:
            _counters.remove(counts)
            if not _counters:
                torch.Tensor.tolist = _real_tolist
        del counts["_thread"]


def stalls_per_step(steps: Iterator) -> list[dict[str, int]]:
    """Run a generator of steps (the engine's device loop) to its end, counting each step's stalls apart: what
    producing each item cost, as {kind: count}."""
    per_step = []
    while True:
        with census() as counts:
            try:
                next(steps)
            except StopIteration:
                return per_step
        per_step.append({kind: counts[kind] for kind in KINDS})
