"""Freed memory goes back to the system (glibc keeps what a worker thread freed unless asked)."""

from __future__ import annotations

import ctypes.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

glibc_linux = pytest.mark.skipif(not sys.platform.startswith("linux") or ctypes.util.find_library("c") is None
                                 or not Path("/proc/self/status").exists(), reason="glibc on Linux only")


# In a process of its own: how much glibc keeps depends on what the process allocated and freed before (thresholds
# it moves, arenas other threads left), and a test process has run hundreds of tests first.
A_WORKER_READS_A_LARGE_FILE = """
import json, threading
from pathlib import Path
from app.hosting import memory

def rss_mib():
    return next(int(line.split()[1]) / 1024 for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith("VmRSS:"))

pinned = []


def read_a_large_file():  # many malloc-sized pieces, freed when it returns, as a file's reading is
    pieces = [bytes(1000) + bytes([i % 256]) for i in range(150_000)]
    # one small piece that outlives them, above them in the worker's heap (a server's later objects are): glibc
    # then cannot give the freed pieces back by shrinking the heap's top, only when asked
    pinned.append(bytes(1000) + b"kept")
    del pieces

before = rss_mib()
worker = threading.Thread(target=read_a_large_file)
worker.start()
worker.join()
held = rss_mib()
released = memory.release()
print(json.dumps({"before": before, "held": held, "released": released, "after": rss_mib()}))
"""


@glibc_linux
def test_what_a_worker_thread_freed_is_returned_to_the_system():
    run = subprocess.run([sys.executable, "-c", A_WORKER_READS_A_LARGE_FILE], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    mib = json.loads(run.stdout)
    assert mib["held"] - mib["before"] > 50  # the worker's arena kept a good part of the ~150 MB it freed
    assert mib["released"]
    assert mib["after"] < mib["held"] - 0.6 * (mib["held"] - mib["before"])  # and most of it left the process
