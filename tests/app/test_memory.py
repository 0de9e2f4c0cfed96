"""Freed memory goes back to the system (glibc keeps what a worker thread freed unless asked)."""

from __future__ import annotations

import ctypes.util
import sys
import threading
from pathlib import Path

import pytest

from app.hosting import memory

glibc_linux = pytest.mark.skipif(not sys.platform.startswith("linux") or ctypes.util.find_library("c") is None
                                 or not Path("/proc/self/status").exists(), reason="glibc on Linux only")


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


@glibc_linux
def test_what_a_worker_thread_freed_is_returned_to_the_system():
    def read_a_large_file():  # many malloc-sized pieces, freed when it returns, as a file's reading is
        pieces = [bytes(1000) + bytes([i % 256]) for i in range(150_000)]
        del pieces

    memory.release()  # first what this process freed before (other tests' threads): the worker's pieces are new pages
    before = rss_mib()
    worker = threading.Thread(target=read_a_large_file)
    worker.start()
    worker.join()
    held = rss_mib()
    assert held - before > 50  # the worker's arena kept a good part of the ~150 MB it freed
    assert memory.release()
    # most of what the arena kept leaves the process (how much it kept depends on what else this process did first)
    assert rss_mib() < held - 0.4 * (held - before)
