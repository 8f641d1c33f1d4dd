"""Signatures, classification rules and the library they form: its trigger index, and
messages matched against it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypedDict, TypeVar

import regex

from ..model import Category, Kind, Role, Severity
from .regexes import Regex

_T = TypeVar("_T")


# Words that make a line look like an error even when no signature knows it: such lines are
# kept and grouped into templates, so a novel failure is never invisible.
GENERIC_TRIGGERS = (
    "Error",
    "ERROR",
    "error:",
    "Exception",
    "FATAL",
    "Fatal",
    "fatal:",
    "Traceback",
    "failed",
    "Failed",
    "FAILED",
    "Aborted",
    "Killed",
    "panic",
)


@dataclass(frozen=True, slots=True)
class Signature:
    id: str
    kind: Kind
    trigger: tuple[str, ...]
    regex: Regex
    title: str
    samples: tuple[str, ...]
    counter_samples: tuple[str, ...] = ()
    category: Category | None = None
    severity: Severity | None = None
    role: Role | None = None
    priority: int = 0
    explanation: str = ""
    remedy: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    source: str = ""
    """The file it was loaded from."""
    classify: bool = False
    """A catch-all (an exception line, an unrecognized error line): the library's classification
    rules decide its category from its `exception` and `message` fields."""
    reason_follows: bool = False
    """A result code whose reason the same process states a few lines later (NCCL >= 2.19 appends
    `Last error:` and the WARN text that set it): the incident takes that line's category."""
    reason_precedes: bool = False
    """A failure report whose specific reason the same process printed just before it as a
    warning (NCCL's proxy service loop, after the WARN of the call that failed): that warning is
    the root, the report the way the process took it."""
    primary_rank_only: bool = False
    """Its emitter prints it from the primary rank only (detectron2's console logger, which
    other ranks do not attach): with no prefix naming a rank, the process that printed it is
    rank 0."""
    own_log_file: bool = False
    """Its emitter writes it, with the `rank` it names, into that rank's own log file only
    (detectron2's setup_logger: a rank above 0 logs to `log.txt.rank<N>` and to no console): a
    file where it names one rank above 0 is that rank's log, and its unprefixed lines are too."""
    every_rank_alike: bool = False
    """A failure of a state every rank shares and meets at the same step (the fp16 grad scaler's
    collapse under DDP's synchronized gradients): the rank that logs it first is no culprit."""
    traceback_follows: bool = False
    """Its emitter logs it with the traceback of an exception it caught and went on from
    (Python's `logger.exception`): the traceback that opens next in the same stream is no
    failure of its own."""
    after_own_failure: bool = False
    """A failure a rank reports as the consequence of its own failed or timed-out collective,
    when it reported one first (the heartbeat monitor's stuck watchdog: the communicator abort
    after a timeout hung); on a rank that reported none, a cause."""
    settles_preceding: bool = False
    """Its emitter prints it after handling the failure the same thread reported just before
    (NCCL's proxy service thread: `Accept failed` after the socket error of one incoming
    connection's handshake, which it drops before serving the next): that failure is no
    incident."""
    saved_before_next_step: bool = False
    """A checkpoint notice logged before a synchronous write (HF Trainer's, OpenMMLab's): the
    training loop's next step shows the checkpoint was written (their emitters say nothing
    after it)."""
    columns: tuple[Regex, ...] = ()
    """Optional fields of a line `regex` matched, each searched on its own in the message: a
    progress line's loss, grad norm, batch size (see logscope.scan.bulk_progress)."""

    def match(self, message: str) -> dict[str, str] | None:
        """The fields of a message the regex matches: its groups, then each column's groups
        it has not (None if the regex does not match)."""
        m = self.regex.search(message)
        if m is None:
            return None
        fields = {k: v for k, v in m.groupdict().items() if v is not None}
        for column in self.columns:
            c = column.search(message)
            if c is not None:
                for k, v in c.groupdict().items():
                    if v is not None:
                        fields.setdefault(k, v)
        return fields

    def spans(self, message: str) -> tuple[int, dict[str, tuple[int, int]]] | None:
        """`match` as places: where the regex match starts, and each field's span."""
        m = self.regex.search(message)
        if m is None:
            return None
        out = {k: m.span(k) for k in self.regex.groupindex if m.group(k) is not None}
        for column in self.columns:
            c = column.search(message)
            if c is not None:
                for k in column.groupindex:
                    if k not in out and c.group(k) is not None:
                        out[k] = c.span(k)
        return m.start(), out


_BLANK_DIGITS = bytes.maketrans(b"0123456789", b"\0" * 10)
_SHAPE_CACHE_SIZE = 4096
_SHAPE_MAX_LEN = 2048


