"""Run a generator in a worker thread, a bounded number of items ahead of its consumer.

The overlap scheduling of the speculative loop uses it: the device loop (draft, verify, cache rollback)
runs ahead in the worker while the consumer turns each finished step into plain values, so host work no
longer sits between one step's device work and the next. torch releases the GIL inside its kernels.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator


class BackgroundSteps:
    """Runs a step generator in a worker thread, at most `depth` steps ahead of its consumer (0: no limit).
    Iterate it for the items, or `batches()` for everything ready at once; `close()` stops the worker."""

    _DONE = object()

    def __init__(self, steps: Iterator, depth: int = 2, name: str = "speclab-worker"):
        self._steps = steps
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._finished = threading.Event()  # set once the worker has handed over its last item
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def _work(self) -> None:
        try:
            for item in self._steps:
                while not self._stop.is_set():
                    try:
                        self._queue.put(item, timeout=0.05)
                        break
                    except queue.Full:
                        continue
                if self._stop.is_set():
                    break
        except BaseException as exc:  # handed to the consumer, which raises it
            self._queue.put(exc)
        finally:
            self._steps.close()
            self._queue.put(self._DONE)
            self._finished.set()

    def __iter__(self):
        for batch in self.batches():
            yield from batch

    def batches(self, every_s: float | None = None) -> Iterator[list]:
        """Lists of the items ready so far (waiting for at least one); re-raises the worker's exception.
        every_s: collect for this long before handing over a batch (at once when the worker ends), so a
        consumer that only redraws now and then is not woken, and does not take the interpreter, at every
        item while the worker is being timed."""
        while True:
            if every_s is not None:
                self._finished.wait(every_s)
            batch = [self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            items = [item for item in batch if item is not self._DONE and not isinstance(item, BaseException)]
            if items:
                yield items
            for item in batch:
                if isinstance(item, BaseException):
                    raise item
                if item is self._DONE:
                    return

    def close(self) -> None:
        self._stop.set()
        while self._thread.is_alive():  # drain so the worker can see the stop and finish
            try:
                self._queue.get(timeout=0.05)
            except queue.Empty:
                pass
        self._thread.join()
