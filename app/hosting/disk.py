"""What visitors can leave on the server's disk: uploads and downloads, bounded in all and per address.

Each upload is at most 10 MB (Gradio's `max_file_size`, refused as it arrives), and Gradio sweeps its cache of files
older than an hour; neither bounds a total. `DiskBudget` does:

- **per address**: an address may upload at most UPLOAD_BYTES_PER_ADDRESS in UPLOAD_WINDOW_S (counted from each
  upload's declared length as it arrives, before it is read); past it, HTTP 429 and one line.
- **in all**: after every upload, and every SWEEP_EVERY_S besides, the folders that hold uploads and downloads
  (Gradio's cache, the "Download this comparison" folder) are measured; over MAX_DISK_BYTES, the oldest files go
  first until the folders are back under it, never one younger than KEEP_YOUNGER_S (an upload the page is about to
  open, a download just offered). An upload that would take the folders past MAX_DISK_BYTES when nothing more can
  be swept is refused (HTTP 429, one line), so uploads never take the folders past it.
"""

from __future__ import annotations

import asyncio
import math
import os
import tempfile
import threading
import time
from collections import OrderedDict, deque
from pathlib import Path

from .addresses import answer, client_address

UPLOAD_PATH = "/gradio_api/upload"
MAX_DISK_BYTES = 1024 * 2**20  # uploads and downloads kept, in all
UPLOAD_BYTES_PER_ADDRESS = 100 * 2**20  # what one address may upload ...
UPLOAD_WINDOW_S = 600.0  # ... in this long
KEEP_YOUNGER_S = 60.0  # a file this new is never swept
SWEEP_EVERY_S = 30.0
MAX_ADDRESSES = 10_000
DOWNLOADS = Path(tempfile.gettempdir()) / "speclab-comparisons"  # app/tabs/compare.py download_path
FULL = "SpecLab: the server's room for uploaded files is full just now; please try again in a minute."
TOO_MUCH = ("SpecLab: your address has uploaded {mb} MB in the last {minutes} minutes, the most one address may; "
            "please try again in {s} s.")


def files_in(folders) -> list[tuple[float, int, Path]]:
    """Every file under the folders: (modified time, size, path)."""
    found = []
    for folder in folders:
        for root, _, names in os.walk(folder):
            for name in names:
                path = Path(root) / name
                try:
                    stat = path.stat()
                except OSError:
                    continue
                found.append((stat.st_mtime, stat.st_size, path))
    return found


class DiskBudget:
    """The bounds above over `folders`; `clock` for the per-address window, `now` for files' ages."""

    def __init__(self, folders, max_bytes: int = MAX_DISK_BYTES, per_address: int = UPLOAD_BYTES_PER_ADDRESS,
                 window_s: float = UPLOAD_WINDOW_S, keep_younger_s: float = KEEP_YOUNGER_S, clock=time.monotonic,
                 now=time.time):
        self.folders = [Path(f) for f in folders]
        self.max_bytes, self.per_address, self.window_s, self.keep_younger_s = max_bytes, per_address, window_s, \
            keep_younger_s
        self.clock, self.now = clock, now
        self.uploads: OrderedDict[str, deque] = OrderedDict()  # address -> (when, bytes) in the window
        self.lock = threading.Lock()
        self.swept_bytes = 0  # removed so far (the reliability script reads it)
        self.last_total = 0  # the folders' bytes at the last sweep, and the uploads admitted since

    def admit(self, address: str, length: int) -> float:
        """Count an upload of `length` bytes from `address`: 0 when it may go on, else seconds until it may."""
        with self.lock:
            now = self.clock()
            recent = self.uploads.pop(address, None) or deque()
            while recent and now - recent[0][0] > self.window_s:
                recent.popleft()
            used = sum(size for _, size in recent)
            wait = 0.0
            if recent and used + length > self.per_address:
                wait = max(1.0, self.window_s - (now - recent[0][0]))
            else:
                recent.append((now, length))
            self.uploads[address] = recent
            while len(self.uploads) > MAX_ADDRESSES:
                self.uploads.popitem(last=False)
            return wait

    def has_room(self, length: int) -> bool:
        """Whether an upload of `length` bytes fits under the total (counted at once when it does)."""
        with self.lock:
            if self.last_total + length > self.max_bytes:
                return False
            self.last_total += length
            return True

    def total(self) -> int:
        return sum(size for _, size, _ in files_in(self.folders))

    def sweep(self) -> int:
        """Remove the oldest files until the folders hold at most max_bytes; returns the bytes removed."""
        with self.lock:
            found = sorted(files_in(self.folders))
            total = sum(size for _, size, _ in found)
            removed, young = 0, self.now() - self.keep_younger_s
            for modified, size, path in found:
                if total - removed <= self.max_bytes or modified > young:
                    break
                try:
                    path.unlink()
                    removed += size
                except OSError:
                    continue
            self.swept_bytes += removed
            self.last_total = total - removed
            return removed

    def every(self, seconds: float = SWEEP_EVERY_S) -> threading.Thread:
        """Sweep every `seconds` in a daemon thread (downloads are written without an upload)."""

        def loop():
            while True:
                time.sleep(seconds)
                self.sweep()

        thread = threading.Thread(target=loop, name="speclab-disk-sweep", daemon=True)
        thread.start()
        return thread


class UploadBudget:
    """ASGI middleware: an upload past its address's budget is refused (HTTP 429, one line) before it is read; after
    every upload the folders are swept back under the total."""

    def __init__(self, app, budget: DiskBudget):
        self.app, self.budget = app, budget

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") != UPLOAD_PATH:
            return await self.app(scope, receive, send)
        declared = b"".join(v for k, v in scope.get("headers", []) if k == b"content-length")
        length = int(declared) if declared.isdigit() else self.budget.per_address  # unknown: counted as the most
        if not self.budget.has_room(length):
            await asyncio.to_thread(self.budget.sweep)
            if not self.budget.has_room(length):
                return await answer(send, 429, FULL, 60, as_json=True)
        wait = self.budget.admit(client_address(scope), length)
        if wait:
            retry = math.ceil(wait)
            return await answer(send, 429, TOO_MUCH.format(mb=self.budget.per_address // 2**20,
                                                           minutes=round(self.budget.window_s / 60), s=retry),
                                retry, as_json=True)
        await self.app(scope, receive, send)
        await asyncio.to_thread(self.budget.sweep)
