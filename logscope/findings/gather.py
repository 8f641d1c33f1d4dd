"""What cost a run without stopping it, gathered: slowdowns and training health."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..model import Attempt, Event, Finding, Progress
from .slowdowns import Locate, find_slowdowns, step_times
from .training_health import find_health


def find(
    progress: Progress,
    attempts: Sequence[Attempt],
    overflows: Sequence[Event],
    gpus: int | None,
    hosts: Mapping[int, frozenset[str]],
    locate: Locate,
) -> tuple[Finding, ...]:
    """Every finding of a run, in the order they began."""
    series = [(a, s) for a in attempts if (s := step_times(progress, a)) is not None]
    found = find_slowdowns([s for _, s in series], gpus, hosts, locate)
    found += find_health(progress, series, overflows, gpus, locate)
    return tuple(sorted(found, key=lambda f: (f.attempt or 0, f.start_iteration or 0, f.kind)))
