"""The signature library: load and validate `patterns/*.toml`, match messages, check samples."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypedDict, TypeVar

import regex

from ..errors import PatternError
from ..model import CATEGORIES, KINDS, ROLES, SEVERITIES, Category, Kind, Role, Severity
from .regexes import Regex

_T = TypeVar("_T")
_V = TypeVar("_V", bound=str)

_REQUIRED = ("id", "trigger", "regex", "title", "samples")
_FAILURE_REQUIRED = ("category", "severity", "role", "explanation")
_KNOWN = frozenset(
    {
        *_REQUIRED,
        *_FAILURE_REQUIRED,
        "kind",
        "priority",
        "remedy",
        "references",
        "counter_samples",
        "classify",
        "columns",
    }
)
_RULE_KNOWN = frozenset({"id", "category", "exception", "message", "samples"})
_FINDING_KNOWN = frozenset({"id", "title", "explanation", "remedy", "references", "evidence"})
_ID = re.compile(r"[a-z0-9_]+(\.[a-z0-9_]+)+")

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
        # UTF-8 keeps substrings: a trigger is in the text iff its bytes are in the text's bytes
        return self.candidates_in(raw.encode("utf-8", "surrogatepass"))

    def candidates_in(self, data: bytes, shape: bytes | None = None) -> tuple[int, ...]:
        """`candidates` of a line's UTF-8 bytes (`shape`: the bytes with their digits made
        NUL, when the caller has them)."""
        if len(data) > _SHAPE_MAX_LEN:
            found, numeric = self._scan(data, self.triggers), self.numeric
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
            maybe = tuple(t for t in self.numeric if t.translate(_BLANK_DIGITS) in shape)
            cached = self._by_shape[shape] = (self._scan(shape, self.triggers), maybe)
        return cached

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


def builtin_dirs() -> list[Path]:
    """Where the built-in library lives: `patterns/` in a checkout, `_patterns` in a wheel."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package.parent / "patterns", package / "_patterns"):
        if candidate.is_dir() and any(candidate.glob("*.toml")):
            return [candidate]
    return []


