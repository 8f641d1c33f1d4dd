"""`analyze`: logs that have ended, fed to one Engine in input order, each read the fastest way
it allows: a large file in ranges scanned by worker processes, a compressed one decompressed
into chunks the workers scan (read.spool), anything else here as a stream."""

from __future__ import annotations

import contextlib
import itertools
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from ..analysis.context import (
    CONTEXT_WINDOW,
    TAIL_BUDGET,
    TAIL_BYTES,
    attempt_spans,
    context_marks,
    last_lines,
    last_seen,
    root_context,
    tail_lines,
)
from ..errors import InputError, WorkerError
from ..lines.discovery import DISCOVERY_BUDGET, DISCOVERY_BYTES, window_per_input
from ..lines.wrap import WRAP_SAMPLE, whole_records
from ..match.signatures import Library
from ..memory import release_freed_memory
from ..model import Analysis, InputInfo
from ..read.compression import compression_of
from ..read.sources import (
    MAX_LINE,
    Block,
    ReadStats,
    Source,
    Tail,
    coalesce,
    damaged,
    expand,
    joined,
    looks_binary,
    note_cut,
    read_blocks,
)
from ..read.spool import Chunk, KeepBudget, Kept, Spool
from ..read.windows import WINDOW, split_ranges
from ..scan.range_scan import InputPlan, RangeScan, RangeTask, scan_range
from .conclude import conclude
from .feed import Engine, default_library
from .hangs import join_dumps, split_dumps

_YEAR = re.compile(rb"\b(20\d\d)([-/])[01]\d\2[0-3]\d[T _]\d\d:\d\d")
# a glog / c10 header's month and day (`E1229 22:06:38.480071`), which carries no year
_GLOG_DAY = re.compile(rb"(?<![\w.])[IWEF]([01]\d)([0-3]\d) \d\d:\d\d:\d\d")


def _feed_sequential(
    engine: Engine,
    src: Source,
    stats: ReadStats,
    block_size: int,
    tick: Callable[[int], None],
    tail: Tail,
) -> None:
    """Read an input block by block in this process, keeping its `tail`. Its plan is learned
    from its first WRAP_SAMPLE bytes whatever the block size (the blocks before are held), and
    no block ends inside a hard-wrapped record (lines.wrap.whole_records)."""
    blocks = coalesce(read_blocks(src, stats, block_size=block_size), block_size)
    held: list[Block] = []
    size = 0
    for block in blocks:
        held.append(block)
        size += len(block.data)
        if size >= WRAP_SAMPLE:
            break
    head = joined(held).data if held else b""
    year = _year_hint(src, head[:65536])
    wrap = engine.learn_input(src.path, head, year).wrap
    offset = 0
    for block in whole_records(itertools.chain(held, blocks), wrap):
        engine.feed_block(block, src.path, year, events=False, offset=offset)
        offset += len(block.data)
        tail.add(block.data)
        tick(stats.bytes)


def _range_tasks(
    src: Source, engine: Engine, min_bytes: int, chunk_bytes: int
) -> list[RangeTask] | None:
    """The ranges of an uncompressed file of `min_bytes` and up, each starting at a line start;
    None for any other input, and for a file the sequential path must explain (unreadable,
    binary)."""
    if src.path == "-":
        return None
    try:
        size = Path(src.path).stat().st_size
        if size < min_bytes or compression_of(src.path) is not None:
            return None
        with Path(src.path).open("rb") as f:
            head = f.read(WRAP_SAMPLE)
        if looks_binary(head[:65536]):
            return None
        ranges = split_ranges(src.path, size, chunk_bytes)
    except OSError:
        return None
    plan = engine.learn_input(src.path, head, _year_hint(src, head[:65536]))
    return [plan.task(a, b) for a, b in ranges]


def _compressed(src: Source, min_bytes: int) -> bool:
    """A compressed file of `min_bytes` and up."""
    if src.path == "-":
        return False
    try:
        return Path(src.path).stat().st_size >= min_bytes and compression_of(src.path) is not None
    except OSError:
        return False  # the read explains


def _feed_ranges(
    engine: Engine,
    src: Source,
    stats: ReadStats,
    scans: Iterable[tuple[RangeTask, RangeScan]],
    tick: Callable[[int], None],
    marks: list[tuple[int, int]],
) -> None:
    """Feed the scans of an input's ranges in order, noting in `marks` the (line number, byte
    offset) of each range of the file itself."""
    base = 0
    error: str | None = None
    for task, scan in scans:
        # taken even after an error: the next input's scans follow
        if error is not None or scan.error is not None:
            error = error or scan.error
            continue
        if task.origin is None:  # a range of the file itself: a place to read it again from
            marks.append((base + 1, task.start))
        engine.feed(scan, src.path, base, events=False)
        note_cut(stats, src.path, [base + c for c in scan.cut], MAX_LINE)
        base += scan.lines
        if (stats.bytes + scan.size) // RELEASE_BYTES > stats.bytes // RELEASE_BYTES:
            release_freed_memory()  # the scans fed so far (memory.py)
        stats.bytes += scan.size
        stats.lines = base
        tick(stats.bytes)
    if error is not None:
        raise InputError(src.path, error)


