"""What visitors can leave on the server's disk: uploads and downloads, bounded in all and per address, and a room
that recovers from any flood.

Each upload is at most 10 MB (Gradio's `max_file_size`, refused as it arrives), and Gradio sweeps its cache of files
older than an hour; neither bounds a total. `DiskBudget` does:

- **per address**: an address may upload at most UPLOAD_BYTES_PER_ADDRESS in UPLOAD_WINDOW_S (counted from each
  upload's declared length as it arrives, before it is read); past it, HTTP 429 and one line.
- **in all**: the folders that hold uploads and downloads (Gradio's cache, the "Download this comparison" folder)
  hold at most MAX_DISK_BYTES. An upload that would take them past it first has room made for it: the oldest files
  go until it fits. A file is never removed while it is protected: younger than KEEP_YOUNGER_S (an upload the page
  is about to open), in use (named by a page's event waiting in the queue or running, or being read), or an offered
  download within DOWNLOAD_LIFE_S of its last offer (the life the docs give it, Gradio's own sweep's age). Only when
  the protected files alone leave no room is the upload refused (HTTP 429, one line).
- **a flood ages out**: an upload is needed only until its page has opened it, so every upload older than
  UPLOAD_LIFE_S and not in use is removed at the next sweep (every SWEEP_EVERY_S, and after each upload), whatever
  the total: after a flood the room is empty again within minutes, and a new visitor's upload fits within
  KEEP_YOUNGER_S of the flood's end (the flood's files are then old enough to make room). Uploads still arriving
  are counted from their declared length until they are kept, so a crowd uploading at once cannot pass the total.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import tempfile
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path

from .addresses import answer, client_address

UPLOAD_PATH = "/gradio_api/upload"
MAX_DISK_BYTES = 1024 * 2**20  # uploads and downloads kept, in all
UPLOAD_BYTES_PER_ADDRESS = 100 * 2**20  # what one address may upload ...
UPLOAD_WINDOW_S = 600.0  # ... in this long
KEEP_YOUNGER_S = 30.0  # a file this new is never swept
UPLOAD_LIFE_S = 300.0  # an upload this old, and not in use, is removed at the next sweep
DOWNLOAD_LIFE_S = 3600.0  # an offered download is kept this long after its last offer (app/main.py CACHE_AGE_S)
DOWNLOAD_PREFIX = "speclab-comparison-"  # app/tabs/compare.py download_path: the offered files and Gradio's copies
SWEEP_EVERY_S = 30.0
MAX_ADDRESSES = 10_000
DOWNLOADS = Path(tempfile.gettempdir()) / "speclab-comparisons"  # app/tabs/compare.py download_path
FULL = "SpecLab: the server's room for uploaded files is full just now; please try again in a minute."
TOO_MUCH = ("SpecLab: your address has uploaded {mb} MB in the last {minutes} minutes, the most one address may; "
            "please try again in {s} s.")

def life_words(seconds: float) -> str:
    """A file's life in the page's words: whole hours as "1 h", else minutes ("30 min"), else seconds."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:.0f} h"
    if seconds >= 60:
        return f"{round(seconds / 60):.0f} min"
    return f"{seconds:.0f} s"


def download_label(life_s: float = DOWNLOAD_LIFE_S) -> str:
    """The download button's words: what it saves and how long its link lives. Each offer (after every run or
    opened file) starts the life again (`DiskBudget.refresh_offers`), so the life counts from the latest one."""
    return f"Download this comparison (link kept {life_words(life_s)})"


_reading: Counter = Counter()  # paths being read now (app/hosting/uploads.py), how many times over
_reading_lock = threading.Lock()


@contextmanager
def reading(path: str):
    """Mark a file as in use while it is read: no sweep removes it meanwhile."""
    with _reading_lock:
        _reading[str(path)] += 1
    try:
        yield
    finally:
        with _reading_lock:
            _reading[str(path)] -= 1
            if _reading[str(path)] <= 0:
                del _reading[str(path)]


def being_read() -> set[str]:
    with _reading_lock:
        return set(_reading)


