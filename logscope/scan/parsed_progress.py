"""ProgressColumns: what a range's bulk parse of its progress lines yields (Collector, in
bulk_progress): plain arrays that cross processes as a few buffers, and the text of only the
lines the engine may build an Event of (edge_lines)."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model import Stream

Array = np.ndarray[Any, Any]
"""The stream a line's prefix names: (host, rank, local rank, srun task)."""


@dataclass(slots=True, eq=False)
class ProgressColumns:
    """A range's progress lines parsed in bulk, in line order. Plain arrays: they cross
    processes as a few buffers."""

    lineno: array[int] = field(default_factory=lambda: array("q"))
    signature: array[int] = field(default_factory=lambda: array("i"))
    """Index of the line's signature in the library."""
    head: array[int] = field(default_factory=lambda: array("i"))
    """Index of the line's prefix fields in `heads`."""
    heads: list[Stream] = field(default_factory=list)
    time: array[float] = field(default_factory=lambda: array("d"))
    """POSIX seconds the line states (its prefix's stamp, or its regex's `time`); NaN if none."""
    values: dict[str, array[float]] = field(default_factory=dict)
    """model.progress.PARSED by name; NaN where the line does not say."""
    nonfinite: array[int] = field(default_factory=lambda: array("b"))
    """1 where the line has a loss that is not a finite number."""
    raw: bytes = b""
    """The lines themselves, back to back (those of `held` only, if it is set): an event is
    built from one when the engine needs it, by the per-line path."""
    ends: array[int] = field(default_factory=lambda: array("q"))
    """End offset of each line of `raw`."""
    held: array[int] | None = None
    """Indexes of the lines `raw` holds, ascending (`edge_lines`); None: every line's."""
    year: int | None = None
    """The year the lines' stamps were completed with (lines.parse_line)."""

    def __len__(self) -> int:
        return len(self.lineno)

    def __eq__(self, other: object) -> bool:
        """Equal lines and values, NaN equal to NaN (as bytes)."""
        if not isinstance(other, ProgressColumns):
            return NotImplemented
        return _state(self) == _state(other)

    __hash__ = None  # type: ignore[assignment]

    def raw_line(self, i: int) -> bytes:
        """The text of line `i`; a LookupError if `held` leaves it out."""
        if self.held is not None:
            j = bisect_left(self.held, i)
            if j == len(self.held) or self.held[j] != i:
                raise LookupError(f"the text of progress line {self.lineno[i]} was not kept")
            i = j
        return self.raw[self.ends[i - 1] if i else 0 : self.ends[i]]


def edge_lines(linenos: Array, iterations: Array, others: Array) -> Array:
    """Indexes of the progress lines (numbered `linenos`, `iterations` NaN where a line has
    none) whose Event the engine may build, given the line numbers of a range's other candidate
    lines: the first and the last of each run between two of those (Engine._feed_progress
    keeps them), and the line before one whose iteration is not above the last one stated
    before it, or before the first that states one (an attempt that ends there is closed with
    its last line: timeline._close). A worker ships the text of these lines only: the rest
    (most of a log that prints every step) would cross processes for nothing."""
    n = len(linenos)
    edge = np.zeros(n, bool)
    if not n:
        return np.flatnonzero(edge)
    run = np.searchsorted(others, linenos)
    change = np.flatnonzero(run[1:] != run[:-1])
    edge[[0, n - 1]] = True
    edge[change] = edge[change + 1] = True
    its = np.where(np.isnan(iterations), -1, iterations).astype(np.int64)  # as ScanArrays
    stated = np.flatnonzero(its >= 0)
    if len(stated):
        values = its[stated]
        back = stated[1:][values[1:] <= values[:-1]]
        before = np.concatenate((stated[:1], back)) - 1
        edge[before[before >= 0]] = True
    return np.flatnonzero(edge)


def _state(c: ProgressColumns) -> tuple[Any, ...]:
    plain = (c.lineno, c.signature, c.head, c.time, c.nonfinite, c.ends)
    values = sorted((k, v.tobytes()) for k, v in c.values.items())
    held = None if c.held is None else c.held.tobytes()
    return (*(a.tobytes() for a in plain), values, c.heads, c.raw, held, c.year)
