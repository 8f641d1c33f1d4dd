"""What an incident says in words: its title (a signature's, filled from the match), explanation,
remedies and references."""

from __future__ import annotations

import re

from ..match.events import UNRECOGNIZED
from ..match.failure_block import CHILD_FAILED, FAILURE_ENTRY
from ..match.signatures import Library
from ..model import Event, field_int
from .duplicate_ranks import DUPLICATE_RANK
from .duplicate_ranks import TEXT as DUPLICATE_TEXT


def incident_text(library: Library, e: Event) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
    """An incident's title, explanation, remedies and references, from its root's signature."""
    sig = library.by_id(e.signature)
    if e.signature == FAILURE_ENTRY:
        sig = library.by_id(CHILD_FAILED)
        what = e.fields.get("signal_name") or f"exit code {e.fields.get('exit_code')}"
        rank = e.fields.get("rank", "?")
        title = f"Rank {rank} exited with {what}"
        if sig is None:
            return title, "", (), ()
        return title, sig.explanation, sig.remedy, sig.references
    if e.signature == UNRECOGNIZED:
        return (
            f"Unrecognized error: {e.fields.get('message', '')[:TITLE_FIELD_MAX]}",
            _UNRECOGNIZED_EXPLANATION,
            _UNRECOGNIZED_REMEDIES,
            (),
        )
    if e.signature == DUPLICATE_RANK:
        title, explanation, remedies = DUPLICATE_TEXT
        return fill_title(title, e.fields), explanation, remedies, ()
    if sig is None:
        return e.signature, "", (), ()
    title = fill_title(sig.title, e.fields)
    xid = field_int(e, "xid")
    if xid is not None and xid in library.xid:
        title = f"{title}: Xid {xid}, {library.xid[xid].get('title', '')}".rstrip(", ")
        root = field_int(e, "root_xid")
        if root is not None and root in library.xid:
            title = f"{title}; caused by Xid {root}, {library.xid[root].get('title', '')}"
    return title, sig.explanation, sig.remedy, sig.references


_UNRECOGNIZED_EXPLANATION = (
    "No signature knows this line, but it reads as an error and nothing else in the log "
    "explains how the job failed: it is the earliest such line. Its category comes from the "
    "library's classification rules where one fits its words (`unknown` where none does)."
)
_UNRECOGNIZED_REMEDIES = (
    "Read the lines around it (`logscope analyze --format markdown` shows them)",
    "Teach logscope the message: add a signature with `samples` in a `--patterns DIR`",
)

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_UNFILLED = re.compile(r"\s*[:,-]?\s*\{\w+\}")
TITLE_FIELD_MAX = 120


def fill_title(title: str, fields: dict[str, str]) -> str:
    """A signature title with `{field}` placeholders filled from the match; a placeholder with
    no value is dropped together with the separator before it."""

    def value(m: re.Match[str]) -> str:
        v = fields.get(m.group(1), "").strip()
        return v[:TITLE_FIELD_MAX] if v else m.group(0)

    filled = _PLACEHOLDER.sub(value, title)
    return _UNFILLED.sub("", filled).strip()
