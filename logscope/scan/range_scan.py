"""One range of a file, start to end: its candidate lines found, its plain progress lines parsed
in bulk (bulk_progress.Collector) and the rest decoded and matched line by line. Runs in worker
processes when `analyze` has them (a large file's ranges, a compressed file's chunks)."""

from __future__ import annotations

import functools
import operator
import pickle
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field, replace
from dataclasses import fields as dataclass_fields
from typing import Any

import numpy as np

from ..errors import InputError
from ..lines.discovery import DISCOVERY_BYTES, routing_prefixes
from ..lines.layers import Layers
from ..match.prefilter import Hit, Prefilter, matched
from ..match.signatures import Library
from ..memory import release_freed_memory
from ..model import Line
from ..read.newlines import Newlines
from ..read.sources import MAX_LINE, Block, ReadStats, Source, read_blocks
from ..read.windows import WINDOW, LongLine, read_windows
from .bulk_progress import Collector
from .parsed_progress import ProgressColumns

_line_state = operator.attrgetter(*(f.name for f in dataclass_fields(Line)[1:]))
PackedMatch = tuple[tuple[Any, ...], int, dict[str, str] | None]
"""A matched line as plain data: the Line's fields after `path`, signature index (-1: none)
and fields. Plain tuples cross processes five times faster than pickled dataclasses."""

Matched = tuple[Line, Hit | None]


def match_lines(
    collector: Collector,
    lines: Iterable[tuple[int, bytes, bool]],
    width: int | None,
    edges_only: bool = False,
) -> tuple[list[Matched], ProgressColumns]:
    """Candidate lines (line number, raw bytes, cut at MAX_LINE) that `collector` did not take
    (window_lines) as decoded, matched lines, and the progress lines it took parsed in bulk;
    both in line order. `edges_only`: the columns hold the text of their edge_lines only
    (parsed_progress.py)."""
    library, path, year = collector.library, collector.path, collector.year
    layers = collector.layers
    out: list[Matched] = []
    for lineno, raw, truncated in lines:
        out.extend(matched(library, raw, path, lineno, year, truncated, width, layers))
    others = np.fromiter((m[0].lineno for m in out), np.int64, len(out)) if edges_only else None
    columns, rejected = collector.finish(others)
    if rejected:
        for lineno, raw in rejected:
            out.extend(matched(library, raw, path, lineno, year, False, width, layers))
        out.sort(key=lambda m: m[0].lineno)  # stable: a line's records stay in order
    return out, columns


def window_lines(
    prefilter: Prefilter,
    collector: Collector,
    data: bytes | bytearray,
    size: int,
    newlines: Newlines,
    first_lineno: int,
    width: int | None,
    truncated: Collection[int] = (),
) -> Iterator[tuple[int, bytes, bool]]:
    """The candidate lines of `data[:size]` (whose newlines are given; the first numbered
    `first_lineno`) that the collector does not take, as (line number, raw bytes, cut at
    MAX_LINE). Lines are offered a shape at a time (Collector.take_lines), a hard-wrapped
    input's records one by one; a line cut at MAX_LINE is never offered."""
    if width is not None:
        for lineno, a, b in prefilter.placed(data, size, newlines, first_lineno, width):
            raw, cut = bytes(data[a:b]), lineno in truncated
            if cut or not collector.take(lineno, raw):
                yield lineno, raw, cut
        return
    index, starts, ends = prefilter.spans(data, size, newlines)
    linenos = index + first_lineno
    cuts = np.isin(linenos, list(truncated))
    offer = np.flatnonzero(~cuts)
    left = offer[collector.take_lines(data, starts[offer], ends[offer], linenos[offer])]
    for i in np.union1d(left, np.flatnonzero(cuts)).tolist():
        yield int(linenos[i]), bytes(data[starts[i] : ends[i]]), bool(cuts[i])


