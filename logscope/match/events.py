"""Matched lines to events: signature fields, classification, torchrun's failure block per
stream, tracebacks per stream (a caught one ends in a warning), and the unrecognized error lines
kept for the incident of last resort."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

from ..model import SEVERITIES, Category, Event, Line, Severity
from .prefilter import Hit, Prefilter
from .signatures import Library, Signature
from .unrecognized import Clusters

_BLOCK_ENTRY = re.compile(r"^\[(\d+)\]:\s*$")
# Where a block read from the middle starts: its section headers, or an entry's first field as
# torchrun aligns it (`  time      : ...`).
_BLOCK_START = re.compile(
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
CUT_TRACEBACK = "a traceback whose exception the log does not show"
"""The message of a traceback kept as a failure of last resort (its exception never came)."""
UNRECOGNIZED = "unrecognized.error_line"
"""Synthetic signature id of an error-looking line that no signature knows: the
incident of last resort, so that a log with a plain failure is never called healthy."""
TRACEBACK_START = "python.traceback_start"
# Exceptions of a process told to stop (KeyboardInterrupt, torchrun's SignalException): no failure
_TOLD_TO_STOP = frozenset({"cancelled", "timelimit", "preemption", "process_killed"})
MAX_UNRECOGNIZED = 100
"""Unrecognized error lines kept as events (all are counted in the templates)."""
TRACEBACK_TEXT = "Traceback (most recent call last):"
# A traceback quotes each frame's source line under its `  File "...", line N, in f` line, indented
# by four spaces (CPython Lib/traceback.py, StackSummary.format): `    raise X(...)` there is the
# program's code, whatever its literal says. The exception line that follows is the message.
_RAISE_SOURCE = re.compile(r" {4,}raise\b")
OPENED_AT = "traceback_opened_at"
"""The field of an exception line without a prefix of its own that took the process of the
prefixed line opening its traceback: that line's number (Extractor._record_head)."""
CAUGHT_SPAN = 400
"""Lines from a caught traceback's opening line within which its exception line is looked for:
every rank's few frames may interleave (64 ranks x 5 lines); past it, the traceback was cut and
the stream's next exception is a new one. Within it, a chained `Traceback` line is part of the
caught one (`traceback.format_exc()` prints the chain)."""

# Exit codes of workers killed by a signal, as torchelastic reports them (negative signal), and
# the shell's 128 + signal.
EXIT_SIGNALS: Mapping[int, tuple[str, Category]] = MappingProxyType(
    {
        -9: ("SIGKILL", "process_killed"),
        -11: ("SIGSEGV", "segfault"),
        -7: ("SIGBUS", "segfault"),
        -8: ("SIGFPE", "segfault"),
        -4: ("SIGILL", "segfault"),
        -6: ("SIGABRT", "unknown"),
        -15: ("SIGTERM", "process_killed"),
        -2: ("SIGINT", "cancelled"),
        137: ("SIGKILL", "process_killed"),
        139: ("SIGSEGV", "segfault"),
        # a Windows process that died of an exception exits with its NTSTATUS (ntstatus.h), as
        # torchrun and mp.spawn report it there: the native crashes
        3221225477: ("STATUS_ACCESS_VIOLATION", "segfault"),
        3221225501: ("STATUS_ILLEGAL_INSTRUCTION", "segfault"),
        3221225620: ("STATUS_INTEGER_DIVIDE_BY_ZERO", "segfault"),
        3221225725: ("STATUS_STACK_OVERFLOW", "segfault"),
        3221226356: ("STATUS_HEAP_CORRUPTION", "segfault"),
        3221226505: ("STATUS_STACK_BUFFER_OVERRUN", "segfault"),
    }
)

MAX_SIGNAL = 64
"""Linux's highest signal number (SIGRTMAX): a shell's exit code 128 + N above it is no signal."""


def signal_exit(code: int) -> bool:
    """An exit code that says a signal ended the process: torchelastic's negative signal, or the
    shell's 128 + N for a signal N (above that the program chose the code: `exit(-6)` is 250)."""
    return code < 0 or 128 < code <= 128 + MAX_SIGNAL


