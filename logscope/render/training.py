"""Step time, loss and gradient norm along a run, thinned for the document and its charts: at
most `POINTS` buckets of consecutive progress lines, each with its median step time and its
highest loss and gradient norm (a slowdown is a level; a spike must show)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..findings.slowdowns import step_times
from ..model import Analysis

POINTS = 600
"""Buckets in a run: enough for a 900-pixel chart, small for a 5 GB log."""


def _value(v: float) -> float | None:
    return round(v, 6) if math.isfinite(v) else None


def training_doc(analysis: Analysis) -> dict[str, list[Any]] | None:
    """Columns `attempt`, `iteration`, `step_s`, `loss`, `grad_norm` (None where the log does
    not say), or None when no progress line reports any of them."""
    attempts = analysis.attempts
    progress = analysis.progress
    rows = [s for a in attempts if (s := step_times(progress, a)) is not None]
    total = sum(len(s.iteration) for s in rows)
    if total == 0:
        return None
    size = max(1, math.ceil(total / POINTS))
    loss_all = progress.loss.numpy()
    grad_all = progress.grad_norm.numpy()
    out: dict[str, list[Any]] = {
        k: [] for k in ("attempt", "iteration", "step_s", "loss", "grad_norm")
    }
    for s in rows:
        per_it = s.seconds / s.covered
        loss = loss_all[s.rows]
        grad = grad_all[s.rows]
        for lo in range(0, len(s.iteration), size):
            hi = min(len(s.iteration), lo + size)
            it = int(s.iteration[hi - 1])
            out["attempt"].append(s.attempt)
            out["iteration"].append(it if it >= 0 else None)
            out["step_s"].append(_stat(np.median, per_it[lo:hi]))
            out["loss"].append(_stat(np.max, loss[lo:hi]))
            out["grad_norm"].append(_stat(np.max, grad[lo:hi]))
    if all(v is None for k in ("step_s", "loss", "grad_norm") for v in out[k]):
        return None
    return out


def _stat(f: Any, values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return _value(float(f(finite))) if len(finite) else None
