"""Inputs: paths, globs, directories and stdin, decompressed, read as blocks of whole lines."""

from __future__ import annotations

import bz2
import glob
import gzip
import io
import itertools
import lzma
import math
import multiprocessing
import os
import re
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, BinaryIO

import lz4.frame
import numpy as np
import numpy.typing as npt
import zstandard

from .errors import InputError, WorkerError

BLOCK_SIZE = 1 << 20
MAX_LINE = 1 << 20
"""Longer lines are cut at this many bytes and flagged: a 50 MB line is never held whole."""

_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\x04\x22\x4d\x18", "lz4"),
)
_RAW_CHUNK = 1 << 20
_BINARY_PROBE = 8192


@dataclass(frozen=True, slots=True)
class Source:
    """One input to read: a file path or `-` for stdin."""

    path: str
    explicit: bool = True
    """Named by the user (an unreadable file is an error) rather than found in a directory."""


@dataclass(slots=True)
class Block:
    """Whole lines of one input: `data` ends with a newline unless the input ended without one."""

    data: bytes
    first_lineno: int
    truncated: list[int] = field(default_factory=list)
    """Line numbers of lines cut at MAX_LINE."""

    @property
    def nlines(self) -> int:
        n = self.data.count(b"\n")
        return n if self.data.endswith(b"\n") else n + 1


@dataclass(slots=True)
class ReadStats:
    """What reading an input found, filled in while its blocks are consumed."""

    bytes: int = 0
    lines: int = 0
    compression: str | None = None
    warnings: list[str] = field(default_factory=list)
    cut_lines: int = 0


def expand(paths: list[str]) -> list[Source]:
    """Turn the user's paths, globs and directories into a sorted list of sources."""
    out: list[Source] = []
    seen: set[str] = set()

    def add(src: Source) -> None:
        if src.path not in seen:
            seen.add(src.path)
            out.append(src)

    for arg in paths:
        if arg == "-":
            add(Source("-"))
            continue
        p = Path(arg)
        if p.is_dir():
            files = _dir_files(p)
            if not files:
                raise InputError(arg, "directory contains no files")
            for f in files:
                add(Source(f, explicit=False))
        elif p.exists():
            add(Source(arg))
        elif glob.has_magic(arg):
            files = _glob_files(arg)
            if not files:
                raise InputError(arg, "no file matches this pattern")
            for f in files:
                add(Source(f))
        else:
            raise InputError(arg, "no such file or directory")
    return out


def _dir_files(p: Path) -> list[str]:
    """The files below a directory, hidden ones (and those in hidden folders) left out."""
    return sorted(
        str(f)
        for f in p.rglob("*")
        if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts)
    )


def _glob_files(pattern: str) -> list[str]:
    """The files a glob matches (`**` too)."""
    matches = glob.glob(pattern, recursive=True)  # noqa: PTH207 - takes absolute globs
    return sorted(m for m in matches if Path(m).is_file())


def compression_in(head: bytes) -> str | None:
    """The compression whose magic bytes start `head` (gzip, bz2, xz, zstd, lz4), or None."""
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    return None


class _ZstdStream(io.RawIOBase):
    """zstd frames decompressed as a stream (`zstd -dc`): one frame after another, and a frame
    cut short raises EOFError after its last whole block (zstandard's stream_reader would end
    silently)."""

    def __init__(self, raw: Any) -> None:
        super().__init__()
        self._raw = raw
        self._dctx = zstandard.ZstdDecompressor()
        self._dobj = self._dctx.decompressobj()
        self._mid_frame = False

    def readable(self) -> bool:
        return True

    def read1(self, n: int = -1) -> bytes:
        while data := self._raw.read(_RAW_CHUNK):
            out: list[bytes] = []
            while data:
                out.append(self._dobj.decompress(data))
                self._mid_frame, data = not self._dobj.eof, b""
                if self._dobj.eof:  # the next frame may follow in the same read
                    data = self._dobj.unused_data
                    self._dobj = self._dctx.decompressobj()
            if any(out):
                return b"".join(out)
        if self._mid_frame:
            raise EOFError("the zstd frame ends before its end mark")
        return b""

    def read(self, n: int = -1) -> bytes:
        return self.read1(n)


