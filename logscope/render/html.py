"""The HTML postmortem: one self-contained, offline file from the analysis document.

It renders the JSON document (`logscope.document`), never the Analysis object or the logs, so
`logscope report analysis.json` makes the same page and every figure on it is also in the JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jinja2

WIDTH = 960
LANE_H = 46
LEFT = 90


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("logscope", "templates"),
        autoescape=True,  # log text is hostile input
        undefined=jinja2.StrictUndefined,  # a typo in a template fails the tests, not the user
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _t(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


@dataclass(frozen=True, slots=True)
class Box:
    x: float
    y: float
    w: float
    h: float
    cls: str
    title: str


@dataclass(frozen=True, slots=True)
class Mark:
    x: float
    y: float
    cls: str
    title: str


@dataclass(frozen=True, slots=True)
class Timeline:
    width: int
    height: int
    boxes: tuple[Box, ...]
    marks: tuple[Mark, ...]
    paths: tuple[tuple[str, str], ...]
    """(class, SVG path data) of the progress lines."""
    labels: tuple[tuple[float, float, str], ...]
    axis: tuple[tuple[float, str], ...]


def timeline(doc: dict[str, Any]) -> Timeline | None:
    """Attempts as lanes over wall time, progress as lines, checkpoints, hangs, wasted work."""
    attempts = doc.get("attempts") or []
    spans = [(_t(a["start"] or a["loop_start"]), _t(a["end"])) for a in attempts]
    times = [t for span in spans for t in span if t is not None]
    if len(times) < 2 or max(times) <= min(times):
        return None
    t0, t1 = min(times), max(times)
    scale = (WIDTH - LEFT - 20) / (t1 - t0)

    def x(t: float) -> float:
        return round(LEFT + (t - t0) * scale, 1)

    boxes: list[Box] = []
    marks: list[Mark] = []
    labels: list[tuple[float, float, str]] = []
    paths: list[tuple[str, str]] = []
    ledger = doc.get("ledger") or {"incidents": []}
    by_attempt = {i["attempt"]: i for i in ledger["incidents"]}
    points = [(_t(t), it) for t, it in doc.get("progress") or []]
    for i, (a, (s, e)) in enumerate(zip(attempts, spans, strict=True)):
        if s is None or e is None:
            continue
        y = 10 + i * LANE_H
        labels.append((8, y + 26, f"attempt {i + 1}"))
        boxes.append(Box(x(s), y + 8, max(1.0, x(e) - x(s)), 30, "lane", f"attempt {i + 1}"))
        loop = _t(a["loop_start"])
        if loop is not None and loop > s:
            boxes.append(Box(x(s), y + 8, x(loop) - x(s), 30, "startup", "start-up"))
        inc = by_attempt.get(i)
        if inc and inc["failure"]:
            f = _t(inc["failure"]) or e
            u = f - (inc["wasted_progress_s"] or 0)
            boxes.append(Box(x(u), y + 8, max(1.0, x(f) - x(u)), 30, "wasted", "wasted progress"))
            boxes.append(Box(x(f), y + 8, max(1.0, x(e) - x(f)), 30, "hang", "hang"))
            title = f"{inc['incident'] or ''} {inc['kind']}".strip()
            marks.append(Mark(x(f), y + 4, "incident", title))
        for c in a["checkpoints"]:
            ct = _t(c["end"])
            if ct is not None:
                marks.append(Mark(x(ct), y + 38, "checkpoint", f"checkpoint {c['iteration']}"))
        lo, hi = a["first_iteration"], a["last_iteration"]
        mine = [(t, it) for t, it in points if t is not None and s <= t <= e]
        if mine and lo is not None and hi is not None and hi > lo:
            span = hi - (a["resumed_from"] or lo)
            base = a["resumed_from"] or lo
            coords = [
                f"{x(t)},{round(y + 36 - 26 * (it - base) / max(1, span), 1)}" for t, it in mine
            ]
            paths.append(("progress", "M" + " L".join(coords)))
    axis = []
    for k in range(5):
        t = t0 + (t1 - t0) * k / 4
        axis.append((x(t), datetime.fromtimestamp(t).strftime("%m-%d %H:%M")))
    height = 10 + len(attempts) * LANE_H + 24
    return Timeline(
        WIDTH, height, tuple(boxes), tuple(marks), tuple(paths), tuple(labels), tuple(axis)
    )


def _ranks(ranks: list[int]) -> str:
    if not ranks:
        return ""
    out: list[str] = []
    start = prev = ranks[0]
    for r in [*ranks[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(out)


def _hours(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if abs(seconds) >= 3600:
        return f"{seconds / 3600:.2f} h"
    if abs(seconds) >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


def render(doc: dict[str, Any], generated: str) -> str:
    """The page for an analysis document. `generated` is a label (time, version) for the footer."""
    env = environment()
    env.filters["hours"] = _hours
    env.filters["ranks"] = _ranks
    env.filters["pct"] = lambda v: "-" if v is None else f"{v:.1%}"
    template = env.get_template("report.html.j2")
    verdict = doc.get("verdict")
    verdict_incident = next(
        (i for i in doc["incidents"] if verdict and i["id"] == verdict["incident"]), None
    )
    # jinja's tojson escapes <, >, & and ': log text cannot close the embedded <script>
    return template.render(
        doc=doc,
        verdict_incident=verdict_incident,
        timeline=timeline(doc),
        generated=generated,
        doc_json=doc,
    )
