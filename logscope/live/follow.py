"""`tail -F` by polling stat(), for `logscope tail`: growing, rotated, truncated and compressed
files cut into numbered lines as they grow; stdin, FIFOs and process substitutions read as the
bytes come."""

from __future__ import annotations

import glob
import math
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ..read.compression import Inflater, compression_in, may_be_magic
from ..read.sources import BLOCK_SIZE, MAX_LINE, Block, LineCutter, dir_files, glob_files

_ROTATED = re.compile(r"(?:\.(?:gz|bz2|xz|zst|lz4)|\.[^.\d][^.]*\.\d+)$")
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
class _Decoder:
    """Recognizes a compressed input by its first bytes and decompresses it as it comes."""

    head: bytes | None = b""
    """The input's first bytes while too few to tell a compression's magic; None once told."""
    inflater: Inflater | None = None
    damaged: bool = False
    """Compressed data that cannot be decompressed: nothing more is read until it is replaced."""

    def decode(self, data: bytes) -> bytes:
        """The text in the input's next bytes, `data`."""
        if self.head is not None:
            data, self.head = self.head + data, None
            if may_be_magic(data):
                self.head = data  # a compressed file's first bytes: wait for the rest
                return b""
            kind = compression_in(data)
            self.inflater = Inflater(kind) if kind else None
        if self.inflater is None:
            return data
        text = self.inflater.feed(data)
        self.damaged = self.inflater.damage is not None
        return text

    def flush(self) -> bytes:
        """The first bytes held back, when the input ends before there are enough to tell."""
        if not self.head:
            return b""  # nothing read yet (a FIFO with no writer so far), or already told
        head, self.head = self.head, None
        return head

    def notice(self, path: str, start: int) -> Notice:
        kind = self.inflater.kind if self.inflater else "compressed"
        damage = self.inflater.damage if self.inflater else ""
        return Notice(
            path,
            "error",
            f"{path}: {kind} data damaged after byte {start} ({damage}); the lines before it "
            "are read, nothing more until the file is replaced",
        )


def _chunks(path: str, lines: LineCutter, data: bytes, block_size: int) -> Iterator[Chunk]:
    # a decompressed piece may be longer than max_line: the cutter takes at most that at once
    for at in range(0, len(data), block_size):
        block = lines.feed(data[at : at + block_size])
        if block is not None:
            yield Chunk(path, block)


@dataclass(slots=True)
class _Watch:
    """One followed path: the open file, how far it was read, and its line count."""

    path: str
    block_size: int
    max_line: int
    lines: LineCutter
    fh: BinaryIO | None = None
    ident: tuple[int, int] | None = None
    """(st_dev, st_ino) of `fh`: a different one at `path` means the file was rotated."""
    offset: int = 0
    count_to: int = 0
    """While offset < count_to, existing lines are counted, not emitted (following from the end)."""
    counted: int = 0
    tail: bytes = b""
    """While counting: the partial line after the last newline counted."""
    tail_cut: bool = False
    """While counting: that partial line is longer than max_line (it will be skipped)."""
    decoder: _Decoder = field(default_factory=_Decoder)
    """Decompresses a compressed file as it grows; offsets stay those of the raw file."""
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
            how = "reading from its start" + ("" if fst.st_size else " (empty so far)")
        if announce:
            yield Notice(self.path, "opened", f"{self.path}: {how}")
        yield from self._read()

    def _restart(self) -> None:
        self.lines = LineCutter(self.max_line)
        self.offset = self.count_to = self.counted = 0
        self.tail, self.tail_cut = b"", False
        self.decoder = _Decoder()
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
            if size <= self.offset or self.decoder.damaged:
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
        self.busy = self.offset < size
        data = self.decoder.decode(data)
        if self.decoder.damaged:
            self.busy = False
            yield self.decoder.notice(self.path, start)
        if start < self.count_to:
            self._count(data)
            return
        yield from _chunks(self.path, self.lines, data, self.block_size)

    def _count(self, data: bytes) -> None:
        # Numbering stays physical when following from the end, at the cost of one
        # sequential read of what was there (block_size at a time, nothing held).
        self.counted += data.count(b"\n")
        nl = data.rfind(b"\n")
        if nl >= 0:
            self.tail, self.tail_cut = data[nl + 1 :], False
        elif not self.tail_cut:
            self.tail += data
        if len(self.tail) > self.max_line:
            self.tail, self.tail_cut = b"", True
        if self.offset < self.count_to:
            return
        # a partial last line was there: it is emitted whole once its end comes, unless it is
        # already too long to hold
        if self.tail_cut:
            self.lines = LineCutter(self.max_line, lineno=self.counted + 2, skipping=True)
        else:
            self.lines = LineCutter(self.max_line, lineno=self.counted + 1, pending=self.tail)
        self.tail, self.tail_cut = b"", False
        self.count_to = 0

    def _flush(self) -> Iterator[Chunk]:
        if self.offset < self.count_to:
            return
        yield from _chunks(self.path, self.lines, self.decoder.flush(), self.block_size)
        block = self.lines.flush()
        if block is not None:
            yield Chunk(self.path, block)

    def _error(self, message: str) -> Iterator[Notice]:
        if message != self.error:
            self.error = message
            yield Notice(self.path, "error", f"{self.path}: {message}; retrying")

    def is_open(self) -> bool:
        return self.fh is not None

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
        self.fh = None
        self.ident = None