def _decompressed(raw: Any, kind: str | None) -> Any:
    """A decompressing reader over `raw` (which it does not close), or `raw` itself for an
    uncompressed input."""
    if kind == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if kind == "bz2":
        return bz2.BZ2File(raw, "rb")
    if kind == "xz":
        return lzma.LZMAFile(raw, "rb")
    if kind == "zstd":
        return _ZstdStream(raw)
    if kind == "lz4":
        return lz4.frame.LZ4FrameFile(raw, "rb")
    return raw


def compression_of(path: str) -> str | None:
    """gzip, bz2, xz, zstd, lz4 or None, from a file's magic bytes."""
    with Path(path).open("rb") as f:
        return compression_in(f.read(8))


def looks_binary(head: bytes) -> bool:
    """True for data no log writer produces: NUL bytes or mostly non-text in the first 8 KiB."""
    probe = head[:_BINARY_PROBE]
    if not probe:
        return False
    if probe.count(b"\x00") > len(probe) // 100 + 1:
        return True
    control = sum(1 for b in probe if b < 9 or 13 < b < 32)
    return control > len(probe) // 10


def open_source(src: Source, stats: ReadStats) -> BinaryIO:
    """Open a source, transparently decompressing gzip, bz2, xz, zstd and lz4 (sniffed by magic
    bytes). Stdin, a pipe and process substitution (`<(ssh node cat job.out)`) are read as they
    come: nothing is sought."""
    if src.path == "-":
        raw: Any = sys.stdin.buffer
    else:
        try:
            raw = Path(src.path).open("rb")  # noqa: SIM115 - closed by read_blocks
        except OSError as err:
            raise InputError(src.path, f"cannot open: {err.strerror or err}") from None
    if not hasattr(raw, "peek"):
        raw = io.BufferedReader(raw)  # a stream without peek(): test runners, notebooks
    kind = compression_in(raw.peek(8)[:8])
    stats.compression = kind
    if kind is None:
        return raw  # type: ignore[no-any-return]
    # a decompressor given a file object does not close it: stdin stays open, a file is closed
    # with it
    stream = _decompressed(raw, kind)
    return stream if src.path == "-" else _Closing(stream, raw)  # type: ignore[return-value]


class _Closing:
    """A decompressing reader that also closes the file under it."""

    def __init__(self, stream: Any, raw: Any) -> None:
        self._stream = stream
        self._raw = raw

    def read1(self, n: int = -1) -> bytes:
        return self._stream.read1(n)  # type: ignore[no-any-return]

    def read(self, n: int = -1) -> bytes:
        return self._stream.read(n)  # type: ignore[no-any-return]

    def close(self) -> None:
        self._stream.close()
        self._raw.close()


def read_blocks(
    src: Source,
    stats: ReadStats,
    block_size: int = BLOCK_SIZE,
    max_line: int = MAX_LINE,
    byte_range: tuple[int, int] | None = None,
) -> Iterator[Block]:
    """Yield blocks of whole lines; physical line numbers are counted on the decompressed bytes.

    A damaged compressed stream ends the input with a warning (what was read is still
    analysed); binary data at the start of an input raises InputError. With `byte_range`
    (an uncompressed file's [start, end), starting at a line start) only that part is read and
    line numbers count from its start.
    """
    block_size = min(block_size, max_line)
    stream: Any = open_source(src, stats) if byte_range is None else _Range(src.path, *byte_range)
    lines = _Lines(max_line)
    first = byte_range is None or byte_range[0] == 0
    try:
        while True:
            chunk, damage = _read(stream, block_size, bool(stats.compression))
            if damage is not None:
                msg = f"{stats.compression or 'input'} stream is damaged or truncated ({damage})"
                where = lines.lineno + chunk.count(b"\n") + lines.pending.count(b"\n")
                stats.warnings.append(f"{src.path}:{where}: {msg}; the lines before it were read")
            if first:
                first = False
                if looks_binary(chunk):
                    raise InputError(src.path, "binary data, not a text log", line=1)
            if not chunk:
                break
            if damage is not None:
                # process this last piece, then stop on the next read
                if src.path != "-":
                    stream.close()
                stream = _Ended()
            stats.bytes += len(chunk)
            block = lines.feed(chunk)
            if block is None:
                continue
            if block.truncated:
                note_cut(stats, src.path, block.truncated, max_line)
            stats.lines = lines.lineno - 1
            yield block
        block = lines.flush()
        if block is not None:
            stats.lines = block.first_lineno
            yield block
    finally:
        if src.path != "-":
            stream.close()


