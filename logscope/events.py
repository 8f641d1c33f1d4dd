"""Lines to events: the literal prefilter, signature matches, and multi-line blocks per stream.

Python does work only on candidate lines: a block of raw bytes is scanned by one RE2 alternation
of every signature's trigger (inside pyarrow, no per-line Python), and only the lines it finds
are decoded and matched.
"""

from __future__ import annotations

import operator
import re
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field, replace
from dataclasses import fields as dataclass_fields
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .clusters import Clusters
from .errors import InputError
from .lines import DISCOVERY_BYTES, decode, parse_line, routing_prefixes
from .model import Event, Line
from .patterns import Library, Signature
from .sources import (
    MAX_LINE,
    WINDOW,
    LongLine,
    ReadStats,
    Source,
    line_numbers,
    newlines_of,
    read_blocks,
    read_windows,
)
from .wrap import rejoin

# torchrun's ChildFailedError block (FORMATS.md §3.1): the field lines are parsed here, as a
# block, because a `rank : 3` line means nothing without the `exitcode` line below it.
# Literals only: the entry header `[3]:` is not one (every `[default3]:` header has `]:`), so an
# entry starts at its first field instead.
BLOCK_TRIGGERS = (
    r"Root Cause",
    r"Failures:",
    r"<NO_OTHER_FAILURES>",
    r"time      :",
    r"host      :",
    r"rank      :",
    r"exitcode  :",
    r"error_file:",
    r"traceback :",
    r"  time: ",
    r"  rank: ",
    r"  exitcode: ",
    r"  msg: ",
    r"====================",
)
_BLOCK_ENTRY = re.compile(r"^\[(\d+)\]:\s*$")
# Where a block read from the middle starts: its section headers, or an entry's first field as
# torchrun aligns it (`  time      : ...`).
_BLOCK_START = re.compile(
    r"^(?:Root Cause \(first observed failure\):|Failures:|\s+(?:time|host|rank|exitcode) {2,}: )"
)
_BLOCK_FIELD = re.compile(r"^\s+(time|host|rank|exitcode|error_file|traceback|msg)\s*:\s?(.*)$")
_BLOCK_RANK = re.compile(r"(-?\d+)(?: \(local_rank: (\d+)\))?")
_BLOCK_EXIT = re.compile(r"(-?\d+)(?: \(pid: (\d+)\))?(?:\s+\((SIG\w+)\))?")
_BLOCK_SIGNAL = re.compile(r"Signal (\d+) \((SIG\w+)\) received by PID (\d+)")

FAILURE_ENTRY = "torchrun.failure_entry"
"""Synthetic signature id of one entry of a ChildFailedError block."""
UNRECOGNIZED = "unrecognized.error_line"
"""Synthetic signature id of an error-looking line that no signature knows (issue 11): the
incident of last resort, so that a log with a plain failure is never called healthy."""
MAX_UNRECOGNIZED = 100
"""Unrecognized error lines kept as events (all are counted in the templates)."""

# Exit codes of workers killed by a signal, as torchelastic reports them (negative signal).
EXIT_SIGNALS: dict[int, tuple[str, str]] = {
    -9: ("SIGKILL", "process_killed"),
    -11: ("SIGSEGV", "segfault"),
    -7: ("SIGBUS", "segfault"),
    -6: ("SIGABRT", "process_killed"),
    -15: ("SIGTERM", "process_killed"),
    -2: ("SIGINT", "cancelled"),
    137: ("SIGKILL", "process_killed"),
    139: ("SIGSEGV", "segfault"),
}

_DATE_CMD = re.compile(
    r"(?P<rest>[A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d)"
    r"(?: [A-Z]{2,5}| [+-]\d{4})? (?P<year>\d{4})"
)
_TIME_FORMATS = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%d_%H:%M:%S", "%Y-%m-%d %H:%M:%S")

# Error-looking messages that are not errors of the job, so are never "unrecognized".
_NOT_AN_ERROR = re.compile(
    r"^\s*(?:raise\b|File \"|\^+$|~+$|During handling of the above exception"
    r"|The above exception was the direct cause|frame #\d+: "
    r"|Exception raised from \S+ at .* \(most recent call first\):)|error_file:|errors\.html"
)
_LOOKS_LIKE_ERROR = re.compile(
    r"(?i)\b(?:error|exception|fatal|failed|failure|abort(?:ed)?|killed|panic|segmentation)\b"
)
# A line its own logger marks as information, a debug note or a warning does not report a
# failure, whatever words it holds (`NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v7`).
_NOT_A_FAILURE_LEVEL = frozenset("IDVW")
_INFO_MESSAGE = re.compile(
    r"^\s*(?:NCCL INFO|INFO\b|DEBUG\b|WARNING\b|\[?(?:INFO|DEBUG|WARNING)\]?[: ])"
)


