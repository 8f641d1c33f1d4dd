"""A window's candidate lines as byte matrices, one for each length and shape: numpy blanks the
digits of all lines of one length at once and finds their distinct shapes (scan.line_shapes),
so the bulk parse decides once per shape which lines it may take."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.lib.stride_tricks import sliding_window_view

from ..model import to_float
from .arrow_buffers import numpy_view

Array = np.ndarray[Any, Any]


class Verdict(Enum):
    """What becomes of the lines of one shape."""

    TAKE = "take"
    """Parsed in bulk."""
    EACH = "each"
    """Decided line by line: the shape alone does not tell."""
    REFUSE = "refuse"
    """Decoded and matched line by line."""


@dataclass(frozen=True, slots=True)
class Grid:
    """Lines of one shape: a row each, their trailing `\\r` cut."""

    shape: bytes
    linenos: Array
    """int64, ascending."""
    rows: Array
    """uint8, one line a row."""

    def __len__(self) -> int:
        return len(self.linenos)


@dataclass(frozen=True, slots=True)
class Sorted:
    grids: list[tuple[Grid, Any]]
    """The lines to take, a grid per shape, with what the judge said of the shape."""
    each: Array
    """Indexes of the lines to decide line by line, ascending."""
    refused: Array
    """Indexes of the lines to decode and match line by line, ascending."""


def sort_lines(
    data: bytes | bytearray,
    starts: Array,
    ends: Array,
    linenos: Array,
    table: bytes,
    judge: Callable[[bytes, bytes], tuple[Verdict, Any]],
    max_len: int,
) -> Sorted:
    """Sort the lines `data[starts[i]:ends[i]]` (no newline; `linenos` theirs) by shape.

    `table` maps each byte to its byte in a shape (bytes.maketrans); `judge` decides a shape once,
    given it and its first line.
    Lines over `max_len` bytes, after their trailing `\\r`, are decided line by line.
    """
    buf = np.frombuffer(data, np.uint8)
    starts = np.asarray(starts, np.int64)
    ends = np.asarray(ends, np.int64)
    nonempty = ends > starts
    # a trailing `\r` is not part of the line (Collector.take strips it); a line with more
    # keeps one inside, and a shape with `\r` inside is decided line by line
    ends = ends - (nonempty & (buf[np.maximum(ends - 1, 0)] == 13))
    lengths = ends - starts
    by_length = np.argsort(lengths, kind="stable")
    cuts = np.flatnonzero(np.diff(lengths[by_length])) + 1
    grids: list[tuple[Grid, Any]] = []
    each: list[Array] = []
    refused: list[Array] = []
    for members in np.split(by_length, cuts):
        if not len(members):
            continue
        width = int(lengths[members[0]])
        if width == 0 or width > max_len:
            each.append(members)
            continue
        rows = sliding_window_view(buf, width)[starts[members]]
        # bytes.translate: a little faster than numpy's lookup of each byte in an array
        shapes = np.frombuffer(rows.tobytes().translate(table), np.uint8).reshape(rows.shape)
        if (shapes == shapes[0]).all():  # the usual: lines of one length have one shape
            first, parts = np.zeros(1, np.int64), [np.arange(len(members))]
        else:
            keys = np.ascontiguousarray(shapes).view(np.dtype((np.void, width))).ravel()
            _, first, which = np.unique(keys, return_index=True, return_inverse=True)
            order = np.argsort(which, kind="stable")
            parts = np.split(order, np.flatnonzero(np.diff(which[order])) + 1)
        for k, part in zip(first, parts, strict=True):
            verdict, said = judge(shapes[k].tobytes(), rows[k].tobytes())
            if verdict is Verdict.TAKE:
                grid = Grid(shapes[k].tobytes(), linenos[members[part]], rows[part])
                grids.append((grid, said))
            elif verdict is Verdict.EACH:
                each.append(members[part])
            else:
                refused.append(members[part])
    return Sorted(grids, _sorted(each), _sorted(refused))


def _sorted(parts: list[Array]) -> Array:
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


@dataclass(frozen=True, slots=True)
class Group:
    """Taken lines of one shape and signatures, in line order: a row of `rows` each."""

    sigs: tuple[int, ...]
    linenos: Array
    rows: Array
    """The lines' text: after the last `\\r`."""
    whole: list[tuple[Array, Array]] = field(default_factory=list)
    """The rows whose line is more than their text (the `\\r` states before it): indexes of
    rows, and their lines as a matrix."""

    def raw(self, i: int) -> bytes:
        line: bytes = self.rows[i].tobytes()
        for index, lines in self.whole:
            found = np.flatnonzero(index == i)
            if len(found):
                line = lines[found[0]].tobytes()
        return line


