"""Candidate lines: the literal prefilter that finds them in a block of raw bytes (Hyperscan when
installed, else one RE2 alternation of every trigger, no per-line Python), and the decoding and
matching of the lines it finds."""

from __future__ import annotations

import functools
import re
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ..lines.decode import decode, parse_line
from ..lines.layers import Layers
from ..lines.wrap import rejoin
from ..model import Line
from ..read.newlines import Newlines
from ..read.sources import line_numbers
from .signatures import Library, Signature

# torchrun's ChildFailedError block (FORMATS.md §3.1): its field lines are candidates, parsed as a
# block by events.Extractor, because a `rank : 3` line means nothing without the `exitcode` line
# below it.
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

# Lines that follow the record they belong to, which may hold no trigger: each makes the line
# before it a candidate. glog's FATAL record (`F20220801 07:29:34.701110  2256 fs.cc:42] Invalid
# tracker path`) says why the process aborts in its own words; glog writes this line right after
# it, from the record's destructor, before abort() (google/glog src/logging.cc ~LogMessage).
RECORD_BEFORE = (b"*** Check failure stack trace: ***",)


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


@functools.lru_cache(maxsize=8)
def _hyperscan(literals: tuple[str, ...]) -> Any:
    """A Hyperscan database of the literals and the RECORD_BEFORE markers after them (compiled
    once per process), or None when the `hyperscan` package is not installed or cannot compile
    them: the RE2 scan is the fallback."""
    try:
        import hyperscan  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return None
    # the RECORD_BEFORE markers last, their ids past the literals': one scan finds both
    expressions = [*(t.encode() for t in literals), *RECORD_BEFORE]
    try:
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(
            expressions=expressions,
            ids=list(range(len(expressions))),
            elements=len(expressions),
            flags=[0] * len(expressions),
            literal=True,
        )
    except Exception:
        return None
    return db