def _spooled_scans(
    src: Source,
    stats: ReadStats,
    engine: Engine,
    pool: ProcessPoolExecutor,
    spool: Spool,
    budget: KeepBudget,
    tail: Tail,
) -> Iterator[tuple[RangeTask, RangeScan]]:
    """A compressed input's scans in order: decompressed into chunks by a child process
    (spool.Spool), each scanned by a worker like a range of a plain file. The chunks around
    failures and the latest progress line are kept for the root cause's context: the input
    cannot be read again but from its start."""
    taken: deque[tuple[Chunk, RangeTask]] = deque()  # submitted, in order

    def tasks() -> Iterator[RangeTask]:
        plan: InputPlan | None = None
        for chunk in spool.chunks():
            if plan is None:
                with Path(chunk.path).open("rb") as f:
                    head = f.read(WRAP_SAMPLE)
                plan = engine.learn_input(src.path, head, _year_hint(src, head[:65536]))
            taken.append((chunk, plan.task(0, chunk.size, chunk.path, chunk.offset)))
            yield taken[-1][1]

    lineno = 1  # the first line of the next chunk fed
    # scans submitted ahead: all the room but for the chunk being written
    for scan in _in_order(pool, tasks(), spool.room - 1, src.path):
        chunk, task = taken.popleft()
        _keep_tail(tail, chunk)
        mark = engine.mark()
        yield task, scan
        since = engine.since(mark)
        spool.scanned(
            chunk, lineno, scan.lines, since.lines, since.last_progress_line, since.new_attempt
        )
        lineno += scan.lines
    spool.finish(budget)
    stats.compression = spool.compression
    if spool.damage is not None:
        # _feed_ranges has fed every chunk and counted their lines
        where = stats.lines + spool.newline_last
        stats.warnings.append(damaged(src.path, where, stats.compression, spool.damage))


def _keep_tail(tail: Tail, chunk: Chunk) -> None:
    with Path(chunk.path).open("rb") as f:
        skip = max(0, chunk.size - tail.size)
        f.seek(skip)
        tail.add(f.read(), skipped=skip)


def _in_order(
    pool: ProcessPoolExecutor, tasks: Iterable[RangeTask], ahead: int, name: str | None = None
) -> Iterator[RangeScan]:
    """Scans of the tasks in order, with at most `ahead` more submitted: results wait in memory
    only while this process is behind (Executor.map would submit them all). `name`: the input
    a dead worker's error names (else the task's file)."""
    pending: deque[tuple[str, Future[RangeScan]]] = deque()
    path = ""
    try:
        for task in tasks:
            pending.append((task.path, pool.submit(scan_range, task)))
            if len(pending) > ahead:
                path, future = pending.popleft()
                yield future.result()
        while pending:
            path, future = pending.popleft()
            yield future.result()
    except BrokenProcessPool:
        raise WorkerError(
            f"{name or path}: a worker process died (killed? out of memory?); try again with "
            "--jobs 1"
        ) from None


def _year_hint(src: Source, first: bytes) -> int | None:
    """The year of the input's stamps that carry none: the first full date in its head, else the
    year the file was last written, or the one before where its first glog header's day comes
    later in the year than that (a log of late December read in January)."""
    m = _YEAR.search(first)
    if m:
        return int(m.group(1))
    if src.path != "-":
        try:
            written = datetime.fromtimestamp(Path(src.path).stat().st_mtime)
        except OSError:
            return None
        day = _GLOG_DAY.search(first)
        if day and (int(day[1]), int(day[2])) > (written.month, written.day):
            return written.year - 1
        return written.year
    return None


RANGE_MIN_BYTES = 1 << 20
"""Uncompressed files this size and up are read in ranges (by workers, when there are)."""
PARALLEL_MIN_BYTES = 64 << 20
"""Fewer bytes in ranges are read in this process: starting workers costs more than it saves."""
CHUNK_BYTES = 32 << 20
RELEASE_BYTES = 256 << 20
"""Input fed between two returns of freed memory to the system during a scan (~3 ms each): the
received scans' buffers otherwise pile up in glibc's heap, ~25 MB on a 5 GB per-step log."""