@dataclass(frozen=True, slots=True)
class RangeTask:
    """One worker's share of a file: bytes [start, end), which begin at a line start."""

    path: str
    start: int
    end: int
    pattern: str
    library: Library
    year: int | None
    window: int = WINDOW
    max_line: int = MAX_LINE
    discovery: int = DISCOVERY_BYTES
    """Bytes at the input's start whose lines' routing prefixes are collected."""
    wrap: int | None = None
    """The width the input's lines were hard-wrapped at (wrap.wrap_width), if they were."""
    literals: tuple[str, ...] = ()
    """The prefilter's triggers (Prefilter.literals), for Hyperscan."""
    origin: int | None = None
    """Where `start` is in the input, when the file holds a piece of it (spool.Chunk)."""
    layers: Layers | None = None
    """The input's prefix layers (lines.layers), learned from its first lines."""

    @property
    def shift(self) -> int:
        """Add to a byte offset in the file for the offset in the input."""
        return 0 if self.origin is None else self.origin - self.start

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled for a worker with its library as bytes, pickled once per library: pickling
        its ~200 signatures again for each task cost ~17 ms of the parent's CPU a task."""
        state = tuple(getattr(self, name) for name in _TASK_FIELDS)
        return _task, (_library_bytes(self.library), *state)


@dataclass(frozen=True, slots=True)
class InputPlan:
    """What every scan of one input shares, learned from its first bytes (Engine.learn_input):
    its tasks' fields but the bytes each covers."""

    path: str
    library: Library
    prefilter: Prefilter
    year: int | None
    """The year its stamps lack."""
    wrap: int | None
    """The width its lines were hard-wrapped at (wrap.wrap_width), if they were."""
    discovery: int = DISCOVERY_BYTES
    layers: Layers | None = None
    """Its prefix layers (lines.layers.learn)."""

    def task(
        self, start: int, end: int, path: str | None = None, origin: int | None = None
    ) -> RangeTask:
        """The task of bytes [start, end) of the input, or of the file `path` that holds a
        piece of it from `origin` on (spool.Chunk)."""
        return RangeTask(
            self.path if path is None else path,
            start,
            end,
            self.prefilter.pattern,
            self.library,
            self.year,
            discovery=self.discovery,
            wrap=self.wrap,
            literals=self.prefilter.literals,
            origin=origin,
            layers=self.layers,
        )


_TASK_FIELDS = tuple(f.name for f in dataclass_fields(RangeTask) if f.name != "library")


def _library_bytes(library: Library) -> bytes:
    return library.derived(
        "range_scan.pickled", lambda: pickle.dumps(library, pickle.HIGHEST_PROTOCOL)
    )


@functools.lru_cache(maxsize=4)
def _library_of(data: bytes) -> Library:
    library: Library = pickle.loads(data)  # noqa: S301 - the parent process pickled it
    return library


def _task(library: bytes, *state: Any) -> RangeTask:
    """A task back from its pickle (RangeTask.__reduce__), its library unpickled once."""
    fields = dict(zip(_TASK_FIELDS, state, strict=True))
    return RangeTask(library=_library_of(library), **fields)


@dataclass(frozen=True, slots=True)
class RangeScan:
    matches: list[PackedMatch]
    """Line numbers count from the range's first line (1)."""
    lines: int
    size: int
    cut: list[int]
    """Line numbers (from the range's first line) cut at MAX_LINE."""
    prefixes: tuple[bytes, ...]
    """Routing prefixes of its lines in the input's discovery window
    (lines.discovery.routing_prefixes)."""
    progress: ProgressColumns = field(default_factory=ProgressColumns)
    """Its plain progress lines, parsed in bulk (numbered like `matches`)."""
    error: str | None = None
    """Why the range could not be read (the file vanished, say): its input's error."""
    decoded: list[Matched] | None = None
    """A block scanned in this process (scan_block): its matched lines as they are, numbered
    in the input, in place of `matches`."""

    def matched(self, path: str, base: int, library: Library) -> list[Matched]:
        """The matched lines, of input `path`, numbered from `base` (0 for a block's)."""
        if self.decoded is not None:
            return self.decoded
        return [unpack(match, path, base + 1, library) for match in self.matches]


def scan_range(task: RangeTask) -> RangeScan:
    """Find, decode and match the candidate lines of a range. Runs in a worker process, which
    gives back what the scan freed before the next (memory.py): a worker held ~70 MB of
    freed buffers, while the parent's progress columns grew (5 GB per-step logs)."""
    try:
        try:
            return scan_with(task, lines_by_windows)
        except LongLine:
            # rare: a line over MAX_LINE, which read_blocks cuts and reports
            return scan_with(task, lines_by_blocks)
    except InputError as err:
        return RangeScan([], 0, 0, [], (), error=err.message)
    except OSError as err:
        return RangeScan([], 0, 0, [], (), error=f"cannot read: {err.strerror or err}")
    finally:
        release_freed_memory()


