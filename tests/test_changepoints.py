"""The statistics behind findings: binary segmentation and trailing robust scores."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from logscope.findings import changepoints as changepoints
from logscope.findings.changepoints import (
    noise_sigma,
    segments,
    sorted_window_medians,
    trailing_score_chunks,
    trailing_scores,
    window_medians,
    winsorize,
)


def _noise(n: int, seed: int, sd: float = 0.01) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, sd, n)


@settings(max_examples=40, deadline=None)
@given(st.integers(50, 3000), st.integers(0, 2**32 - 1))
def test_noise_alone_is_one_segment(n: int, seed: int) -> None:
    assert len(segments(_noise(n, seed), 10, np.log1p(0.02))) == 1


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    st.integers(100, 2000),
    st.floats(0.1, 0.9),
    st.sampled_from([0.03, 0.05, 0.1]),
    st.integers(0, 2**32 - 1),
)
@example(n=344, where=0.5703125, shift=0.03, seed=1437)  # found 6 lines early
def test_a_step_is_found_where_it_is(n: int, where: float, shift: float, seed: int) -> None:
    k = max(10, min(n - 10, int(n * where)))
    y = _noise(n, seed)
    y[k:] += np.log1p(shift)
    segs = segments(y, 10, np.log1p(0.02))
    assert len(segs) == 2
    # a step of 3 noise units (0.03 against sd 0.01) is placed less surely than a larger one:
    # a few lines either side are as likely as the true place
    assert abs(segs[1].start - k) <= (10 if shift < 0.05 else 5)
    assert abs(segs[1].level - segs[0].level - np.log1p(shift)) < 0.01


def test_a_stretch_in_the_middle_is_found_at_both_ends() -> None:
    """An epidemic change: weak in the first split over the whole series, found on recursion."""
    y = _noise(1500, 7)
    y[700:900] += np.log1p(0.03)
    segs = segments(y, 10, np.log1p(0.02))
    assert len(segs) == 3
    assert abs(segs[1].start - 700) <= 5 and abs(segs[1].end - 900) <= 5


def test_one_outlier_makes_no_segment() -> None:
    y = _noise(400, 3)
    y[200] += 1.0  # a step that took 2.7x: a save, an evaluation
    y[201] += 0.5
    assert len(segments(y, 10, np.log1p(0.02))) == 1


def test_sigma_ignores_level_shifts_and_winsorize_keeps_steps() -> None:
    y = _noise(1000, 5, sd=0.02)
    y[500:] += 1.0
    assert 0.015 < noise_sigma(y) < 0.025
    w = winsorize(y, noise_sigma(y))
    assert abs(np.median(w[500:]) - np.median(w[:500]) - 1.0) < 0.01


def test_trailing_scores_compare_with_the_past_only() -> None:
    y = np.concatenate([np.full(30, 2.0) + _noise(30, 1), [3.0], np.full(10, 2.0)])
    base, _, score = trailing_scores(y, 20, 10, 0.005)
    assert np.isnan(score[:10]).all()
    assert abs(base[30] - 2.0) < 0.02
    assert score[30] > 20
    assert np.nanmax(np.abs(score[11:30])) < 6


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=0, max_size=400),
    st.integers(1, 150),
    st.booleans(),
)
def test_moving_medians_are_the_sorted_ones(values: list[float], window: int, ties: bool) -> None:
    # the heap (bottleneck) and sorting each window give the same floats, even-sized windows'
    # mean of the two middle values, ties and windows longer than the series included
    y = np.round(np.array(values, dtype=np.float64), 0 if ties else 6)
    assert np.array_equal(window_medians(y, window), sorted_window_medians(y, window))


def test_a_window_holding_nan_has_a_nan_median() -> None:
    y = np.array([1.0, 2.0, np.nan, 4.0, 5.0, 6.0, 7.0])
    got = window_medians(y, 3)
    assert np.array_equal(np.isnan(got), [False, False, True, True, True, False, False])
    assert got[-1] == 6.0 and got[1] == 1.5


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000])
def test_trailing_scores_by_chunks_are_the_same_floats(chunk: int) -> None:
    rng = np.random.default_rng(5)
    y = np.cumsum(rng.normal(0, 1, 500)) + rng.standard_t(2, 500)
    base, spread, score = trailing_scores(y, 20, 10, 0.005)
    parts = list(trailing_score_chunks(y, 20, 10, 0.005, chunk=chunk))
    assert [p.start for p, *_ in parts] == list(range(0, 500, chunk))
    for got, want in zip(
        zip(*(p[1:] for p in parts), strict=True), (base, spread, score), strict=True
    ):
        assert np.concatenate(got).tobytes() == want.tobytes()


@pytest.mark.parametrize("chunk", [1, 3, 50, 1 << 16])
@given(y=st.lists(st.sampled_from([0.0, 1.0, 1.5, 2.0, 10.0]), min_size=4, max_size=120))
def test_best_split_by_chunks_is_the_whole_argmax(chunk: int, y: list[float]) -> None:
    """The first of the largest gains, ties included, as np.argmax over all splits at once."""
    arr = np.array(y)
    cs = np.concatenate(([0.0], np.cumsum(arr)))
    s, e, min_size = 0, len(arr), 2
    k = np.arange(s + min_size, e - min_size + 1)
    n1, n2 = (k - s).astype(np.float64), (e - k).astype(np.float64)
    gain = n1 * n2 / (e - s) * ((cs[k] - cs[s]) / n1 - (cs[e] - cs[k]) / n2) ** 2
    want = (int(k[int(np.argmax(gain))]), float(np.max(gain)))
    assert changepoints.best_split(cs, s, e, min_size, chunk) == want