def analyze(
    paths: Sequence[str],
    library: Library | None = None,
    warn: list[str] | None = None,
    block_size: int = WINDOW,
    gpus: int | None = None,
    mtbf_s: float | None = None,
    jobs: int = 1,
    on_progress: Callable[[int], None] | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    parallel_min_bytes: int = PARALLEL_MIN_BYTES,
    range_min_bytes: int = RANGE_MIN_BYTES,
) -> Analysis:
    """Analyze logs that have ended. `warn` collects non-fatal input problems.

    Uncompressed files of `range_min_bytes` and up are read as ranges that start at line
    starts, scanned by `jobs` worker processes when `jobs` > 1 and the ranges hold
    `parallel_min_bytes` in all; the matched lines are fed to the one engine in input order, so
    the result is the same with any `jobs`. `on_progress` gets the bytes read so far.
    """
    library = library or default_library()
    sources, dumps = split_dumps(expand(list(paths)))
    engine = Engine(library)
    engine.discovery = window_per_input(len(sources), DISCOVERY_BUDGET, 1 << 20, DISCOVERY_BYTES)
    inputs: list[InputInfo] = []
    plans = [(src, _range_tasks(src, engine, range_min_bytes, chunk_bytes)) for src in sources]
    tasks = [t for _, ts in plans for t in ts or ()]
    done = 0
    spooled = {
        src.path
        for src, ranges in plans
        if ranges is None and jobs > 1 and _compressed(src, range_min_bytes)
    }
    pool: ProcessPoolExecutor | None = None
    line_marks: dict[str, list[tuple[int, int]]] = {}  # context.root_context's `marks`
    kept: dict[str, list[Kept]] = {}
    budget = KeepBudget()
    tail_bytes = window_per_input(len(sources), TAIL_BUDGET, 256 << 10, TAIL_BYTES)
    seen: dict[str, dict[bytes, int]] = {}  # context.last_lines of those inputs
    ends: dict[str, Future[dict[bytes, int]]] = {}  # last_lines of files, by a worker
    with contextlib.ExitStack() as stack:
        if jobs > 1 and (spooled or sum(t.end - t.start for t in tasks) >= parallel_min_bytes):
            pool = stack.enter_context(ProcessPoolExecutor(jobs))
            # while the workers are busy anyway, not in this process after them
            for src, ranges in plans:
                if ranges:
                    end, mine = ranges[-1].end, engine.layers_of(src.path)
                    ends[src.path] = pool.submit(tail_lines, src.path, end, tail_bytes, mine)
            scans = _in_order(pool, tasks, 2 * jobs)  # two per worker
        else:
            scans = map(scan_range, tasks)
        for src, ranges in plans:
            stats = ReadStats()

            def tick(n: int, base: int = done) -> None:
                if on_progress is not None:
                    on_progress(base + n)

            tail: Tail | None = None  # the input's end as it goes by, if it cannot be reread
            try:
                if ranges is not None:  # the shared `scans` go on with the next input's
                    marks = line_marks.setdefault(src.path, [])
                    ranged = zip(ranges, scans, strict=False)
                    _feed_ranges(engine, src, stats, ranged, tick, marks)
                elif pool is not None and src.path in spooled:
                    spool = stack.enter_context(Spool(src, chunk_bytes, jobs + 2, CONTEXT_WINDOW))
                    kept[src.path] = spool.kept
                    tail = Tail(tail_bytes)
                    chunks = _spooled_scans(src, stats, engine, pool, spool, budget, tail)
                    marks = line_marks.setdefault(src.path, [])
                    _feed_ranges(engine, src, stats, chunks, tick, marks)
                else:
                    tail = Tail(tail_bytes)
                    _feed_sequential(engine, src, stats, block_size, tick, tail)
            except InputError as err:
                if src.explicit:
                    raise
                stats.warnings.append(f"{src.path}: skipped: {err.message}")
            except OSError as err:
                raise InputError(src.path, f"cannot read: {err.strerror or err}") from None
            if stats.bytes == 0 and not stats.warnings:
                stats.warnings.append(f"{src.path}: {EMPTY_INPUT}")
            if tail is not None:
                mine = engine.layers_of(src.path)
                seen[src.path] = last_lines(bytes(tail.data), tail.cut, stats.lines, mine)
            elif src.path in ends:
                with contextlib.suppress(OSError, BrokenProcessPool):  # last_seen reads it then
                    back = ends[src.path].result()
                    seen[src.path] = {prefix: n + stats.lines for prefix, n in back.items()}
            done += stats.bytes
            if on_progress is not None:
                on_progress(done)
            if warn is not None:
                warn.extend(stats.warnings)
            inputs.append(
                InputInfo(
                    src.path, stats.bytes, stats.lines, stats.compression, tuple(stats.warnings)
                )
            )
        if pool is not None:
            pool.shutdown(wait=False)  # every scan is in: the workers' memory goes meanwhile
        release_freed_memory()  # the scans' buffers, before the findings' arrays (memory.py)
        analysis = join_dumps(conclude(engine, inputs, gpus=gpus, mtbf_s=mtbf_s), dumps)
        if warn is not None and analysis.hang_dumps is not None:
            warn.extend(analysis.hang_dumps.warnings)
        spans = attempt_spans(analysis.incidents, analysis.attempts)
        layers = {info.path: engine.layers_of(info.path) for info in inputs}
        context = root_context(analysis.incidents, line_marks, kept, spans=spans, layers=layers)
    seen_last = tuple(last_seen(analysis, tail_bytes, seen, layers))
    return replace(
        analysis,
        context=context,
        context_marks=context_marks(context, spans),
        last_seen=seen_last,
    )


EMPTY_INPUT = "empty input: no line to analyze (the job never started, or wrote its log elsewhere)"
