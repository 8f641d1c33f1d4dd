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
CONFIDENCE = 0.6
"""An actor's name is a program's convention, not a rank the report states."""


def _never_started(name: Event, events: Sequence[Event]) -> bool:
    return any(
        e.signature == NEVER_STARTED
        and e.line.path == name.line.path
        and 0 < e.line.lineno - name.line.lineno <= REPORT_LINES
        for e in events
    )


def _dead_rank(events: Sequence[Event]) -> tuple[int, str] | None:
    """The rank of the one verl worker of placement group 0 that Ray's reports of dead actors
    name (every report naming the same one: its bundle is its rank), and why."""
    named = {
        (field_int(e, "pg_idx"), field_int(e, "bundle"))
        for e in events
        if e.signature == DEAD_WORKER_NAME and not _never_started(e, events)
    }
    if len(named) != 1:
        return None
    pg, bundle = named.pop()
    if pg != 0 or bundle is None:
        return None
    why = (
        f"Ray reports verl's worker {pg}:{bundle} dead, and the worker of placement group 0, "
        f"bundle {bundle} is rank {bundle}"
    )
    return bundle, why


def dead_worker_culprit(culprit: Culprit, events: Sequence[Event]) -> Culprit:
    """A culprit with no rank yet, named by the dead worker Ray's reports name."""
    dead = _dead_rank(events)
    return culprit if dead is None else with_rank(culprit, dead[0], None, dead[1], CONFIDENCE)


def dead_worker(events: Sequence[Event]) -> Culprit | None:
    """The dead worker Ray's reports name as the culprit, where no other culprit is being
    refined (a root that is only a report)."""
    dead = _dead_rank(events)
    if dead is None:
        return None
    return Culprit(rank=dead[0], local_rank=None, host=None, confidence=CONFIDENCE, reason=dead[1])
