"""A large file read in windows of whole lines, and split into ranges that start at line
starts: how the workers read the range they scan."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from .newlines import Newlines
from .sources import MAX_LINE

WINDOW = 8 << 20
"""Bytes read at a time by read_windows. RE2 pays ~5 ms per call to compile and warm up: the
scan runs at ~130 MB/s in 1 MiB windows, ~190 in 4 MiB, ~210 in 8 MiB and no faster in 16 MiB,
which cost ~30 MB more per worker (bench/ logs, read + prefilter, one core)."""


class LongLine(Exception):
    """A line over max_line in a range read by read_windows: read that range with read_blocks,
    which cuts such lines."""


@dataclass(frozen=True, slots=True)
class Window:
    """Whole lines of a file: `data[:size]`. The buffer is reused by the next window."""

    data: bytearray
    size: int
    offset: int
    """Byte offset of data[0] in the file."""
    first_lineno: int
    newlines: Newlines
    """Where the window's newlines are."""

    @property
    def nlines(self) -> int:
        return self.newlines.lines


def read_windows(
    path: str, start: int, end: int, window: int = WINDOW, max_line: int = MAX_LINE
) -> Iterator[Window]:
    """Bytes [start, end) of an uncompressed file (start at a line start) as windows of whole
    lines, read into one reused buffer: the fast path of `read_blocks(byte_range=...)`, without
    its copies. Raises LongLine, before the window holding it, if a line is over `max_line`.
    """
    cap = max(window, max_line + 1)
    buf = bytearray(cap)
    view = memoryview(buf)
    carry = 0
    lineno = 1
    remaining = end - start
    try:
        f = Path(path).open("rb")  # noqa: SIM115 - closed below
    except OSError as err:
        raise InputError(path, f"cannot open: {err.strerror or err}") from None
    with f, view:
        f.seek(start)
        while True:
            want = min(cap - carry, remaining)
            got = f.readinto(view[carry : carry + want]) if want > 0 else 0
            remaining -= got
            filled = carry + got
            if filled == 0:
                return
            last = remaining <= 0 or got == 0  # the range ended, or the file shrank
            after = buf.rfind(b"\n", 0, filled) + 1  # after the last newline
            body = filled if last else after
            newlines = Newlines.of(buf, body)
            if body == 0 or body - after > max_line or _line_over(newlines, max_line):
                raise LongLine(f"{path}: a line over {max_line} bytes")
            yield Window(buf, body, start, lineno, newlines)
            if last:
                return
            lineno += newlines.count
            start += body
            carry = filled - body
            buf[:carry] = buf[body:filled]


def _line_over(newlines: Newlines, max_line: int) -> bool:
    """A line ended by a newline is over `max_line` bytes."""
    if newlines.no_line_over(max_line):
        return False
    lengths = np.diff(newlines.positions(), prepend=-1) - 1
    return bool(len(lengths) and int(lengths.max()) > max_line)


def split_ranges(path: str, size: int, chunk: int) -> list[tuple[int, int]]:
    """[start, end) ranges of about `chunk` bytes, each starting at a line start."""
    cuts = [0]
    with Path(path).open("rb") as f:
        pos = chunk
        while pos < size:
            f.seek(pos)
            rest = f.read(MAX_LINE + 1)
            nl = rest.find(b"\n")
            if nl < 0:
                pos += len(rest) or 1
                continue
            cut = pos + nl + 1
            if cut >= size:
                break
            if cut > cuts[-1]:
                cuts.append(cut)
            pos = cut + chunk
    cuts.append(size)
    return list(itertools.pairwise(cuts))