def coalesce(blocks: Iterable[Block], size: int) -> Iterator[Block]:
    """Consecutive blocks joined into blocks of at least `size` bytes (the last may be less):
    the RE2 scan pays ~5 ms per call, so 1 MiB blocks would halve its speed."""
    parts: list[Block] = []
    total = 0
    for block in blocks:
        parts.append(block)
        total += len(block.data)
        if total >= size:
            yield _joined(parts)
            parts, total = [], 0
    if parts:
        yield _joined(parts)


def _joined(parts: list[Block]) -> Block:
    if len(parts) == 1:
        return parts[0]
    data = b"".join(p.data for p in parts)
    return Block(data, parts[0].first_lineno, [n for p in parts for n in p.truncated])


def read_blocks_elsewhere(src: Source, stats: ReadStats, block_size: int) -> Iterator[Block]:
    """`coalesce(read_blocks(...))` run by a child process, for compressed inputs: Python
    decompresses at ~200 MB/s, as slow as the rest of the analysis, so it gets a core of its
    own. The child's ReadStats land in `stats`; its InputError is raised here."""
    receiver, sender = multiprocessing.Pipe(duplex=False)
    child = multiprocessing.Process(
        target=_read_for_parent, args=(src, block_size, sender), name="logscope-reader"
    )
    child.start()
    sender.close()
    try:
        while True:
            try:
                kind, payload, theirs = receiver.recv()
            except EOFError:
                raise WorkerError(f"{src.path}: the reading process died") from None
            stats.bytes, stats.lines = theirs.bytes, theirs.lines
            if kind == "block":
                yield payload
                continue
            stats.compression, stats.cut_lines = theirs.compression, theirs.cut_lines
            stats.warnings.extend(theirs.warnings)
            if kind == "error":
                raise InputError(*payload)
            return
    finally:
        if child.is_alive():
            child.terminate()
        child.join()
        receiver.close()


def _read_for_parent(src: Source, block_size: int, sender: Connection) -> None:
    stats = ReadStats()
    try:
        for block in coalesce(read_blocks(src, stats, block_size=block_size), block_size):
            sender.send(("block", block, ReadStats(stats.bytes, stats.lines)))
        sender.send(("end", None, stats))
    except InputError as err:
        sender.send(("error", (err.path, err.message, err.line), stats))
    finally:
        sender.close()


class _Range:
    """Bytes [start, end) of a file, read like a stream."""

    def __init__(self, path: str, start: int, end: int) -> None:
        try:
            self._f = Path(path).open("rb")  # noqa: SIM115 - closed by close()
        except OSError as err:
            raise InputError(path, f"cannot open: {err.strerror or err}") from None
        self._f.seek(start)
        self._left = end - start

    def read(self, n: int = -1) -> bytes:
        n = self._left if n < 0 else min(n, self._left)
        data = self._f.read(n)
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._f.close()


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
    newlines: npt.NDArray[np.intp]
    """Positions of every newline in the window, ascending."""

    @property
    def nlines(self) -> int:
        last = int(self.newlines[-1]) + 1 if len(self.newlines) else 0
        return len(self.newlines) + (self.size > last)

    def lineno_at(self, positions: Sequence[int]) -> list[int]:
        """Line numbers of the lines holding the given byte positions."""
        return line_numbers(self.newlines, self.first_lineno, positions)


def newlines_of(data: bytes | bytearray, size: int = -1) -> npt.NDArray[np.intp]:
    """Positions of every newline in `data[:size]`, ascending (numpy: ~1 GB/s)."""
    size = len(data) if size < 0 else size
    found: npt.NDArray[np.intp] = np.flatnonzero(np.frombuffer(data, np.uint8, count=size) == 10)
    return found


def line_numbers(
    newlines: npt.NDArray[np.intp], first_lineno: int, positions: Sequence[int]
) -> list[int]:
    """Line numbers of the lines holding byte positions of a block, given its newlines."""
    numbers: list[int] = (first_lineno + np.searchsorted(newlines, positions)).tolist()
    return numbers


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
            newlines = newlines_of(buf, filled)
            body = filled if last else (int(newlines[-1]) + 1 if len(newlines) else 0)
            lengths = np.diff(newlines, prepend=-1) - 1
            tail = body - (int(newlines[-1]) + 1 if len(newlines) else 0)
            if body == 0 or tail > max_line or (len(lengths) and int(lengths.max()) > max_line):
                raise LongLine(f"{path}: a line over {max_line} bytes")
            yield Window(buf, body, start, lineno, newlines)
            if last:
                return
            lineno += len(newlines)
            start += body
            carry = filled - body
            buf[:carry] = buf[body:filled]


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