def minimal_literals(literals: list[str]) -> list[str]:
    """Drop every literal that contains another: a line with `ValueError` also has `Error`.

    The prefilter only needs a superset of the candidate lines, and a smaller alternation makes
    the RE2 scan faster (176 literals: 113 MB/s; 40: 250 MB/s, measured on bench/ logs).
    """
    unique = sorted(set(literals), key=len)
    kept: list[str] = []
    for t in unique:
        if not any(k in t for k in kept):
            kept.append(t)
    return kept


def escape_literal(literal: str) -> str:
    """A literal as a regex for RE2 or POSIX ERE (grep -E): every metacharacter escaped."""
    return re.sub(r"([\\.^$|?*+()\[\]{}])", r"\\\1", literal)


@dataclass(frozen=True, slots=True)
class Prefilter:
    """Finds the lines of a block that contain any trigger, with one RE2 scan."""

    pattern: str

    @classmethod
    def for_library(cls, library: Library) -> Prefilter:
        return cls.for_literals(minimal_literals([*library.triggers, *BLOCK_TRIGGERS]))

    @classmethod
    def for_literals(cls, literals: Iterable[str]) -> Prefilter:
        # sorted, literals that share a prefix sit side by side and RE2 factors them into one
        # branch: ~300 MB/s against ~220 MB/s in length order (bench/ logs)
        alternation = "|".join(escape_literal(t) for t in sorted(set(literals)))
        return cls("(?:" + alternation + ")[^\n]*")

    def lines(
        self, block: bytes, first_lineno: int, width: int | None = None
    ) -> Iterator[tuple[int, bytes]]:
        """(line number, raw bytes) of each candidate line of a block; with a wrap width, of
        each candidate record, its physical lines joined by newlines (wrap.rejoin)."""
        spans = rejoin(block, list(self.candidates(block)), width)
        if not spans:
            return
        numbers = line_numbers(newlines_of(block), first_lineno, [s for s, _ in spans])
        for (start, end), lineno in zip(spans, numbers, strict=True):
            yield lineno, block[start:end]

    def candidates(self, block: bytes | bytearray, size: int = -1) -> Iterator[tuple[int, int]]:
        """(start, end) byte offsets of each candidate line of `block[:size]`, in order; end
        excludes the newline."""
        size = len(block) if size < 0 else size
        if not size:
            return
        # the block as an Arrow binary value without a copy (a copy costs as much as the scan)
        offsets = pa.py_buffer(array("q", (0, size)))
        value = pa.Array.from_buffers(
            pa.large_binary(), 1, [None, offsets, pa.py_buffer(memoryview(block)[:size])]
        )
        # Splitting at every match yields the text between matches: a match starts where the
        # piece before it ends, and runs to the end of its line.
        pieces = pc.split_pattern_regex(value, self.pattern)
        lengths = pc.binary_length(pieces.flatten()).to_pylist()
        pos = 0
        for piece_len in lengths[:-1]:
            pos += piece_len
            start = block.rfind(b"\n", 0, pos) + 1
            end = block.find(b"\n", pos, size)
            if end < 0:
                end = size
            yield start, end
            pos = end


Hit = tuple[Signature, dict[str, str]]
"""The best signature for a line and the fields its regex captured."""


def matched_lines(
    library: Library,
    prefilter: Prefilter,
    block: bytes,
    first_lineno: int,
    path: str,
    year: int | None,
    truncated: Collection[int] = (),
    width: int | None = None,
) -> Iterator[tuple[Line, Hit | None]]:
    """Decode the candidate lines of a block and match each against the library."""
    for lineno, raw in prefilter.lines(block, first_lineno, width):
        yield from _matched(library, raw, path, lineno, year, lineno in truncated)


def _matched(
    library: Library, raw: bytes, path: str, lineno: int, year: int | None, truncated: bool
) -> Iterator[tuple[Line, Hit | None]]:
    if b"\n" in raw:
        yield from _matched_record(library, raw.split(b"\n"), path, lineno, year)
        return
    for line in parse_line(decode(raw), path, lineno, year):
        if truncated:
            line = replace(line, truncated=True)
        yield line, library.match(line.raw, line.text)


