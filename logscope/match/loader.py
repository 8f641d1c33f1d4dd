"""The signature library loaded from `patterns/*.toml` and users' folders: every field
validated, each error naming its file, signature and field."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import regex

from ..errors import PatternError
from ..model import CATEGORIES, KINDS, ROLES, SEVERITIES
from .regexes import Regex
from .signatures import FindingText, Library, Rule, Signature, Xid

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
        "reason_follows",
        "reason_precedes",
        "primary_rank_only",
        "own_log_file",
        "every_rank_alike",
        "after_own_failure",
        "traceback_follows",
        "settles_preceding",
        "saved_before_next_step",
        "columns",
    }
)
_RULE_KNOWN = frozenset({"id", "category", "exception", "message", "samples"})
_FINDING_KNOWN = frozenset({"id", "title", "explanation", "remedy", "references", "evidence"})
_ID = re.compile(r"[a-z0-9_]+(\.[a-z0-9_]+)+")


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


def _flag(entry: dict[str, Any], name: str, path: str, where: str) -> bool:
    """An optional true/false key, false when absent."""
    value = entry.get(name, False)
    if not isinstance(value, bool):
        raise PatternError(path, f"{name}: must be true or false", where)
    return value


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
    if any("\r" in t or "\n" in t for t in triggers):
        # a line's `\r` states are scanned for triggers one by one (TriggerIndex._states)
        raise PatternError(path, "trigger: a line break (\\r, \\n) never stands in a line", where)
    samples = _as_list(entry["samples"], path, where, "samples")
    if not samples:
        raise PatternError(path, "samples: needs at least one sample line", where)
    priority = entry.get("priority", 0)
    if not isinstance(priority, int):
        raise PatternError(path, "priority: must be an integer", where)
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
        classify=_flag(entry, "classify", path, where),
        reason_follows=_flag(entry, "reason_follows", path, where),
        reason_precedes=_flag(entry, "reason_precedes", path, where),
        primary_rank_only=_flag(entry, "primary_rank_only", path, where),
        own_log_file=_flag(entry, "own_log_file", path, where),
        every_rank_alike=_flag(entry, "every_rank_alike", path, where),
        after_own_failure=_flag(entry, "after_own_failure", path, where),
        traceback_follows=_flag(entry, "traceback_follows", path, where),
        settles_preceding=_flag(entry, "settles_preceding", path, where),
        saved_before_next_step=_flag(entry, "saved_before_next_step", path, where),
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
