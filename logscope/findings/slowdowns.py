"""Slowdowns ("fail-slow"): stretches of a run where each step took longer than the run's own
baseline, found as change points in step time (per sample where the batch size is logged, each
attempt on its own), with the time and GPU-hours they cost beyond the baseline."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from numpy.typing import NDArray

from ..compact_column import uniform
from ..model import Attempt, Finding, Progress, SlowdownDetail, duration, gpu_hours_of
from .changepoints import Floats, segments

MIN_LINES = 10
"""A regime shorter than this many progress lines is a blip (a save, an evaluation), not one."""
WARMUP_LINES = 3
"""The first lines of an attempt include compilation, autotuning and warm-up: not compared."""
WARMUP_MAX = 50
"""A slower stretch at an attempt's start that ends within its first 50 lines (or 5%) is the
attempt warming up (allocator, autotuning, recompiles, data-loader workers, NCCL connections
set up lazily), not a slowdown; one that lasts to the attempt's end is (a slower restart)."""
MIN_SHIFT = 0.02
"""Regimes closer than this (relative) are one."""
MIN_SLOWDOWN = 0.025
"""A regime this much slower than the baseline is a slowdown."""
WARN_SLOWDOWN = 0.04
"""A slowdown this large is a warning (a few percent is info: worth knowing, rarely worth a
node swap)."""
MINOR_MIN_LINES = 3 * MIN_LINES
"""A slowdown below WARN_SLOWDOWN is one only when it lasts this many progress lines: a few
percent for a few lines is the machine's own noise (a neighbour's job, a page-cache flush,
a busy file system), which a fail-slow part is not: it stays slow."""
BASELINE_SHARE = 0.05
"""The baseline regime lasted at least this share of the run's compared lines."""

Locate = Callable[[int], tuple[str | None, int | None]]
"""An order key (`seq`) to its file and line number."""


@dataclass(frozen=True, slots=True)
class StepTimes:
    """One attempt's step times, a row per progress line kept (repeated iterations dropped)."""

    attempt: int
    rows: slice | NDArray[np.int64]
    """Positions in the run's Progress: a slice while they are one stretch (most runs)."""
    seq: NDArray[np.int64]
    """The lines' order keys."""
    iteration: NDArray[np.int64]
    covered: Floats
    """Iterations the line covers (its log interval)."""
    seconds: Floats
    """Seconds the line covers."""
    units: Floats
    """What the line's seconds cover: iterations, x the batch size where it is known (so a
    slowdown is compared per sample)."""
    time: Floats
    """POSIX end time of the line (NaN if unknown)."""


def step_times(progress: Progress, attempt: Attempt) -> StepTimes | None:
    lo, hi = attempt.progress
    if lo < 0 or hi < lo:
        return None
    rows: slice | NDArray[np.int64] = slice(lo, hi + 1)
    it = progress.iteration.numpy()[rows]
    time = progress.time.numpy()[rows]
    secs = progress.iter_s.numpy()[rows]
    batch = progress.batch.numpy()[rows]
    seq = np.frombuffer(progress.seq, dtype=np.int64)[rows]
    numbered = bool((it >= 0).any())
    if numbered:
        # another rank printing the same iteration, or a line out of order: keep the first
        before = np.empty_like(it)  # the highest iteration before each line
        before[:1], before[1:] = -1, it[:-1]
        np.maximum.accumulate(before, out=before)
        keep = (it >= 0) & (it > before)
        del before
        if not keep.all():  # else the views stay views: no copy of millions of lines
            it, time, secs, batch, seq = it[keep], time[keep], secs[keep], batch[keep], seq[keep]
            rows = np.flatnonzero(keep) + lo
    if len(it) == 0:
        return None
    # the columns are views of Progress, or computed once: a 5 GB log has millions of lines
    covered: Floats = np.broadcast_to(1.0, len(it))
    if numbered:
        steps = np.empty_like(it)  # iterations since the line before
        steps[:1] = it[0] - (attempt.resumed_from if attempt.resumed_from else it[0] - 1)
        np.subtract(it[1:], it[:-1], out=steps[1:])
        covered = _one_value(np.maximum(steps, 1, out=steps).astype(np.float64))
        del steps
    if np.isnan(secs).any():
        secs = np.where(np.isnan(secs), np.concatenate(([math.nan], np.diff(time))), secs)
    units = covered
    if np.isfinite(batch).all() and (batch > 0).all():
        units = _one_value(covered * batch)
    return StepTimes(attempt.index, rows, seq, it, covered, secs, units, time)


def _one_value(a: Floats) -> Floats:
    """a, or its one value repeated (a read-only view of no size) if it holds just one: a log
    interval and a batch size mostly never change."""
    return np.broadcast_to(a[:1].copy(), a.shape) if len(a) and uniform(a) else a


