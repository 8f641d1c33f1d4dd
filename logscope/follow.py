"""`tail -F` by polling stat(), for `logscope tail`: growing, rotated, truncated and compressed
files cut into numbered lines as they grow."""

from __future__ import annotations

import glob
import math
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .sources import BLOCK_SIZE, MAX_LINE, Block, LineCutter, dir_files, glob_files

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
        self.lines = LineCutter(self.max_line)
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
        self.lines = LineCutter(self.max_line, lineno=self.counted + 1)
        if line_start < self.count_to:
            # a partial last line was there: wait for its end and emit it whole, unless it is
            # already too long to hold
            if self.count_to - line_start <= self.max_line:
                self.offset = line_start
            else:
                self.lines = LineCutter(self.max_line, lineno=self.counted + 2, skipping=True)
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
                    watch = _Watch(path, block_size, max_line, LineCutter(max_line))
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
