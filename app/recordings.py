"""Recorded runs kept on disk: a share link opened after the server restarted replays the run it showed before.

The app records every complete comparison under its configuration (the models, the device, every setting;
app/tabs/compare.py `result_key`), and a share link of the same configuration replays that run instead of
computing new numbers: a class opening one link sees one set of figures. Kept in memory only, those records
were gone with a restart, and a lecturer's prepared link then showed other speedups.

Here each record is also a file in a folder the operator chooses (`--recordings DIR`, or SPECLAB_RECORDINGS;
default under the user's cache). The folder is bounded in files and bytes, oldest first out. Files are written
whole or not at all (a temporary file, then an atomic rename), so several server processes may share a folder,
and a reader never sees half a file. A run that cannot be stored (a full disk, a folder that is not writable) is
still shown and kept in memory; the failure is said once in the server's log. A file that does not read back as
a comparison of the same configuration is ignored.

Eviction weighs what a record cost: past the bounds, the record that took the least engine time to compute goes
first (its cost halving with every day of age, so old records make room in the end), never the one just
written. A visitor flooding the server with tiny distinct links only pushes out tiny records, their own among
them. A record the operator pins (a link opened with the operator's pin key, app/tabs/compare.py) is kept apart,
in `DIR/pinned/`, never evicted, and never replaced by a visitor's run of the same configuration.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import tempfile
import threading
import time
from collections import OrderedDict
from pathlib import Path

from .comparison import MAX_FILE_BYTES, Comparison, RecordError, collector_paused, parse_file, read_parsed

MAX_FILES = 256  # records kept on disk, oldest (by modification time) removed first
MAX_BYTES = 256 * 2**20  # and their total size; a default 64-token comparison is about 150 KB
SUFFIX = ".speclab.json"
STALE_S = 600  # a temporary file this old was left by a writer that died
HALF_LIFE_S = 86_400.0  # a record's cost, as eviction weighs it, halves with every day of age
MAX_PINNED = 64  # pinned records kept in memory (all of them stay on disk)
PINNED = "pinned"  # the subfolder of pinned records
_COST = re.compile(rb'^\{"cost_s": ([0-9.eE+-]+),')

log = logging.getLogger("speclab.recorded")


def default_folder() -> Path:
    """SPECLAB_RECORDINGS, else speclab/recorded under the user's cache (XDG_CACHE_HOME, else ~/.cache)."""
    if os.environ.get("SPECLAB_RECORDINGS"):
        return Path(os.environ["SPECLAB_RECORDINGS"])
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "speclab" / "recorded"


def file_name(key: str) -> str:
    """The record's file: a digest of its configuration (the key itself is too long and holds the prompt)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:40] + SUFFIX


def run_cost_s(comparison: Comparison) -> float:
    """The engine time a comparison took: every lane's wall time, once per timing run."""
    return sum(lane.summary.wall_s * lane.timing_runs for lane in comparison.lanes.values()
               if lane.summary is not None)


def keep_score(cost_s: float, age_s: float) -> float:
    """How much a record is worth keeping: log2 of its cost, less a unit per HALF_LIFE_S of age."""
    return math.log2(max(cost_s, 1e-9)) - max(age_s, 0.0) / HALF_LIFE_S


