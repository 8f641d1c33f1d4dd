"""Training health from the progress lines: loss spikes, NaN losses, bursts of skipped steps,
gradient-norm spikes and a collapsing fp16 loss scale, as findings, never incidents. Each rule
compares a value with the same attempt's recent past (a trailing window of `WINDOW` lines,
robust median and spread), so the scale of a loss or norm does not matter."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from ..compact_column import Packed
from ..model import (
    Attempt,
    CountDetail,
    Event,
    Finding,
    FindingDetail,
    FindingKind,
    Progress,
    ScaleDetail,
    Severity,
    SpikeDetail,
    gpu_hours_of,
)
from .changepoints import Floats, trailing_score_chunks
from .excerpt_spikes import ExcerptSpike, excerpt_spikes
from .slowdowns import Locate, StepTimes

WINDOW = 100
"""Lines of history a value's noise is measured over (from consecutive differences, so a trend
is no noise; long enough that a quiet stretch does not make ordinary noise look like a spike).
The baseline itself is the median of the last 5 lines."""
MIN_HISTORY = 10
"""A value is judged only with at least this many lines before it in its attempt."""
SPIKE_SCORE = 8.0
"""Robust spreads above the trailing median for a spike."""
LOSS_SPIKE_RISE = 0.10
"""...and at least this much above it, relative: noise in a small-batch run is no spike."""
GRAD_SPIKE_RATIO = 5.0
"""A gradient-norm spike is at least this many times the trailing median."""
TAIL_WINDOW = 200
"""Lines of history for a series' usual outliers."""
TAIL_RATIO = 2.0
"""Per-step losses and norms of a small-batch run are heavy-tailed: a spike also stands this many
times above every value of the TAIL_WINDOW lines before it (of the loss's rise over its
baseline, of the norm), the spikes already found left out."""
GAP = 3
"""Lines a spike or NaN episode may pause for and still be one episode."""
SKIP_BURST = 4
"""Skipped steps, each within SKIP_SPAN iterations of the one before, that make a burst.
Dynamic loss scaling doubles the scale every window (1000 steps by default in Megatron and
DeepSpeed) and skips the one step that overflows (two with hysteresis): an isolated skip is
routine, several close together are not."""
SKIP_SPAN = 20
SCALE_COLLAPSE = 2.0**10
"""A loss scale this many times below the highest it held since the scaler settled has collapsed
(so has one at 1, the default minimum of Megatron and DeepSpeed)."""


def find_health(
    progress: Progress,
    series: Sequence[tuple[Attempt, StepTimes]],
    overflows: Sequence[Event],
    gpus: int | None,
    locate: Locate,
) -> list[Finding]:
    """The training-health findings of a run. `overflows` are the skipped-step lines (status
    events with the `scale` that overflowed, and the `new_scale` where it was lowered)."""
    seqs = sorted(e.seq for e in overflows)
    scales = sorted(
        (e.seq, float(e.fields["new_scale"])) for e in overflows if "new_scale" in e.fields
    )
    out: list[Finding] = []
    for a, s in series:
        rows = _Rows(s, progress, locate, gpus)
        out += _with_excerpt_spikes(rows, a, _loss_spikes(rows), loss=True)
        out += _with_excerpt_spikes(rows, a, _grad_spikes(rows), loss=False)
        out += _nans(rows)
        out += _skips(rows, a, seqs)
        out += _scale_collapse(rows, scales)
    return out


class _Rows:
    """An attempt's progress lines with their health columns."""

    def __init__(self, s: StepTimes, progress: Progress, locate: Locate, gpus: int | None) -> None:
        self.s = s
        self.locate = locate
        self.gpus = gpus

        def col(a: Packed) -> Floats:
            return a.numpy()[s.rows]  # a view while the rows are one stretch

        self.loss = col(progress.loss)
        self.nonfinite = progress.nonfinite.numpy()[s.rows]
        self.grad_norm = col(progress.grad_norm)
        self.loss_scale = col(progress.loss_scale)
        self.skipped = col(progress.skipped)
        self.nan_iters = col(progress.nan_iters)

    @cached_property
    def iteration_s(self) -> float | None:
        """Typical seconds per iteration: what a finding's lost iterations cost (asked only
        when there is a finding)."""
        per_it = self.s.seconds / self.s.covered
        finite = per_it[np.isfinite(per_it)]
        return float(np.median(finite)) if len(finite) else None

    def iteration(self, i: int) -> int | None:
        it = int(self.s.iteration[i])
        return it if it >= 0 else None

    def time(self, i: int) -> datetime | None:
        t = float(self.s.time[i])
        return datetime.fromtimestamp(t) if math.isfinite(t) else None

    def finding(
        self,
        kind: FindingKind,
        severity: Severity,
        title: str,
        first: int,
        last: int,
        detail: FindingDetail,
        lost_iterations: float | None = None,
    ) -> Finding:
        lost = (
            lost_iterations * self.iteration_s
            if lost_iterations is not None and self.iteration_s is not None
            else None
        )
        file, line = self.locate(int(self.s.seq[first]))
        return Finding(
            kind=kind,
            severity=severity,
            title=title,
            attempt=self.s.attempt,
            start_iteration=self.iteration(first),
            end_iteration=self.iteration(last),
            start=self.time(first),
            end=self.time(last),
            detail=detail,
            lost_s=lost,
            lost_gpu_hours=gpu_hours_of(lost, self.gpus),
            file=file,
            line=line,
        )

    def at(self, i: int) -> str:
        it = self.iteration(i)
        if it is not None:
            return f"iteration {it}"
        file, line = self.locate(int(self.s.seq[i]))
        return f"{file}:{line}"