def _matched_record(
    library: Library, pieces: list[bytes], path: str, lineno: int, year: int | None
) -> Iterator[tuple[Line, Hit | None]]:
    """A hard-wrapped record: matched as one line, reported at the physical line that holds
    the words its signature was found by (a trigger), so that it reads as in the file."""
    texts = [decode(p).rstrip("\r") for p in pieces]
    whole = "".join(texts)
    for line in parse_line(whole, path, lineno, year):
        hit = library.match(line.raw, line.text)
        at = 0
        if hit is not None:
            where = [i for t in hit[0].trigger if (i := whole.find(t)) >= 0]
            if where:
                offset, at = min(where), 0
                while at + 1 < len(texts) and offset >= len(texts[at]):
                    offset -= len(texts[at])
                    at += 1
        yield replace(line, lineno=lineno + at, raw=texts[at]), hit


_line_state = operator.attrgetter(*(f.name for f in dataclass_fields(Line)[1:]))
PackedMatch = tuple[tuple[Any, ...], int, dict[str, str] | None]
"""A matched line as plain data: the Line's fields after `path`, signature index (-1: none)
and fields. Plain tuples cross processes five times faster than pickled dataclasses."""


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


@dataclass(frozen=True, slots=True)
class RangeScan:
    matches: list[PackedMatch]
    """Line numbers count from the range's first line (1)."""
    lines: int
    size: int
    cut: list[int]
    """Line numbers (from the range's first line) cut at MAX_LINE."""
    prefixes: tuple[bytes, ...]
    """Routing prefixes of its lines in the input's discovery window (lines.routing_prefixes)."""
    error: str | None = None
    """Why the range could not be read (the file vanished, say): its input's error."""


def scan_range(task: RangeTask) -> RangeScan:
    """Find, decode and match the candidate lines of a range. Runs in a worker process."""
    try:
        try:
            return _scan(task, _window_lines)
        except LongLine:
            # rare: a line over MAX_LINE, which read_blocks cuts and reports
            return _scan(task, _block_lines)
    except InputError as err:
        return RangeScan([], 0, 0, [], (), err.message)
    except OSError as err:
        return RangeScan([], 0, 0, [], (), f"cannot read: {err.strerror or err}")


@dataclass(slots=True)
class _Tally:
    lines: int = 0
    cut: list[int] = field(default_factory=list)
    prefixes: set[bytes] = field(default_factory=set)


_RangeLines = Callable[[RangeTask, _Tally], Iterator[tuple[int, bytes, bool]]]


def _scan(task: RangeTask, read: _RangeLines) -> RangeScan:
    index = {id(s): i for i, s in enumerate(task.library.signatures)}
    out: list[PackedMatch] = []
    tally = _Tally()
    for lineno, raw, truncated in read(task, tally):
        for line, hit in _matched(task.library, raw, task.path, lineno, task.year, truncated):
            state = _line_state(line)
            out.append((state, -1, None) if hit is None else (state, index[id(hit[0])], hit[1]))
    prefixes = tuple(sorted(tally.prefixes))
    return RangeScan(out, tally.lines, task.end - task.start, tally.cut, prefixes)


def _window_lines(task: RangeTask, tally: _Tally) -> Iterator[tuple[int, bytes, bool]]:
    prefilter = Prefilter(task.pattern)
    for w in read_windows(task.path, task.start, task.end, task.window, task.max_line):
        tally.prefixes |= routing_prefixes(w.data, w.offset, w.size, task.discovery)
        spans = rejoin(w.data, list(prefilter.candidates(w.data, w.size)), task.wrap, w.size)
        numbers = w.lineno_at([start for start, _ in spans])
        for (start, end), lineno in zip(spans, numbers, strict=True):
            yield lineno, bytes(w.data[start:end]), False
        tally.lines = w.first_lineno - 1 + w.nlines


def _block_lines(task: RangeTask, tally: _Tally) -> Iterator[tuple[int, bytes, bool]]:
    prefilter = Prefilter(task.pattern)
    stats = ReadStats()
    offset = task.start  # as Engine.discover counts: the bytes of the blocks, cut lines cut
    for block in read_blocks(
        Source(task.path), stats, max_line=task.max_line, byte_range=(task.start, task.end)
    ):
        tally.prefixes |= routing_prefixes(block.data, offset, window=task.discovery)
        offset += len(block.data)
        for lineno, raw in prefilter.lines(block.data, block.first_lineno, task.wrap):
            yield lineno, raw, lineno in block.truncated
        tally.cut.extend(block.truncated)
        tally.lines = block.first_lineno - 1 + block.nlines


