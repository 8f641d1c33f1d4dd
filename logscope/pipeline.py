"""`analyze`: logs that have ended, read the fastest way each allows (ranges of a large file
scanned by worker processes, a compressed file decompressed in a child process, a stream here)
and fed to one Engine in input order."""

from __future__ import annotations

import contextlib
import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from datetime import datetime
from pathlib import Path

from .compression import compression_of
from .context import TAIL_BUDGET, TAIL_BYTES, last_seen, root_context
from .engine import Engine, default_library
from .errors import InputError, WorkerError
from .lines import DISCOVERY_BUDGET, DISCOVERY_BYTES, window_per_input
from .model import Analysis, InputInfo
from .patterns import Library
from .ranges import RangeScan, RangeTask, scan_range, unpack
from .sources import (
    MAX_LINE,
    WINDOW,
    ReadStats,
    Source,
    coalesce,
    expand,
    looks_binary,
    note_cut,
    read_blocks,
    read_blocks_elsewhere,
    split_ranges,
)
from .wrap import WRAP_SAMPLE, wrap_width

_YEAR = re.compile(rb"\b(20\d\d)-[01]\d-[0-3]\d[T _]\d\d:\d\d")


def _feed_sequential(
    engine: Engine,
    src: Source,
    stats: ReadStats,
    block_size: int,
    tick: Callable[[int], None],
    elsewhere: bool = False,
) -> None:
    """Read an input block by block here, or (`elsewhere`) in a child process."""
    year: int | None = None
    if elsewhere:
        blocks = read_blocks_elsewhere(src, stats, block_size)
    else:
        blocks = coalesce(read_blocks(src, stats, block_size=block_size), block_size)
    for i, block in enumerate(blocks):
        if i == 0:
            year = _year_hint(src, block.data[:65536])
        engine.discover(block, src.path)
        engine.feed_block(block, src.path, year, events=False)
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
    pattern = engine.extractor.prefilter.pattern
    year = _year_hint(src, head[:65536])
    wrap = engine.wrap[src.path] = wrap_width(head[: head.rfind(b"\n") + 1])
    return [
        RangeTask(
            src.path,
            a,
            b,
            pattern,
            engine.library,
            year,
            discovery=engine.discovery,
            wrap=wrap,
            literals=engine.extractor.prefilter.literals,
        )
        for a, b in ranges
    ]


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
    tasks: list[RangeTask],
    scans: Iterator[RangeScan],
    tick: Callable[[int], None],
) -> None:
    """Feed the scans of a file's ranges (the next len(tasks) of `scans`) in order."""
    base = 0
    marks = engine.line_marks.setdefault(src.path, [])
    error: str | None = None
    for task in tasks:
        scan = next(scans)  # taken even after an error: the next input's scans follow
        if error is not None or scan.error is not None:
            error = error or scan.error
            continue
        marks.append((base + 1, task.start))
        engine.note_prefixes(src.path, scan.prefixes)
        lines = [unpack(match, src.path, base + 1, engine.library) for match in scan.matches]
        engine.feed_sorted(lines, scan.progress, src.path, base, events=False)
        note_cut(stats, src.path, [base + c for c in scan.cut], MAX_LINE)
        base += scan.lines
        stats.bytes += scan.size
        stats.lines = base
        tick(stats.bytes)
    if error is not None:
        raise InputError(src.path, error)


def _in_order(
    pool: ProcessPoolExecutor, workers: int, tasks: Sequence[RangeTask]
) -> Iterator[RangeScan]:
    """Scans of the tasks in order, with at most two per worker submitted ahead: results wait
    in memory only while this process is behind (Executor.map would submit them all)."""
    ahead = 2 * workers
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
            f"{path}: a worker process died (killed? out of memory?); try again with --jobs 1"
        ) from None


def _year_hint(src: Source, first: bytes) -> int | None:
    m = _YEAR.search(first)
    if m:
        return int(m.group(1))
    if src.path != "-":
        try:
            return datetime.fromtimestamp(Path(src.path).stat().st_mtime).year
        except OSError:
            return None
    return None


RANGE_MIN_BYTES = 1 << 20
"""Uncompressed files this size and up are read in ranges (by workers, when there are)."""
PARALLEL_MIN_BYTES = 64 << 20
"""Fewer bytes in ranges are read in this process: starting workers costs more than it saves."""
CHUNK_BYTES = 32 << 20


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
    sources = expand(list(paths))
    engine = Engine(library)
    engine.discovery = window_per_input(len(sources), DISCOVERY_BUDGET, 1 << 20, DISCOVERY_BYTES)
    inputs: list[InputInfo] = []
    plans = [(src, _range_tasks(src, engine, range_min_bytes, chunk_bytes)) for src in sources]
    tasks = [t for _, ts in plans for t in ts or ()]
    done = 0
    with contextlib.ExitStack() as stack:
        if jobs > 1 and sum(t.end - t.start for t in tasks) >= parallel_min_bytes:
            pool = stack.enter_context(ProcessPoolExecutor(jobs))
            scans = _in_order(pool, jobs, tasks)
        else:
            scans = map(scan_range, tasks)
        for src, ranges in plans:
            stats = ReadStats()

            def tick(n: int, base: int = done) -> None:
                if on_progress is not None:
                    on_progress(base + n)

            try:
                if ranges is not None:
                    _feed_ranges(engine, src, stats, ranges, scans, tick)
                else:
                    elsewhere = jobs > 1 and _compressed(src, range_min_bytes)
                    _feed_sequential(engine, src, stats, block_size, tick, elsewhere)
            except InputError as err:
                if src.explicit:
                    raise
                stats.warnings.append(f"{src.path}: skipped: {err.message}")
            except OSError as err:
                raise InputError(src.path, f"cannot read: {err.strerror or err}") from None
            if stats.bytes == 0 and not stats.warnings:
                stats.warnings.append(f"{src.path}: {EMPTY_INPUT}")
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
    analysis = engine.result(inputs, gpus=gpus, mtbf_s=mtbf_s)
    analysis.extra["context"] = root_context(analysis.incidents, engine.line_marks)
    tail = window_per_input(len(sources), TAIL_BUDGET, 256 << 10, TAIL_BYTES)
    analysis.extra["last_seen"] = last_seen(analysis, tail)
    return analysis


EMPTY_INPUT = "empty input: no line to analyze (the job never started, or wrote its log elsewhere)"