def episodes(flags: np.ndarray, gap: int) -> list[tuple[int, int]]:
    """Runs of set flags as (first, last) positions, runs at most `gap` apart joined."""
    pos = np.flatnonzero(flags)
    out: list[tuple[int, int]] = []
    for p in pos.tolist():
        if out and p - out[-1][1] <= gap + 1:
            out[-1] = (out[-1][0], p)
        else:
            out.append((p, p))
    return out


def _finite(y: Floats, positive: bool = False) -> tuple[Floats, NDArray[np.int64] | None]:
    """The finite values of y (and > 0 if `positive`) with their positions, or y itself and
    None when that is all of them (no copy of millions of lines)."""
    ok = np.isfinite(y)
    if positive:
        with np.errstate(invalid="ignore"):
            ok &= y > 0
    if ok.all():
        return y, None
    pos = np.flatnonzero(ok)
    return y[pos], pos


def _at(pos: NDArray[np.int64] | None, k: int) -> int:
    """Row of the k-th value `_finite` kept."""
    return k if pos is None else int(pos[k])


def _recovery(y: Floats, after: int, level: float) -> int | None:
    """The first position after `after` where y is back at or below `level`."""
    back = np.flatnonzero(y[after + 1 :] <= level)
    return after + 1 + int(back[0]) if len(back) else None


def _loss_spikes(rows: _Rows) -> list[Finding]:
    y, pos = _finite(rows.loss)
    rise = np.empty(len(y))
    candidates = np.zeros(len(y), dtype=bool)
    base: dict[int, float] = {}  # of the candidates: their baseline
    calm: dict[int, float] = {}  # and the level the loss is back to normal at
    # scored a chunk at a time: the full scores of millions of lines are 24 bytes each
    for part, b, spread, score in trailing_score_chunks(y, WINDOW, MIN_HISTORY, 0.005):
        np.subtract(y[part], b, out=rise[part])
        with np.errstate(invalid="ignore"):
            # a spike is a ratio to the loss before it: a baseline at or below zero (an RL
            # objective, a reward) has none
            c = (score >= SPIKE_SCORE) & (b > 0) & (rise[part] >= LOSS_SPIKE_RISE * b)
        candidates[part] = c
        at = np.flatnonzero(c)
        level = b[at] + np.maximum(3 * spread[at], 0.02 * np.abs(b[at]))
        for i, v, w in zip((at + part.start).tolist(), b[at].tolist(), level.tolist(), strict=True):
            base[i], calm[i] = v, w
    flags = _outstanding(candidates, rise, {i: calm[i] - base[i] for i in calm})
    out = []
    for a, last in episodes(flags, GAP):
        peak = a + int(np.argmax(y[a : last + 1]))
        back = _recovery(y, peak, calm[a])
        first, top = _at(pos, a), _at(pos, peak)
        after = _iterations_between(rows, first, _at(pos, back)) if back is not None else None
        recovered = (
            f"back to {base[a]:.4g} after {after} iterations"
            if after is not None
            else "not back to its level before the attempt ended"
        )
        out.append(
            rows.finding(
                "loss_spike",
                "warning",
                f"Loss spike at {rows.at(first)}: {base[a]:.4g} to {y[peak]:.4g} "
                f"({y[peak] / base[a]:.2f}x), {recovered}",
                first,
                top,
                SpikeDetail(float(y[peak] / base[a]), float(base[a]), after),
            )
        )
    return out