def find_slowdowns(
    series: Sequence[StepTimes],
    gpus: int | None,
    hosts: Mapping[int, frozenset[str]],
    locate: Locate,
) -> list[Finding]:
    """Slowdowns of a run (see the module docstring). `hosts` maps an attempt to the nodes a
    node list in its lines named, for the hosts a slower restart brought in."""
    regimes: list[tuple[StepTimes, list[tuple[int, int, float]]]] = []
    for s in series:
        with np.errstate(divide="ignore", invalid="ignore"):
            # seconds per sample; a zero or negative step (stamps out of order) is no value
            y = np.log(s.seconds / s.units)
        ok = np.isfinite(y)
        ok[:WARMUP_LINES] = False
        pos: range | NDArray[np.int64] = range(WARMUP_LINES, len(y))
        if ok[WARMUP_LINES:].all():  # the usual run: a view, no copy of millions of lines
            compared = y[WARMUP_LINES:]
        else:
            pos = np.flatnonzero(ok)
            compared = y[pos]
        del ok
        if len(pos) >= MIN_LINES:
            segs = segments(compared, MIN_LINES, math.log1p(MIN_SHIFT))
            # (start, end) as rows of s: a regime spans the uncompared rows inside it
            regimes.append(
                (s, [(int(pos[g.start]), int(pos[g.end - 1]) + 1, g.level) for g in segs])
            )
    total = sum(end - start for _, regs in regimes for start, end, _ in regs)
    lasting = [
        level
        for _, regs in regimes
        for start, end, level in regs
        if end - start >= max(MIN_LINES, BASELINE_SHARE * total)
    ]
    if not lasting:
        return []
    base = min(lasting)
    out: list[Finding] = []
    for s, regs in regimes:
        first, last = regs[0][0], regs[-1][1]
        for start, end, level in regs:
            slower = math.expm1(level - base)
            if slower < MIN_SLOWDOWN or (slower < WARN_SLOWDOWN and end - start < MINOR_MIN_LINES):
                continue
            at_start = start == first
            if (
                at_start
                and end < last
                and end - start < max(WARMUP_MAX, BASELINE_SHARE * len(s.iteration))
            ):
                continue  # the attempt warming up
            before = hosts.get(s.attempt - 1)
            joined = hosts.get(s.attempt, before) - before if at_start and before else frozenset()
            out.append(
                _finding(s, start, end, slower, math.exp(base), gpus, at_start, joined, locate)
            )
    return out


def _finding(
    s: StepTimes,
    start: int,
    end: int,
    slower: float,
    base_unit: float,
    gpus: int | None,
    from_start: bool,
    joined: frozenset[str],
    locate: Locate,
) -> Finding:
    rows = slice(start, end)
    secs = s.seconds[rows]
    ok = np.isfinite(secs)
    lost = float(np.sum(secs[ok] - base_unit * s.units[rows][ok]))
    if from_start:
        start = 0  # slow from the attempt's first step: its warm-up lines were only not compared
    first_it = int(s.iteration[start] - s.covered[start] + 1) if s.iteration[start] >= 0 else None
    last_it = int(s.iteration[end - 1]) if s.iteration[end - 1] >= 0 else None
    t0 = s.time[start] - (s.seconds[start] if math.isfinite(s.seconds[start]) else 0.0)
    t1 = s.time[end - 1]
    begin = datetime.fromtimestamp(t0) if math.isfinite(t0) else None
    finish = datetime.fromtimestamp(t1) if math.isfinite(t1) else None
    span = (t1 - t0) if math.isfinite(t0) and math.isfinite(t1) else None
    baseline_it = base_unit * float(np.median(s.units[rows] / s.covered[rows]))
    where = f" from iteration {first_it}" if first_it is not None else ""
    restart = " after the restart" if from_start and s.attempt > 0 else ""
    if joined:
        restart += f" (new node{'s' if len(joined) > 1 else ''}: {', '.join(sorted(joined))})"
    lasting = f" for {duration(span)}" if span is not None else ""
    file, line = locate(int(s.seq[start]))
    return Finding(
        kind="slowdown",
        severity="warning" if slower >= WARN_SLOWDOWN else "info",
        title=(
            f"Steps {slower:+.1%} slower{where}{restart}{lasting} "
            f"(baseline {baseline_it:.3g} s/iteration): {duration(lost)} lost"
        ),
        attempt=s.attempt,
        start_iteration=first_it,
        end_iteration=last_it,
        start=begin,
        end=finish,
        detail=SlowdownDetail(slower, baseline_it, tuple(sorted(joined))),
        lost_s=lost,
        lost_gpu_hours=gpu_hours_of(lost, gpus),
        file=file,
        line=line,
    )
