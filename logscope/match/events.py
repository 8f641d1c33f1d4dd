"""Matched lines to events: signature fields, classification, torchrun's failure block per
stream (read by match.failure_block), tracebacks per stream (a caught one ends in a warning), and
the unrecognized error lines kept for the incident of last resort."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..model import SEVERITIES, Category, Event, Line, Severity
from .exit_codes import chosen_exit
from .failure_block import BLOCK_START, CHILD_FAILED, FailureBlocks
from .field_times import parse_time
from .prefilter import Hit, Prefilter
from .signatures import Library, Signature
from .unrecognized import Clusters

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
FATAL_LEVEL = "F"
"""A record its logger marks FATAL (glog's `F0801 ...] `, c10's `[F...]`), whatever its words: glog
aborts the process after it (LOG(FATAL)), so it is an error line even with no error word."""
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
    # a component's tag (a name, not a time), then the level its logger states in words and a
    # colon (`[Auto Resume] Info: `, `[dataloader] WARNING: `)
    r"|^\s*\[[A-Za-z][^\]]{0,39}\]:? +(?:INFO|Info|DEBUG|Debug|WARNING|Warning|WARN|Warn): "
    # Python's warnings module: `file.py:12: UserWarning: message` (Lib/warnings.py,
    # _formatwarnmsg_impl: `f"{filename}:{lineno}: {category}: {message}"`); a warning raised as
    # an error under `-W error` is a traceback's exception line, without the `file:line: ` part
    r"|^\s*\S+:\d+: \w*Warning: "
    # Go loggers: logfmt's `level=info` (logrus: Kubernetes operators, containerd, Docker)
    r"|\blevel=(?:trace|debug|info|warn|warning)\b"
    # a client that says it will try again has not failed (`entering retry loop`, `retrying in 5 s`)
    r"|(?i:\bretry(?:ing)?\b|\bwill retry\b|\bretries left\b)"
)


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
        and not BLOCK_START.match(line.text)
        and not looks_like_error(line.text)
    )


@dataclass(slots=True)
class Extractor:
    """Turns decoded candidate lines into events; keeps per-stream state across blocks."""

    library: Library
    unrecognized: Clusters = field(default_factory=Clusters)
    unrecognized_events: list[Event] = field(default_factory=list)
    """The first MAX_UNRECOGNIZED unrecognized error lines as events (UNRECOGNIZED), for the
    engine to use when no signature explains the failure."""
    _blocks: FailureBlocks = field(default_factory=FailureBlocks)
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
        out, consumed = self._blocks.line(line)
        if consumed:
            return out
        if hit is None and BLOCK_START.match(line.text):
            # an excerpt of the block without its ChildFailedError header
            self._blocks.start(line, line.lineno - 1)
            return out + self._blocks.line(line)[0]
        if hit is None:
            if looks_like_error(line.text) or line.level == FATAL_LEVEL:
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
        if sig.role == "summary" and category == "python_exception" and chosen_exit(fields):
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
            self._blocks.start(line, line.lineno)
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
        return self._blocks.interrupt(path, task, host)

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

    def finish(self) -> list[Event]:
        """Close blocks still open at the end of the input. A traceback whose exception never
        came (an excerpt cut, a process killed while it printed) is kept as an error line of
        last resort: a traceback is printed for an exception only."""
        out = self._blocks.close_all()
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