def queued_paths(blocks) -> set[str]:
    """The files named by a page's events waiting in Gradio's queue or running (an upload its page is opening)."""
    queue = getattr(blocks, "_queue", None)
    if queue is None:
        return set()
    for _ in range(5):  # read from the sweep's thread while the server's loop may change the queue: read again
        try:
            events = [e for lane in list(queue.event_queue_per_concurrency_id.values()) for e in list(lane.queue)]
            events += [e for jobs in list(getattr(queue, "active_jobs", ()) or ()) if jobs for e in list(jobs)]
            break
        except RuntimeError:
            continue
    else:
        events = []
    found: set[str] = set()

    def walk(value, depth: int = 0) -> None:
        if depth > 8:
            return
        if isinstance(value, dict):
            if isinstance(value.get("path"), str):
                found.add(value["path"])
            for item in list(value.values())[:64]:
                walk(item, depth + 1)
        elif isinstance(value, (list, tuple)):
            for item in list(value)[:64]:
                walk(item, depth + 1)

    for event in events:
        walk(getattr(getattr(event, "data", None), "data", None))
    return found


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
    """The bounds above over `folders`; `clock` for the per-address window, `now` for files' ages; `in_use()` the
    paths a page uses now (app/main.py: those its queued and running events name)."""

    def __init__(self, folders, max_bytes: int = MAX_DISK_BYTES, per_address: int = UPLOAD_BYTES_PER_ADDRESS,
                 window_s: float = UPLOAD_WINDOW_S, keep_younger_s: float = KEEP_YOUNGER_S, clock=time.monotonic,
                 now=time.time, upload_life_s: float = UPLOAD_LIFE_S, download_life_s: float = DOWNLOAD_LIFE_S,
                 downloads: Path | None = None, in_use: Callable[[], Iterable[str]] | None = None):
        self.folders = [Path(f) for f in folders]
        self.max_bytes, self.per_address, self.window_s, self.keep_younger_s = max_bytes, per_address, window_s, \
            keep_younger_s
        self.upload_life_s, self.download_life_s = upload_life_s, download_life_s
        self.downloads = Path(downloads) if downloads is not None else DOWNLOADS
        self.clock, self.now = clock, now
        self.in_use = in_use or (lambda: ())
        self.uploads: OrderedDict[str, deque] = OrderedDict()  # address -> (when, bytes) in the window
        self.uploaded: OrderedDict[str, float] = OrderedDict()  # an upload's path -> when it arrived (self.now)
        self.lock = threading.Lock()
        self.swept_bytes = 0  # removed so far (the reliability script reads it)
        self.last_total = 0  # the folders' bytes at the last sweep
        self.arriving = 0  # the bytes of uploads admitted and not yet kept (a sweep cannot see them yet)

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
        """Whether an upload of `length` bytes fits under the total with the uploads still arriving (counted among
        them at once when it does; `done` when it has arrived)."""
        with self.lock:
            if self.last_total + self.arriving + length > self.max_bytes:
                return False
            self.arriving += length
            return True

    def done(self, length: int, kept: bool = True) -> None:
        """An upload admitted by `has_room` has ended: kept in the folders (counted there until the next sweep
        measures them), or refused."""
        with self.lock:
            self.arriving = max(0, self.arriving - length)
            self.last_total += length if kept else 0

    def arrived(self, paths) -> None:
        """Gradio kept these uploads (the paths its upload answered with): each ages out after upload_life_s."""
        with self.lock:
            for path in paths:
                if isinstance(path, str):
                    self.uploaded.pop(path, None)
                    self.uploaded[path] = self.now()
            while len(self.uploaded) > MAX_ADDRESSES:
                self.uploaded.popitem(last=False)

    def total(self) -> int:
        return sum(size for _, size, _ in files_in(self.folders))

    def offered_at(self, path: Path, modified: float) -> float | None:
        """When a download was last offered (its file in the downloads folder is touched at each offer; Gradio's
        copy carries the name); None for any other file."""
        if not path.name.startswith(DOWNLOAD_PREFIX):
            return None
        try:
            return max(modified, (self.downloads / path.name).stat().st_mtime)
        except OSError:
            return modified

    def protected(self, path: Path, modified: float, now: float, using: set[str]) -> bool:
        if modified > now - self.keep_younger_s or str(path) in using:
            return True
        offered = self.offered_at(path, modified)
        return offered is not None and offered > now - self.download_life_s

    def sweep(self, room_for: int = 0) -> int:
        """Remove the uploads past their life, then the oldest files until the folders hold at most max_bytes
        less `room_for` (an upload being admitted) and the uploads still arriving, never a protected one; returns
        the bytes removed."""
        using = {*map(str, self.in_use()), *being_read()}
        with self.lock:
            now = self.now()
            found = sorted(files_in(self.folders))
            total = sum(size for _, size, _ in found)
            removed, kept = 0, []
            for modified, size, path in found:
                arrived = self.uploaded.get(str(path))
                if arrived is not None and arrived < now - self.upload_life_s and \
                        not self.protected(path, modified, now, using):
                    removed += self._remove(path, size)
                else:
                    kept.append((modified, size, path))
            room_for += self.arriving  # the uploads still arriving need their room too
            for modified, size, path in kept:
                if total - removed + room_for <= self.max_bytes:
                    break
                if not self.protected(path, modified, now, using):
                    removed += self._remove(path, size)
            self.refresh_offers(kept, now)
            self.swept_bytes += removed
            self.last_total = total - removed
            return removed

    def _remove(self, path: Path, size: int) -> int:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            return 0
        self.uploaded.pop(str(path), None)
        return size

    def refresh_offers(self, found, now: float) -> None:
        """Gradio's own sweep removes a copy an hour after it was made (its ctime), though its download may have
        been offered again since: each copy of a download offered again is stamped with its last offer (which
        renews its ctime), so it lives DOWNLOAD_LIFE_S from then."""
        for modified, _, path in found:
            offered = self.offered_at(path, modified)
            if offered is not None and offered > modified and path.parent != self.downloads and path.exists():
                try:
                    os.utime(path, (offered, offered))
                except OSError:
                    pass

    def every(self, seconds: float = SWEEP_EVERY_S, serving=lambda: True) -> threading.Thread:
        """Sweep every `seconds` in a daemon thread (downloads are written without an upload), for as long as
        `serving()` says the server is up: a closed app's sweeps end with it."""

        def loop():
            while True:
                time.sleep(seconds)
                if not serving():
                    return
                self.sweep()

        thread = threading.Thread(target=loop, name="speclab-disk-sweep", daemon=True)
        thread.start()
        return thread