@dataclass(slots=True)
class _PipeWatch:
    """Stdin (`-`), a FIFO or a process substitution (`<(ssh node cat job.out)`): read as the
    bytes come, without sizes or seeks. What was read is gone, so "from its end" means from
    what comes next; the end of what one writer sent ends its partial last line, and a FIFO
    is read again when another writer opens it."""

    path: str
    block_size: int
    lines: LineCutter
    fd: int | None = None
    offset: int = 0
    decoder: _Decoder = field(default_factory=_Decoder)
    error: str | None = None
    busy: bool = False

    def poll(self, from_end: bool) -> Iterator[Chunk | Notice]:
        self.busy = False
        if self.fd is None:
            try:
                if self.path == "-":
                    self.fd = os.dup(sys.stdin.fileno())
                    os.set_blocking(self.fd, False)
                else:  # a FIFO opened without O_NONBLOCK would wait here for a writer
                    self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            except (OSError, ValueError) as err:
                if self.error is None:
                    self.error = str(err)
                    yield Notice(self.path, "error", f"{self.path}: cannot open: {err}")
                return
            how = "not a regular file (a pipe or a terminal): read as it comes"
            yield Notice(self.path, "opened", f"{self.path}: {how}")
        if self.decoder.damaged:
            return
        try:
            data = os.read(self.fd, self.block_size)
        except BlockingIOError:
            return  # nothing written since the last poll
        except OSError as err:
            if str(err) != self.error:
                self.error = str(err)
                yield Notice(self.path, "error", f"{self.path}: cannot read: {err}; retrying")
            return
        if not data:  # the writer closed its end
            yield from _chunks(self.path, self.lines, self.decoder.flush(), self.block_size)
            block = self.lines.flush()
            if block is not None:
                yield Chunk(self.path, block)
            return
        self.busy = True
        start = self.offset
        self.offset += len(data)
        text = self.decoder.decode(data)
        if self.decoder.damaged:
            self.busy = False
            yield self.decoder.notice(self.path, start)
        yield from _chunks(self.path, self.lines, text, self.block_size)

    def is_open(self) -> bool:
        return self.fd is not None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
        self.fd = None


def _is_pipe(path: str) -> bool:
    if path == "-":
        return True
    try:
        mode = Path(path).stat().st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


def _follow_paths(patterns: Sequence[str]) -> tuple[set[str], list[str]]:
    """Paths to follow now, and the patterns that match nothing yet."""
    paths: set[str] = set()
    unmatched: list[str] = []
    for arg in patterns:
        p = Path(arg)
        if p.is_dir() or (glob.has_magic(arg) and not p.exists()):
            files = dir_files(p) if p.is_dir() else glob_files(arg)
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
    it sleeps `poll_s` only when no file has unread data. User errors become Notices. A
    compressed file (by its magic bytes) is decompressed as it grows; `-`, a FIFO or
    `<(...)` is read without seeking (_PipeWatch).
    """
    block_size = max(1, min(block_size, max_line))
    watches: dict[str, _Watch | _PipeWatch] = {}
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
                    watch = (
                        _PipeWatch(path, block_size, LineCutter(max_line))
                        if _is_pipe(path)
                        else _Watch(path, block_size, max_line, LineCutter(max_line))
                    )
                    watches[path] = watch
                yield from watch.poll(from_end=first and not from_start)
                busy = busy or watch.busy
                if not watch.is_open() and path not in paths:
                    del watches[path]  # matched a glob once; a new file there starts afresh
            first = False
            now = clock()
            yield Tick(now)
            if not busy:
                sleep(poll_s)
    finally:
        for watch in watches.values():
            watch.close()
