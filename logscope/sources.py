"""Inputs: paths, globs, directories and stdin, decompressed, read as blocks of whole lines."""

from __future__ import annotations

import bz2
import glob
import gzip
import io
import lzma
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from .errors import InputError

BLOCK_SIZE = 1 << 20
MAX_LINE = 1 << 20
"""Longer lines are cut at this many bytes and flagged: a 50 MB line is never held whole."""

_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
)
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
            files = sorted(
                f
                for f in p.rglob("*")
                if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts)
            )
            if not files:
                raise InputError(arg, "directory contains no files")
            for f in files:
                add(Source(str(f), explicit=False))
        elif p.exists():
            add(Source(arg))
        elif glob.has_magic(arg):
            matches = sorted(glob.glob(arg, recursive=True))  # noqa: PTH207 - takes absolute globs
            files_only = [m for m in matches if Path(m).is_file()]
            if not files_only:
                raise InputError(arg, "no file matches this pattern")
            for m in files_only:
                add(Source(m))
        else:
            raise InputError(arg, "no such file or directory")
    return out


def _sniff(head: bytes) -> str | None:
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    return None


def _looks_binary(head: bytes) -> bool:
    """True for data no log writer produces: NUL bytes or mostly non-text in the first 8 KiB."""
    probe = head[:_BINARY_PROBE]
    if not probe:
        return False
    if probe.count(b"\x00") > len(probe) // 100 + 1:
        return True
    control = sum(1 for b in probe if b < 9 or 13 < b < 32)
    return control > len(probe) // 10


def open_source(src: Source, stats: ReadStats) -> BinaryIO:
    """Open a source, transparently decompressing gzip, bz2 and xz (sniffed by magic bytes)."""
    if src.path == "-":
        raw: Any = sys.stdin.buffer
        if not hasattr(raw, "peek"):
            raw = io.BufferedReader(raw)  # a stream without peek(): test runners, notebooks
        kind = _sniff(raw.peek(8)[:8])
        stats.compression = kind
        # the decompressors do not close a file object they are given: stdin stays open
        if kind == "gzip":
            return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
        if kind == "bz2":
            return bz2.BZ2File(raw, "rb")  # type: ignore[return-value]
        if kind == "xz":
            return lzma.LZMAFile(raw, "rb")  # type: ignore[return-value]
        return raw  # type: ignore[no-any-return]
    try:
        fh = Path(src.path).open("rb")  # noqa: SIM115 - closed by read_blocks
    except OSError as err:
        raise InputError(src.path, f"cannot open: {err.strerror or err}") from None
    kind = _sniff(fh.read(8))
    stats.compression = kind
    if kind is None:
        fh.seek(0)
        return fh
    fh.close()
    # opened by name, a decompressor closes its own file
    if kind == "gzip":
        return gzip.open(src.path, "rb")  # type: ignore[return-value]
    if kind == "bz2":
        return bz2.open(src.path, "rb")  # type: ignore[return-value]
    return lzma.open(src.path, "rb")  # type: ignore[return-value]


def read_blocks(
    src: Source,
    stats: ReadStats,
    block_size: int = BLOCK_SIZE,
    max_line: int = MAX_LINE,
) -> Iterator[Block]:
    """Yield blocks of whole lines; physical line numbers are counted on the decompressed bytes.

    A damaged compressed stream ends the input with a warning (what was read is still
    analysed); binary data at the start of an input raises InputError.
    """
    block_size = min(block_size, max_line)
    stream = open_source(src, stats)
    lineno = 1
    pending = b""
    skipping = False  # inside the rest of a line already cut at max_line
    first = True
    try:
        while True:
            chunk, damage = _read(stream, block_size, bool(stats.compression))
            if damage is not None:
                msg = f"{stats.compression or 'input'} stream is damaged or truncated ({damage})"
                where = lineno + chunk.count(b"\n") + pending.count(b"\n")
                stats.warnings.append(f"{src.path}:{where}: {msg}; the lines before it were read")
            if first:
                first = False
                if _looks_binary(chunk):
                    raise InputError(src.path, "binary data, not a text log", line=1)
            if not chunk:
                break
            if damage is not None:
                # process this last piece, then stop on the next read
                if src.path != "-":
                    stream.close()
                stream = _Ended()  # type: ignore[assignment]
            stats.bytes += len(chunk)
            truncated: list[int] = []
            data = pending + chunk
            pending = b""
            if skipping:
                nl = data.find(b"\n")
                if nl < 0:
                    continue
                data = data[nl + 1 :]
                skipping = False
            cut = data.rfind(b"\n")
            if cut < 0:
                if len(data) > max_line:
                    truncated.append(lineno)
                    out = data[:max_line] + b"\n"
                    skipping = True
                    _note_cut(stats, src.path, truncated, max_line)
                    yield Block(out, lineno, truncated)
                    stats.lines = lineno
                    lineno += 1
                    continue
                pending = data
                continue
            body, pending = data[: cut + 1], data[cut + 1 :]
            if len(pending) > max_line:
                # the tail is already an over-long line: emit its head now
                n_body = body.count(b"\n")
                truncated.append(lineno + n_body)
                body = body + pending[:max_line] + b"\n"
                pending = b""
                skipping = True
            # Only the first line can be over-long: it may have begun in `pending`; every
            # other line lies inside one chunk, and block_size <= max_line.
            first_nl = body.find(b"\n")
            if first_nl > max_line:
                body = body[:max_line] + body[first_nl:]
                truncated.insert(0, lineno)
            if truncated:
                _note_cut(stats, src.path, truncated, max_line)
            block = Block(body, lineno, truncated)
            n = body.count(b"\n")
            lineno += n
            stats.lines = lineno - 1
            yield block
        if pending:
            yield Block(pending, lineno, [])
            stats.lines = lineno
    finally:
        if src.path != "-":
            stream.close()


_MAX_CUT_WARNINGS = 5


def _note_cut(stats: ReadStats, path: str, linenos: list[int], max_line: int) -> None:
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
    except (EOFError, OSError, zlib.error, lzma.LZMAError, ValueError) as err:
        return b"".join(parts), str(err)
    return b"".join(parts), None