def merged(parts: list[Group]) -> Group:
    """Groups of one shape and signatures as one, in line order."""
    if len(parts) == 1:
        return parts[0]
    linenos = np.concatenate([g.linenos for g in parts])
    order = np.argsort(linenos, kind="stable")
    at = np.empty(len(order), np.int64)
    at[order] = np.arange(len(order))  # where each row goes
    whole: list[tuple[Array, Array]] = []
    base = 0
    for g in parts:
        whole += [(at[base + index], lines) for index, lines in g.whole]
        base += len(g.linenos)
    rows = np.concatenate([g.rows for g in parts])[order]
    return Group(parts[0].sigs, linenos[order], rows, whole)


def raw_lines(groups: list[Group], keep: Array) -> tuple[bytes, Array]:
    """The lines of the rows `keep` (numbered across the groups), back to back in that order,
    and the end of each."""
    sizes = np.array([len(g.linenos) for g in groups])
    bases = np.concatenate(([0], np.cumsum(sizes)[:-1])).tolist()
    lengths = np.repeat([g.rows.shape[1] for g in groups], sizes)
    for g, base in zip(groups, bases, strict=True):
        for index, lines in g.whole:
            lengths[base + index] = lines.shape[1]
    ends = np.cumsum(lengths[keep], dtype=np.int64)
    starts = np.zeros(len(lengths), np.int64)
    starts[keep] = ends - lengths[keep]
    kept = np.zeros(len(lengths), bool)
    kept[keep] = True
    out = np.zeros(int(ends[-1]) if len(ends) else 0, np.uint8)
    for g, base in zip(groups, bases, strict=True):
        plain = kept[base : base + len(g.linenos)].copy()
        for index, lines in g.whole:
            plain[index] = False
            chosen = kept[base + index]
            place(out, starts[base + index[chosen]], lines[chosen])
        rows = np.flatnonzero(plain)
        place(out, starts[base + rows], g.rows[rows])
    return out.tobytes(), ends


def place(out: Array, starts: Array, lines: Array) -> None:
    """Write each line (a row of the matrix) at its start in `out` (the lines do not overlap):
    one fancy assignment, not one a line."""
    if len(starts) and lines.shape[1]:
        sliding_window_view(out, lines.shape[1], writeable=True)[starts] = lines


def cells(grid: np.ndarray[Any, Any], a: int, b: int) -> np.ndarray[Any, Any]:
    """Bytes [a, b) of each row of a matrix of equal-length ASCII lines, as fixed-width
    strings (numpy's `S`: no line holds a NUL, so none is lost as padding)."""
    return np.ascontiguousarray(grid[:, a:b]).view(f"S{b - a}").ravel()


def cell_floats(grid: np.ndarray[Any, Any], a: int, b: int) -> np.ndarray[Any, Any]:
    """The cells [a, b) of each row as floats, NaN where one is not a number, as Python's
    float reads them: by Arrow's cast (4 times numpy's speed; it refuses what float reads
    otherwise, spaces or `_` between digits), else by numpy, else one by one."""
    n, width = len(grid), b - a
    block = np.ascontiguousarray(grid[:, a:b])
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int64)
    texts = pa.Array.from_buffers(
        pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(block)]
    )
    try:
        parsed = pc.cast(texts, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    else:
        return numpy_view(parsed, np.float64)
    found = block.view(f"S{width}").ravel()
    try:
        return found.astype(np.float64)
    except ValueError:
        return np.array([to_float(c.decode("ascii")) for c in found.tolist()])