def unpack(
    match: PackedMatch, path: str, first_lineno: int, library: Library
) -> tuple[Line, Hit | None]:
    """A worker's match back as a Line (numbered in the file) and its hit."""
    state, sig, captured = match
    line = Line(path, first_lineno - 1 + state[0], *state[1:])
    return line, None if sig < 0 or captured is None else (library.signatures[sig], captured)


def parse_time(value: str) -> datetime | None:
    """A time captured by a signature: ISO, torchrun's `2024-03-12_02:29:19`, or `date`'s."""
    m = _DATE_CMD.match(value)
    if m:
        # `date` prints a zone name (CET, UTC) that strptime cannot map; the clock is local
        value = f"{m['rest']} {m['year']}"
        try:
            return datetime.strptime(value, "%a %b %d %H:%M:%S %Y")
        except ValueError:
            return None
    for fmt in _TIME_FORMATS:
        try:
            return datetime.strptime(value[:19], fmt)
        except ValueError:
            continue
    return None


def looks_like_error(message: str) -> bool:
    return bool(_LOOKS_LIKE_ERROR.search(message)) and not _NOT_AN_ERROR.search(message)


def who(line: Line) -> tuple[int | None, str | None, int | None, int | None]:
    """The stream a line belongs to: (srun task, host, local rank, global rank)."""
    return (line.task, line.host, line.local_rank, line.rank)


@dataclass(slots=True)
class _Block:
    section: str = ""
    entries: list[dict[str, str]] = field(default_factory=list)
    current: dict[str, str] | None = None
    exit_lines: dict[int, Line] = field(default_factory=dict)
    """The physical `exitcode :` line of each entry, by the entry's position."""
    last_lineno: int = 0


