"""Aborts that are consequences: a process that reported a failure, then died of it.

Two shapes, both of a process taking itself down over a failure it already stated:
- a SIGABRT that a launcher reports for a rank whose watchdog timed out first (ProcessGroupNCCL:
  `To avoid data inconsistency, we are taking the entire process down`), or for a rank the log
  holds no line of, after another rank's watchdog took its process down;
- a C++ `terminate called after throwing an instance of 'T'` whose `what():` line, printed right
  after it by libstdc++'s verbose terminate handler, is a known symptom (a watchdog timeout, a
  peer that closed the connection), or that comes right after ProcessGroupNCCL said it takes the
  process down (its watchdog logs `To avoid data inconsistency, we are taking the entire process
  down.`, then rethrows the failure it reported): the terminate is how that symptom ended the
  process, whether or not its `what():` line made it into the log.
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
TAKING_DOWN = "nccl.taking_process_down"


def own_abort(death: Event, events: Sequence[Event], world: World) -> bool:
    """A SIGABRT of a rank that reported a failure first: its watchdog took the process down, so
    the death is a symptom of what that rank reported, not a cause. A takedown line that no
    prefix gives a rank (`To avoid data inconsistency, we are taking the entire process down`)
    counts for whichever rank the launcher reports."""
    if field_int(death, "exit_code") != -6 and death.fields.get("signal_name") != "SIGABRT":
        return False
    rank = field_int(death, "rank")
    if rank is None:
        local = field_int(death, "local_rank")
        if local is not None:
            rank = world.rank_of_stream(Stream(death.line.task, death.line.host, local, None))
    for e in events:
        if e.seq >= death.seq or e.role != "symptom" or e.severity not in SERIOUS:
            continue
        if e.signature == FAILURE_ENTRY:
            continue  # the launcher's own report of the death, not the rank's
        said = world.rank_of(e.line)
        if rank is not None and said == rank:
            return True
        if said is None and e.signature == TAKING_DOWN:
            # a process with no rank prefix said it takes itself down: the SIGABRT that follows
            # is that, unless a prefix shows it was another rank's
            return True
        if e.signature == TAKING_DOWN and rank is not None and rank not in world.ranks:
            # a rank whose output the log does not hold (a launcher that keeps rank 0's only)
            # died of SIGABRT after another rank's watchdog took its process down: the ranks
            # time out the same collective, and it was the same takedown
            return True
    return False


def symptom_terminates(events: Sequence[Event]) -> frozenset[int]:
    """The order keys of `terminate called ...` lines that end a known symptom: a symptom's
    `what():` line of the same stream at most WHAT_WITHIN lines after it, or ProcessGroupNCCL's
    `taking the entire process down` at most WHAT_WITHIN lines before it."""
    whats = {
        (e.line.path, e.line.stream, e.line.lineno)
        for e in events
        if e.role == "symptom" and e.severity in SERIOUS and "what():" in e.line.text
    }
    downs = {
        (e.line.path, e.line.stream, e.line.lineno) for e in events if e.signature == TAKING_DOWN
    }
    if not whats and not downs:
        return frozenset()
    return frozenset(
        t.seq
        for t in events
        if t.signature == TERMINATE
        and any(
            (t.line.path, t.line.stream, t.line.lineno + k) in whats
            or (t.line.path, t.line.stream, t.line.lineno - k) in downs
            for k in range(1, WHAT_WITHIN + 1)
        )
    )