def _outstanding(candidates: np.ndarray, y: Floats, calm: Mapping[int, float]) -> np.ndarray:
    """The candidate spikes that stand TAIL_RATIO times above every value of the TAIL_WINDOW
    lines before them, leaving out the spikes already found (until `y` is back at or below
    `calm`, of each candidate): a heavy-tailed series' usual outliers are no spikes, a second
    spike soon after a first one still is."""
    keep = np.zeros(len(y), dtype=bool)
    masked = np.zeros(len(y), dtype=bool)
    for i in np.flatnonzero(candidates).tolist():
        if masked[i]:
            keep[i] = True  # the spike found just before, still high
            continue
        lo = max(0, i - TAIL_WINDOW)
        past = y[lo:i][~masked[lo:i]]
        if len(past) < MIN_HISTORY or y[i] < TAIL_RATIO * float(np.max(past)):
            continue
        keep[i] = True
        back = _recovery(y, i, calm[i])
        masked[i : (back if back is not None else len(y))] = True
    return keep


def _iterations_between(rows: _Rows, first: int, last: int) -> int | None:
    a, b = rows.iteration(first), rows.iteration(last)
    return b - a if a is not None and b is not None else last - first


def _grad_spikes(rows: _Rows) -> list[Finding]:
    y, pos = _finite(rows.grad_norm, positive=True)
    candidates = np.zeros(len(y), dtype=bool)
    base: dict[int, float] = {}  # of the candidates
    for part, b, _, score in trailing_score_chunks(y, WINDOW, MIN_HISTORY, 0.05):
        with np.errstate(invalid="ignore"):
            c = (score >= SPIKE_SCORE) & (y[part] >= GRAD_SPIKE_RATIO * b)
        candidates[part] = c
        at = np.flatnonzero(c)
        base.update(zip((at + part.start).tolist(), b[at].tolist(), strict=True))
    flags = _outstanding(candidates, y, {i: 2 * v for i, v in base.items()})
    out = []
    for a, last in episodes(flags, GAP):
        peak = a + int(np.argmax(y[a : last + 1]))
        first = _at(pos, a)
        out.append(
            rows.finding(
                "grad_norm_spike",
                "info",
                f"Gradient norm spike at {rows.at(first)}: {base[a]:.3g} to {y[peak]:.4g} "
                f"({y[peak] / base[a]:.0f}x)",
                first,
                _at(pos, peak),
                SpikeDetail(float(y[peak] / base[a]), float(base[a])),
            )
        )
    return out


def _with_excerpt_spikes(
    rows: _Rows, attempt: Attempt, found: list[Finding], loss: bool
) -> list[Finding]:
    """The spikes the trailing rule found, and those of the attempt's first lines, where it has
    too little history (excerpt_spikes): an order of magnitude against the first lines. A
    trailing-rule spike within one of these is the same spike."""
    y, pos = _finite(rows.loss if loss else rows.grad_norm, positive=not loss)
    first_it = rows.iteration(0) if len(rows.s.iteration) else None
    if attempt.first_iteration is not None:
        first_it = attempt.first_iteration
    spikes = excerpt_spikes(y, MIN_HISTORY, first_it, loss)
    out = [_excerpt_finding(rows, sp, pos, loss) for sp in spikes]
    spans = [
        (f.start_iteration, rows.iteration(_at(pos, sp.back)) if sp.back is not None else None)
        for f, sp in zip(out, spikes, strict=True)
    ]
    for f in found:
        it = f.start_iteration
        if it is not None and any(
            a is not None and a <= it and (b is None or it <= b) for a, b in spans
        ):
            continue
        out.append(f)
    return out


def _excerpt_finding(
    rows: _Rows, sp: ExcerptSpike, pos: NDArray[np.int64] | None, loss: bool
) -> Finding:
    y = rows.loss if loss else rows.grad_norm
    first, top = _at(pos, sp.first), _at(pos, sp.peak)
    peak = float(y[top])
    after = _iterations_between(rows, first, _at(pos, sp.back)) if sp.back is not None else None
    if loss:
        recovered = (
            f"back to {sp.baseline:.4g} after {after} iterations"
            if after is not None
            else "not back to its first lines' level in these lines"
        )
        title = (
            f"Loss spike at {rows.at(first)}: {sp.baseline:.4g} to {peak:.4g} "
            f"({peak / sp.baseline:.2f}x, +{peak - sp.baseline:.2f} nats against the first "
            f"lines), {recovered}"
        )
        return rows.finding(
            "loss_spike",
            "warning",
            title,
            first,
            top,
            SpikeDetail(peak / sp.baseline, sp.baseline, after),
        )
    return rows.finding(
        "grad_norm_spike",
        "info",
        f"Gradient norm spike at {rows.at(first)}: {sp.baseline:.3g} to {peak:.4g} "
        f"({peak / sp.baseline:.0f}x the first lines)",
        first,
        top,
        SpikeDetail(peak / sp.baseline, sp.baseline),
    )