class RecordedRuns:
    """Complete comparisons by configuration: the `limit` most worth keeping in memory, all (within bounds) on
    disk, and the pinned ones apart. Without a folder it keeps them in memory only."""

    def __init__(self, folder: Path | None = None, limit: int = 32, max_files: int = MAX_FILES,
                 max_bytes: int = MAX_BYTES):
        self.folder = Path(folder) if folder is not None else None
        self.limit, self.max_files, self.max_bytes = limit, max_files, max_bytes
        self._memory: OrderedDict[str, tuple[Comparison, float, float]] = OrderedDict()  # key: (run, cost, when)
        self._pinned: OrderedDict[str, Comparison] = OrderedDict()
        self._lock = threading.Lock()
        self._warned = False

    def last(self, key: str) -> Comparison | None:
        """The run recorded for `key`: a pinned one, else from memory, else from its file (then kept in memory)."""
        with self._lock:
            found = self._pinned.get(key) or (self._memory.get(key) or (None,))[0]
        if found is None and self.folder is not None:
            pinned = self._read(self.folder / PINNED / file_name(key), key)
            if pinned is not None:
                self._keep_pinned(key, pinned)
                return pinned
            found = self._read(self.folder / file_name(key), key)
            if found is not None:
                self._keep(key, found)
        return found

    def is_pinned(self, key: str) -> bool:
        with self._lock:
            if key in self._pinned:
                return True
        return self.folder is not None and (self.folder / PINNED / file_name(key)).exists()

    def remember(self, key: str, comparison: Comparison, pinned: bool = False) -> None:
        """Record a complete run; `pinned`: never evicted (the operator's). A pinned record is replaced only by
        another pinned run: a visitor running the same configuration afresh sees their run, not recorded."""
        if self.is_pinned(key) and not pinned:
            return
        if pinned:
            self._keep_pinned(key, comparison)
        else:
            self._keep(key, comparison)
        if self.folder is not None:
            try:
                self._write(key, comparison, pinned)
                self._prune(keep=file_name(key))
            except OSError as exc:  # a full disk, a read-only folder: the run is still shown, and kept in memory
                if not self._warned:
                    log.warning("recorded runs are kept in memory only: cannot write to %s (%s)", self.folder, exc)
                    self._warned = True

    def pin(self, key: str) -> bool:
        """Pin the run recorded for `key` (False when there is none)."""
        found = self.last(key)
        if found is None:
            return False
        if not self.is_pinned(key):
            self.remember(key, found, pinned=True)
            if self.folder is not None:
                (self.folder / file_name(key)).unlink(missing_ok=True)
        with self._lock:
            self._memory.pop(key, None)
        return True

    def _keep(self, key: str, comparison: Comparison) -> None:
        """In memory; past `limit`, the record least worth keeping goes (never the one just kept)."""
        now = time.time()
        with self._lock:
            self._memory[key] = (comparison, run_cost_s(comparison), now)
            self._memory.move_to_end(key)
            while len(self._memory) > self.limit:
                others = [k for k in self._memory if k != key]
                worst = min(others, key=lambda k: keep_score(self._memory[k][1], now - self._memory[k][2]))
                del self._memory[worst]

    def _keep_pinned(self, key: str, comparison: Comparison) -> None:
        with self._lock:
            self._pinned[key] = comparison
            self._pinned.move_to_end(key)
            while len(self._pinned) > MAX_PINNED:  # read back from disk when asked for again
                self._pinned.popitem(last=False)
            self._memory.pop(key, None)

    def _read(self, path: Path, key: str) -> Comparison | None:
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
            with collector_paused():  # parsed once: its key checked, then read as a comparison
                doc = parse_file(data)
                if not isinstance(doc, dict) or doc.get("key") != key:
                    return None  # another configuration's digest, or not ours
                return read_parsed(doc)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, RecordError, RecursionError) as exc:
            log.warning("ignored recorded run %s: %s", path.name, str(exc)[:200])
            return None

    def _write(self, key: str, comparison: Comparison, pinned: bool) -> None:
        """The whole file, or nothing: written beside its place, then renamed over it. Its cost comes first,
        so eviction reads a few bytes of each file, not the whole."""
        folder = self.folder / PINNED if pinned else self.folder
        folder.mkdir(parents=True, exist_ok=True)
        body = '{"cost_s": %r, "key": %s, %s' % (round(run_cost_s(comparison), 6), json.dumps(key),
                                                 comparison.to_json()[1:])  # a saved comparison, with its key
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".writing-", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as f:
                f.write(body)
            os.replace(temporary, folder / file_name(key))
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    @staticmethod
    def _cost_of(path: Path) -> float:
        """A record's cost, from the first bytes of its file (0 for a file without one)."""
        try:
            with open(path, "rb") as f:
                found = _COST.match(f.read(64))
            return float(found.group(1)) if found else 0.0
        except (OSError, ValueError):
            return 0.0

    def _prune(self, keep: str = "") -> None:
        """Past MAX_FILES or MAX_BYTES, remove the records least worth keeping (keep_score), never `keep` (the
        file just written) nor a pinned one (another process may remove some first)."""
        records, now = [], time.time()
        for path in self.folder.glob("*" + SUFFIX):
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            score = math.inf if path.name == keep else keep_score(self._cost_of(path), now - stat.st_mtime)
            records.append((score, stat.st_mtime, stat.st_size, path))
        for path in self.folder.glob(".writing-*.tmp"):  # left by a process that died while writing
            try:
                if path.stat().st_mtime < time.time() - STALE_S:
                    path.unlink(missing_ok=True)
            except FileNotFoundError:
                pass
        records.sort(reverse=True)  # most worth keeping first
        kept_files = kept_bytes = 0
        for _, _, size, path in records:
            kept_files, kept_bytes = kept_files + 1, kept_bytes + size
            if kept_files > self.max_files or kept_bytes > self.max_bytes:
                path.unlink(missing_ok=True)