class UploadBudget:
    """ASGI middleware: an upload past its address's budget is refused (HTTP 429, one line) before it is read; one
    past the total first has room made for it; after every upload the folders are swept."""

    def __init__(self, app, budget: DiskBudget):
        self.app, self.budget = app, budget

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") != UPLOAD_PATH:
            return await self.app(scope, receive, send)
        declared = b"".join(v for k, v in scope.get("headers", []) if k == b"content-length")
        length = int(declared) if declared.isdigit() else self.budget.per_address  # unknown: counted as the most
        if not self.budget.has_room(length):
            await asyncio.to_thread(self.budget.sweep, length)
            if not self.budget.has_room(length):
                return await answer(send, 429, FULL, 60, as_json=True)
        wait = self.budget.admit(client_address(scope), length)
        if wait:
            self.budget.done(length, kept=False)
            retry = math.ceil(wait)
            return await answer(send, 429, TOO_MUCH.format(mb=self.budget.per_address // 2**20,
                                                           minutes=round(self.budget.window_s / 60), s=retry),
                                retry, as_json=True)
        answered: list[bytes] = []

        async def keep(message):
            if message["type"] == "http.response.body" and sum(map(len, answered)) < 65_536:
                answered.append(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, keep)
        finally:
            self.budget.done(length)
        try:
            paths = json.loads(b"".join(answered))
        except ValueError:
            paths = []
        self.budget.arrived(paths if isinstance(paths, list) else [])
        await asyncio.to_thread(self.budget.sweep)