@dataclass(frozen=True, slots=True)
class TriggerIndex:
    """Which signatures a line can match, from one scan for all triggers.

    Most candidate lines of a large log share a few shapes (progress lines differing only in
    their numbers), so the scan's answer is cached by the line's UTF-8 bytes with every digit
    blanked out. That is exact for triggers without digits, which is all but a few; those few
    are searched for in the line itself when its shape holds their shape.
    """

    triggers: tuple[bytes, ...]
    by_trigger: dict[bytes, tuple[int, ...]]
    numeric: tuple[bytes, ...]
    _by_shape: dict[bytes, tuple[tuple[int, ...], tuple[bytes, ...]]] = field(
        default_factory=dict, compare=False
    )
    _last_long: list[tuple[str, tuple[int, ...]]] = field(default_factory=list, compare=False)
    """The last long line's answer: the records a line's `\r` states make share its raw text
    (a progress bar redrawn thousands of times on one physical line), which is scanned once."""

    @classmethod
    def build(cls, trigger_sets: Sequence[Sequence[str]]) -> TriggerIndex:
        """The index of sets of triggers (a signature's each): `candidates` gives their
        positions."""
        triggers = sorted({t.encode() for ts in trigger_sets for t in ts}, key=len, reverse=True)
        by_trigger: dict[bytes, list[int]] = {t: [] for t in triggers}
        for i, ts in enumerate(trigger_sets):
            for t in ts:
                by_trigger[t.encode()].append(i)
        numeric = tuple(t for t in triggers if t.translate(_BLANK_DIGITS) != t)
        plain = tuple(t for t in triggers if t not in numeric)
        return cls(plain, {t: tuple(v) for t, v in by_trigger.items()}, numeric)

    def candidates(self, raw: str) -> tuple[int, ...]:
        """Indexes of the signatures whose trigger the line holds, ascending."""
        long = len(raw) > _SHAPE_MAX_LEN
        if long and self._last_long and self._last_long[0][0] is raw:
            return self._last_long[0][1]
        # UTF-8 keeps substrings: a trigger is in the text iff its bytes are in the text's bytes
        found = self.candidates_in(raw.encode("utf-8", "surrogatepass"))
        if long:
            self._last_long[:] = [(raw, found)]
        return found

    def candidates_in(self, data: bytes, shape: bytes | None = None) -> tuple[int, ...]:
        """`candidates` of a line's UTF-8 bytes (`shape`: the bytes with their digits made
        NUL, when the caller has them)."""
        if len(data) > _SHAPE_MAX_LEN:
            found, numeric = self._states(data.translate(_BLANK_DIGITS) if shape is None else shape)
        else:
            # blanking digits keeps every digit-free trigger's occurrences, and makes none; a
            # trigger with digits can be in the line only if its blanked form is in the shape
            shape = data.translate(_BLANK_DIGITS) if shape is None else shape
            found, numeric = self._shaped(shape)
        if numeric and any(t in data for t in numeric):
            found = tuple(sorted({*found, *self._scan(data, numeric)}))
        return found

    def of_shape(self, shape: bytes) -> tuple[int, ...] | None:
        """`candidates` of every line of a shape (its digits NUL); None when they depend on
        the digits (a trigger with digits may be in such a line) or the shape is too long to
        be cached."""
        if len(shape) > _SHAPE_MAX_LEN:
            return None
        found, numeric = self._shaped(shape)
        return None if numeric else found

    def _shaped(self, shape: bytes) -> tuple[tuple[int, ...], tuple[bytes, ...]]:
        """The signatures whose digit-free triggers a shape holds, and the triggers with
        digits whose shape it holds (those must be looked for in the line itself)."""
        cached = self._by_shape.get(shape)
        if cached is None:
            if len(self._by_shape) >= _SHAPE_CACHE_SIZE:
                self._by_shape.clear()
            cached = self._by_shape[shape] = (self._scan(shape, self.triggers), self._maybe(shape))
        return cached

    def _maybe(self, shape: bytes) -> tuple[bytes, ...]:
        """The triggers with digits whose shape a shape holds (each may be in the line)."""
        return tuple(t for t in self.numeric if t.translate(_BLANK_DIGITS) in shape)

    def _states(self, shape: bytes) -> tuple[tuple[int, ...], tuple[bytes, ...]]:
        """`_shaped` of a long line's shape, state by state: a progress bar redrawn with `\\r`
        thousands of times repeats a few shapes, each looked up once (no trigger holds `\\r`)."""
        found: set[int] = set()
        numeric: set[bytes] = set()
        for part in set(shape.split(b"\r")):
            some, maybe = (
                (self._scan(part, self.triggers), self._maybe(part))
                if len(part) > _SHAPE_MAX_LEN
                else self._shaped(part)
            )
            found.update(some)
            numeric.update(maybe)
        return tuple(sorted(found)), tuple(numeric)

    def _scan(self, data: bytes, triggers: tuple[bytes, ...]) -> tuple[int, ...]:
        # one C-level substring search per distinct trigger beats a regex alternation here:
        # `regex`'s overlapped scan tries every alternative at every position
        found: set[int] = set()
        for t in [t for t in triggers if t in data]:
            found.update(self.by_trigger[t])
        return tuple(sorted(found))


