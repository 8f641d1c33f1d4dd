"""Spool: a compressed input read by the worker processes. A child process decompresses it into
chunk files of whole lines (in /dev/shm where it exists) that the workers scan like ranges of a
plain file; at most `room` chunks wait, so the folder stays bounded whatever the input's size."""

from __future__ import annotations

import multiprocessing
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Semaphore
from pathlib import Path
from typing import BinaryIO

from ..errors import InputError, WorkerError
from .compression import read_upto_damage
from .sources import ReadStats, Source, looks_binary, open_source, read_lines

_IN_MEMORY = Path("/dev/shm")  # noqa: S108 - a folder of our own is made inside it


@dataclass(frozen=True, slots=True)
class Chunk:
    """Whole lines of a decompressed input, stored in a file of their own."""

    path: str
    size: int
    offset: int
    """Byte offset of its first byte in the decompressed input."""


@dataclass(frozen=True, slots=True)
class Kept:
    """A chunk kept after its scan, to read lines from again (context.root_context)."""

    path: str
    first_lineno: int
    lines: int
    final: bool
    """The input's last chunk: no line follows it."""


KEEP_CHUNKS = 8
"""Chunks of an input kept at most; lines beyond them are read from the input again."""


class Spool:
    """Chunks of one compressed input, in order. Once a chunk is scanned, `scanned` deletes it
    or keeps it for the root causes' context (Keeper: those holding lines within `window` of a
    failure or of the latest progress line), and lets the child write another. The child's
    InputError (binary data, say) is raised by `chunks`. Use as a context manager: the folder
    goes on exit."""

    def __init__(self, src: Source, chunk_bytes: int, room: int, window: int) -> None:
        self._src = src
        self.compression: str | None = None
        """What the input is compressed with, once `chunks` has ended."""
        self.damage: str | None = None
        """Why the input ended early (damaged, truncated), once `chunks` has ended."""
        self.newline_last = True
        """The text ends with a newline, once `chunks` has ended."""
        self._chunk_bytes = chunk_bytes
        self.room = room
        """Chunks written and not yet scanned, at most."""
        self._room = multiprocessing.Semaphore(room)
        parent = _IN_MEMORY if _writable(_IN_MEMORY) else None
        self.folder = tempfile.mkdtemp(prefix="logscope-", dir=parent)
        self._child: multiprocessing.Process | None = None
        self.kept: list[Kept] = []
        """The chunks kept once `finish` has run."""
        self._keeper = Keeper(window, KEEP_CHUNKS)

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *_: object) -> None:
        if self._child is not None:
            if self._child.is_alive():
                self._child.terminate()
            self._child.join()
        shutil.rmtree(self.folder, ignore_errors=True)

    def chunks(self) -> Iterator[Chunk]:
        receiver, sender = multiprocessing.Pipe(duplex=False)
        self._child = multiprocessing.Process(
            target=_spool_for_parent,
            args=(self._src, self.folder, self._chunk_bytes, self._room, sender),
            name="logscope-inflater",
        )
        self._child.start()
        sender.close()
        with receiver:
            while True:
                try:
                    kind, payload, stats = receiver.recv()
                except EOFError:
                    raise WorkerError(f"{self._src.path}: the decompressing process died") from None
                if kind == "chunk":
                    yield payload
                    continue
                self.compression = stats.compression
                if kind == "error":
                    raise InputError(*payload)
                self.damage, self.newline_last = payload
                return

    def scanned(
        self,
        chunk: Chunk,
        first_lineno: int,
        lines: int,
        failing: Sequence[int],
        progress: int | None,
        restarted: bool,
    ) -> None:
        """A chunk is scanned and fed, its lines numbered from `first_lineno`: the lines of
        the failures found in it, its last progress line if it has one, and whether a new
        attempt began in it, say whether it is kept (Keeper). The child may write another."""
        self._room.release()
        fed = _Fed(chunk, first_lineno, lines)
        for gone in self._keeper.fed(fed, failing, progress, restarted):
            Path(gone.chunk.path).unlink(missing_ok=True)

    def finish(self, budget: KeepBudget) -> None:
        """No chunk follows: list those kept in `kept`, as far as `budget` (shared by the inputs
        of one analysis) allows, and delete the others."""
        last = self._keeper.last
        gone = self._keeper.finish()
        for fed in self._keeper.alive:
            if budget.take(fed.chunk.size):
                self.kept.append(Kept(fed.chunk.path, fed.first_lineno, fed.lines, fed is last))
            else:
                gone.append(fed)
        for fed in gone:
            Path(fed.chunk.path).unlink(missing_ok=True)