def _nans(rows: _Rows) -> list[Finding]:
    if not rows.nonfinite.any() and not (rows.nan_iters > 0).any():
        return []  # the usual run: no column of millions of zeros made
    nan_its = np.nan_to_num(rows.nan_iters)
    count = np.where(rows.nonfinite > 0, np.maximum(rows.s.covered, nan_its), nan_its)
    out = []
    for a, b in episodes(count > 0, GAP):
        n = float(np.sum(count[a : b + 1]))
        span = f" to {rows.at(b)}" if b > a else ""
        out.append(
            rows.finding(
                "nan_loss",
                "warning",
                f"NaN loss at {rows.at(a)}{span}: {n:.0f} iteration{'s' if n != 1 else ''} "
                "with a NaN or infinite loss",
                a,
                b,
                CountDetail(n),
                lost_iterations=n,
            )
        )
    return out


def _skips(rows: _Rows, attempt: Attempt, overflow_seqs: Sequence[int]) -> list[Finding]:
    seq = rows.s.seq
    lo, hi = int(seq[0]), int(seq[-1])
    if not (rows.skipped > 0).any() and not any(lo < q <= hi for q in overflow_seqs):
        return []  # the usual run: no column of millions of zeros made
    skipped = np.nan_to_num(rows.skipped).copy()
    # DeepSpeed prints a line per skipped step: each counts for the progress line after it
    for q in overflow_seqs:
        if lo < q <= hi:
            skipped[int(np.searchsorted(seq, q))] += 1
    if attempt.resumed_from is None:
        # a run from scratch: the scaler searches down from its initial scale, skipping steps
        clean = np.flatnonzero(skipped == 0)
        skipped[: int(clean[0]) if len(clean) else len(skipped)] = 0
    numbered = bool((rows.s.iteration >= 0).all())
    at = rows.s.iteration if numbered else np.arange(len(skipped))
    groups: list[list[int]] = []  # skips each within SKIP_SPAN iterations of the one before
    for p in np.flatnonzero(skipped > 0).tolist():
        if groups and at[p] - at[groups[-1][-1]] <= SKIP_SPAN:
            groups[-1].append(p)
        else:
            groups.append([p])
    out = []
    for g in groups:
        n = float(np.sum(skipped[g]))
        if n < SKIP_BURST:
            continue
        a, b = g[0], g[-1]
        out.append(
            rows.finding(
                "skipped_steps",
                "warning",
                f"{n:.0f} steps skipped from {rows.at(a)} to {rows.at(b)} "
                "(fp16 overflow: the gradients overflowed again and again)",
                a,
                b,
                CountDetail(n),
                lost_iterations=n,
            )
        )
    return out


def _scale_collapse(rows: _Rows, overflow_scales: Sequence[tuple[int, float]]) -> list[Finding]:
    scale = rows.loss_scale.copy()
    seq = rows.s.seq
    lo, hi = int(seq[0]), int(seq[-1])
    for q, v in overflow_scales:
        if lo < q <= hi:
            i = int(np.searchsorted(seq, q))
            scale[i] = v if math.isnan(scale[i]) else min(scale[i], v)
    pos = np.flatnonzero(np.isfinite(scale))
    vals = scale[pos]
    if len(vals) == 0 or float(np.max(vals)) <= 1.0:
        return []  # bf16 and fp32 runs print a constant loss scale of 1
    # the scaler's search down from its initial scale, at a run's start, is no collapse
    steady = np.flatnonzero(np.diff(vals) >= 0)
    settled = int(steady[0]) + 1 if len(steady) else len(vals)
    if settled >= len(vals):
        return []
    held = np.maximum.accumulate(vals[settled:])
    low = (vals[settled:] <= 1.0) | (vals[settled:] <= held / SCALE_COLLAPSE)
    hits = np.flatnonzero(low)
    if len(hits) == 0:
        return []
    i, last = int(pos[settled + hits[0]]), int(pos[settled + hits[-1]])
    before = float(held[hits[0]])
    return [
        rows.finding(
            "loss_scale_collapse",
            "warning",
            f"fp16 loss scale collapsed to {scale[i]:g} at {rows.at(i)} (from {before:g}): "
            "the gradients overflow at every scale",
            i,
            last,
            ScaleDetail(float(scale[i]), before),
        )
    ]
