"""Aborts that are consequences: a process that reported a failure, then died of it.

Two shapes, both of a process taking itself down over a failure it already stated:
- a SIGABRT that a launcher reports for a rank whose watchdog timed out first (ProcessGroupNCCL:
  `To avoid data inconsistency, we are taking the entire process down`);
- a C++ `terminate called after throwing an instance of 'T'` whose `what():` line, printed right
  after it by libstdc++'s verbose terminate handler, is a known symptom (a watchdog timeout, a
  peer that closed the connection): the terminate is how that symptom ended the process.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..match.events import FAILURE_ENTRY
from ..model import Event, Stream, World, field_int

SERIOUS = ("fatal", "error")
WHAT_WITHIN = 3
"""libstdc++ prints `  what():  <message>` on the line after `terminate called ...`; a few lines
of slack for another thread's line interleaved between them."""
TERMINATE = "cpp.terminate"


def own_abort(death: Event, events: Sequence[Event], world: World) -> bool:
    """A SIGABRT of a rank that reported a failure first: its watchdog took the process down, so
    the death is a symptom of what that rank reported, not a cause."""
    if field_int(death, "exit_code") != -6 and death.fields.get("signal_name") != "SIGABRT":
        return False
    rank = field_int(death, "rank")
    if rank is None:
        local = field_int(death, "local_rank")
        if local is not None:
            rank = world.rank_of_stream(Stream(death.line.task, death.line.host, local, None))
    if rank is None:
        return False
    return any(
        e.role == "symptom"
        and e.severity in SERIOUS
        and e.signature != FAILURE_ENTRY
        and e.seq < death.seq
        and world.rank_of(e.line) == rank
        for e in events
    )


def symptom_terminates(events: Sequence[Event]) -> frozenset[int]:
    """The order keys of `terminate called ...` lines whose `what():` is a known symptom: a
    symptom's `what():` line of the same stream at most WHAT_WITHIN lines after it."""
    whats = {
        (e.line.path, e.line.stream, e.line.lineno)
        for e in events
        if e.role == "symptom" and e.severity in SERIOUS and "what():" in e.line.text
    }
    if not whats:
        return frozenset()
    return frozenset(
        t.seq
        for t in events
        if t.signature == TERMINATE
        and any(
            (t.line.path, t.line.stream, t.line.lineno + k) in whats
            for k in range(1, WHAT_WITHIN + 1)
        )
    )
