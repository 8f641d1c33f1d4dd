"""Collector: a range's plain progress lines parsed together into float arrays, not a Line and
an Event each. Lines of one shape are read from one match (scan.line_shapes), the others by each
signature's regex and `columns` inside pyarrow (RE2); a line this path cannot vouch for (cut,
rejoined, control characters, non-ASCII) takes the per-line path."""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..compact_column import NUMPY_TYPES
from ..lines.decode import GLUED_HEADER, parse_line
from ..lines.layers import Layers
from ..match.field_times import parse_time
from ..match.prefilter import BLOCK_TRIGGERS
from ..match.signatures import Library, TriggerIndex
from ..model import PARSED, Stream
from .arrow_buffers import numbers, numpy_view, strings
from .line_grids import Grid, Group, Verdict, cell_floats, cells, merged, raw_lines, sort_lines
from .line_shapes import digit_blind
from .parsed_progress import ProgressColumns, edge_lines
from .quiet_states import QuietStates

_HEAD = "_head"
_CONTROL = bytes(c for c in range(32) if c != 13) + b"\x7f"
_SHAPE = bytes.maketrans(b"0123456789" + _CONTROL, b"\0" * 10 + b"\x01" * len(_CONTROL))
"""A line's shape: its digits made NUL (signatures.TriggerIndex's key), its control characters
but `\r` made \x01 to be found (a line with any is decoded line by line)."""
Array = np.ndarray[Any, Any]


def _re2_ok(pattern: str) -> bool:
    """RE2 compiles the pattern and every group in it is named (extract_regex needs both)."""
    try:
        pc.extract_regex(strings([]), pattern)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


@dataclass(frozen=True, slots=True)
class BulkPlan:
    bulk: frozenset[int]
    """Indexes of the iteration signatures whose regex and columns RE2 runs as written."""
    index: TriggerIndex
    """The library's triggers and, last, torchrun's failure-block words (prefilter.BLOCK_TRIGGERS):
    a line of that block is read with the block (events.Extractor)."""
    block: int
    """The failure-block words' index in `index`. A block field starts its message (`  time:
    ...`, failure_block._BLOCK_FIELD), so a line a progress regex matches before the word is not
    one: the old template's `  time: ` also stands between the fields of step lines (mmengine,
    torchvision's MetricLogger), parsed in bulk all the same (`Collector.finish` checks where)."""

    def signatures(self, found: tuple[int, ...]) -> tuple[int, ...]:
        """A candidate line's signatures (`found`, the block's index among them if the line has
        its words) if it may be parsed in bulk, else ()."""
        bulk = [i for i in found if i != self.block]
        return found if bulk and self.bulk.issuperset(bulk) else ()


def bulk_plan(library: Library) -> BulkPlan:
    """What the bulk path may take, worked out once per library."""
    return library.derived("bulk_progress.plan", lambda: _make_bulk_plan(library))


def _make_bulk_plan(library: Library) -> BulkPlan:
    out: set[int] = set()
    for i, s in enumerate(library.signatures):
        patterns = [s.regex.pattern, *(c.pattern for c in s.columns)]
        if s.kind == "iteration" and all(_re2_ok(p) for p in patterns):
            out.add(i)
    index = TriggerIndex.build([*(s.trigger for s in library.signatures), BLOCK_TRIGGERS])
    return BulkPlan(frozenset(out), index, len(library.signatures))


