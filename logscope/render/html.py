"""The HTML postmortem: one self-contained, offline file rendered from the JSON document
(render.document), never from the Analysis, so `logscope report analysis.json` makes the same
page. Joins, pivots, coordinates and wording are done here: the templates loop and branch only."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import jinja2
from markupsafe import Markup, escape

from ..model import duration, gpu_hours, rank_ranges
from .charts import charts
from .document import culprit_name, hang_line, survived_rows

WIDTH = 960
LANE_H = 46
LEFT = 120
RIGHT = 40

_EPOCH = datetime(1970, 1, 1)
_TICK_STEPS = (
    *(1, 2, 5, 10, 15, 30),
    *(60 * m for m in (1, 2, 5, 10, 15, 30)),
    *(3600 * h for h in (1, 2, 3, 6, 12)),
    *(86400 * d for d in (1, 2, 7, 14, 28)),
)


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("logscope.render", "templates"),
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
class Label:
    x: float
    y: float
    text: str
    cls: str = ""
    anchor: str = "start"


@dataclass(frozen=True, slots=True)
class Timeline:
    width: int
    height: int
    boxes: tuple[Box, ...]
    marks: tuple[Mark, ...]
    paths: tuple[tuple[str, str], ...]
    """(class, SVG path data) of the progress lines."""
    labels: tuple[Label, ...]
    axis: tuple[Label, ...]
    ticks: tuple[float, ...]
    """x of the axis ticks (vertical grid lines)."""


def _ticks(t0: float, t1: float) -> list[tuple[float, str]]:
    """Round times between t0 and t1 (at most 7), labelled in the log's wall-clock time."""
    span = t1 - t0
    step = next((s for s in _TICK_STEPS if span / s <= 6), _TICK_STEPS[-1])
    wall0 = datetime.fromtimestamp(t0)
    offset = (wall0 - _EPOCH).total_seconds()
    first = _EPOCH + timedelta(seconds=math.ceil(offset / step) * step)
    out: list[tuple[float, str]] = []
    day = None
    k = 0
    while True:
        wall = first + timedelta(seconds=k * step)
        t = wall.timestamp()
        if t > t1 + 1e-6:
            break
        fmt = "%H:%M:%S" if step < 60 else "%H:%M"
        if wall.date() != day:
            fmt = "%m-%d " + fmt
            day = wall.date()
        out.append((t, wall.strftime(fmt)))
        k += 1
    return out


def _lane_outcome(doc: dict[str, Any], index: int, inc: dict[str, Any] | None) -> tuple[str, str]:
    """The second lane label and its class: how the attempt ended."""
    if inc:
        return f"{inc['kind']} {inc['incident'] or ''}".strip(), "bad"
    if index == len(doc["attempts"]) - 1:
        outcome = doc["job"]["outcome"]
        text = "running at log end" if outcome == "truncated" else outcome
        return text, "ok" if outcome in ("completed", "truncated") else "bad"
    return "restarted", ""


def timeline(doc: dict[str, Any]) -> Timeline | None:
    """Attempts as lanes over wall time, progress as lines, checkpoints, hangs, wasted work."""
    attempts = doc.get("attempts") or []
    spans = [(_t(a["start"] or a["loop_start"]), _t(a["end"])) for a in attempts]
    times = [t for span in spans for t in span if t is not None]
    if len(times) < 2 or max(times) <= min(times):
        return None
    t0, t1 = min(times), max(times)
    scale = (WIDTH - LEFT - RIGHT) / (t1 - t0)

    def x(t: float) -> float:
        return round(LEFT + (t - t0) * scale, 1)

    boxes: list[Box] = []
    marks: list[Mark] = []
    labels: list[Label] = []
    paths: list[tuple[str, str]] = []
    ledger = doc.get("ledger") or {"incidents": []}
    by_attempt = {i["attempt"]: i for i in ledger["incidents"]}
    points = [(_t(t), it) for t, it in doc.get("progress") or []]
    for i, (a, (s, e)) in enumerate(zip(attempts, spans, strict=True)):
        if s is None or e is None:
            continue
        y = 10 + i * LANE_H
        inc = by_attempt.get(i)
        labels.append(Label(8, y + 20, f"attempt {i + 1}"))
        text, cls = _lane_outcome(doc, i, inc)
        labels.append(Label(8, y + 34, text, cls))
        boxes.append(Box(x(s), y + 8, max(1.0, x(e) - x(s)), 30, "lane", f"attempt {i + 1}"))
        loop = _t(a["loop_start"])
        if loop is not None and loop > s:
            boxes.append(Box(x(s), y + 8, x(loop) - x(s), 30, "startup", "start-up"))
        if inc and inc["failure"]:
            f = _t(inc["failure"]) or e
            u = f - (inc["wasted_progress_s"] or 0)
            boxes.append(
                Box(
                    x(u),
                    y + 8,
                    max(1.0, x(f) - x(u)),
                    30,
                    "wasted",
                    "progress lost since the last checkpoint: "
                    + duration(inc["wasted_progress_s"]),
                )
            )
            boxes.append(
                Box(
                    x(f),
                    y + 8,
                    max(1.0, x(e) - x(f)),
                    30,
                    "hang",
                    f"from the failure to the end of the attempt: {duration(inc['hang_s'])}",
                )
            )
            title = f"{inc['incident'] or ''} {inc['kind']} at {_when(inc['failure'])}".strip()
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
            labels.append(Label(x(mine[-1][0]) + 3, y + 8, f"{hi}", "iter"))
    height = 10 + len(attempts) * LANE_H + 24
    ticks = _ticks(t0, t1)
    axis = tuple(
        Label(
            x(t),
            height - 6,
            text,
            anchor="end" if x(t) > WIDTH - RIGHT / 2 - 30 else "middle",
        )
        for t, text in ticks
    )
    return Timeline(
        WIDTH,
        height,
        tuple(boxes),
        tuple(marks),
        tuple(paths),
        tuple(labels),
        axis,
        tuple(x(t) for t, _ in ticks),
    )