def _chosen_exit(fields: Mapping[str, str]) -> bool:
    """A reported exit code the program chose: not 1 (Python's uncaught exception), not a
    signal's."""
    code = fields.get("exit_code", "")
    if not code.isdigit():
        return False
    n = int(code)
    return n not in (0, 1) and n not in EXIT_SIGNALS and not signal_exit(n)


_DATE_CMD = re.compile(
    r"(?P<rest>[A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d)"
    r"(?: [A-Z]{2,5}| [+-]\d{4})? (?P<year>\d{4})"
)
_TIME_FORMATS = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%d_%H:%M:%S", "%Y-%m-%d %H:%M:%S")

# Error-looking messages that are not errors of the job, so are never "unrecognized".
# (`warnings.warn(...)`: the source line the warnings module prints under a warning it shows)
_NOT_AN_ERROR = re.compile(
    r"^\s*(?:raise\b|warnings\.warn\(|File \"|\^+$|~+$|During handling of the above exception"
    r"|The above exception was the direct cause|frame #\d+: "
    r"|Exception raised from \S+ at .* \(most recent call first\):)|error_file:|errors\.html"
)
_LOOKS_LIKE_ERROR = re.compile(
    r"(?i)\b(?:error|exception|fatal|failed|failure|abort(?:ed)?|killed|panic|segmentation)\b"
    # a count of none is no failure (`failed=0`, `Failed: 0`, `error: 0`)
    r"(?!\s*[=:]\s*0\b)"
)
# A line its own logger marks as information, a debug note or a warning does not report a
# failure, whatever words it holds (`NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v7`).
_NOT_A_FAILURE_LEVEL = frozenset("IDVWTRS")
"""Levels below error: info, debug, verbose, warning; loguru's TRACE and SUCCESS, ParlAI's
REPORT and SUCCESS."""
_NOT_A_FAILURE = re.compile(
    r"^\s*(?:NCCL INFO|INFO\b|DEBUG\b|WARNING\b|\[?(?:INFO|DEBUG|WARNING)\]?[: ])"
    # a logger's level field after a time it was not decoded with (`%(asctime)s | %(levelname)s |`,
    # loguru's `| WARNING  |`, `|date|time| [WARNING]`): within the line's first 40 characters
    r"|^.{0,40}?(?:\|\s*(?:INFO|DEBUG|WARNING|WARN)\s*\||\[(?:INFO|DEBUG|WARNING|WARN)\])"
    # Python's warnings module: `file.py:12: UserWarning: message` (Lib/warnings.py,
    # _formatwarnmsg_impl: `f"{filename}:{lineno}: {category}: {message}"`); a warning raised as
    # an error under `-W error` is a traceback's exception line, without the `file:line: ` part
    r"|^\s*\S+:\d+: \w*Warning: "
    # Go loggers: logfmt's `level=info` (logrus: Kubernetes operators, containerd, Docker)
    r"|\blevel=(?:trace|debug|info|warn|warning)\b"
    # a client that says it will try again has not failed (`entering retry loop`, `retrying in 5 s`)
    r"|(?i:\bretry(?:ing)?\b|\bwill retry\b|\bretries left\b)"
)


def parse_time(value: str) -> datetime | None:
    """A time captured by a signature: ISO, torchrun's `2024-03-12_02:29:19`, or `date`'s."""
    m = _DATE_CMD.match(value)
    if m:
        # `date` prints a zone name (CET, UTC) that strptime cannot map; the clock is local
        value = f"{m['rest']} {m['year']}"
        try:
            return datetime.strptime(value, "%a %b %d %H:%M:%S %Y")
        except ValueError:
            return None
    for fmt in _TIME_FORMATS:
        try:
            return datetime.strptime(value[:19], fmt)
        except ValueError:
            continue
    return None


def looks_like_error(message: str) -> bool:
    return bool(_LOOKS_LIKE_ERROR.search(message)) and not _NOT_AN_ERROR.search(message)