@dataclass(frozen=True, slots=True)
class Prefilter:
    """Finds the lines of a block that contain any trigger: with Hyperscan's multi-literal
    search when it is installed (~550 MB/s a core on bench/ logs), else with one RE2 scan
    (~220 MB/s). Both find the same lines."""

    pattern: str
    literals: tuple[str, ...] = ()
    """The triggers themselves, for Hyperscan; without them, RE2 scans for `pattern`."""

    @classmethod
    def for_library(cls, library: Library) -> Prefilter:
        return cls.for_literals(minimal_literals([*library.triggers, *BLOCK_TRIGGERS]))

    @classmethod
    def for_literals(cls, literals: Iterable[str]) -> Prefilter:
        # sorted, literals that share a prefix sit side by side and RE2 factors them into one
        # branch: ~300 MB/s against ~220 MB/s in length order (bench/ logs)
        ordered = tuple(sorted(set(literals)))
        alternation = "|".join(escape_literal(t) for t in ordered)
        return cls("(?:" + alternation + ")[^\n]*", ordered)

    @property
    def engine(self) -> str:
        """`hyperscan` or `re2`: what scans."""
        return "hyperscan" if self.literals and _hyperscan(self.literals) is not None else "re2"

    def placed(
        self,
        block: bytes | bytearray,
        size: int,
        lines: Newlines,
        first_lineno: int,
        width: int | None = None,
    ) -> list[tuple[int, int, int]]:
        """(line number, start, end) of each candidate line (or wrapped record) of
        `block[:size]`, whose newlines are given; end excludes the newline."""
        index, first, last = self.spans(block, size, lines)
        starts, ends = first.tolist(), last.tolist()
        if width is None:
            return list(zip((index + first_lineno).tolist(), starts, ends, strict=True))
        spans = rejoin(block, list(zip(starts, ends, strict=True)), width, size)
        numbers = line_numbers(lines.positions(), first_lineno, [a for a, _ in spans])
        return [(n, a, b) for n, (a, b) in zip(numbers, spans, strict=True)]

    def spans(
        self, block: bytes | bytearray, size: int, lines: Newlines
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The candidate lines of `block[:size]`, whose newlines are given, as arrays: their
        indexes (the newlines before them), starts and ends (excluding the newline), in order."""
        found, markers = self._found(block, size)
        before = _records_before(block, size, markers)
        if before:
            found = np.concatenate((found, np.asarray(before, np.int64)))
        if len(found) > 1 and bool((np.diff(found) < 0).any()):
            found.sort()
        return lines.lines_of(found)

    def candidates(self, block: bytes | bytearray, size: int = -1) -> Iterator[tuple[int, int]]:
        """(start, end) byte offsets of each candidate line of `block[:size]`, in order; end
        excludes the newline: `spans`, for a block whose newlines are not known yet."""
        size = len(block) if size < 0 else size
        if not size:
            return
        _, starts, ends = self.spans(block, size, Newlines.of(block, size))
        yield from zip(starts.tolist(), ends.tolist(), strict=True)

    def _found(
        self, block: bytes | bytearray, size: int
    ) -> tuple[npt.NDArray[np.int64], list[int] | None]:
        """A byte of each match in `block[:size]`, ascending (the last byte of each Hyperscan
        match, one line may hold several, else the start of each candidate line), and the end
        of each RECORD_BEFORE marker when Hyperscan found them in the same scan (None: the
        caller searches for them)."""
        db = _hyperscan(self.literals) if self.literals else None
        if db is None:
            return np.fromiter(self._re2_line_starts(block, size), np.int64), None
        ends: list[int] = []
        markers: list[int] = []
        n = len(self.literals)

        def on_match(i: int, _f: int, to: int, _fl: int, _c: object) -> None:
            (ends if i < n else markers).append(to)

        db.scan(memoryview(block)[:size], match_event_handler=on_match)
        # Hyperscan reports matches in the order of their ends; a match ends at `to` (exclusive)
        return np.asarray(ends, np.int64) - 1, markers

    def _re2_line_starts(self, block: bytes | bytearray, size: int) -> Iterator[int]:
        """The start of each candidate line of `block[:size]`, found by one RE2 scan."""
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
            start, pos = _line_around(block, pos, size)
            yield start


def _records_before(
    block: bytes | bytearray, size: int, ends: list[int] | None = None
) -> list[int]:
    """A byte (its newline) of the line before each RECORD_BEFORE line of `block[:size]` that
    has one in the block and is not blank; `ends`: where the markers end, when a scan found
    them (else they are searched for)."""
    if ends is None:
        ends = [
            at + len(marker) for marker in RECORD_BEFORE for at in _occurrences(block, marker, size)
        ]
    out: list[int] = []
    for end in ends:
        start = block.rfind(b"\n", 0, end) + 1
        if start >= 2 and block[start - 2] != 0x0A:
            out.append(start - 1)
    return out


def _occurrences(block: bytes | bytearray, marker: bytes, size: int) -> Iterator[int]:
    at = block.find(marker, 0, size)
    while at >= 0:
        yield at
        at = block.find(marker, at + len(marker), size)


def _line_around(block: bytes | bytearray, pos: int, size: int) -> tuple[int, int]:
    """(start, end) of the line holding byte `pos` (a match's start or end) of `block[:size]`;
    end excludes the newline."""
    end = block.find(b"\n", pos, size)
    return block.rfind(b"\n", 0, pos) + 1, size if end < 0 else end


Hit = tuple[Signature, dict[str, str]]
"""The best signature for a line and the fields its regex captured."""


def matched(
    library: Library,
    raw: bytes,
    path: str,
    lineno: int,
    year: int | None,
    truncated: bool,
    width: int | None,
    layers: Layers | None = None,
) -> Iterator[tuple[Line, Hit | None]]:
    """A candidate line decoded (`layers`: its input's prefix layers) and matched."""
    if width is not None and b"\n" in raw:  # a record rejoined from a hard-wrapped input
        pieces = raw.split(b"\n")
        yield from _matched_record(library, pieces, path, lineno, year, truncated, layers)
        return
    for line in parse_line(decode(raw), path, lineno, year, layers):
        if truncated:
            line = replace(line, truncated=True)
        yield line, library.match(line.raw, line.text)


def _matched_record(
    library: Library,
    pieces: list[bytes],
    path: str,
    lineno: int,
    year: int | None,
    cut: bool,
    layers: Layers | None = None,
) -> Iterator[tuple[Line, Hit | None]]:
    """A hard-wrapped record: matched as one line, reported at the physical line where the
    phrase its signature was found by (a trigger) begins, so that it reads as in the file: the
    phrase runs back from the trigger to the message's start or the last `] ` before it (a
    bracketed field: `[PG ID 0 ... Rank 6] ProcessGroupNCCL's watchdog got stuck`, a command
    list's `['python', ...] exits with return code`)."""
    texts = [decode(p).rstrip("\r") for p in pieces]
    whole = "".join(texts)
    for line in parse_line(whole, path, lineno, year, layers):
        hit = library.match(line.raw, line.text)
        at = 0
        if hit is not None:
            where = [i for t in hit[0].trigger if (i := whole.find(t)) >= 0]
            if where:
                found = min(where)
                message = len(whole) - len(line.text)  # the text is the record's end
                field = whole.rfind("] ", message, found)
                offset, at = (field + 2 if field >= 0 else min(message, found)), 0
                while at + 1 < len(texts) and offset >= len(texts[at]):
                    offset -= len(texts[at])
                    at += 1
        yield replace(line, lineno=lineno + at, raw=texts[at], truncated=cut), hit
