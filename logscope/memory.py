"""Freed memory back to the system, between the scan and the analysis of what it found.

glibc's malloc serves a block of 128 KiB and more with a mapping of its own until one is freed;
it then raises that limit to the block's size (up to 32 MiB), so the next buffers of a scan
(the scans the workers send, the arrays they become) come from the heap, and a heap with a
small live block above them cannot shrink: a 1 GB per-step log's analysis held ~30 MB it had
freed when its findings began (issue 13). `malloc_trim` gives back every free page of the
heap. (A fixed mapping limit, `mallopt`, does it too, but it would hold in the workers as well,
where mapping each window anew cost up to 0.5 s per GB.)"""

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