@dataclass(slots=True)
class Tally:
    lines: int = 0
    cut: list[int] = field(default_factory=list)
    prefixes: set[bytes] = field(default_factory=set)


_RangeLines = Callable[[RangeTask, Tally, Collector], Iterator[tuple[int, bytes, bool]]]
"""The candidate lines of a range that the collector does not take."""


def scan_block(
    plan: InputPlan, block: Block, offset: int | None = None, edges_only: bool = False
) -> RangeScan:
    """A block of an input (a stream's, a growing file's) scanned in this process as a worker
    scans a range: its lines numbered in the input and left decoded (RangeScan.decoded).
    `offset`: where it starts in the input, for the routing prefixes of the discovery window
    (None: none are collected)."""
    newlines = Newlines.of(block.data)
    read = functools.partial(_one_block, block=block, offset=offset, newlines=newlines)
    scan = scan_with(plan.task(0, len(block.data)), read, edges_only=edges_only, packed=False)
    return replace(scan, lines=newlines.lines)


def scan_with(
    task: RangeTask, read: _RangeLines, edges_only: bool = True, packed: bool = True
) -> RangeScan:
    tally = Tally()
    collector = Collector(task.library, task.path, task.year, task.layers)
    lines, progress = match_lines(
        collector, read(task, tally, collector), task.wrap, edges_only=edges_only
    )
    prefixes = tuple(sorted(tally.prefixes))
    size = task.end - task.start
    if not packed:
        return RangeScan([], tally.lines, size, tally.cut, prefixes, progress, decoded=lines)
    index = {id(s): i for i, s in enumerate(task.library.signatures)}
    out: list[PackedMatch] = []
    for line, hit in lines:
        state = _line_state(line)
        out.append((state, -1, None) if hit is None else (state, index[id(hit[0])], hit[1]))
    return RangeScan(out, tally.lines, size, tally.cut, prefixes, progress)


def lines_by_windows(
    task: RangeTask, tally: Tally, collector: Collector
) -> Iterator[tuple[int, bytes, bool]]:
    prefilter = Prefilter(task.pattern, task.literals)
    for w in read_windows(task.path, task.start, task.end, task.window, task.max_line):
        tally.prefixes |= routing_prefixes(
            w.data, w.offset + task.shift, w.size, task.discovery, task.layers
        )
        yield from window_lines(
            prefilter, collector, w.data, w.size, w.newlines, w.first_lineno, task.wrap
        )
        tally.lines = w.first_lineno - 1 + w.nlines


def lines_by_blocks(
    task: RangeTask, tally: Tally, collector: Collector
) -> Iterator[tuple[int, bytes, bool]]:
    stats = ReadStats()
    # as a block read in this process counts: the bytes of the blocks, cut lines cut
    offset = task.start + task.shift
    for block in read_blocks(
        Source(task.path), stats, max_line=task.max_line, byte_range=(task.start, task.end)
    ):
        yield from _one_block(task, tally, collector, block, offset, Newlines.of(block.data))
        offset += len(block.data)
        tally.lines = block.first_lineno - 1 + block.nlines


def _one_block(
    task: RangeTask,
    tally: Tally,
    collector: Collector,
    block: Block,
    offset: int | None,
    newlines: Newlines,
) -> Iterator[tuple[int, bytes, bool]]:
    """The candidate lines of one block of whole lines (its `newlines` given), at `offset` in
    its input (None: its routing prefixes are not collected); its cut lines noted."""
    if offset is not None:
        tally.prefixes |= routing_prefixes(
            block.data, offset, window=task.discovery, layers=task.layers
        )
    yield from window_lines(
        Prefilter(task.pattern, task.literals),
        collector,
        block.data,
        len(block.data),
        newlines,
        block.first_lineno,
        task.wrap,
        block.truncated,
    )
    tally.cut.extend(block.truncated)


def unpack(
    match: PackedMatch, path: str, first_lineno: int, library: Library
) -> tuple[Line, Hit | None]:
    """A worker's match back as a Line (numbered in the file) and its hit."""
    state, sig, captured = match
    line = Line(path, first_lineno - 1 + state[0], *state[1:])
    return line, None if sig < 0 or captured is None else (library.signatures[sig], captured)
