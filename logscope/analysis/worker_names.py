"""A culprit named by the report of its death: Ray's ActorDiedError lists the dead actor's name,
and where the program that made the actor encodes the worker's rank in that name (verl:
`<prefix><Class>_<placement group>:<bundle>`, rank = bundle in placement group 0), the name says
which rank died. An actor the same report says never ran (cancelled before it started) died of
nothing of its own and names no one."""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Culprit, Event, field_int
from .clues import with_rank

DEAD_WORKER_NAME = "verl.dead_worker_name"
NEVER_STARTED = "ray.actor_never_started"
REPORT_LINES = 4
"""How far below an actor's name its report may say it never ran (`namespace:`, `ip:` and the
death cause come between)."""


def _never_started(name: Event, events: Sequence[Event]) -> bool:
    return any(
        e.signature == NEVER_STARTED
        and e.line.path == name.line.path
        and 0 < e.line.lineno - name.line.lineno <= REPORT_LINES
        for e in events
    )


def dead_worker_culprit(culprit: Culprit, events: Sequence[Event]) -> Culprit:
    """A culprit with no rank yet: the one verl worker of placement group 0 that Ray's reports
    of dead actors name (every report naming the same one), its bundle its rank."""
    named = {
        (field_int(e, "pg_idx"), field_int(e, "bundle"))
        for e in events
        if e.signature == DEAD_WORKER_NAME and not _never_started(e, events)
    }
    if len(named) != 1:
        return culprit
    pg, bundle = named.pop()
    if pg != 0 or bundle is None:
        return culprit
    why = (
        f"Ray reports verl's worker {pg}:{bundle} dead, and the worker of placement group 0, "
        f"bundle {bundle} is rank {bundle}"
    )
    return with_rank(culprit, bundle, None, why, 0.6)


def dead_worker(events: Sequence[Event]) -> Culprit | None:
    """dead_worker_culprit's rank alone, where no other culprit is being refined (a root that
    is only a report)."""
    none = Culprit(rank=None, local_rank=None, host=None, confidence=0.0, reason="")
    named = dead_worker_culprit(none, events)
    return named if named.rank is not None else None