_MAX_CUT_WARNINGS = 5


def note_cut(stats: ReadStats, path: str, linenos: list[int], max_line: int) -> None:
    for n in linenos:
        stats.cut_lines += 1
        if stats.cut_lines <= _MAX_CUT_WARNINGS:
            stats.warnings.append(
                f"{path}:{n}: line longer than {max_line} bytes; only its first {max_line} "
                "bytes are read"
            )


class _Ended:
    def read(self, n: int = -1) -> bytes:
        return b""

    def read1(self, n: int = -1) -> bytes:
        return b""

    def close(self) -> None:
        pass


def _read(stream: BinaryIO, n: int, compressed: bool) -> tuple[bytes, str | None]:
    """Read up to n bytes; on a damaged stream return what came before the damage."""
    if not compressed:
        try:
            return stream.read(n), None
        except OSError as err:
            return b"", str(err)
    parts: list[bytes] = []
    got = 0
    try:
        while got < n:
            piece = stream.read1(n - got)  # type: ignore[attr-defined]
            if not piece:
                break
            parts.append(piece)
            got += len(piece)
    except (
        EOFError,
        OSError,
        zlib.error,
        lzma.LZMAError,
        ValueError,
        zstandard.ZstdError,
        RuntimeError,  # lz4 on a damaged block
    ) as err:
        return b"".join(parts), str(err)
    return b"".join(parts), None


# --- follow: `tail -F` by polling stat(), for `logscope tail` -----------------------------------

_ROTATED = re.compile(r"(?:\.(?:gz|bz2|xz|zst)|\.[^.\d][^.]*\.\d+)$")
"""Names of rotated or compressed siblings (`x.log.1`, `x.log.2.gz`, `x.out.gz`): never followed
when found by a glob or in a directory; a path named exactly is followed whatever its name."""


@dataclass(frozen=True, slots=True)
class Tick:
    """Emitted after every poll round, data or not: the caller checks for stalls here."""

    now: float
    """`clock()` (time.monotonic by default) at the end of the round."""


@dataclass(frozen=True, slots=True)
class Notice:
    """Something happened to a followed file; `message` is a sentence naming it."""

    path: str
    what: str
    """One of "opened", "truncated", "rotated", "vanished", "error"."""
    message: str


@dataclass(frozen=True, slots=True)
class Chunk:
    """New whole lines of one followed file, numbered as physical lines of that file."""

    path: str
    block: Block


@dataclass(slots=True)
class _Lines:
    """Cuts a byte stream into whole lines, holding back at most one partial line."""

    max_line: int
    lineno: int = 1
    pending: bytes = b""
    skipping: bool = False
    """Inside the rest of a line already cut at max_line."""

    def feed(self, chunk: bytes) -> Block | None:
        # callers keep len(chunk) <= max_line, so only the first line (which may have begun
        # in `pending`) can be over-long
        data = self.pending + chunk
        self.pending = b""
        if self.skipping:
            nl = data.find(b"\n")
            if nl < 0:
                return None
            data = data[nl + 1 :]
            self.skipping = False
        cut = data.rfind(b"\n")
        if cut < 0:
            if len(data) > self.max_line:
                block = Block(data[: self.max_line] + b"\n", self.lineno, [self.lineno])
                self.lineno += 1
                self.skipping = True
                return block
            self.pending = data
            return None
        body, self.pending = data[: cut + 1], data[cut + 1 :]
        truncated: list[int] = []
        first_nl = body.find(b"\n")
        if first_nl > self.max_line:
            body = body[: self.max_line] + body[first_nl:]
            truncated.append(self.lineno)
        block = Block(body, self.lineno, truncated)
        self.lineno += body.count(b"\n")
        return block

    def flush(self) -> Block | None:
        """The partial last line of a file that will not grow any more, if there is one."""
        if not self.pending:
            return None
        block = Block(self.pending, self.lineno, [])
        self.pending = b""
        self.lineno += 1
        return block


