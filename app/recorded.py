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
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path

from .record import MAX_FILE_BYTES, Comparison, LastComparisons, RecordError, read_comparison

MAX_FILES = 256  # records kept on disk, oldest (by modification time) removed first
MAX_BYTES = 256 * 2**20  # and their total size; a default 64-token comparison is about 150 KB
SUFFIX = ".speclab.json"
STALE_S = 600  # a temporary file this old was left by a writer that died

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


class RecordedRuns:
    """Complete comparisons by configuration: the most recent `limit` in memory, all (within bounds) on disk.
    Without a folder it keeps them in memory only."""

    def __init__(self, folder: Path | None = None, limit: int = 32, max_files: int = MAX_FILES,
                 max_bytes: int = MAX_BYTES):
        self.folder = Path(folder) if folder is not None else None
        self.memory = LastComparisons(limit=limit)
        self.max_files, self.max_bytes = max_files, max_bytes
        self._warned = False

    def last(self, key: str) -> Comparison | None:
        """The run recorded for `key`: from memory, else from its file (then kept in memory)."""
        found = self.memory.last(key)
        if found is None and self.folder is not None:
            found = self._read(key)
            if found is not None:
                self.memory.remember(key, found)
        return found

    def remember(self, key: str, comparison: Comparison) -> None:
        self.memory.remember(key, comparison)
        if self.folder is not None:
            try:
                self._write(key, comparison)
                self._prune()
            except OSError as exc:  # a full disk, a read-only folder: the run is still shown, and kept in memory
                if not self._warned:
                    log.warning("recorded runs are kept in memory only: cannot write to %s (%s)", self.folder, exc)
                    self._warned = True

    def _read(self, key: str) -> Comparison | None:
        path = self.folder / file_name(key)
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
            doc = json.loads(data)
            if not isinstance(doc, dict) or doc.get("key") != key:
                return None  # another configuration's digest, or not ours
            return read_comparison(data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, RecordError, RecursionError) as exc:
            log.warning("ignored recorded run %s: %s", path.name, str(exc)[:200])
            return None

    def _write(self, key: str, comparison: Comparison) -> None:
        """The whole file, or nothing: written beside its place, then renamed over it."""
        self.folder.mkdir(parents=True, exist_ok=True)
        body = '{"key": %s, %s' % (json.dumps(key), comparison.to_json()[1:])  # a saved comparison, with its key
        handle, temporary = tempfile.mkstemp(dir=self.folder, prefix=".writing-", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as f:
                f.write(body)
            os.replace(temporary, self.folder / file_name(key))
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def _prune(self) -> None:
        """Remove the oldest records past MAX_FILES or MAX_BYTES (another process may remove some first)."""
        records = []
        for path in self.folder.glob("*" + SUFFIX):
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            records.append((stat.st_mtime, stat.st_size, path))
        for path in self.folder.glob(".writing-*.tmp"):  # left by a process that died while writing
            try:
                if path.stat().st_mtime < time.time() - STALE_S:
                    path.unlink(missing_ok=True)
            except FileNotFoundError:
                pass
        records.sort(reverse=True)  # newest first
        kept_files = kept_bytes = 0
        for _, size, path in records:
            kept_files, kept_bytes = kept_files + 1, kept_bytes + size
            if kept_files > self.max_files or kept_bytes > self.max_bytes:
                path.unlink(missing_ok=True)
