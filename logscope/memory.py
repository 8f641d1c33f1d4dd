"""release_freed_memory: the free pages of glibc's heap given back to the system (malloc_trim),
between the scan and the analysis of what it found, and in a worker after each range. Once a
scan's large buffers come from the heap, a small live block above them keeps it from shrinking."""

from __future__ import annotations

import ctypes
import sys


def release_freed_memory() -> bool:
    """Give the free pages of glibc's heaps back to the system: a few milliseconds. False
    where it does not apply (not Linux, or a C library without malloc_trim, such as musl)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    trim(0)
    return True