def _when(value: str | None) -> str:
    """An ISO time as `2022-03-22 04:43:17` (the log's own clock, no sub-seconds)."""
    return value[:19].replace("T", " ") if value else "-"


_CODE = re.compile(r"`([^`]+)`")


def _code(text: str) -> Markup:
    """Escape text, then show its `backticked` parts as <code>: remedies quote commands so."""
    parts = _CODE.split(str(text))
    out = Markup("")
    for k, part in enumerate(parts):
        out += Markup("<code>{}</code>").format(part) if k % 2 else escape(part)
    return out


def _who(culprit: dict[str, Any] | None) -> str | None:
    if not culprit:
        return None
    return culprit_name(
        culprit["rank"], culprit["local_rank"], culprit["host"], culprit.get("task")
    )


def overview(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per incident for the banner: what, where, when, what it cost, what to do first."""
    ledger = doc.get("ledger") or {"incidents": []}
    by_id = {i["incident"]: i for i in ledger["incidents"] if i["incident"]}
    jobs = {a["index"]: a["job_id"] for a in doc.get("attempts", [])}
    rows = []
    for inc in doc["incidents"]:
        rc = inc["root_cause"]
        cost = by_id.get(inc["id"])
        where = _who(inc["culprit"])
        if where is None:
            where = f"no rank named (host {rc['host']})" if rc["host"] else "no rank named"
        rows.append(
            {
                "id": inc["id"],
                "category": inc["category"],
                "title": inc["title"],
                "where": where,
                "when": _when((cost or {}).get("failure") or inc["start"] or rc["time"]),
                "attempt": cost["attempt"] + 1 if cost else None,
                "job": jobs.get(cost["attempt"]) if cost else None,
                "kind": cost["kind"] if cost else None,
                "lost_gpu_hours": cost["lost_gpu_hours"] if cost else None,
                "cost": cost,
                "line": f"{rc['file']}:{rc['line']}",
                "first_remedy": inc["remedies"][0] if inc["remedies"] else None,
            }
        )
    # the costliest first: the banner leads with what cost the run the most
    return sorted(rows, key=lambda r: -(r["lost_gpu_hours"] or 0.0))


def context_rows(inc: dict[str, Any]) -> dict[str, Any]:
    """The root cause's neighbourhood, flagging the root line and where other lines were skipped."""
    rc = inc["root_cause"]
    lines = inc["context"] or [{"line": rc["line"], "text": rc["text"]}]
    marks = sorted(inc.get("context_marks") or [], key=lambda m: m["after_line"])
    rows: list[dict[str, Any]] = []
    prev = None
    for c in lines:
        while marks and marks[0]["after_line"] < c["line"]:
            rows.append({"mark": marks.pop(0)["text"]})
        rows.append(
            {
                "line": c["line"],
                "text": c["text"],
                "root": c["line"] == rc["line"],
                "gap": prev is not None and c["line"] > prev + 1,
            }
        )
        prev = c["line"]
    rows += [{"mark": m["text"]} for m in marks]
    return {"rows": rows, "gaps": any(r.get("gap") for r in rows)}


def what_if(advice: dict[str, Any] | None) -> dict[str, Any] | None:
    """The what-if rows pivoted: one row per interval, one overhead column per detection latency."""
    if not advice or not advice["what_if"]:
        return None
    detections: list[float | None] = []
    rows: dict[float | None, dict[str, Any]] = {}
    for w in advice["what_if"]:
        if w["detection_s"] not in detections:
            detections.append(w["detection_s"])
        row = rows.setdefault(
            w["interval_s"],
            {
                "interval_s": w["interval_s"],
                "interval_iterations": w["interval_iterations"],
                "notes": [],
                "overheads": {},
            },
        )
        if w.get("label") and w["label"] not in row["notes"]:
            row["notes"].append(w["label"])
        row["overheads"][w["detection_s"]] = w["overhead"]
    detected = advice.get("detection_s")
    columns = [
        {
            "detection_s": d,
            "note": "as detected in this run"
            if detected is not None and d is not None and abs(d - detected) <= 1
            else "if failures are caught quickly",
        }
        for d in detections
    ]
    return {
        "columns": columns,
        "rows": [
            {**r, "cells": [r["overheads"].get(d) for d in detections]} for r in rows.values()
        ],
    }


@dataclass(frozen=True, slots=True)
class Cell:
    x: float
    shade: int
    """0 (printed until the end) to 4 (fell silent first)."""
    title: str


@dataclass(frozen=True, slots=True)
class Strip:
    width: int
    cell_w: float
    cells: tuple[Cell, ...]
    first_silent: tuple[int, ...]
    """The ranks whose last line came first."""


def heat_strip(doc: dict[str, Any]) -> Strip | None:
    """One cell per rank, darker the earlier its last line: who fell silent first."""
    seen = doc.get("last_seen") or []
    if len(seen) < 2:
        return None
    # order by input then line: inputs are listed in doc["inputs"] order
    order = {i["path"]: n for n, i in enumerate(doc["inputs"])}
    keys = {s["rank"]: (order.get(s["file"], 0), s["line"]) for s in seen}
    ranked = sorted(keys.values())
    position = {k: i for i, k in enumerate(ranked)}
    n = max(len(ranked) - 1, 1)
    cell_w = max(2.0, min(24.0, (WIDTH - LEFT) / len(seen)))
    cells = []
    for i, s in enumerate(seen):
        late = position[keys[s["rank"]]] / n  # 0 = first to fall silent
        shade = 4 - min(4, int(late * 5))
        cells.append(
            Cell(
                LEFT + i * cell_w,
                shade,
                f"rank {s['rank']}: last line {s['file']}:{s['line']}",
            )
        )
    earliest = ranked[0]
    first = tuple(s["rank"] for s in seen if keys[s["rank"]] == earliest)
    return Strip(WIDTH, cell_w, tuple(cells), first)


def render(doc: dict[str, Any], generated: str) -> str:
    """The page for an analysis document. `generated` is a label (time, version) for the footer."""
    env = environment()
    env.filters["hours"] = duration
    env.filters["ranks"] = rank_ranges
    env.filters["gpuh"] = gpu_hours
    env.filters["who"] = _who
    env.filters["when"] = _when
    env.filters["code"] = _code
    env.filters["pct"] = lambda v: "-" if v is None else f"{v:.1%}"
    env.filters["num"] = lambda v: "-" if v is None else f"{v:,.0f}"
    template = env.get_template("report.html.j2")
    verdict = doc.get("verdict")
    verdict_incident = next(
        (i for i in doc["incidents"] if verdict and i["id"] == verdict["incident"]), None
    )
    rows = overview(doc)
    # jinja's tojson escapes <, >, & and ': log text cannot close the embedded <script>
    return template.render(
        doc=doc,
        verdict_incident=verdict_incident,
        verdict_row=next((r for r in rows if verdict and r["id"] == verdict["incident"]), None),
        overview=rows,
        context={inc["id"]: context_rows(inc) for inc in doc["incidents"]},
        costs={r["id"]: r["cost"] for r in rows},
        what_if=what_if(doc.get("checkpoint_advice")),
        timeline=timeline(doc),
        charts=charts(doc),
        strip=heat_strip(doc),
        survived=survived_rows(doc),
        hang=doc.get("hang_dumps"),
        hang_line=hang_line(doc),
        generated=generated,
        doc_json=doc,
    )