@dataclass(frozen=True, slots=True)
class Rule:
    """A classification rule: an exception type and/or message that says which category a
    generic error line belongs to (`OSError` → io_error, `NCCL` in the message → comm_error)."""

    id: str
    category: Category
    exception: regex.Pattern[str] | None
    """Searched in the exception's dotted name; None: any."""
    message: regex.Pattern[str] | None
    """Searched in the message; None: any."""
    samples: tuple[str, ...]
    """Full lines that a classifying signature matches and this rule must decide."""
    source: str = ""

    def applies(self, exception: str, message: str) -> bool:
        if self.exception is not None and not self.exception.search(exception):
            return False
        return self.message is None or bool(self.message.search(message))


@dataclass(frozen=True, slots=True)
class FindingText:
    """What a configuration finding says: its explanation and remedies, and the
    signatures whose lines are its evidence (their samples are its tested lines)."""

    id: str
    title: str
    explanation: str
    remedies: tuple[str, ...]
    references: tuple[str, ...]
    evidence: tuple[str, ...]
    source: str = ""


class Xid(TypedDict, total=False):
    """An `[xid.<code>]` table: NVIDIA's meaning of an Xid code."""

    title: str
    category: Category
    severity: Severity


@dataclass(frozen=True, slots=True)
class Library:
    signatures: tuple[Signature, ...]
    xid: dict[int, Xid] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    """Classification rules, first match wins."""
    findings: dict[str, FindingText] = field(default_factory=dict)
    """Configuration findings' texts by id."""
    _index: TriggerIndex = field(init=False, compare=False, repr=False)
    _by_id: dict[str, Signature] = field(init=False, compare=False, repr=False)
    _derived: dict[str, Any] = field(init=False, compare=False, repr=False)
    """What later stages work out from the library, once per library object (`derived`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", TriggerIndex.build([s.trigger for s in self.signatures]))
        object.__setattr__(self, "_by_id", {s.id: s for s in self.signatures})
        object.__setattr__(self, "_derived", {})

    def __getstate__(self) -> tuple[Any, ...]:
        """Pickled without what was derived from it: a worker works that out again."""
        return tuple(getattr(self, f.name) for f in fields(self) if f.name != "_derived")

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        names = [f.name for f in fields(self) if f.name != "_derived"]
        for name, value in zip(names, state, strict=True):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_derived", {})

    def derived(self, key: str, make: Callable[[], _T]) -> _T:
        """The value `make` works out from this library, made once per library object and
        `key` (a later stage's plan of how to read with it)."""
        if key not in self._derived:
            self._derived[key] = make()
        value: _T = self._derived[key]
        return value

    def by_id(self, sig_id: str) -> Signature | None:
        # the incident rules ask once per event (is it a catch-all?): a dict, not a scan
        return self._by_id.get(sig_id)

    @property
    def triggers(self) -> tuple[str, ...]:
        out: dict[str, None] = {}
        for s in self.signatures:
            for t in s.trigger:
                out[t] = None
        for t in GENERIC_TRIGGERS:
            out[t] = None
        return tuple(out)

    def raised(self, raw: str, message: str) -> bool:
        """Whether a catch-all for raised exceptions (a `classify` signature) matches the line:
        the last line of a traceback, an uncaught C++ exception."""
        return any(
            s.classify and s.match(message) is not None
            for i in self._index.candidates(raw)
            if (s := self.signatures[i]).kind == "failure"
        )

    def classify(self, exception: str, message: str) -> Rule | None:
        """The first rule that fits an error line's exception type and message."""
        for rule in self.rules:
            if rule.applies(exception, message):
                return rule
        return None

    def match(self, raw: str, message: str) -> tuple[Signature, dict[str, str]] | None:
        """The best signature for a line: triggers checked on the raw line, regex on the message."""
        best: tuple[Signature, dict[str, str]] | None = None
        for i in self._index.candidates(raw):
            s = self.signatures[i]
            if best is not None and s.priority <= best[0].priority:
                continue
            fields = s.match(message)
            if fields is not None:
                best = (s, fields)
        return best


def classified(library: Library, raw: str, message: str) -> tuple[str, str] | None:
    """The (exception, message) a classification rule sees for a line: the fields of a
    classifying signature's match, the whole message of an unrecognized line, None for a line
    that a signature of its own decides."""
    hit = library.match(raw, message)
    if hit is None:
        return "", message
    if hit[0].classify:
        return hit[1].get("exception", ""), hit[1].get("message", "")
    return None
