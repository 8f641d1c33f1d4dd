"""Change points in a noisy series and robust scores against a trailing window: the statistics
behind slowdowns and training health, on numpy arrays, knowing nothing of logs. Change points
come from binary segmentation of the mean with a BIC-like penalty (as `ruptures.Binseg`, L2)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import bottleneck as bn
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

Floats = NDArray[np.float64]

MAD_TO_SIGMA = 1.4826
"""Median absolute deviation to standard deviation, for Gaussian noise."""
CHUNK_VALUES = 1 << 20
"""Values `trailing_median` sorts at once (8 MB): windows are taken CHUNK_VALUES // window at a
time, so a long window does not cost a copy of the whole series times the window."""
SCORE_CHUNK = 1 << 16
"""Points `trailing_score_chunks` scores at once: a series of millions of progress lines never
has its baseline, spread and score whole (24 bytes a point, and more while computed)."""


def window_medians(y: Floats, window: int) -> Floats:
    """At each point, the median of the `window` points that end there (fewer at the start).

    Bottleneck's moving median (a double heap, O(log window) a point) gives the same floats
    as sorting each window, ~25 times faster for 100 points a window: over the 3 million
    progress lines of a 5 GB log that was the longest step after the scan. It skips NaN
    where numpy's median returns it, so a series holding NaN is sorted window by window.
    The analysis never imports pandas (~40 MB, 0.4 s) for this."""
    n = len(y)
    if n and window >= 1 and not np.isnan(y).any():
        out: Floats = bn.move_median(np.asarray(y, np.float64), min(window, n), min_count=1)
        return out
    return sorted_window_medians(y, window)


def sorted_window_medians(y: Floats, window: int) -> Floats:
    """window_medians by sorting each window (numpy's median), NaN where a window holds one."""
    n = len(y)
    ends = np.empty(n)
    for i in range(min(window - 1, n)):
        ends[i] = np.median(y[: i + 1])
    if n >= window:
        view = sliding_window_view(y, window)
        chunk = max(1, CHUNK_VALUES // window)
        for a in range(0, len(view), chunk):
            part = view[a : a + chunk]
            ends[window - 1 + a : window - 1 + a + len(part)] = np.median(part, axis=1)
    return ends


def trailing_median(y: Floats, window: int, min_periods: int = 1) -> Floats:
    """At each point, the median of the `window` points before it (fewer at the start, NaN with
    fewer than `min_periods`)."""
    out = np.full(len(y), np.nan)
    out[1:] = window_medians(y, window)[:-1]
    out[: min(min_periods, len(y))] = np.nan
    return out


def trailing_sum(flags: NDArray[np.bool_], window: int) -> Floats:
    """At each point, how many of the `window` points before it are set."""
    c = np.concatenate(([0.0], np.cumsum(flags, dtype=np.float64)))
    i = np.arange(len(flags))
    return c[i] - c[np.maximum(0, i - window)]


def noise_sigma(y: Floats) -> float:
    """The noise of a series with level shifts: the MAD of its first differences, over sqrt 2."""
    if len(y) < 3:
        return 0.0
    d = np.diff(y)
    np.abs(np.subtract(d, np.median(d), out=d), out=d)  # in place: a series may be millions long
    return float(MAD_TO_SIGMA * np.median(d, overwrite_input=True) / math.sqrt(2))


def winsorize(y: Floats, sigma: float, window: int = 9, k: float = 4.0) -> Floats:
    """y clipped to its centred running median +- k sigma: single outliers lose their weight,
    a step change (which moves the median with it) keeps it."""
    if len(y) < window or sigma <= 0:
        return y
    half = window // 2
    med = np.empty(len(y))
    med[: len(y) - half] = window_medians(y, window)[half:]  # centred: the window ending later
    for i in [*range(half), *range(len(y) - half, len(y))]:
        med[i] = np.median(y[max(0, i - half) : i + half + 1])  # the ends: part windows
    high = med + k * sigma
    low = np.subtract(med, k * sigma, out=med)
    return np.minimum(np.maximum(y, low, out=low), high, out=low)  # np.clip, in place


@dataclass(frozen=True, slots=True)
class Segment:
    start: int
    """First index (inclusive)."""
    end: int
    """Last index + 1."""
    level: float
    """The median of the segment's raw values."""


def segments(
    y: Floats,
    min_size: int,
    min_shift: float,
    penalty_factor: float = 3.0,
) -> list[Segment]:
    """The segments of constant mean in y, by binary segmentation (see the module docstring).
    Adjacent segments whose medians differ by less than `min_shift` are merged."""
    n = len(y)
    if n == 0:
        return []
    sigma = noise_sigma(y)
    z = winsorize(y, sigma)
    cuts = _binary_segmentation(z, min_size, penalty_factor * sigma**2 * math.log(n))
    bounds = [0, *cuts, n]
    out: list[Segment] = []
    for a, b in itertools.pairwise(bounds):
        level = float(np.median(y[a:b]))
        if out and abs(level - out[-1].level) < min_shift:
            merged = Segment(out[-1].start, b, float(np.median(y[out[-1].start : b])))
            out[-1] = merged
        else:
            out.append(Segment(a, b, level))
    return out


def _binary_segmentation(y: Floats, min_size: int, penalty: float) -> list[int]:
    """Split points, each lowering the squared error by more than `penalty`. A split is taken
    even when its two means are close: a short stretch in the middle of a segment shows only
    weakly in the first split, clearly in the next (`segments` merges what stays close)."""
    cs = np.concatenate(([0.0], np.cumsum(y)))
    cuts: list[int] = []
    stack = [(0, len(y))]
    while stack:
        s, e = stack.pop()
        if e - s < 2 * min_size:
            continue
        cut, gain = best_split(cs, s, e, min_size)
        if gain <= penalty:
            continue
        cuts.append(cut)
        stack += [(s, cut), (cut, e)]
    return sorted(cuts)


def best_split(
    cs: Floats, s: int, e: int, min_size: int, chunk: int = SCORE_CHUNK
) -> tuple[int, float]:
    """The split of y[s:e] (cs: y's cumulative sums from 0) that lowers the squared error most,
    and by how much: the first of the largest gains, as np.argmax picks it. The candidate splits
    are weighed `chunk` at a time (the gains of a million points at once took nine arrays
    of them), each gain the same float."""
    n = e - s
    best, best_gain = -1, -math.inf
    for lo in range(s + min_size, e - min_size + 1, chunk):
        k = np.arange(lo, min(lo + chunk, e - min_size + 1))
        n1 = (k - s).astype(np.float64)
        n2 = (e - k).astype(np.float64)
        m1 = (cs[k] - cs[s]) / n1
        m2 = (cs[e] - cs[k]) / n2
        gain = n1 * n2 / n * (m1 - m2) ** 2
        j = int(np.argmax(gain))
        g = float(gain[j])
        if best < 0 or g > best_gain or (math.isnan(g) and not math.isnan(best_gain)):
            best, best_gain = int(k[j]), g
        if math.isnan(best_gain):
            break  # np.argmax stops at the first NaN
    return best, best_gain


def trailing_scores(
    y: Floats, window: int, min_periods: int, floor: float, recent: int = 5
) -> tuple[Floats, Floats, Floats]:
    """For each point, its baseline (the median of the `recent` points before it: close behind
    a loss that falls fast), the noise of the `window` points before it (from their first
    differences, so a trend does not count as noise; at least `floor` times |baseline|) and the
    point's score: how many noise units above the baseline it lies. NaN where fewer than
    `min_periods` points precede it."""
    base = trailing_median(y, recent)
    steps = np.abs(np.diff(y, prepend=np.nan))  # steps[i] = |y[i] - y[i - 1]|
    # the steps before point i: steps[1..i-1], known from point min_periods on
    noise = (MAD_TO_SIGMA / math.sqrt(2)) * trailing_median(steps[1:], window, min_periods)
    noise = np.concatenate(([np.nan], noise))[: len(y)]
    spread = np.maximum(noise, floor * np.abs(base))
    with np.errstate(divide="ignore", invalid="ignore"):
        score = (y - base) / spread
    return base, spread, score


def trailing_score_chunks(
    y: Floats,
    window: int,
    min_periods: int,
    floor: float,
    recent: int = 5,
    chunk: int = SCORE_CHUNK,
) -> Iterator[tuple[slice, Floats, Floats, Floats]]:
    """`trailing_scores` of y, `chunk` points at a time: (the points, their base, spread and
    score). The same floats: each chunk is scored with the `window` points before it, all any
    of its points looks back at."""
    history = max(window, recent) + 1  # a point's noise is of the `window` steps before it
    for start in range(0, len(y), chunk):
        lo, end = max(0, start - history), min(len(y), start + chunk)
        base, spread, score = trailing_scores(y[lo:end], window, min_periods, floor, recent)
        k = start - lo
        yield slice(start, end), base[k:], spread[k:], score[k:]