def _as_list(value: Any, path: str, sig: str, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PatternError(path, f"{name}: must be a list of strings", sig)
    return tuple(value)


def _checked_id(
    entry: dict[str, Any],
    path: str,
    where: str,
    required: tuple[str, ...],
    known: frozenset[str],
) -> str:
    """The entry's id, after checking it has its required fields and no unknown one."""
    entry_id = entry.get("id")
    where = entry_id if isinstance(entry_id, str) else where
    for name in required:
        if name not in entry:
            raise PatternError(path, f"missing field {name!r}", where)
    if not isinstance(entry_id, str) or not _ID.fullmatch(entry_id):
        raise PatternError(path, "id: must look like topic.name (lower case)", where)
    unknown = sorted(set(entry) - known)
    if unknown:
        raise PatternError(path, f"unknown field {unknown[0]!r}", where)
    return entry_id


def _signature(entry: dict[str, Any], path: str, index: int, builtin: bool) -> Signature:
    sig_id = where = _checked_id(entry, path, f"signature[{index}]", _REQUIRED, _KNOWN)
    kind = _one_of(entry.get("kind", "failure"), KINDS, path, "kind", where)
    if kind == "failure":
        for name in _FAILURE_REQUIRED:
            if name not in entry:
                raise PatternError(path, f"missing field {name!r} (required for failures)", where)
    category = _optional(entry, "category", CATEGORIES, path, where)
    severity = _optional(entry, "severity", SEVERITIES, path, where)
    role = _optional(entry, "role", ROLES, path, where)
    if not isinstance(entry["regex"], str):
        raise PatternError(path, "regex: does not compile: it must be a string", where)
    compiled = Regex(entry["regex"])
    if not builtin:  # a user's: a broken one is reported now (the suite checks the built-ins)
        try:
            compiled = Regex(compiled.pattern, regex.compile(compiled.pattern))
        except regex.error as err:
            raise PatternError(path, f"regex: does not compile: {err}", where) from None
    columns = [Regex(text) for text in _as_list(entry.get("columns"), path, where, "columns")]
    for i, column in enumerate(columns if not builtin else ()):
        try:
            named = bool(column.groupindex)
        except regex.error as err:
            raise PatternError(path, f"columns[{i}]: does not compile: {err}", where) from None
        if not named:
            raise PatternError(path, f"columns[{i}]: needs a named group", where)
    triggers = _as_list(entry["trigger"], path, where, "trigger")
    if not triggers or not all(triggers):
        raise PatternError(path, "trigger: needs at least one non-empty string", where)
    samples = _as_list(entry["samples"], path, where, "samples")
    if not samples:
        raise PatternError(path, "samples: needs at least one sample line", where)
    priority = entry.get("priority", 0)
    if not isinstance(priority, int):
        raise PatternError(path, "priority: must be an integer", where)
    classify = entry.get("classify", False)
    if not isinstance(classify, bool):
        raise PatternError(path, "classify: must be true or false", where)
    return Signature(
        id=sig_id,
        kind=kind,
        trigger=triggers,
        regex=compiled,
        title=str(entry["title"]),
        samples=samples,
        counter_samples=_as_list(entry.get("counter_samples"), path, where, "counter_samples"),
        category=category,
        severity=severity,
        role=role,
        priority=priority,
        explanation=str(entry.get("explanation", "")),
        remedy=_as_list(entry.get("remedy"), path, where, "remedy"),
        references=_as_list(entry.get("references"), path, where, "references"),
        source=path,
        classify=classify,
        columns=tuple(columns),
    )


def _optional_regex(entry: dict[str, Any], name: str, path: str, where: str) -> Any:
    value = entry.get(name)
    if value is None:
        return None
    try:
        return regex.compile(value)
    except (regex.error, TypeError) as err:
        raise PatternError(path, f"{name}: does not compile: {err}", where) from None


def _rule(entry: dict[str, Any], path: str, index: int) -> Rule:
    rule_id = where = _checked_id(
        entry, path, f"classify[{index}]", ("id", "category", "samples"), _RULE_KNOWN
    )
    category = _one_of(entry["category"], CATEGORIES, path, "category", where)
    exception = _optional_regex(entry, "exception", path, where)
    message = _optional_regex(entry, "message", path, where)
    if exception is None and message is None:
        raise PatternError(path, "needs an 'exception' or a 'message' regex", where)
    samples = _as_list(entry["samples"], path, where, "samples")
    if not samples:
        raise PatternError(path, "samples: needs at least one sample line", where)
    return Rule(rule_id, category, exception, message, samples, path)


def _one_of(value: object, allowed: tuple[_V, ...], path: str, name: str, where: str) -> _V:
    """The value, if it is one of the vocabulary `allowed`."""
    for word in allowed:
        if value == word:
            return word
    raise PatternError(path, f"{name}: {value!r} is not one of {', '.join(allowed)}", where)


def _optional(
    entry: dict[str, Any], name: str, allowed: tuple[_V, ...], path: str, where: str
) -> _V | None:
    """The entry's field `name`, if it has one: one of the vocabulary `allowed`."""
    return _one_of(entry[name], allowed, path, name, where) if name in entry else None


def _finding_text(entry: dict[str, Any], path: str, index: int) -> FindingText:
    where = _checked_id(
        entry, path, f"finding[{index}]", ("id", "title", "explanation", "evidence"), _FINDING_KNOWN
    )
    evidence = _as_list(entry["evidence"], path, where, "evidence")
    if not evidence:
        raise PatternError(path, "evidence: needs at least one signature id", where)
    return FindingText(
        id=where,
        title=str(entry["title"]),
        explanation=str(entry["explanation"]),
        remedies=_as_list(entry.get("remedy"), path, where, "remedy"),
        references=_as_list(entry.get("references"), path, where, "references"),
        evidence=evidence,
        source=path,
    )


_Loaded = tuple[list[Signature], dict[int, Xid], list[Rule], list[FindingText]]


def _xid(info: dict[str, Any], path: str, where: str) -> Xid:
    """An `[xid.<code>]` table's title, category and severity (no other field is read)."""
    out: Xid = {}
    if "title" in info:
        out["title"] = str(info["title"])
    if "category" in info:
        out["category"] = _one_of(str(info["category"]), CATEGORIES, path, "category", where)
    if "severity" in info:
        out["severity"] = _one_of(str(info["severity"]), SEVERITIES, path, "severity", where)
    return out


def _load_file(path: Path, builtin: bool = False) -> _Loaded:
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise PatternError(str(path), f"not valid TOML: {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise PatternError(str(path), f"cannot read: {err}") from None
    entries = doc.get("signature", [])
    if not isinstance(entries, list):
        raise PatternError(str(path), "[[signature]] must be an array of tables")
    sigs = [_signature(e, str(path), i, builtin) for i, e in enumerate(entries)]
    seen: set[str] = set()
    for s in sigs:
        if s.id in seen:
            raise PatternError(str(path), "id: defined twice in this file", s.id)
        seen.add(s.id)
    xid: dict[int, Xid] = {}
    for code, info in (doc.get("xid") or {}).items():
        if not str(code).isdigit() or not isinstance(info, dict):
            raise PatternError(str(path), f"xid.{code}: must be [xid.<number>] with a title")
        xid[int(code)] = _xid(info, str(path), f"xid.{code}")
    rule_entries = doc.get("classify", [])
    if not isinstance(rule_entries, list):
        raise PatternError(str(path), "[[classify]] must be an array of tables")
    rules = [_rule(e, str(path), i) for i, e in enumerate(rule_entries)]
    finding_entries = doc.get("finding", [])
    if not isinstance(finding_entries, list):
        raise PatternError(str(path), "[[finding]] must be an array of tables")
    texts = [_finding_text(e, str(path), i) for i, e in enumerate(finding_entries)]
    return sigs, xid, rules, texts


def load_library(dirs: Iterable[Path | str]) -> Library:
    """Load every `*.toml` of each directory in order; a later signature with the same id wins."""
    by_id: dict[str, Signature] = {}
    xid: dict[int, Xid] = {}
    rules: dict[str, Rule] = {}
    rule_dir: dict[str, int] = {}
    sources: list[str] = []
    texts: dict[str, FindingText] = {}
    shipped = {b.resolve() for b in builtin_dirs()}
    for n, d in enumerate(dirs):
        d = Path(d)
        builtin = d.resolve() in shipped
        if d.is_file() and d.suffix == ".toml":
            files = [d]
        elif d.is_dir():
            files = sorted(d.glob("*.toml"))
            if not files:
                raise PatternError(str(d), "no *.toml signature files in this directory")
        else:
            raise PatternError(str(d), "no such pattern directory")
        for f in files:
            sigs, codes, file_rules, file_texts = _load_file(f, builtin)
            sources.append(str(f))
            texts.update((t.id, t) for t in file_texts)
            for r in file_rules:
                rules.pop(r.id, None)
                rule_dir[r.id] = n
                rules[r.id] = r
            for s in sigs:
                by_id.pop(s.id, None)  # an override moves to the end: user libraries come last
                by_id[s.id] = s
            xid.update(codes)
    # a later directory's rules (the user's) are tried first, so they can refine a built-in one
    ordered = sorted(rules.values(), key=lambda r: -rule_dir[r.id])
    for t in texts.values():
        for sig_id in t.evidence:
            if sig_id not in by_id:
                raise PatternError(t.source, f"evidence: no signature {sig_id!r}", t.id)
    return Library(tuple(by_id.values()), xid, tuple(sources), tuple(ordered), texts)


@dataclass(frozen=True, slots=True)
class SampleProblem:
    source: str
    signature: str
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.signature}: {self.message}"


def check_samples(library: Library, only: Sequence[str] | None = None) -> list[SampleProblem]:
    """Every sample must be matched by its signature (and win); no counter-sample may match it.

    Samples are full physical lines: they go through the prefix decoder first, so they also
    guard `logscope.lines.decode`.
    """
    from ..lines.decode import parse_line

    problems: list[SampleProblem] = []

    def winner(sample: str) -> list[str]:
        ids = []
        for line in parse_line(sample):
            hit = library.match(sample, line.text)
            if hit is not None:
                ids.append(hit[0].id)
        return ids

    def matches(sig: Signature, sample: str) -> bool:
        return any(sig.match(line.text) is not None for line in parse_line(sample))

    for sig in library.signatures:
        if only is not None and sig.source not in only:
            continue
        for i, sample in enumerate(sig.samples):
            if not any(t in sample for t in sig.trigger):
                problems.append(
                    SampleProblem(sig.source, sig.id, f"samples[{i}]: contains no trigger")
                )
            elif not matches(sig, sample):
                problems.append(SampleProblem(sig.source, sig.id, f"samples[{i}]: does not match"))
            elif sig.id not in winner(sample):
                won = ", ".join(winner(sample)) or "nothing"
                problems.append(
                    SampleProblem(sig.source, sig.id, f"samples[{i}]: matched, but {won} wins")
                )
        for i, sample in enumerate(sig.counter_samples):
            if any(t in sample for t in sig.trigger) and matches(sig, sample):
                problems.append(SampleProblem(sig.source, sig.id, f"counter_samples[{i}]: matches"))
    for rule in library.rules:
        if only is not None and rule.source not in only:
            continue
        for i, sample in enumerate(rule.samples):
            decided = [
                library.classify(*fields)
                for line in parse_line(sample)
                if (fields := classified(library, sample, line.text)) is not None
            ]
            if not any(d is rule for d in decided):
                got = ", ".join(sorted({d.id for d in decided if d is not None})) or "no rule"
                problems.append(
                    SampleProblem(rule.source, rule.id, f"samples[{i}]: classified by {got}")
                )
    return problems


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
