"""Errors that are the consequence of their own process's failed collective, not new causes: a
catch-all error (an exception line, an unrecognized line), or a signature's `after_own_failure`
(the heartbeat monitor's stuck watchdog), printed by a process after it reported a failed or
timed-out collective (the watchdog's abort, `DDP expects same model` after an aborted
allgather, an NPU runtime's task timeout and then the framework's `ACL stream synchronize
failed` traceback)."""

from __future__ import annotations

from collections.abc import Sequence

from ..match.events import UNRECOGNIZED
from ..match.signatures import Library
from ..model import Event, World

BURST_LINES = 40
"""A burst: the lines of one failure of one rank (terminate + what() + frames, a traceback)."""


def catch_all(e: Event, library: Library) -> bool:
    """An event of a catch-all: an unrecognized line, or a signature that classifies."""
    if e.signature == UNRECOGNIZED:
        return True
    sig = library.by_id(e.signature)
    return sig is not None and sig.classify


def after_own_failure(serious: Sequence[Event], world: World, library: Library) -> frozenset[int]:
    """The seqs of the causes among `serious` that follow their own process's failed or
    timed-out collective: by rank where the log names it; where it names none, in the burst
    right after a timed-out wait on the same stream."""
    failed = _failed_collectives(serious, world)
    waits = [
        e
        for e in serious
        if e.role == "symptom"
        and e.category == "collective_timeout"
        and world.rank_of(e.line) is None
    ]
    return frozenset(
        e.seq
        for e in serious
        if e.role == "cause"
        and (
            _after_own(e, failed, world, library) or _after_unranked_wait(e, waits, world, library)
        )
    )


def _failed_collectives(serious: Sequence[Event], world: World) -> dict[int, int]:
    """The order key of each rank's first failed or timed-out collective it reported."""
    first: dict[int, int] = {}
    for e in serious:
        if e.role == "symptom" and e.category in ("collective_timeout", "comm_error"):
            r = world.rank_of(e.line)
            if r is not None and e.seq < first.get(r, e.seq + 1):
                first[r] = e.seq
    return first


def _after_own(cause: Event, failed: dict[int, int], world: World, library: Library) -> bool:
    """A catch-all error, or a signature's `after_own_failure`, of a rank that already reported
    a failed or timed-out collective."""
    sig = library.by_id(cause.signature)
    if not catch_all(cause, library) and not (sig is not None and sig.after_own_failure):
        return False
    rank = world.rank_of(cause.line)
    return rank is not None and failed.get(rank, cause.seq) < cause.seq


def _after_unranked_wait(
    cause: Event, waits: Sequence[Event], world: World, library: Library
) -> bool:
    """`_after_own` where the log names no rank: a catch-all error of a process whose own
    stream reported a timed-out collective wait in the burst before it."""
    if not catch_all(cause, library) or world.rank_of(cause.line) is not None:
        return False
    a = cause.line
    return any(
        w.seq < cause.seq
        and w.line.path == a.path
        and 0 < a.lineno - w.line.lineno <= BURST_LINES
        and w.line.stream.agrees(a.stream)
        for w in waits
    )