@dataclass(slots=True)
class _Watch:
    """One followed path: the open file, how far it was read, and its line count."""

    path: str
    block_size: int
    max_line: int
    lines: _Lines
    fh: BinaryIO | None = None
    ident: tuple[int, int] | None = None
    """(st_dev, st_ino) of `fh`: a different one at `path` means the file was rotated."""
    offset: int = 0
    count_to: int = 0
    """While offset < count_to, existing lines are counted, not emitted (following from the end)."""
    counted: int = 0
    last_nl: int = -1
    absent_noted: bool = False
    error: str | None = None
    busy: bool = False
    """The last poll left data unread: poll again without sleeping."""

    def poll(self, from_end: bool) -> Iterator[Chunk | Notice]:
        self.busy = False
        try:
            st: os.stat_result | None = Path(self.path).stat()
        except (FileNotFoundError, NotADirectoryError):
            st = None
        except OSError as err:
            yield from self._error(f"cannot stat: {err.strerror or err}")
            return
        if self.fh is not None:
            if st is not None and (st.st_dev, st.st_ino) == self.ident:
                yield from self._read()
                return
            # renamed or deleted: its writer may have added lines since the last poll
            if self.offset >= self.count_to:
                yield from self._read()
                if self.busy:
                    return
            yield from self._flush()
            self.close()
            if st is None:
                self.absent_noted = True
                yield Notice(
                    self.path, "vanished", f"{self.path}: vanished; waiting for it to return"
                )
                return
            yield Notice(
                self.path,
                "rotated",
                f"{self.path}: rotated (a new file); reading it from its start",
            )
            yield from self._open(from_end=False, announce=False)
            return
        if st is None:
            if not self.absent_noted:
                self.absent_noted = True
                yield Notice(
                    self.path, "vanished", f"{self.path}: no such file; waiting for it to appear"
                )
            return
        yield from self._open(from_end)

    def _open(self, from_end: bool, announce: bool = True) -> Iterator[Chunk | Notice]:
        fh: BinaryIO | None = None
        try:
            fh = Path(self.path).open("rb", buffering=0)  # noqa: SIM115 - held across polls
            fst = os.fstat(fh.fileno())
        except OSError as err:
            if fh is not None:
                fh.close()
            yield from self._error(f"cannot open: {err.strerror or err}")
            return
        self.fh = fh
        self.ident = (fst.st_dev, fst.st_ino)
        self._restart()
        self.error = None
        if from_end and fst.st_size:
            self.count_to = fst.st_size
            how = f"following from its end (byte {fst.st_size})"
        else:
            how = "reading from its start"
        if announce:
            yield Notice(self.path, "opened", f"{self.path}: {how}")
        yield from self._read()

    def _restart(self) -> None:
        self.lines = _Lines(self.max_line)
        self.offset = self.count_to = self.counted = 0
        self.last_nl = -1
        self.absent_noted = False

    def _read(self) -> Iterator[Chunk | Notice]:
        fh = self.fh
        if fh is None:
            return
        try:
            size = os.fstat(fh.fileno()).st_size
            if size < self.offset:
                yield Notice(
                    self.path,
                    "truncated",
                    f"{self.path}: truncated (size {size} < {self.offset} read); "
                    "reading from its start",
                )
                self._restart()
            if size <= self.offset:
                return
            want = self.block_size
            if self.offset < self.count_to:
                want = min(want, self.count_to - self.offset)
            fh.seek(self.offset)
            data = fh.read(want)
        except OSError as err:
            yield from self._error(f"cannot read: {err.strerror or err}")
            return
        if not data:
            return
        self.error = None
        start = self.offset
        self.offset += len(data)
        if start < self.count_to:
            self._count(data, start)
            self.busy = self.offset < size
            return
        self.busy = self.offset < size
        block = self.lines.feed(data)
        if block is not None:
            yield Chunk(self.path, block)

    def _count(self, data: bytes, start: int) -> None:
        # Numbering stays physical when following from the end, at the cost of one
        # sequential read of what was there (block_size at a time, nothing held).
        self.counted += data.count(b"\n")
        nl = data.rfind(b"\n")
        if nl >= 0:
            self.last_nl = start + nl
        if self.offset < self.count_to:
            return
        line_start = self.last_nl + 1
        self.lines = _Lines(self.max_line, lineno=self.counted + 1)
        if line_start < self.count_to:
            # a partial last line was there: wait for its end and emit it whole, unless it is
            # already too long to hold
            if self.count_to - line_start <= self.max_line:
                self.offset = line_start
            else:
                self.lines = _Lines(self.max_line, lineno=self.counted + 2, skipping=True)
        self.count_to = 0

    def _flush(self) -> Iterator[Chunk]:
        if self.offset < self.count_to:
            return
        block = self.lines.flush()
        if block is not None:
            yield Chunk(self.path, block)

    def _error(self, message: str) -> Iterator[Notice]:
        if message != self.error:
            self.error = message
            yield Notice(self.path, "error", f"{self.path}: {message}; retrying")

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
        self.fh = None
        self.ident = None


