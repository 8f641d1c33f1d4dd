"""Which inputs are dumps, by their content alone (never their name): a Flight Recorder trace
pickled (protocol 2+ opens with 0x80 and holds the `entries` key) or in JSON (an object with an
`entries` list and torch's entry keys), `py-spy dump` text (`Process N: ...`, then `Python v...`
or `Thread N (...)`), a copy of /proc/<pid>/status (`Name:`, `State:`, `Pid:` lines)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..read.sources import rereadable
from .flight_recorder import RankTrace, read_trace
from .pyspy import ProcessStack, ProcStatus, read_proc_status, read_pyspy

DumpKind = Literal["flight_recorder", "pyspy", "proc_status"]

HEAD_BYTES = 1 << 16
MAX_DUMP_BYTES = 1 << 30
"""A larger file is no dump worth reading whole (a Flight Recorder ring of 20000 entries with
frames is ~50 MB)."""

_PYSPY = re.compile(
    rb"^(?:[^\n]*\n){0,40}?Process \d+: [^\n]*\n(?:Python v\d|\s*\nThread |Thread )", re.M
)
_STATUS = (
    re.compile(rb"^Name:\t", re.M),
    re.compile(rb"^State:\t[A-Za-z] ", re.M),
    re.compile(rb"^Pid:\t\d+", re.M),
)
_FR_KEYS = (b'"profiling_name"', b'"collective_seq_id"', b'"pg_config"', b'"version"')


def kind_of(head: bytes) -> DumpKind | None:
    """The kind of dump a file's first bytes show, or None for anything else (a log)."""
    if (
        head[:1] == b"\x80"
        and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05")
        and b"entries" in head
    ):
        return "flight_recorder"
    stripped = head.lstrip()
    if stripped[:1] == b"{" and b'"entries"' in head and any(k in head for k in _FR_KEYS):
        return "flight_recorder"
    if _PYSPY.match(head):
        return "pyspy"
    if all(p.search(head[:4096]) for p in _STATUS):
        return "proc_status"
    return None


@dataclass(frozen=True, slots=True)
class DumpSet:
    """The dumps among the inputs, read."""

    files: tuple[str, ...]
    traces: tuple[RankTrace, ...]
    stacks: tuple[ProcessStack, ...]
    statuses: tuple[ProcStatus, ...]
    warnings: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.files


def sniff(path: str) -> DumpKind | None:
    """The kind of a regular file's dump; None for anything else, and never a read of stdin,
    a pipe or device (what it gives is gone for the log reader after)."""
    if not rereadable(path):
        return None
    try:
        with Path(path).open("rb") as f:
            return kind_of(f.read(HEAD_BYTES))
    except OSError:
        return None  # the log reader explains


def read_dumps(files: Sequence[tuple[str, DumpKind]]) -> DumpSet:
    traces: list[RankTrace] = []
    stacks: list[ProcessStack] = []
    statuses: list[ProcStatus] = []
    warnings: list[str] = []
    for path, kind in files:
        try:
            size = Path(path).stat().st_size
            if size > MAX_DUMP_BYTES:
                warnings.append(f"{path}: {size} bytes: too large for a dump, left out")
                continue
            data = Path(path).read_bytes()
        except OSError as err:
            warnings.append(f"{path}: cannot read: {err.strerror or err}")
            continue
        if kind == "flight_recorder":
            trace, notes = read_trace(path, data)
            warnings.extend(notes)
            if trace is not None:
                traces.append(trace)
        elif kind == "pyspy":
            found, notes = read_pyspy(path, data.decode("utf-8", "replace"))
            stacks.extend(found)
            warnings.extend(notes)
        else:
            status = read_proc_status(path, data.decode("utf-8", "replace"))
            if status is not None:
                statuses.append(status)
    return DumpSet(
        tuple(p for p, _ in files), tuple(traces), tuple(stacks), tuple(statuses), tuple(warnings)
    )


__all__ = ["DumpKind", "DumpSet", "kind_of", "read_dumps", "sniff"]
