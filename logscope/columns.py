"""Progress lines as columns (issue 13): the iteration lines of a range parsed in bulk.

A log that prints every step is mostly iteration lines, and decoding each into a Line, a dict of
fields and an Event costs ~50 us of Python a line. Here a range's plain progress lines (every
trigger they hold belongs to an iteration signature) are parsed together: lines that differ only
in their digits from one match of the first of them (shapes.py), the others by each signature's
regex and `columns` run once over all of them inside pyarrow (RE2). Numbers become float arrays,
and the prefix before each match (`[default7]: `, a timestamp) is decoded once per distinct
prefix. The engine receives arrays, not one object per line.

Lines this path cannot vouch for take the per-line path instead, whole: a line cut at MAX_LINE
or rejoined from a hard-wrapped record, one with control characters or non-ASCII text (RE2 and
the `regex` module agree on `\\d`, `\\s` and `\\b` over ASCII only), one whose `\\r` states before
the last say anything, one with another rank's output glued into it, one no regex matches.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .events import inert, parse_time
from .lines import _EMBEDDED, parse_line
from .patterns import Library, TriggerIndex
from .scan import BLOCK_TRIGGERS
from .shapes import digit_blind

VALUES = (
    "iteration",
    "train_iters",
    "iter_s",
    "iter_ms",
    "loss",
    "grad_norm",
    "loss_scale",
    "skipped",
    "nan_iters",
    "batch",
)
"""The numeric fields of a progress line that Progress keeps (model.Progress)."""

_HEAD = "_head"
_CONTROL = bytes(c for c in range(32) if c != 13) + b"\x7f"
_SHAPE = bytes.maketrans(b"0123456789" + _CONTROL, b"\0" * 10 + b"\x01" * len(_CONTROL))
"""A line's shape: its digits made NUL (patterns.TriggerIndex's key), its control characters
but `\r` made \x01 to be found (a line with any is decoded line by line)."""
HeadFields = tuple[str | None, int | None, int | None, int | None]
"""The stream a line's prefix names: (host, rank, local rank, srun task)."""


def _re2_ok(pattern: str) -> bool:
    """RE2 compiles the pattern and every group in it is named (extract_regex needs both)."""
    try:
        pc.extract_regex(_strings([]), pattern)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


@dataclass(frozen=True, slots=True)
class _Plan:
    bulk: frozenset[int]
    """Indexes of the iteration signatures whose regex and columns RE2 runs as written."""
    index: TriggerIndex
    """The library's triggers and, last, torchrun's failure-block words (scan.BLOCK_TRIGGERS):
    a line of that block is read with the block (events.Extractor)."""


_PLANS: dict[int, tuple[Library, _Plan]] = {}


def _plan(library: Library) -> _Plan:
    """What the bulk path may take, worked out once per library and process."""
    known = _PLANS.get(id(library))
    if known is not None and known[0] is library:
        return known[1]
    out: set[int] = set()
    for i, s in enumerate(library.signatures):
        patterns = [s.regex.pattern, *(c.pattern for c in s.columns)]
        if s.kind == "iteration" and all(_re2_ok(p) for p in patterns):
            out.add(i)
    index = TriggerIndex.build([*(s.trigger for s in library.signatures), BLOCK_TRIGGERS])
    if len(_PLANS) >= 8:
        _PLANS.clear()
    _PLANS[id(library)] = (library, _Plan(frozenset(out), index))
    return _PLANS[id(library)][1]


@dataclass(slots=True, eq=False)
class ProgressColumns:
    """A range's progress lines parsed in bulk, in line order. Plain arrays: they cross
    processes as a few buffers."""

    lineno: array[int] = field(default_factory=lambda: array("q"))
    signature: array[int] = field(default_factory=lambda: array("i"))
    """Index of the line's signature in the library."""
    head: array[int] = field(default_factory=lambda: array("i"))
    """Index of the line's prefix fields in `heads`."""
    heads: list[HeadFields] = field(default_factory=list)
    time: array[float] = field(default_factory=lambda: array("d"))
    """POSIX seconds the line states (its prefix's stamp, or its regex's `time`); NaN if none."""
    values: dict[str, array[float]] = field(default_factory=dict)
    """VALUES by name; NaN where the line does not say."""
    nonfinite: array[int] = field(default_factory=lambda: array("b"))
    """1 where the line has a loss that is not a finite number."""
    raw: bytes = b""
    """The lines themselves, back to back: an event is built from one when the engine needs
    it (the first and last line of a run), by the per-line path."""
    ends: array[int] = field(default_factory=lambda: array("q"))
    """End offset of each line in `raw`."""
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
        return self.raw[self.ends[i - 1] if i else 0 : self.ends[i]]