@dataclass(slots=True)
class Extractor:
    """Turns decoded candidate lines into events; keeps per-stream state across blocks."""

    library: Library
    unrecognized: Clusters = field(default_factory=Clusters)
    unrecognized_events: list[Event] = field(default_factory=list)
    """The first MAX_UNRECOGNIZED unrecognized error lines as events (UNRECOGNIZED), for the
    engine to use when no signature explains the failure."""
    _blocks: dict[tuple[str, int | None, str | None], _Block] = field(default_factory=dict)
    prefilter: Prefilter = field(init=False)

    def __post_init__(self) -> None:
        self.prefilter = Prefilter.for_library(self.library)

    def feed(self, line: Line, hit: Hit | None, seq: int = 0) -> list[Event]:
        """Events of one decoded line (none for most), given its best signature match; `seq`
        is the line's order key."""
        out: list[Event] = []
        block_events = self._block_line(line)
        if block_events is not None:
            return block_events
        if hit is None and _BLOCK_START.match(line.text):
            # an excerpt of the block without its ChildFailedError header (issue 11)
            self._blocks[(line.path, line.task, line.host)] = _Block(last_lineno=line.lineno - 1)
            return self._block_line(line) or []
        if hit is None:
            if looks_like_error(line.text):
                self.unrecognized.add(line)
                if (
                    len(self.unrecognized_events) < MAX_UNRECOGNIZED
                    and line.level not in _NOT_A_FAILURE_LEVEL
                    and not _INFO_MESSAGE.match(line.text)
                ):
                    self.unrecognized_events.append(self._unrecognized(line, seq))
            return out
        sig, fields = hit
        category, severity = sig.category, sig.severity
        xid = fields.get("xid")
        if xid is not None and xid.isdigit() and int(xid) in self.library.xid:
            # NVIDIA's meaning of the code decides: Xid 13 is an application fault, 79 a dead GPU
            info = self.library.xid[int(xid)]
            category = info.get("category", category)
            severity = info.get("severity", severity)
        if sig.classify:
            rule = self.library.classify(fields.get("exception", ""), fields.get("message", ""))
            if rule is not None:
                category = rule.category
                fields = {**fields, "rule": rule.id}
        time = line.time
        exact = time is not None
        if "time" in fields:
            t = parse_time(fields["time"])
            if t is not None:
                time, exact = t, True
        out.append(
            Event(
                seq=seq,
                signature=sig.id,
                kind=sig.kind,
                line=line,
                fields=fields,
                category=category,
                severity=severity,
                role=sig.role,
                time=time,
                time_exact=exact,
            )
        )
        if sig.id == "torchrun.child_failed":
            self._blocks[(line.path, line.task, line.host)] = _Block(last_lineno=line.lineno)
        return out

    def _unrecognized(self, line: Line, seq: int) -> Event:
        rule = self.library.classify("", line.text)
        fields = {"message": line.text.strip()}
        if rule is not None:
            fields["rule"] = rule.id
        return Event(
            seq=seq,
            signature=UNRECOGNIZED,
            kind="failure",
            line=line,
            fields=fields,
            category=rule.category if rule is not None else "unknown",
            severity="error",
            role="cause",
            time=line.time,
            time_exact=line.time is not None,
        )

    def _block_line(self, line: Line) -> list[Event] | None:
        """Consume a line of an open ChildFailedError block; None if it is not one."""
        key = (line.path, line.task, line.host)
        blk = self._blocks.get(key)
        if blk is None:
            return None
        if line.lineno - blk.last_lineno > 4:
            # the block's lines are consecutive; a gap means it ended without its border
            return self._close(key, line) or None
        text = line.text
        blk.last_lineno = line.lineno
        if text.startswith("Root Cause"):
            blk.section = "root"
            return []
        if text.startswith(("Failures:", "Other Failures:")):
            blk.section = "other"
            return []
        m = _BLOCK_ENTRY.match(text)
        if m:
            blk.current = {"index": m.group(1), "section": blk.section}
            blk.entries.append(blk.current)
            return []
        m = _BLOCK_FIELD.match(text)
        if m and (blk.current is None or m.group(1) in blk.current):
            # the `[3]:` header line is not a candidate (see BLOCK_TRIGGERS): a field seen
            # again starts the next entry
            blk.current = {"section": blk.section}
            blk.entries.append(blk.current)
        if m and blk.current is not None:
            blk.current[m.group(1)] = m.group(2).strip()
            blk.current.setdefault("lineno", str(line.lineno))
            if m.group(1) == "exitcode":
                blk.exit_lines[len(blk.entries) - 1] = line
            return []
        if text.startswith("=====") and blk.section == "root" and blk.current is not None:
            return self._close(key, line)
        if (
            text.lstrip().startswith(("-----", "=====", "<NO_OTHER_FAILURES>"))
            or text.endswith(" FAILED")
            or not text.strip()
        ):
            return []
        return self._close(key, line) or None

    def _close(self, key: tuple[str, int | None, str | None], line: Line) -> list[Event]:
        blk = self._blocks.pop(key)
        return [
            self._entry_event(e, blk.exit_lines[i])
            for i, e in enumerate(blk.entries)
            if i in blk.exit_lines
        ]

    def _entry_event(self, entry: dict[str, str], line: Line) -> Event:
        """One failure of the block, anchored at its physical `exitcode :` line."""
        fields: dict[str, str] = {"root": "1" if entry.get("section") == "root" else "0"}
        m = _BLOCK_RANK.match(entry.get("rank", ""))
        if m:
            fields["rank"] = m.group(1)
            if m.group(2):
                fields["local_rank"] = m.group(2)
        m = _BLOCK_EXIT.match(entry.get("exitcode", ""))
        category = "process_killed"
        if m:
            fields["exit_code"] = m.group(1)
            if m.group(2):
                fields["pid"] = m.group(2)
            code = int(m.group(1))
            if code in EXIT_SIGNALS:
                fields["signal_name"], category = EXIT_SIGNALS[code]
            elif code > 0:
                category = "python_exception"
        tb = entry.get("traceback", entry.get("msg", ""))
        if tb:
            fields["traceback"] = tb
            sm = _BLOCK_SIGNAL.search(tb)
            if sm:
                fields["signal"], fields["signal_name"] = sm.group(1), sm.group(2)
        if entry.get("host"):
            fields["host"] = entry["host"]
        time = parse_time(entry.get("time", "")) if entry.get("time") else None
        entry_line = replace(line, host=entry.get("host") or line.host)
        sigterm = fields.get("signal_name") == "SIGTERM"
        return Event(
            signature=FAILURE_ENTRY,
            kind="failure",
            line=entry_line,
            fields=fields,
            category=category,
            severity="info" if sigterm else "error",
            role="symptom" if sigterm else "summary",
            time=time,
            time_exact=time is not None,
        )

    def finish(self) -> list[Event]:
        """Close blocks still open at the end of the input."""
        out: list[Event] = []
        for key in list(self._blocks):
            dummy = Line(path=key[0], lineno=0, raw="", text="")
            out.extend(self._close(key, dummy))
        return out