@dataclass(slots=True)
class KeepBudget:
    """Bytes of chunks the inputs of one analysis keep in all, once read (384 compressed
    per-rank files must not each keep theirs)."""

    left: int = 256 << 20

    def take(self, size: int) -> bool:
        if size > self.left:
            return False
        self.left -= size
        return True


@dataclass(frozen=True, slots=True)
class _Fed:
    chunk: Chunk
    first_lineno: int
    lines: int

    @property
    def end(self) -> int:
        return self.first_lineno + self.lines


class Keeper:
    """Which scanned chunks to keep for the root causes' context, decided as they come: one
    holding a failure line, for good; the one holding the latest progress line, until a later
    chunk holds one, or for good if a new attempt begins (a hang's root cause is the last
    progress line of its attempt); and with either, the neighbour holding lines within
    `window` of that line. At most `most` are kept for good."""

    def __init__(self, window: int, most: int) -> None:
        self._window = window
        self._most = most
        self.alive: list[_Fed] = []
        """Chunks not deleted, in order."""
        self._kept: set[int] = set()  # chunks (their offsets) kept for good
        self._rolling: set[int] = set()  # kept for the latest progress line
        self._carry: list[set[int]] = []  # what the next chunk is kept for
        self.last: _Fed | None = None

    def fed(
        self, fed: _Fed, failing: Sequence[int], progress: int | None, restarted: bool = False
    ) -> list[_Fed]:
        """Take the next chunk; returns the chunks to delete."""
        previous, self.last = self.last, fed
        self.alive.append(fed)
        for mark in self._carry:
            self._mark(mark, fed)
        self._carry = []
        if restarted:  # the last attempt's last progress line is in these, or in this one
            for f in [*self.alive]:
                if f.chunk.offset in self._rolling or f is fed:
                    self._mark(self._kept, f)
        if progress is not None:
            self._rolling = set()
        for line, mark in [*((n, self._kept) for n in failing), (progress, self._rolling)]:
            if line is None:
                continue
            self._mark(mark, fed)
            if previous is not None and line - self._window < fed.first_lineno:
                self._mark(mark, previous)
            if line + self._window >= fed.end:
                self._carry.append(mark)
        gone = [f for f in self.alive if f is not fed and not self._wanted(f)]
        self.alive = [f for f in self.alive if f is fed or self._wanted(f)]
        return gone

    def finish(self) -> list[_Fed]:
        """No chunk follows; returns the chunks to delete."""
        gone = [f for f in self.alive if not self._wanted(f)]
        self.alive = [f for f in self.alive if self._wanted(f)]
        return gone

    def _mark(self, mark: set[int], fed: _Fed) -> None:
        key = fed.chunk.offset
        if mark is self._kept and key not in mark and len(mark) >= self._most:
            return
        mark.add(key)

    def _wanted(self, fed: _Fed) -> bool:
        return fed.chunk.offset in self._kept or fed.chunk.offset in self._rolling