@dataclass(slots=True)
class Collector:
    """Sorts a range's candidate lines into plain progress lines, parsed in bulk by `finish`,
    and the rest, which the caller decodes line by line."""

    library: Library
    path: str
    year: int | None
    _bulk: frozenset[int] = field(init=False)
    _index: TriggerIndex = field(init=False)
    _lineno: list[int] = field(default_factory=list)
    _text: list[str] = field(default_factory=list)
    _raw: list[bytes] = field(default_factory=list)
    _shapes: list[bytes] = field(default_factory=list)
    _sigs: list[tuple[int, ...]] = field(default_factory=list)
    _heads: dict[HeadFields, int] = field(default_factory=dict)
    _head_fields: list[HeadFields] = field(default_factory=list)
    _parsed: dict[str, tuple[int, float]] = field(default_factory=dict)
    _inert: dict[bytes, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        plan = _plan(self.library)
        self._bulk, self._index = plan.bulk, plan.index

    def take(self, lineno: int, raw: bytes) -> bool:
        """Keep a plain progress line for the bulk parse; False: the caller decodes it."""
        if not self._bulk:
            return False
        raw = raw.rstrip(b"\r")
        shape = raw.translate(_SHAPE)  # digits NUL, control characters but `\r` \x01
        if b"\x01" in shape:
            return False
        sigs = self._index.candidates_in(raw, shape)
        if not sigs or not self._bulk.issuperset(sigs):
            return False
        cut = raw.rfind(b"\r")
        if cut < 0:
            last = raw
        else:
            # the `\r` states before the last (a progress bar tqdm redraws) must say nothing
            if not self._inert_states(raw[:cut], shape[:cut]):
                return False
            last, shape = raw[cut + 1 :], shape[cut + 1 :]
        if not last.isascii():
            return False
        self._lineno.append(lineno)
        self._shapes.append(shape)
        self._text.append(last.decode("ascii"))
        self._raw.append(raw)
        self._sigs.append(sigs)
        return True

    def _inert_states(self, states: bytes, key: bytes) -> bool:
        """The `\\r` states before a line's last say nothing the engine keeps: no prefix, no
        time, no error words (as the per-line path would decode them). Decided once per shape:
        a redrawn bar differs only in its digits."""
        known = self._inert.get(key)
        if known is None:
            text = states.decode("utf-8", "replace")
            known = all(inert(line) for line in parse_line(text, self.path, 1, self.year))
            if len(self._inert) >= _MAX_CACHED:
                self._inert.clear()
            self._inert[key] = known
        return known

    def finish(self) -> tuple[ProgressColumns, list[tuple[int, bytes]]]:
        """The bulk-parsed lines, and the taken lines no regex matched after all (to be decoded
        line by line), in line order."""
        n = len(self._lineno)
        if not n:
            return ProgressColumns(), []
        chosen = np.full(n, -1, np.int32)
        head = np.full(n, -1, np.int32)
        times = np.full(n, np.nan)
        values = {name: np.full(n, np.nan) for name in VALUES}
        nonfinite = np.zeros(n, np.int8)
        out = _Out(chosen, head, times, values, nonfinite)
        # each line's signatures in the order Library.match prefers them, tried in turn
        order = {
            sigs: sorted(sigs, key=lambda i: (-self.library.signatures[i].priority, i))
            for sigs in set(self._sigs)
        }
        # lines of one shape are read from one match (shapes.py); the others by RE2, in bulk
        groups: dict[tuple[bytes, tuple[int, ...]], list[int]] = {}
        for r, key in enumerate(zip(self._shapes, self._sigs, strict=True)):
            groups.setdefault(key, []).append(r)
        pending: list[int] = []
        for (_, sigs), rows in groups.items():
            if len(rows) >= MIN_SHAPE_LINES and self._blind(order[sigs]):
                self._by_shape(rows, order[sigs], out)
            else:
                pending += rows
        depth = 0
        while pending:
            by_sig: dict[int, list[int]] = {}
            for r in pending:
                ranked = order[self._sigs[r]]
                if depth < len(ranked):
                    by_sig.setdefault(ranked[depth], []).append(r)
            pending = []
            for sig, members in by_sig.items():
                pending += self._parse(sig, members, out)
            depth += 1
        keep = np.flatnonzero(chosen >= 0)
        rejected = [(self._lineno[r], self._raw[r]) for r in np.flatnonzero(chosen < 0)]
        raw = [self._raw[r] for r in keep]
        columns = ProgressColumns(
            lineno=_array("q", np.asarray(self._lineno, np.int64)[keep]),
            signature=_array("i", chosen[keep]),
            head=_array("i", head[keep]),
            heads=list(self._head_fields),
            time=_array("d", times[keep]),
            values={name: _array("d", v[keep]) for name, v in values.items()},
            nonfinite=_array("b", nonfinite[keep]),
            raw=b"".join(raw),
            ends=_array("q", np.cumsum([len(x) for x in raw], dtype=np.int64)),
            year=self.year,
        )
        return columns, rejected

    def _blind(self, ranked: list[int]) -> bool:
        """Every signature a line may match reads all lines of a shape alike (shapes.py)."""
        sigs = [self.library.signatures[i] for i in ranked]
        patterns = [p for s in sigs for p in (s.regex.pattern, *(c.pattern for c in s.columns))]
        return _EMBEDDED_BLIND and all(digit_blind(p) for p in patterns)

    def _by_shape(self, rows: list[int], ranked: list[int], out: _Out) -> None:
        """Lines of one shape: the first one's match places every field of each of them."""
        text = self._text[rows[0]]
        for sig in ranked:
            found = self.library.signatures[sig].spans(text)
            if found is not None:
                break
        else:
            return  # no regex matches them: each is decoded line by line
        start, where = found
        if _EMBEDDED.search(text, start):
            return  # another stream's output glued in: decoded line by line
        index = np.asarray(rows)
        # the lines have one length: as a matrix of bytes, a field is a column of it
        grid = np.frombuffer("".join([self._text[r] for r in rows]).encode("ascii"), np.uint8)
        grid = grid.reshape(len(rows), -1)
        # each distinct prefix (and the message's first two characters) decoded once, in the
        # order the lines show them
        keys, first, which = np.unique(
            _cells(grid, 0, min(start + 2, grid.shape[1])), return_index=True, return_inverse=True
        )
        heads, stamps = np.zeros(len(keys), np.int32), np.zeros(len(keys))
        for k in np.argsort(first, kind="stable").tolist():
            text = keys[k].decode("ascii")
            heads[k], stamps[k] = self._head(text[:start], text)
        out.head[index], out.times[index] = heads[which], stamps[which]
        for name, (a, b) in where.items():
            if name == "time":
                _stated(out, index, [self._text[r][a:b] for r in rows])
            elif name in out.values and b > a:
                numbers = _cell_floats(grid, a, b)
                _store(out, index, name, np.ones(len(rows), bool), numbers)
        out.chosen[index] = sig

    def _parse(self, sig: int, members: list[int], out: _Out) -> list[int]:
        """Parse the lines `members` with one signature; returns those it does not match."""
        s = self.library.signatures[sig]
        taken = _strings([self._text[r] for r in members])
        found = pc.extract_regex(taken, f"^(?P<{_HEAD}>.*?)(?:{s.regex.pattern})")
        matched = found.is_valid()
        valid = _numpy(pc.cast(matched, pa.int8()), np.int8).astype(bool)
        missed = [r for r, ok in zip(members, valid, strict=True) if not ok]
        if not valid.any():
            return missed
        rows = np.asarray(members)[valid]
        found = found.filter(matched)
        taken = taken.filter(matched)
        glued = np.zeros(len(rows), bool)
        for k, (r, prefix) in enumerate(zip(rows, found.field(_HEAD).to_pylist(), strict=True)):
            text = self._text[r]
            if _EMBEDDED.search(text, len(prefix)):
                glued[k] = True  # another stream's output glued in: decoded line by line
                continue
            out.head[r], out.times[r] = self._head(prefix, text)
        columns = {name: found.field(name) for name in found.type.names if name != _HEAD}
        for column in s.columns:
            extra = pc.extract_regex(taken, column.pattern)
            for name in extra.type.names:
                columns.setdefault(name, extra.field(name))
        for name, col in columns.items():
            if name == "time":
                _stated(out, rows, col.to_pylist())
            elif name in out.values:
                _store(out, rows, name, *_numbers(col))
        out.chosen[rows[~glued]] = sig
        return missed

    def _head(self, prefix: str, text: str) -> tuple[int, float]:
        """The index of a prefix's fields and the time it states (NaN if none). The first
        characters of the message go with it: a prefix decoder looks one or two ahead."""
        key = text[: len(prefix) + 2]
        known = self._parsed.get(key)
        if known is None:
            line = parse_line(key, self.path, 1, self.year)[0]
            fields = (line.host, line.rank, line.local_rank, line.task)
            index = self._heads.get(fields)
            if index is None:
                index = self._heads[fields] = len(self._head_fields)
                self._head_fields.append(fields)
            stamp = math.nan if line.time is None else line.time.timestamp()
            known = (index, stamp)
            if len(self._parsed) >= _MAX_CACHED:
                self._parsed.clear()  # stamped prefixes are all distinct
            self._parsed[key] = known
        return known


def _stated(out: _Out, rows: np.ndarray[Any, Any], texts: list[str]) -> None:
    """Times a regex captured: they come before the prefix's, as in Extractor.feed."""
    for r, text in zip(rows.tolist(), texts, strict=True):
        t = parse_time(text) if text else None
        if t is not None:
            out.times[r] = t.timestamp()


def _store(
    out: _Out,
    rows: np.ndarray[Any, Any],
    name: str,
    present: np.ndarray[Any, Any],
    numbers: np.ndarray[Any, Any],
) -> None:
    """A field's numbers for `rows`; a loss present but not finite is flagged, kept as NaN."""
    out.values[name][rows] = numbers
    if name == "loss":
        bad = rows[present & ~np.isfinite(numbers)]
        out.nonfinite[bad] = 1
        out.values[name][bad] = np.nan


@dataclass(frozen=True, slots=True)
class _Out:
    """What `finish` fills in, a row per taken line."""

    chosen: np.ndarray[Any, Any]
    """The signature each line matched, -1 if none (it is decoded line by line)."""
    head: np.ndarray[Any, Any]
    times: np.ndarray[Any, Any]
    values: dict[str, np.ndarray[Any, Any]]
    nonfinite: np.ndarray[Any, Any]


MIN_SHAPE_LINES = 8
"""Lines of one shape read from one match; fewer go to RE2 with the others."""
_EMBEDDED_BLIND = digit_blind(_EMBEDDED.pattern)
_MAX_CACHED = 4096


def _array(typecode: str, values: np.ndarray[Any, Any]) -> array[Any]:
    out = array(typecode)
    out.frombytes(values.astype(_NP[typecode]).tobytes())
    return out


_NP = {"q": np.int64, "i": np.int32, "b": np.int8, "d": np.float64}


def _state(c: ProgressColumns) -> tuple[Any, ...]:
    plain = (c.lineno, c.signature, c.head, c.time, c.nonfinite, c.ends)
    values = sorted((k, v.tobytes()) for k, v in c.values.items())
    return (*(a.tobytes() for a in plain), values, c.heads, c.raw, c.year)


def _cells(grid: np.ndarray[Any, Any], a: int, b: int) -> np.ndarray[Any, Any]:
    """Bytes [a, b) of each row of a matrix of equal-length ASCII lines, as fixed-width
    strings (numpy's `S`: no line holds a NUL, so none is lost as padding)."""
    return np.ascontiguousarray(grid[:, a:b]).view(f"S{b - a}").ravel()


def _cell_floats(grid: np.ndarray[Any, Any], a: int, b: int) -> np.ndarray[Any, Any]:
    """The cells [a, b) of each row as floats, NaN where one is not a number (numpy parses
    ASCII in C as Python's float does)."""
    cells = _cells(grid, a, b)
    try:
        return cells.astype(np.float64)
    except ValueError:
        return np.array([_float(c.decode("ascii")) for c in cells.tolist()])


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def _numbers(col: pa.Array) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """A column of number strings: where a number is present, and the floats (NaN where absent
    or not a number). RE2 gives a group that took no part as '', never a number."""
    out = np.full(len(col), np.nan)
    present = (
        _numpy(pc.binary_length(col), np.int64 if col.type == pa.large_string() else np.int32) > 0
    )
    if present.any():
        some = col.filter(_mask(present))
        try:
            out[present] = _numpy(pc.cast(some, pa.float64()), np.float64)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            out[present] = [_float(v) for v in some.to_pylist()]
    return present, out


# pyarrow's conversions from Python lists and scalars import pandas (~0.4 s, ~40 MB) when it is
# installed: arrays are made from buffers here, and read back as buffers.


def _strings(texts: list[str]) -> pa.Array:
    """ASCII texts as an Arrow string array."""
    offsets = np.zeros(len(texts) + 1, np.int64)
    np.cumsum([len(t) for t in texts], out=offsets[1:])
    data = "".join(texts).encode("ascii")
    return pa.Array.from_buffers(
        pa.large_string(), len(texts), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _mask(flags: np.ndarray[Any, Any]) -> pa.Array:
    bits = np.packbits(flags.astype(bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(flags), [None, pa.py_buffer(bits)])


def _numpy(values: pa.Array, dtype: Any) -> np.ndarray[Any, Any]:
    """A null-free fixed-width Arrow array's values (a view)."""
    data = np.frombuffer(values.buffers()[1], dtype)
    return data[values.offset : values.offset + len(values)]