@dataclass(slots=True)
class Collector:
    """Sorts a range's candidate lines into plain progress lines, parsed in bulk by `finish`,
    and the rest, which the caller decodes line by line."""

    library: Library
    path: str
    year: int | None
    layers: Layers | None = None
    """The input's prefix layers (lines.layers), for the prefixes of the lines taken."""
    _plan: BulkPlan = field(init=False)
    _quiet: QuietStates = field(init=False)
    _lineno: list[int] = field(default_factory=list)
    _text: list[str] = field(default_factory=list)
    _raw: list[bytes] = field(default_factory=list)
    _shapes: list[bytes] = field(default_factory=list)
    _sigs: list[tuple[int, ...]] = field(default_factory=list)
    _grids: list[tuple[Grid, tuple[tuple[int, ...], int]]] = field(default_factory=list)
    _heads: dict[Stream, int] = field(default_factory=dict)
    _head_fields: list[Stream] = field(default_factory=list)
    _parsed: dict[str, tuple[int, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._plan = bulk_plan(self.library)
        self._quiet = QuietStates(self.library, self.path, self.year, self.layers)

    def take(self, lineno: int, raw: bytes) -> bool:
        """Keep a plain progress line for the bulk parse, or drop a redrawn line that says
        nothing (quiet_states); False: the caller decodes it."""
        if not self._plan.bulk:
            return False
        raw = raw.rstrip(b"\r")
        shape = raw.translate(_SHAPE)  # digits NUL, control characters but `\r` \x01
        if b"\x01" in shape:
            return False
        found = self._plan.index.candidates_in(raw, shape)
        sigs = self._plan.signatures(found)
        if not sigs:
            return b"\r" in raw and self._quiet.all_quiet(raw, shape, found)
        cut = raw.rfind(b"\r")
        # the `\r` states before the last (a progress bar tqdm redraws) must say nothing
        if cut >= 0 and self._quiet.judge(raw[:cut], shape[:cut], found) is False:
            return False
        last = raw[cut + 1 :]
        if not last.isascii():
            return cut >= 0 and self._quiet.all_quiet(raw, shape, found)
        self._lineno.append(lineno)
        self._shapes.append(shape[cut + 1 :])
        self._text.append(last.decode("ascii"))
        self._raw.append(raw)
        self._sigs.append(sigs)
        return True

    def take_lines(
        self, data: bytes | bytearray, starts: Array, ends: Array, linenos: Array
    ) -> Array:
        """`take` each line `data[starts[i]:ends[i]]` (numbered `linenos`, ascending), deciding
        once per shape (line_grids.py) what `take` decides line by line; returns the indexes of the
        lines not taken, ascending."""
        if not self._plan.bulk or not len(starts):
            return np.arange(len(starts))
        found = sort_lines(data, starts, ends, linenos, _SHAPE, self._judge, MAX_GRID_WIDTH)
        self._grids += found.grids
        left = [
            i
            for i in found.each.tolist()
            if not self.take(int(linenos[i]), _line(data, starts[i], ends[i]))
        ]
        return np.union1d(found.refused, np.asarray(left, np.int64))

    def _judge(self, shape: bytes, line: bytes) -> tuple[Verdict, tuple[tuple[int, ...], int]]:
        """What `take` decides of every line of a shape (the first such `line`): the
        signatures and where the line's last `\\r` state begins, when it is taken."""
        refused: tuple[Verdict, tuple[tuple[int, ...], int]] = (Verdict.REFUSE, ((), 0))
        if b"\x01" in shape:
            return refused
        if shape.endswith(b"\r"):
            return Verdict.EACH, ((), 0)  # more than one `\r` at its end: `take` strips all
        found = self._plan.index.of_shape(shape)
        if found is None:
            return Verdict.EACH, ((), 0)
        sigs = self._plan.signatures(found)
        if not sigs:
            # a redrawn line may say nothing: `take` looks at each (quiet_states)
            return (Verdict.EACH, ((), 0)) if b"\r" in shape else refused
        cut = shape.rfind(b"\r")
        if cut >= 0:
            states = self._quiet.judge(line[:cut], shape[:cut], found)
            if states is None:
                return Verdict.EACH, ((), 0)
            if not states:
                return refused
        if not shape[cut + 1 :].isascii():
            return (Verdict.EACH, ((), 0)) if cut >= 0 else refused
        return Verdict.TAKE, (sigs, cut + 1)

    def finish(
        self, others: Array | None = None
    ) -> tuple[ProgressColumns, list[tuple[int, bytes]]]:
        """The bulk-parsed lines, and the taken lines no regex matched after all (to be decoded
        line by line), in line order. Given the line numbers of the other candidate lines
        (`others`, ascending), the columns hold the text of `edge_lines` only."""
        groups = self._groups()
        n = sum(len(g.linenos) for g in groups)
        if not n:
            return ProgressColumns(), []
        chosen = np.full(n, -1, np.int32)
        head = np.full(n, -1, np.int32)
        times = np.full(n, np.nan)
        values = {name: np.full(n, np.nan) for name in PARSED}
        nonfinite = np.zeros(n, np.int8)
        out = _Out(chosen, head, times, values, nonfinite)
        # each line's signatures in the order Library.match prefers them, tried in turn
        block = self._plan.block
        order = {
            g.sigs: sorted(
                (i for i in g.sigs if i != block),
                key=lambda i: (-self.library.signatures[i].priority, i),
            )
            for g in groups
        }
        # lines of one shape are read from one match (line_shapes.py); the others by RE2, in bulk
        texts: dict[int, str] = {}
        ranks: dict[int, list[int]] = {}
        worded: set[int] = set()  # rows with a failure block's word
        pending: list[int] = []
        base = 0
        for g in groups:
            rows = np.arange(base, base + len(g.linenos))
            if len(rows) >= MIN_SHAPE_LINES and self._blind(order[g.sigs]):
                self._by_shape(g.rows, rows, order[g.sigs], out, block in g.sigs)
            else:
                width = g.rows.shape[1]
                whole = g.rows.tobytes().decode("ascii")
                for i, r in enumerate(rows.tolist()):
                    texts[r] = whole[i * width : (i + 1) * width]
                    ranks[r] = order[g.sigs]
                pending += rows.tolist()
                if block in g.sigs:
                    worded.update(rows.tolist())
            base += len(rows)
        depth = 0
        while pending:
            by_sig: dict[int, list[int]] = {}
            for r in pending:
                if depth < len(ranks[r]):
                    by_sig.setdefault(ranks[r][depth], []).append(r)
            pending = []
            for sig, members in by_sig.items():
                pending += self._parse(sig, members, texts, worded, out)
            depth += 1
        rejected = self._rejected(groups, chosen)
        if others is not None and rejected:
            others = np.union1d(others, np.asarray([n for n, _ in rejected], np.int64))
        return self._columns(groups, out, others), rejected

    def _groups(self) -> list[Group]:
        """The taken lines by shape and signatures, each group in line order, the groups in
        the order of their first lines."""
        parts: dict[tuple[bytes, tuple[int, ...]], list[Group]] = {}
        by_key: dict[tuple[bytes, tuple[int, ...]], list[int]] = {}
        for r, key in enumerate(zip(self._shapes, self._sigs, strict=True)):
            by_key.setdefault(key, []).append(r)
        for (shape, sigs), rows in by_key.items():
            text = "".join([self._text[r] for r in rows]).encode("ascii")
            matrix = np.frombuffer(text, np.uint8).reshape(len(rows), len(shape))
            raws = [
                (np.array([i]), np.frombuffer(self._raw[r], np.uint8)[None, :])
                for i, r in enumerate(rows)
                if len(self._raw[r]) != len(shape)
            ]
            linenos = np.asarray([self._lineno[r] for r in rows], np.int64)
            parts.setdefault((shape, sigs), []).append(Group(sigs, linenos, matrix, raws))
        for grid, (sigs, lead) in self._grids:
            whole = [(np.arange(len(grid)), grid.rows)] if lead else []
            group = Group(sigs, grid.linenos, grid.rows[:, lead:], whole)
            parts.setdefault((grid.shape[lead:], sigs), []).append(group)
        groups = [merged(p) for p in parts.values()]
        groups.sort(key=lambda g: int(g.linenos[0]))
        return groups

    def _columns(self, groups: list[Group], out: _Out, others: Array | None) -> ProgressColumns:
        linenos = np.concatenate([g.linenos for g in groups])
        keep = np.flatnonzero(out.chosen >= 0)
        keep = keep[np.argsort(linenos[keep], kind="stable")]
        held = None
        if others is None:
            raw, ends = raw_lines(groups, keep)
        else:
            edges = edge_lines(linenos[keep], out.values["iteration"][keep], others)
            raw, ends = raw_lines(groups, keep[edges])
            held = _array("q", edges)
        return ProgressColumns(
            lineno=_array("q", linenos[keep]),
            signature=_array("i", out.chosen[keep]),
            head=_array("i", out.head[keep]),
            heads=list(self._head_fields),
            time=_array("d", out.times[keep]),
            values={name: _array("d", v[keep]) for name, v in out.values.items()},
            nonfinite=_array("b", out.nonfinite[keep]),
            raw=raw,
            ends=_array("q", ends),
            held=held,
            year=self.year,
        )

    @staticmethod
    def _rejected(groups: list[Group], chosen: Array) -> list[tuple[int, bytes]]:
        """The lines no regex matched, in line order."""
        out: list[tuple[int, bytes]] = []
        base = 0
        for g in groups:
            missed = np.flatnonzero(chosen[base : base + len(g.linenos)] < 0).tolist()
            out.extend((int(g.linenos[i]), g.raw(i)) for i in missed)
            base += len(g.linenos)
        out.sort()
        return out

    def _blind(self, ranked: list[int]) -> bool:
        """Every signature a line may match reads all lines of a shape alike (line_shapes.py)."""
        sigs = [self.library.signatures[i] for i in ranked]
        patterns = [p for s in sigs for p in (s.regex.pattern, *(c.pattern for c in s.columns))]
        return _GLUED_HEADER_BLIND and all(digit_blind(p) for p in patterns)

    def _by_shape(
        self, grid: Array, index: Array, ranked: list[int], out: _Out, worded: bool
    ) -> None:
        """Lines of one shape (a row of `grid` each, rows `index` of `out`): the first one's
        match places every field of each of them. `worded`: they have a failure block's word."""
        text = grid[0].tobytes().decode("ascii")
        for sig in ranked:
            found = self.library.signatures[sig].spans(text)
            if found is not None:
                break
        else:
            return  # no regex matches them: each is decoded line by line
        start, where = found
        if GLUED_HEADER.search(text, start):
            return  # another stream's output glued in: decoded line by line
        if worded and _first_block_word(text) <= start:
            return  # may be a failure block's field: decoded line by line
        # each distinct prefix (and the message's first two characters) decoded once, in the
        # order the lines show them
        keys, first, which = np.unique(
            cells(grid, 0, min(start + 2, grid.shape[1])), return_index=True, return_inverse=True
        )
        heads, stamps = np.zeros(len(keys), np.int32), np.zeros(len(keys))
        for k in np.argsort(first, kind="stable").tolist():
            key = keys[k].decode("ascii")
            heads[k], stamps[k] = self._head(key[:start], key)
        out.head[index], out.times[index] = heads[which], stamps[which]
        for name, (a, b) in where.items():
            if name == "time":
                _stated(out, index, [c.decode("ascii") for c in cells(grid, a, b).tolist()])
            elif name in out.values and b > a:
                numbers = cell_floats(grid, a, b)
                _store(out, index, name, np.ones(len(index), bool), numbers)
        out.chosen[index] = sig

    def _parse(
        self, sig: int, members: list[int], texts: dict[int, str], worded: set[int], out: _Out
    ) -> list[int]:
        """Parse the lines `members` (their `texts`; `worded`: rows with a failure block's word)
        with one signature; returns those it does not match."""
        s = self.library.signatures[sig]
        taken = strings([texts[r] for r in members])
        found = pc.extract_regex(taken, f"^(?P<{_HEAD}>.*?)(?:{s.regex.pattern})")
        matched = found.is_valid()
        valid = numpy_view(pc.cast(matched, pa.int8()), np.int8).astype(bool)
        missed = [r for r, ok in zip(members, valid, strict=True) if not ok]
        if not valid.any():
            return missed
        rows = np.asarray(members)[valid]
        found = found.filter(matched)
        taken = taken.filter(matched)
        left = np.zeros(len(rows), bool)  # decoded line by line
        for k, (r, prefix) in enumerate(zip(rows, found.field(_HEAD).to_pylist(), strict=True)):
            text = texts[r]
            if GLUED_HEADER.search(text, len(prefix)):
                left[k] = True  # another stream's output glued in
                continue
            if r in worded and _first_block_word(text) <= len(prefix):
                left[k] = True  # may be a failure block's field
                continue
            out.head[r], out.times[r] = self._head(prefix, text)
        columns = {name: found.field(name) for name in found.type.names if name != _HEAD}
        for column in s.columns:
            extra = pc.extract_regex(taken, column.pattern)
            for name in extra.type.names:
                # a field the regex or an earlier column gave is kept (Signature.spans)
                had = columns.get(name)
                more = extra.field(name)
                columns[name] = more if had is None else pc.if_else(_given(had), had, more)
        for name, col in columns.items():
            if name == "time":
                _stated(out, rows, col.to_pylist())
            elif name in out.values:
                _store(out, rows, name, *numbers(col))
        out.chosen[rows[~left]] = sig
        return missed

    def _head(self, prefix: str, text: str) -> tuple[int, float]:
        """The index of a prefix's fields and the time it states (NaN if none). The first
        characters of the message go with it: a prefix decoder looks one or two ahead."""
        key = text[: len(prefix) + 2]
        known = self._parsed.get(key)
        if known is None:
            line = parse_line(key, self.path, 1, self.year, self.layers)[0]
            fields = line.stream
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
MAX_GRID_WIDTH = 4096
"""Longer candidate lines are decided line by line (Collector.take_lines)."""


def _given(col: pa.Array) -> pa.Array:
    """Where a column of captures holds one: RE2 gives a group that took no part as ''."""
    return pc.greater(pc.binary_length(col), 0)


def _first_block_word(text: str) -> int:
    """Where the first of a failure block's words (prefilter.BLOCK_TRIGGERS) stands in `text`."""
    return min((i for i in map(text.find, BLOCK_TRIGGERS) if i >= 0), default=len(text))


def _line(data: bytes | bytearray, start: Any, end: Any) -> bytes:
    return bytes(data[int(start) : int(end)])


_GLUED_HEADER_BLIND = digit_blind(GLUED_HEADER.pattern)
_MAX_CACHED = 4096


def _array(typecode: str, values: np.ndarray[Any, Any]) -> array[Any]:
    out = array(typecode)
    out.frombytes(values.astype(NUMPY_TYPES[typecode]).tobytes())
    return out
