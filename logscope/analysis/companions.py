"""A job's own files beside the training log (its `.out`: `START TIME`, `END TIME`, the
scheduler's banners), which log no progress: placed on the run's attempts by time, on the
training log's clock."""

from __future__ import annotations

import math
from dataclasses import replace

from ..model import Attempt, input_of
from .clock import from_timestamp, timestamp

COMPANION_OFFSETS = tuple(sign * q * 900.0 for q in range(1, 14 * 4 + 1) for sign in (-1, 1))
"""Offsets tried between a job's own files' clock and the training log's: time zones, in
quarter hours up to 14 h (UTC-12 to UTC+14), smallest first."""


def place_companions(
    attempts: list[Attempt], companions: list[tuple[str, float, int]]
) -> list[Attempt]:
    """Give each progress-less input (a job's `.out`) to the attempts of its job, by time.
    Its START TIME goes to the attempt whose loop it precedes; its other stamps to the last
    attempt started by then, never one before its START (a job restarted in place by
    torchrun has several); its lines belong to the last of these, which its end banners
    close."""
    if not attempts or not companions:
        return attempts
    attempts = list(attempts)
    starts = [timestamp(a.loop_start) for a in attempts]
    lasts = [timestamp(a.last_progress) for a in attempts]
    by_input: dict[int, list[tuple[str, float]]] = {}
    for kind, v, seq in companions:
        if kind != "waiting":
            by_input.setdefault(input_of(seq), []).append((kind, v))
    shift = _companion_clock(by_input, starts, lasts)
    if shift:
        by_input = {
            inp: [(kind, v + shift) for kind, v in stamps] for inp, stamps in by_input.items()
        }
    for inp, stamps in sorted(by_input.items()):
        opening = [v for kind, v in stamps if kind == "start"]
        first = _owner("start", min(opening), starts, lasts) if opening else None
        owner: int | None = None
        for kind, v in stamps:
            i = first if kind == "start" else _owner(kind, v, starts, lasts)
            if i is None:
                continue
            i = i if first is None else max(i, first)
            attempts[i] = _widen(attempts[i], kind, v)
            owner = i if owner is None else max(owner, i)
        if owner is not None:
            a = attempts[owner]
            attempts[owner] = replace(a, companions=(*a.companions, inp))
    return attempts


def _companion_clock(
    by_input: dict[int, list[tuple[str, float]]],
    starts: list[float | None],
    lasts: list[float | None],
) -> float:
    """Seconds to add to the jobs' own files' stamps to read them on the training log's
    clock: 0 unless another offset places more of them (COMPANION_OFFSETS).

    A job's `.out` stamps (`date`'s START/END TIME, the scheduler's banners) come from the
    batch host, in its time zone; the training log's from the ranks (or from `tee`d lines
    with no zone at all). The two can differ by a zone's offset. On the right clock each
    file's START precedes its first attempt's loop, after the attempt before it ended, and
    its last end (END TIME, a banner) falls after that attempt's last progress and before
    the next file's attempt begins (a file of end banners alone: after some attempt's last
    progress, before the next one's loop); the offset that makes the most of that true is
    the clocks' difference (the smallest such, 0 first)."""
    files = [
        (
            min((v for k, v in stamps if k == "start"), default=None),
            [v for k, v in stamps if k == "end"],
        )
        for stamps in by_input.values()
    ]
    files = [(start, ends) for start, ends in files if start is not None or ends]
    if not files:
        return 0.0
    n = len(starts)

    def ended_in(end: float) -> int | None:
        """The attempt a job's end at `end` can be the end of: after its last progress,
        before the next attempt's loop (a job that ended cannot progress after)."""
        for i in range(n):
            if _ends_between(end, lasts[i], starts[i + 1] if i + 1 < n else None):
                return i
        return None

    def score(d: float) -> int:
        owners = [
            _owner("start", start + d, starts, lasts) if start is not None else None
            for start, _ in files
        ]
        placed = {o for o in owners if o is not None}
        good = len(placed)
        for owner, (start, ends) in zip(owners, files, strict=True):
            if not ends:
                continue
            end = max(ends) + d
            if start is None:
                good += ended_in(end) is not None  # a file of end banners alone
                continue
            if owner is None:
                continue
            nxt = min((o for o in placed if o > owner), default=None)
            good += _ends_between(end, lasts[owner], starts[nxt] if nxt is not None else None)
        return good

    best, best_score = 0.0, score(0.0)
    for d in COMPANION_OFFSETS:
        got = score(d)
        if got > best_score:
            best, best_score = d, got
    return best


def _ends_between(end: float, after: float | None, before: float | None) -> bool:
    """A job's end at `end` can close the attempt whose last progress is `after`, the next
    attempt's loop starting at `before` (None: unknown or none)."""
    return (after is None or end >= after) and (before is None or end < before)


def _widen(a: Attempt, kind: str, v: float) -> Attempt:
    """Attempt `a` began (a `start` stamp) or still ran (any other) at `v`."""
    start, end = timestamp(a.start), timestamp(a.end)
    if kind == "start":
        start = v if start is None else min(start, v)
    else:
        end = v if end is None else max(end, v)
    return replace(a, start=from_timestamp(start), end=from_timestamp(end))


def _owner(
    kind: str, v: float, starts: list[float | None], lasts: list[float | None]
) -> int | None:
    n = len(starts)
    if kind == "start":
        # the job started before its training loop: the first attempt whose loop starts after
        for i in range(n):
            s = starts[i]
            if s is not None and s >= v and (i == 0 or (lasts[i - 1] or -math.inf) < v):
                return i
        return None
    # an end, or any other stamp: the last attempt that had started by then
    owner = None
    for i in range(n):
        s = starts[i]
        if s is not None and s <= v:
            owner = i
    return owner