def read_kept(kept: Sequence[Kept], wanted: set[int]) -> dict[int, bytes] | None:
    """The lines `wanted` from kept chunks (without their newlines), or None unless they hold
    every one of them that the input has."""
    need = set(wanted)
    out: dict[int, bytes] = {}
    for k in sorted(kept, key=lambda k: k.first_lineno):
        end = k.first_lineno + k.lines
        mine = {n for n in need if k.first_lineno <= n < end}
        if mine:
            shift = k.first_lineno - 1  # a chunk's lines count from 1 in its file
            got = read_lines(k.path, {n - shift for n in mine})
            if len(got) < len(mine):
                return None  # the chunk is gone
            out.update((n + shift, line) for n, line in got.items())
            need -= mine
        if k.final:
            need = {n for n in need if n < end}
    return None if need else out


def _writable(folder: Path) -> bool:
    try:
        return folder.is_dir() and shutil.disk_usage(folder).free > 1 << 30
    except OSError:
        return False


_READ = 8 << 20


def _spool_for_parent(
    src: Source, folder: str, chunk_bytes: int, room: Semaphore, sender: Connection
) -> None:
    """Decompress `src` into chunk files (_ChunkWriter) and send each one's Chunk when it is
    complete, then ("end", (damage, whether the text ends with a newline), stats)."""
    stats = ReadStats()
    chunks = _ChunkWriter(folder, chunk_bytes, room, sender)
    damage: str | None = None
    try:
        stream = open_source(src, stats)
        try:
            data, damage = read_upto_damage(stream, _READ, True)
            if looks_binary(data):
                raise InputError(src.path, "binary data, not a text log", line=1)
            while data:
                chunks.write(data)
                if damage is not None:
                    break
                data, damage = read_upto_damage(stream, _READ, True)
        finally:
            stream.close()
        chunks.close()
        sender.send(("end", (damage, chunks.newline_last), stats))
    except InputError as err:
        sender.send(("error", (err.path, err.message, err.line), stats))
    except OSError as err:
        message = f"cannot store decompressed text in {folder}: {err.strerror or err}"
        sender.send(("error", (src.path, message, None), stats))
    finally:
        chunks.abandon()
        sender.close()


class _ChunkWriter:
    """Writes a text into chunk files of about `chunk_bytes`, each ending at a line end (a
    chunk grows past it until a newline comes) and each begun once `room` has space. Nothing
    here looks at lines but for a chunk's last newline: the workers number and cut them."""

    def __init__(self, folder: str, chunk_bytes: int, room: Semaphore, sender: Connection) -> None:
        self._folder = folder
        self._chunk_bytes = chunk_bytes
        self._room = room
        self._sender = sender
        self._out: BinaryIO | None = None
        self._offset = 0
        self._size = 0
        self.newline_last = True
        """The text so far ends with a newline (or is empty)."""

    def write(self, data: bytes) -> None:
        if data:
            self.newline_last = data.endswith(b"\n")
        view = memoryview(data)
        at = 0
        while at < len(data):
            out = self._out or self._begin()
            end = len(data)
            if self._size + end - at >= self._chunk_bytes:
                # the chunk ends with the line that takes it to chunk_bytes
                nl = data.find(b"\n", at + max(0, self._chunk_bytes - self._size - 1))
                end = nl + 1 if nl >= 0 else end  # no newline yet: the chunk grows
            out.write(view[at:end])
            self._size += end - at
            full = self._size >= self._chunk_bytes and data[end - 1] == ord("\n")
            at = end
            if full:
                self._send()

    def close(self) -> None:
        if self._out is not None:
            self._send()

    def abandon(self) -> None:
        if self._out is not None:
            self._out.close()

    def _begin(self) -> BinaryIO:
        self._room.acquire()
        self._out = (Path(self._folder) / f"{self._offset:016d}").open("wb")
        return self._out

    def _send(self) -> None:
        assert self._out is not None  # noqa: S101 - _send follows _begin
        self._out.close()
        self._sender.send(("chunk", Chunk(self._out.name, self._size, self._offset), None))
        self._out, self._offset, self._size = None, self._offset + self._size, 0
