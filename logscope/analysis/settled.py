"""Failures their own thread says it handled: a line whose signature `settles_preceding`
(NCCL's proxy service thread's `Accept failed`, its remote allocator's `Allocation failed`)
closes the errors the same thread reported just before it, which then make no incident."""

from __future__ import annotations

from collections.abc import Sequence

from ..lines.decode import nccl_thread
from ..match.signatures import Library
from ..model import Event

SETTLE_LINES = 12
"""How far before the settling line its failure may be: the socket error and the `-> N` lines
NCCL prints as the result unwinds (one a call level, up to about ten)."""


def unsettled(failures: Sequence[Event], library: Library) -> list[Event]:
    """`failures` without the serious ones a later line of the same thread, at most
    SETTLE_LINES lines on, says it handled."""
    settling = [e for e in failures if settles(e, library)]
    if not settling:
        return list(failures)
    return [e for e in failures if not any(settled_by(e, s) for s in settling)]


def settles(e: Event, library: Library) -> bool:
    """`e` says its thread handled the errors it reported just before it."""
    sig = library.by_id(e.signature)
    return sig is not None and sig.settles_preceding


def settled_by(e: Event, s: Event) -> bool:
    """`e` is a serious error of the thread of the settling line `s`, at most SETTLE_LINES
    lines before it."""
    a, b = e.line, s.line
    return (
        e is not s
        and e.severity in ("fatal", "error")
        and a.path == b.path
        and 0 < b.lineno - a.lineno <= SETTLE_LINES
        and a.stream.agrees(b.stream)
        # NCCL's `host:pid:tid [dev] ` head: the thread, where the log's prefixes name no rank
        and nccl_thread(a.raw) == nccl_thread(b.raw)
    )