def inert(line: Line) -> bool:
    """A decoded record without a match that the extractor and the engine would keep nothing
    of: no routing prefix, no time, no error words, not a ChildFailedError block's start."""
    return (
        line.host is None
        and line.rank is None
        and line.local_rank is None
        and line.task is None
        and line.time is None
        and not _BLOCK_START.match(line.text)
        and not looks_like_error(line.text)
    )


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
class Extractor:
    """Turns decoded candidate lines into events; keeps per-stream state across blocks."""

    library: Library
    unrecognized: Clusters = field(default_factory=Clusters)
    unrecognized_events: list[Event] = field(default_factory=list)
    """The first MAX_UNRECOGNIZED unrecognized error lines as events (UNRECOGNIZED), for the
    engine to use when no signature explains the failure."""
    _blocks: dict[tuple[str, int | None, str | None], _Block] = field(default_factory=dict)
    _tracebacks: dict[tuple[Any, ...], Event] = field(default_factory=dict)
    """Per stream, the start of a traceback whose exception line has not come yet."""
    _announced: dict[tuple[Any, ...], int] = field(default_factory=dict)
    """Per stream, the line number of a message its emitter logs with the traceback of an
    exception it caught (a signature's `traceback_follows`): the traceback that opens right
    after it is caught."""
    _caught: dict[tuple[Any, ...], bool] = field(default_factory=dict)
    """Streams whose open traceback was printed inside a message logged below error level
    (`Import of X failed with: Traceback ...`): the program caught its exception and went on.
    True where its emitter announced it (`traceback_follows`): what it ends with, even a fatal
    error's words, is the exception the program caught."""
    prefilter: Prefilter = field(init=False)

    def __post_init__(self) -> None:
        self.prefilter = Prefilter.for_library(self.library)

    def feed(self, line: Line, hit: Hit | None, seq: int = 0) -> list[Event]:
        """Events of one decoded line (none for most), given its best signature match; `seq`
        is the line's order key."""
        # a line that is not the open block's closes it, and is still a line of its own (a
        # traceback's exception after the `traceback :` field of a failure entry)
        out, consumed = self._block_line(line)
        if consumed:
            return out
        if hit is None and _BLOCK_START.match(line.text):
            # an excerpt of the block without its ChildFailedError header
            self._blocks[(line.path, line.task, line.host)] = _Block(last_lineno=line.lineno - 1)
            return out + self._block_line(line)[0]
        if hit is None:
            if looks_like_error(line.text):
                self.unrecognized.add(line)
                if (
                    len(self.unrecognized_events) < MAX_UNRECOGNIZED
                    and line.level not in _NOT_A_FAILURE_LEVEL
                    and not _NOT_A_FAILURE.search(line.text)
                ):
                    self.unrecognized_events.append(self._unrecognized(line, seq))
            return out
        sig, fields = hit
        if sig.kind == "failure" and _RAISE_SOURCE.match(line.text):
            return out
        category, severity = sig.category, sig.severity
        xid = fields.get("xid")
        if xid is not None and xid.isdigit() and int(xid) in self.library.xid:
            # NVIDIA's meaning of the code decides: Xid 13 is an application fault, 79 a dead GPU
            info = self.library.xid[int(xid)]
            category = info.get("category", category)
            severity = info.get("severity", severity)
            root = self.library.xid.get(int(fields.get("root_xid") or -1))
            if root is not None and SEVERITIES.index(
                root.get("severity", "info")
            ) < SEVERITIES.index(severity):
                # `caused by previous Xid 79`: the cleanup of a dead GPU says the GPU died
                category = root.get("category", category)
                severity = root.get("severity", severity)
        if line.level == "W" and sig.role == "symptom" and severity == "error":
            # the emitter's own logger calls it a warning (c10's `[W...]`, glog's `W1129`,
            # Python's `WARNING`): a peer's trouble it saw and went on from
            severity = "warning"
        if (
            sig.role == "summary"
            and "exit_code" not in fields
            and fields.get("signal", "").isdigit()
        ):
            # `exited on signal 9` is what torchrun and srun call exit code -9
            fields = {**fields, "exit_code": f"-{fields['signal']}"}
        if sig.role == "summary" and category == "python_exception" and _chosen_exit(fields):
            # Python exits 1 on an exception nobody caught; another code is the program's own
            # choice (`sys.exit(2)`, `exit(-6)` is 250), which says nothing of why
            category = "unknown"
        # a message logged below error level that carries a traceback, or a traceback whose
        # every line a logger prints at a level below error: the exception was caught
        announced = sig.id == TRACEBACK_START and self._announced_before(line)
        caught = (
            (
                sig.kind == "failure"
                and sig.id != TRACEBACK_START
                and severity in ("info", "warning")
                and TRACEBACK_TEXT in line.text
            )
            or (sig.id == TRACEBACK_START and line.level in _NOT_A_FAILURE_LEVEL)
            or announced
        )
        opens = sig.id == TRACEBACK_START or caught
        if sig.traceback_follows:
            self._announced[(line.path, *line.stream)] = line.lineno
        # the stream is looked at only while a traceback is open or starts: not per progress line
        tracking = bool(self._tracebacks) or opens
        stream = (line.path, *line.stream) if tracking else ()
        open_traceback = tracking and stream in self._tracebacks
        head = (
            self._record_head(line)
            if tracking and not open_traceback and not opens and not any(line.stream)
            else None
        )
        # only a warning, or a line that may end an open traceback, asks whether it was raised
        raised = (severity == "warning" or open_traceback or head is not None) and (
            self.library.raised(line.raw, line.text)
        )
        if head is not None and raised:
            # the end of a traceback its prefixed first line opened: that process's line
            line = replace(
                line,
                task=head.task,
                host=head.host,
                local_rank=head.local_rank,
                rank=head.rank,
                role=head.role,
            )
            fields = {**fields, OPENED_AT: str(head.lineno)}
            stream, open_traceback = (line.path, *line.stream), True
        if raised and severity == "warning" and category not in _TOLD_TO_STOP:
            # an exception that ended a traceback: the process died of it, even when its words
            # alone are only a hint (`Connection reset by peer`)
            severity = "error"
        if sig.classify:
            category, fields = self._classified(
                category, fields, fields.get("exception", ""), fields.get("message", "")
            )
        if (
            raised
            and (severity != "fatal" or self._caught.get(stream, False))
            and self._in_caught(stream, line)
        ):
            # the end of a traceback the program printed and went on
            severity, fields = "warning", {**fields, "caught": "true"}
        out.append(self._event(line, sig, fields, seq, category, severity))
        if sig.id == CHILD_FAILED:
            self._blocks[(line.path, line.task, line.host)] = _Block(last_lineno=line.lineno)
        if opens:
            if stream not in self._tracebacks:
                self._tracebacks[stream] = out[-1]
                if caught:
                    self._caught[stream] = announced
        elif open_traceback and (raised or sig.role == "cause" or severity in ("fatal", "error")):
            del self._tracebacks[stream]  # its exception (KeyboardInterrupt too) or a failure
            self._caught.pop(stream, None)
        return out

    def _announced_before(self, line: Line) -> bool:
        """A traceback that opens on the line after a message announcing it (`traceback_follows`)
        in the same stream."""
        if not self._announced:
            return False
        at = self._announced.pop((line.path, *line.stream), None)
        return at is not None and 0 < line.lineno - at <= 1

    def _record_head(self, line: Line) -> Line | None:
        """The prefixed line that opened the traceback `line`, which no prefix names, may end:
        a logger or print() prefixes the first line it writes only (`logger.exception` under a
        format that names the rank, ParlAI's `rank:  3 | `), so the frames and the exception
        under a prefixed `Traceback` line are that record's. The traceback nearest above it in
        its file, still open, when that one is prefixed (whether `line` ends it, an exception
        line, is the caller's test)."""
        open_here = [
            e.line
            for e in self._tracebacks.values()
            if e.line.path == line.path and 0 < line.lineno - e.line.lineno <= CAUGHT_SPAN
        ]
        if not open_here:
            return None
        head = max(open_here, key=lambda h: h.lineno)
        return head if any(head.stream) else None

    def _in_caught(self, stream: tuple[Any, ...], line: Line) -> bool:
        """The line may end a caught traceback open in its stream."""
        if stream not in self._caught:
            return False
        start = self._tracebacks[stream].line
        return start.path == line.path and line.lineno - start.lineno <= CAUGHT_SPAN

    def event_of(self, line: Line, hit: Hit, seq: int) -> Event:
        """The event of a line whose signature needs no state of the extractor (a progress
        line), as `feed` builds it."""
        sig, fields = hit
        return self._event(line, sig, fields, seq, sig.category, sig.severity)

    @staticmethod
    def _event(
        line: Line,
        sig: Signature,
        fields: dict[str, str],
        seq: int,
        category: Category | None,
        severity: Severity | None,
    ) -> Event:
        time = line.time
        exact = time is not None
        if "time" in fields:
            t = parse_time(fields["time"])
            if t is not None:
                time, exact = t, True
        return Event(
            seq=seq,
            signature=sig.id,
            kind=sig.kind,
            line=line,
            fields=fields,
            category=category,
            severity=severity,
            role=sig.role,
            time=time,
            time_exact=exact,
        )

    def interrupt(self, path: str, task: int | None, host: str | None) -> list[Event]:
        """A line of a stream that is no part of a torchrun failure block: a block open in
        that stream has ended (its events)."""
        key = (path, task, host)
        if key not in self._blocks:
            return []
        return self._close(key)

    def _classified(
        self, category: Category | None, fields: dict[str, str], exception: str, message: str
    ) -> tuple[Category | None, dict[str, str]]:
        """The category the classification rules give a catch-all line, and its fields with
        the rule that decided; the category as it was when no rule fits."""
        rule = self.library.classify(exception, message)
        if rule is None:
            return category, fields
        return rule.category, {**fields, "rule": rule.id}

    def _unrecognized(self, line: Line, seq: int) -> Event:
        category, fields = self._classified(
            "unknown", {"message": line.text.strip()}, "", line.text
        )
        return Event(
            seq=seq,
            signature=UNRECOGNIZED,
            kind="failure",
            line=line,
            fields=fields,
            category=category,
            severity="error",
            role="cause",
            time=line.time,
            time_exact=line.time is not None,
        )

    def _block_line(self, line: Line) -> tuple[list[Event], bool]:
        """The events a line of an open ChildFailedError block gives, and whether the line was
        the block's; a line that is not closes the block (its entries are the events)."""
        key = (line.path, line.task, line.host)
        blk = self._blocks.get(key)
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

    def _close(self, key: tuple[str, int | None, str | None]) -> list[Event]:
        blk = self._blocks.pop(key)
        events: list[Event] = []
        for i, entry in enumerate(blk.entries):
            if i in blk.exit_lines:
                events.append(self._entry_event(entry, blk.signal_lines.get(i, blk.exit_lines[i])))
            elif entry.get("section") == "root" and i in blk.rank_lines:
                # the root-cause entry names the first rank to fail even when the log stops
                # before its exit code
                events.append(self._entry_event(entry, blk.rank_lines[i]))
        return events

    def _entry_event(self, entry: dict[str, str], line: Line) -> Event:
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

    def finish(self) -> list[Event]:
        """Close blocks still open at the end of the input. A traceback whose exception never
        came (an excerpt cut, a process killed while it printed) is kept as an error line of
        last resort: a traceback is printed for an exception only."""
        out: list[Event] = []
        for key in list(self._blocks):
            out.extend(self._close(key))
        for stream, start in self._tracebacks.items():
            if stream in self._caught:
                continue  # printed by a program that went on: no failure of last resort
            self.unrecognized_events.append(
                replace(
                    start,
                    signature=UNRECOGNIZED,
                    fields={"message": CUT_TRACEBACK},
                    category="python_exception",
                    severity="error",
                    role="cause",
                )
            )
        self._tracebacks.clear()
        self._caught.clear()
        self._announced.clear()
        return out
