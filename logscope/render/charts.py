"""Small SVG charts of the run's training series (step time, loss, gradient norm) against
iterations, from the document's `training` columns: one path per attempt, the findings marked
(a band over a slowdown, a line at a spike or a NaN). Coordinates only: the template draws."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from ..model import duration

WIDTH = 960
HEIGHT = 150
LEFT = 120
RIGHT = 40
TOP = 10
BOTTOM = 24

SERIES = (
    ("step_s", "step time", "s", False, ("slowdown",)),
    ("loss", "loss", "", False, ("loss_spike", "nan_loss", "skipped_steps", "loss_scale_collapse")),
    ("grad_norm", "gradient norm", "", True, ("grad_norm_spike",)),
)
"""(column, name, unit, log scale, finding kinds marked on it)."""


@dataclass(frozen=True, slots=True)
class Band:
    x: float
    w: float
    cls: str
    title: str


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    y: float
    text: str
    anchor: str = "middle"


@dataclass(frozen=True, slots=True)
class Chart:
    name: str
    width: int
    height: int
    paths: tuple[tuple[str, str], ...]
    """(class, SVG path data): one per attempt."""
    bands: tuple[Band, ...]
    ticks: tuple[Tick, ...]
    grid: tuple[float, ...]


def charts(doc: dict[str, Any]) -> list[Chart]:
    """A chart per series the log reports, in SERIES order."""
    training = doc.get("training")
    if not training:
        return []
    its = training["iteration"]
    xs: list[float] = (
        [float(i) for i in its]
        if all(i is not None for i in its)
        else [float(k) for k in range(len(its))]
    )
    if len(xs) < 2 or max(xs) <= min(xs):
        return []
    x0, x1 = min(xs), max(xs)

    def x(v: float) -> float:
        return round(LEFT + (v - x0) * (WIDTH - LEFT - RIGHT) / (x1 - x0), 1)

    out = []
    for column, name, unit, log, kinds in SERIES:
        values = training[column]
        finite = [v for v in values if v is not None and (v > 0 or not log)]
        if len(finite) < 2:
            continue
        y = _scale(finite, log, column == "step_s")
        paths = []
        for attempt in sorted(set(training["attempt"])):
            pts = [
                (x(xs[k]), y(v))
                for k, v in enumerate(values)
                if training["attempt"][k] == attempt and v is not None and (v > 0 or not log)
            ]
            if pts:
                d = "M" + " L".join(f"{a},{b}" for a, b in pts)
                paths.append((f"series a{attempt % 4}", d))
        bands = [_band(f, x, x0, x1) for f in doc.get("findings") or [] if f["kind"] in kinds]
        lo, hi = _shown(finite, column == "step_s")
        label = f"{name} ({unit})" if unit else name
        ticks = [
            Tick(8, (HEIGHT - BOTTOM + TOP) // 2 + 4, label, "start"),
            Tick(LEFT - 6, TOP + 4, _fmt(hi), "end"),
            Tick(LEFT - 6, HEIGHT - BOTTOM, _fmt(lo), "end"),
        ]
        grid = []
        for v in _round_ticks(x0, x1):
            grid.append(x(v))
            ticks.append(Tick(x(v), HEIGHT - 6, f"{v:,.0f}"))
        out.append(
            Chart(
                name,
                WIDTH,
                HEIGHT,
                tuple(paths),
                tuple(b for b in bands if b is not None),
                tuple(ticks),
                tuple(grid),
            )
        )
    return out


def _scale(values: list[float], log: bool, level: bool = False) -> Any:
    """value -> y. With `level`, at least +-10% of the median is shown, so that noise of a few
    percent stays flat and a step of 5% stands out."""
    f = math.log10 if log else (lambda v: v)
    lo, hi = (f(v) for v in _shown(values, level))
    if hi <= lo:
        hi = lo + 1.0

    def y(v: float) -> float:
        return round(HEIGHT - BOTTOM - (f(v) - lo) * (HEIGHT - BOTTOM - TOP) / (hi - lo), 1)

    return y


def _shown(values: list[float], level: bool) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if level:
        mid = statistics.median(values)
        return min(lo, mid * 0.9), max(hi, mid * 1.1)
    return lo, hi


def _band(f: dict[str, Any], x: Any, x0: float, x1: float) -> Band | None:
    a, b = f["start_iteration"], f["end_iteration"]
    if a is None:
        return None
    # a slowdown is a stretch; a spike, a NaN, a collapse are where they began
    b = b if b is not None and f["kind"] == "slowdown" else a
    a, b = max(float(a), x0), min(float(b), x1)
    if b < a:
        return None
    lost = f" ({duration(f['lost_s'])} lost)" if f.get("lost_s") else ""
    return Band(x(a), round(max(2.0, x(b) - x(a)), 1), f"finding {f['kind']}", f["title"] + lost)


def _round_ticks(x0: float, x1: float) -> list[float]:
    """At most 6 round iteration numbers between x0 and x1."""
    span = x1 - x0
    step = 10.0 ** (math.floor(math.log10(span)) - 1) if span > 0 else 1.0
    for m in (1, 2, 5, 10, 20, 50):
        if span / (step * m) <= 6:
            step *= m
            break
    first = math.ceil(x0 / step) * step
    return [first + k * step for k in range(int((x1 - first) // step) + 1)]


def _fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
