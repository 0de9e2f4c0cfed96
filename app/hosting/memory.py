"""Give freed memory back to the operating system.

Reading and drawing a large saved comparison allocates hundreds of MB for a moment. Python frees it, but
glibc's allocator keeps much of it mapped, in the arena of whichever worker thread did the work; a crowd
of uploads, each handled on another thread, would leave the server holding the sum. `release` asks glibc
to return what is free (malloc_trim). Elsewhere (macOS, musl) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def _trim():
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None


def release() -> bool:
    """Return the process's free heap memory to the system; whether anything could be asked."""
    trim = _trim()
    if trim is None:
        return False
    trim(0)
    return True
