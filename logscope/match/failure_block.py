"""torchrun's failure block (`ChildFailedError`, FORMATS.md §3.1), read per stream: its `Root
Cause` and `Failures` sections, each entry's fields, one event an entry, anchored at the physical
line that says how the worker ended."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ..model import Category, Event, Line
from .exit_codes import EXIT_SIGNALS
from .field_times import parse_time

_BLOCK_ENTRY = re.compile(r"^\[(\d+)\]:\s*$")
# Where a block read from the middle starts: its section headers, or an entry's first field as
# torchrun aligns it (`  time      : ...`).
BLOCK_START = re.compile(
    r"^(?:Root Cause \(first observed failure\):|Failures:|\s+(?:time|host|rank|exitcode) {2,}: )"
)
_BLOCK_FIELD = re.compile(r"^\s+(time|host|rank|exitcode|error_file|traceback|msg)\s*:\s?(.*)$")
_BLOCK_RANK = re.compile(r"(-?\d+)(?: \(local_rank: (\d+)\))?")
_BLOCK_EXIT = re.compile(r"(-?\d+)(?: \(pid: (\d+)\))?(?:\s+\((SIG\w+)\))?")
_BLOCK_SIGNAL = re.compile(r"Signal (\d+) \((SIG\w+)\) received by PID (\d+)")

CHILD_FAILED = "torchrun.child_failed"
"""The signature of torchrun's `ChildFailedError` line, which heads its failure block."""
FAILURE_ENTRY = "torchrun.failure_entry"
"""Synthetic signature id of one entry of a ChildFailedError block."""

_Key = tuple[str, int | None, str | None]
"""A stream: its file, srun task and host."""


@dataclass(slots=True)
class _Block:
    section: str = ""
    entries: list[dict[str, str]] = field(default_factory=list)
    current: dict[str, str] | None = None
    exit_lines: dict[int, Line] = field(default_factory=dict)
    """The physical `exitcode :` line of each entry, by the entry's position."""
    signal_lines: dict[int, Line] = field(default_factory=dict)
    """The physical `traceback : Signal N (SIGX) received by PID P` line of an entry that has one:
    what happened to the worker, said in words (its exit code says it as a number)."""
    rank_lines: dict[int, Line] = field(default_factory=dict)
    """The physical `rank :` line of each entry: the anchor of a root-cause entry cut before its
    exit code (the log ends inside the block)."""
    last_lineno: int = 0


@dataclass(slots=True)
class FailureBlocks:
    """The blocks open per stream."""

    _open: dict[_Key, _Block] = field(default_factory=dict)

    def start(self, line: Line, last_lineno: int) -> None:
        """A block opens in the line's stream (its header, or an excerpt's first field line:
        `last_lineno` is the line before it)."""
        self._open[(line.path, line.task, line.host)] = _Block(last_lineno=last_lineno)

    def interrupt(self, path: str, task: int | None, host: str | None) -> list[Event]:
        """A line of a stream that is no part of a torchrun failure block: a block open in
        that stream has ended (its events)."""
        key = (path, task, host)
        if key not in self._open:
            return []
        return self._close(key)

    def line(self, line: Line) -> tuple[list[Event], bool]:
        """The events a line of an open ChildFailedError block gives, and whether the line was
        the block's; a line that is not closes the block (its entries are the events)."""
        key = (line.path, line.task, line.host)
        blk = self._open.get(key)
        if blk is None:
            return [], False
        if line.lineno - blk.last_lineno > 4:
            # the block's lines are consecutive; a gap means it ended without its border
            return self._close(key), False
        text = line.text
        blk.last_lineno = line.lineno
        if text.startswith("Root Cause"):
            blk.section = "root"
            return [], True
        if text.startswith(("Failures:", "Other Failures:")):
            blk.section = "other"
            return [], True
        m = _BLOCK_ENTRY.match(text)
        if m:
            blk.current = {"index": m.group(1), "section": blk.section}
            blk.entries.append(blk.current)
            return [], True
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
            elif m.group(1) == "rank":
                blk.rank_lines[len(blk.entries) - 1] = line
            elif m.group(1) == "traceback" and _BLOCK_SIGNAL.search(m.group(2)):
                blk.signal_lines[len(blk.entries) - 1] = line
            return [], True
        if text.startswith("=====") and blk.section == "root" and blk.current is not None:
            return self._close(key), True
        if (
            text.lstrip().startswith(("-----", "=====", "<NO_OTHER_FAILURES>"))
            or text.endswith(" FAILED")
            or not text.strip()
        ):
            return [], True
        return self._close(key), False

    def _close(self, key: _Key) -> list[Event]:
        blk = self._open.pop(key)
        events: list[Event] = []
        for i, entry in enumerate(blk.entries):
            if i in blk.exit_lines:
                events.append(_entry_event(entry, blk.signal_lines.get(i, blk.exit_lines[i])))
            elif entry.get("section") == "root" and i in blk.rank_lines:
                # the root-cause entry names the first rank to fail even when the log stops
                # before its exit code
                events.append(_entry_event(entry, blk.rank_lines[i]))
        return events

    def close_all(self) -> list[Event]:
        """The events of the blocks still open at the end of the input."""
        out: list[Event] = []
        for key in list(self._open):
            out.extend(self._close(key))
        return out


def _entry_event(entry: dict[str, str], line: Line) -> Event:
    """One failure of the block, anchored at its physical `traceback : Signal N` line, else
    at its `exitcode :` line, else (a root-cause entry cut short) at its `rank :` line."""
    fields: dict[str, str] = {"root": "1" if entry.get("section") == "root" else "0"}
    m = _BLOCK_RANK.match(entry.get("rank", ""))
    if m:
        fields["rank"] = m.group(1)
        if m.group(2):
            fields["local_rank"] = m.group(2)
    m = _BLOCK_EXIT.match(entry.get("exitcode", ""))
    # an entry cut before its exit code does not say how the worker ended
    category: Category = "process_killed" if "exitcode" in entry else "unknown"
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
