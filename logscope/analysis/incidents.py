"""Events to incidents: failure events grouped until training goes on again, each group an
Incident whose root cause, culprit and category `root_cause.pick_root` finds."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from ..match.failure_block import FAILURE_ENTRY
from ..match.signatures import Library
from ..model import Event, Incident, Progress, World, field_int
from .incident_text import incident_text
from .root_cause import LEAD_LINES, SERIOUS, just_before, log_order, pick_root

# Progress lines between two failures that make them separate incidents: a rank can print
# an iteration line or two while the cascade of a failure is already under way.
SPLIT_AFTER_PROGRESS = 3


def split_incidents(failures: Sequence[Event], progress: Progress) -> list[list[Event]]:
    """Group failure events, in order: a group starts at a serious event (or an end banner),
    and a new one once training made progress again, or at another serious error than the one
    the group started with once training made progress since that one (the same error coming
    back between steps stays one group: survived.py reads it)."""
    groups: list[list[Event]] = []
    current: list[Event] = []
    first: Event | None = None
    recent: deque[Event] = deque(maxlen=LEAD_LINES)
    for e in sorted(failures, key=log_order):
        if current and (
            progress.steps_between(current[-1].seq, e.seq) >= SPLIT_AFTER_PROGRESS
            or (
                first is not None
                and e.severity in SERIOUS
                and error_of(e) != error_of(first)
                and progress.steps_between(first.seq, e.seq) >= SPLIT_AFTER_PROGRESS
            )
        ):
            groups.append(current)
            current = []
            first = None
        if current:
            current.append(e)
        elif e.severity in SERIOUS or e.role == "end":
            # the warnings right before a group's first error may say what failed
            current = [w for w in recent if just_before(w, e)] + [e]
            first = e
        else:
            recent.append(e)
    if current:
        groups.append(current)
    return groups


def error_of(e: Event) -> tuple[str, str | None]:
    """What error a line says: its signature, and the exception a classifying one names (two
    lines of the same error say the same)."""
    return e.signature, e.fields.get("exception")


def build_incidents(
    failures: Sequence[Event],
    progress: Progress,
    world: World,
    library: Library,
) -> list[Incident]:
    out: list[Incident] = []
    for n, group in enumerate(split_incidents(failures, progress), 1):
        pick = pick_root(group, world, library)
        root = pick.root
        title, explanation, remedy, refs = incident_text(library, root)
        culprit_rank = pick.culprit.rank if pick.culprit else None
        cascade = tuple(e for e in group if e is not root and e.role != "end")
        evidence = tuple(e for e in group if e is not root and e.role == "end")
        last_iter = progress.last_iteration_before(root.seq)
        times = [e.time for e in group if e.time is not None]
        category = pick.category
        own = (root.line.rank, field_int(root, "own_rank"))
        if (
            pick.culprit
            and category in ("collective_timeout", "comm_error")
            and culprit_rank is not None
            and culprit_rank not in own
            # a communication error of a process the log ranks nowhere: the rank a clue names
            # may be its own (the one that raised what NCCL returned), not a peer
            and (category == "collective_timeout" or own != (None, None))
        ):
            # a peer the root's rank waited on; not the rank whose own failure the root is
            title = f"{title} (rank {culprit_rank} stopped answering)"
        out.append(
            Incident(
                id=f"I{n}",
                category=category,
                severity=root.severity or "error",
                title=title,
                explanation=explanation,
                remedies=remedy,
                references=refs,
                root_cause=root,
                culprit=pick.culprit,
                cascade=cascade,
                evidence=evidence,
                iteration=last_iter,
                start=min(times) if times else None,
                end=max(times) if times else None,
            )
        )
    return out


def cascade_ranks(incident: Incident, world: World) -> list[int]:
    culprit = incident.culprit.rank if incident.culprit else None
    ranks = set()
    for e in incident.cascade:
        r = field_int(e, "rank") if e.signature == FAILURE_ENTRY else world.rank_of(e.line)
        if r is not None and r != culprit:
            ranks.add(r)
    return sorted(ranks)
