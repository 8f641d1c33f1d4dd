"""Compressed inputs: gzip, bz2, xz, zstd and lz4 recognized by their magic bytes, read as a
stream (a file, stdin, a pipe) or inflated piece by piece as a followed file grows."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO

import lz4.frame
import zstandard

_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\x04\x22\x4d\x18", "lz4"),
)
_RAW_CHUNK = 1 << 20

DAMAGED = (
    EOFError,
    OSError,
    zlib.error,
    lzma.LZMAError,
    ValueError,
    zstandard.ZstdError,
    RuntimeError,  # lz4 on a damaged block
)
"""What the decompressors raise on damaged data."""


def compression_in(head: bytes) -> str | None:
    """The compression whose magic bytes start `head` (gzip, bz2, xz, zstd, lz4), or None."""
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    return None


def may_be_magic(head: bytes) -> bool:
    """`head` is too short to tell: it is the start of some compression's magic bytes."""
    return any(len(head) < len(magic) and magic.startswith(head) for magic, _ in _MAGIC)


def decompressed(raw: Any, kind: str | None) -> Any:
    """A decompressing reader over `raw` (which it does not close), or `raw` itself for an
    uncompressed input."""
    if kind == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if kind == "bz2":
        return bz2.BZ2File(raw, "rb")
    if kind == "xz":
        return lzma.LZMAFile(raw, "rb")
    if kind == "zstd":
        return _InflatedStream(raw, Inflater(kind))
    if kind == "lz4":
        return lz4.frame.LZ4FrameFile(raw, "rb")
    return raw


def compression_of(path: str) -> str | None:
    """gzip, bz2, xz, zstd, lz4 or None, from a file's magic bytes."""
    with Path(path).open("rb") as f:
        return compression_in(f.read(8))


def read_upto_damage(stream: BinaryIO, n: int, compressed: bool) -> tuple[bytes, str | None]:
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
    except DAMAGED as err:
        return b"".join(parts), str(err)
    return b"".join(parts), None


_DECOMPRESSORS: Mapping[str, Callable[[], Any]] = MappingProxyType(
    {
        "gzip": lambda: zlib.decompressobj(wbits=31),
        "bz2": bz2.BZ2Decompressor,
        "xz": lzma.LZMADecompressor,
        "zstd": lambda: zstandard.ZstdDecompressor().decompressobj(),
        "lz4": lz4.frame.LZ4FrameDecompressor,
    }
)


class Inflater:
    """Decompresses a file piece by piece as it grows (`cmd | zstd > job.out.zst`): the pieces
    may end anywhere, and members or frames may follow one another (`cat a.gz b.gz`, a
    compressor restarted). On damaged data `feed` returns what came before the damage, sets
    `damage` and takes nothing more; `mid_frame` says the data so far ends inside a frame."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.damage: str | None = None
        self.mid_frame = False
        self._new = _DECOMPRESSORS[kind]
        self._d = self._new()

    def feed(self, raw: bytes) -> bytes:
        out: list[bytes] = []
        try:
            while raw and self.damage is None:
                out.append(self._d.decompress(raw))
                self.mid_frame, raw = not self._d.eof, b""
                if self._d.eof:  # the next frame may follow in the same piece
                    raw = self._d.unused_data
                    self._d = self._new()
        except DAMAGED as err:
            self.damage = str(err) or type(err).__name__
        return b"".join(out)


class _InflatedStream(io.RawIOBase):
    """A compressed stream read like `zstd -dc`, frame after frame, through an Inflater: data
    cut short inside a frame raises EOFError after the text before the cut (zstandard's own
    stream_reader would end silently)."""

    def __init__(self, raw: Any, inflater: Inflater) -> None:
        super().__init__()
        self._raw = raw
        self._inflater = inflater

    def readable(self) -> bool:
        return True

    def read1(self, n: int = -1) -> bytes:
        inflater = self._inflater
        while inflater.damage is None and (data := self._raw.read(_RAW_CHUNK)):
            if text := inflater.feed(data):
                return text  # damage, if any, is raised on the next read
        if inflater.damage is not None:
            raise ValueError(inflater.damage)
        if inflater.mid_frame:
            raise EOFError(f"the {inflater.kind} frame ends before its end mark")
        return b""

    def read(self, n: int = -1) -> bytes:
        return self.read1(n)