def _follow_paths(patterns: Sequence[str]) -> tuple[set[str], list[str]]:
    """Paths to follow now, and the patterns that match nothing yet."""
    paths: set[str] = set()
    unmatched: list[str] = []
    for arg in patterns:
        p = Path(arg)
        if p.is_dir() or (glob.has_magic(arg) and not p.exists()):
            files = _dir_files(p) if p.is_dir() else _glob_files(arg)
            found = [f for f in files if not _ROTATED.search(Path(f).name)]
        else:
            found = [arg]  # named exactly: followed even before it exists
        if not found:
            unmatched.append(arg)
        paths.update(found)
    return paths, unmatched


RESCAN_BUSY_S = 1.0
"""While files have unread data, globs and directories are expanded again at most this often."""


def follow(
    patterns: Sequence[str],
    *,
    from_start: bool = False,
    poll_s: float = 0.25,
    stop: Callable[[], bool] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    block_size: int = BLOCK_SIZE,
    max_line: int = MAX_LINE,
) -> Iterator[Chunk | Notice | Tick]:
    """Follow growing files like `tail -F`, by polling stat() (inotify sees nothing on NFS/Lustre).

    Globs and directories are expanded again every idle round (at most once a second while
    catching up: a directory walk stats every file), so files that appear later are followed
    from their start; files there at the start are followed from their end unless
    `from_start`. Truncation and rotation restart the numbering at 1 for the new content.
    Each round reads at most `block_size` per file, in sorted path order, then yields a Tick;
    it sleeps `poll_s` only when no file has unread data. User errors become Notices.
    """
    block_size = max(1, min(block_size, max_line))
    watches: dict[str, _Watch] = {}
    first = True
    busy = False
    now = scanned = -math.inf  # the clock as of the last round's Tick
    paths: set[str] = set()
    try:
        while stop is None or not stop():
            if not busy or now - scanned >= RESCAN_BUSY_S:
                paths, unmatched = _follow_paths(patterns)
                scanned = now
            if first:
                for arg in unmatched:
                    yield Notice(arg, "vanished", f"{arg}: no file matches yet; waiting for one")
            busy = False
            for path in sorted(paths | watches.keys()):
                watch = watches.get(path)
                if watch is None:
                    watch = _Watch(path, block_size, max_line, _Lines(max_line))
                    watches[path] = watch
                yield from watch.poll(from_end=first and not from_start)
                busy = busy or watch.busy
                if watch.fh is None and path not in paths:
                    del watches[path]  # matched a glob once; a new file there starts afresh
            first = False
            now = clock()
            yield Tick(now)
            if not busy:
                sleep(poll_s)
    finally:
        for watch in watches.values():
            watch.close()


def rereadable(path: str) -> bool:
    """An input that can be read a second time: a regular file, not stdin, a pipe, a FIFO or
    a process substitution (`<(...)`), whose bytes are gone once read."""
    try:
        return path != "-" and Path(path).is_file()
    except OSError:
        return False


def read_lines(
    path: str,
    wanted: set[int],
    marks: Sequence[tuple[int, int]] = (),
    max_line: int = MAX_LINE,
) -> dict[int, bytes]:
    """The physical lines `wanted` of a file (decompressed), read once.

    Used for the context around a root cause after the analysis: only the few lines asked for
    are kept. `marks` ((line number, byte offset) of line starts, ascending) let an
    uncompressed file be read from the last mark before the first line wanted. Stdin or a pipe
    cannot be read again, so it yields nothing.
    """
    if not wanted or not rereadable(path):
        return {}
    out: dict[int, bytes] = {}
    first, last = min(wanted), max(wanted)
    skip, byte_range = 0, None
    for lineno, offset in marks:
        if lineno <= first:
            skip, byte_range = lineno - 1, (offset, Path(path).stat().st_size)
    stats = ReadStats()
    try:
        for block in read_blocks(Source(path), stats, max_line=max_line, byte_range=byte_range):
            n = skip + block.first_lineno
            end = n + block.nlines - 1
            if first <= end and n <= last:
                for i, line in enumerate(block.data.split(b"\n")):
                    if n + i in wanted:
                        out[n + i] = line
            if end >= last:
                break
    except (InputError, OSError):
        return out
    return out
