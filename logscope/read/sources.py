"""Inputs: paths, globs, directories and stdin, decompressed, read as blocks of whole lines; an
uncompressed file also split into ranges of whole lines, read as windows."""

from __future__ import annotations

import glob
import io
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from ..errors import InputError
from .compression import compression_in, decompressed, read_upto_damage
from .newlines import newlines_of

BLOCK_SIZE = 1 << 20
MAX_LINE = 1 << 20
"""Longer lines are cut at this many bytes and flagged: a 50 MB line is never held whole."""

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


@dataclass(slots=True)
class Tail:
    """The end of an input's text as it goes by: its last `size` bytes. What is read of an
    input that cannot be read again (compressed, stdin, a pipe) for the last line of each
    rank (context.last_lines)."""

    size: int
    data: bytearray = field(default_factory=bytearray)
    seen: int = 0
    """Bytes of the input so far, given or skipped."""

    @property
    def cut(self) -> bool:
        """Bytes came before `data`."""
        return self.seen > len(self.data)

    def add(self, data: bytes | bytearray | memoryview, skipped: int = 0) -> None:
        """The next bytes of the input, after `skipped` bytes not given."""
        self.seen += skipped + len(data)
        view = memoryview(data)
        if len(view) >= self.size:  # a chunk of a compressed input: it alone is the tail
            self.data = bytearray(view[len(view) - self.size :])  # one copy, not four
            return
        self.data += view
        if len(self.data) > self.size:
            del self.data[: len(self.data) - self.size]


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
            files = dir_files(p)
            if not files:
                raise InputError(arg, "directory contains no files")
            for f in files:
                add(Source(f, explicit=False))
        elif p.exists():
            add(Source(arg))
        elif glob.has_magic(arg):
            files = glob_files(arg)
            if not files:
                raise InputError(arg, "no file matches this pattern")
            for f in files:
                add(Source(f))
        else:
            raise InputError(arg, "no such file or directory")
    return out


def dir_files(p: Path) -> list[str]:
    """The files below a directory, hidden ones (and those in hidden folders) left out."""
    return sorted(
        str(f)
        for f in p.rglob("*")
        if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts)
    )


def glob_files(pattern: str) -> list[str]:
    """The files a glob matches (`**` too)."""
    matches = glob.glob(pattern, recursive=True)  # noqa: PTH207 - takes absolute globs
    return sorted(m for m in matches if Path(m).is_file())


def looks_binary(head: bytes) -> bool:
    """True for data no log writer produces: NUL bytes or mostly non-text in the first 8 KiB.
    ESC is text: terminal colours and styles (ECMA-48 `ESC [ ... m`, which rich, IPython's
    tracebacks, loguru and tqdm write) fill a captured colour log with it."""
    probe = head[:_BINARY_PROBE]
    if not probe:
        return False
    if probe.count(b"\x00") > len(probe) // 100 + 1:
        return True
    control = sum(1 for b in probe if b < 9 or (13 < b < 32 and b != _ESC))
    return control > len(probe) // 10


_ESC = 0x1B


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
    stream = decompressed(raw, kind)
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


@dataclass(slots=True)
class LineCutter:
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
    lines = LineCutter(max_line)
    first = byte_range is None or byte_range[0] == 0
    try:
        while True:
            chunk, damage = read_upto_damage(stream, block_size, bool(stats.compression))
            if damage is not None:
                where = lines.lineno + chunk.count(b"\n") + lines.pending.count(b"\n")
                stats.warnings.append(damaged(src.path, where, stats.compression, damage))
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


def damaged(path: str, where: int, compression: str | None, damage: str) -> str:
    """The warning for an input that ends early at line `where`: damaged or cut short."""
    what = f"{compression or 'input'} stream is damaged or truncated ({damage})"
    return f"{path}:{where}: {what}; the lines before it were read"


def coalesce(blocks: Iterable[Block], size: int) -> Iterator[Block]:
    """Consecutive blocks joined into blocks of at least `size` bytes (the last may be less):
    the RE2 scan pays ~5 ms per call, so 1 MiB blocks would halve its speed."""
    parts: list[Block] = []
    total = 0
    for block in blocks:
        parts.append(block)
        total += len(block.data)
        if total >= size:
            yield joined(parts)
            parts, total = [], 0
    if parts:
        yield joined(parts)


def joined(parts: Sequence[Block]) -> Block:
    """Consecutive blocks as one."""
    if len(parts) == 1:
        return parts[0]
    data = b"".join(p.data for p in parts)
    return Block(data, parts[0].first_lineno, [n for p in parts for n in p.truncated])


def split_block(block: Block, at: int) -> tuple[Block, Block]:
    """A block cut at byte `at`, a line start: its lines before and from there."""
    first = block.first_lineno + block.data.count(b"\n", 0, at)
    return (
        Block(block.data[:at], block.first_lineno, [n for n in block.truncated if n < first]),
        Block(block.data[at:], first, [n for n in block.truncated if n >= first]),
    )


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


def line_numbers(
    newlines: npt.NDArray[np.intp], first_lineno: int, positions: Sequence[int]
) -> list[int]:
    """Line numbers of the lines holding byte positions of a block, given its newlines."""
    numbers: list[int] = (first_lineno + np.searchsorted(newlines, positions)).tolist()
    return numbers


def pick_lines(data: bytes, first_lineno: int, wanted: set[int]) -> dict[int, bytes]:
    """The lines `wanted` of `data` (whole lines, the first numbered `first_lineno`), without
    their newlines: placed by the newlines' positions, so that no other line is copied."""
    newlines = newlines_of(data)
    count = len(newlines) + (bool(data) and not data.endswith(b"\n"))
    out: dict[int, bytes] = {}
    for n in wanted:
        i = n - first_lineno
        if 0 <= i < count:
            start = int(newlines[i - 1]) + 1 if i else 0
            out[n] = data[start : int(newlines[i]) if i < len(newlines) else len(data)]
    return out


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
                out.update(pick_lines(block.data, n, wanted))
            if end >= last:
                break
    except (InputError, OSError):
        return out
    return out
