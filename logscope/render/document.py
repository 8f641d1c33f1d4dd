"""The analysis as the stable JSON document (`schema_version` 1): plain dicts and lists."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..incidents import World, cascade_ranks
from ..model import Analysis, Event, Incident

SCHEMA_VERSION = 1


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t is not None else None


def _int(v: str | None) -> int | None:
    return int(v) if v is not None and v.lstrip("-").isdigit() else None


def _line_ref(e: Event) -> dict[str, Any]:
    return {"file": e.line.path, "line": e.line.lineno, "text": e.line.raw}


def _root(e: Event, world: World) -> dict[str, Any]:
    rank = _int(e.fields.get("rank")) if e.role == "summary" else None
    return {
        "pattern": e.signature,
        **_line_ref(e),
        "rank": rank if rank is not None else world.rank_of(e.line),
        "local_rank": e.line.local_rank
        if e.line.local_rank is not None
        else _int(e.fields.get("local_rank")),
        "host": e.line.host or e.fields.get("host"),
        "time": _iso(e.time),
        "time_exact": e.time_exact if e.time is not None else None,
        "fields": dict(e.fields),
    }


def incident_doc(inc: Incident, world: World) -> dict[str, Any]:
    c = inc.culprit
    return {
        "id": inc.id,
        "category": inc.category,
        "severity": inc.severity,
        "title": inc.title,
        "explanation": inc.explanation,
        "remedies": list(inc.remedies),
        "references": list(inc.references),
        "root_cause": _root(inc.root_cause, world),
        "culprit": None
        if c is None
        else {
            "rank": c.rank,
            "local_rank": c.local_rank,
            "host": c.host,
            "confidence": round(c.confidence, 2),
            "reason": c.reason,
        },
        "cascade": {"count": len(inc.cascade), "ranks": cascade_ranks(inc, world)},
        "iteration": inc.iteration,
        "start": _iso(inc.start),
        "end": _iso(inc.end),
        "evidence": [_line_ref(e) for e in _evidence(inc)],
    }


def _evidence(inc: Incident, limit: int = 12) -> list[Event]:
    """The end banners, then one line per (signature, rank) of the cascade, in log order."""
    seen: set[tuple[str, int | None, int | None]] = set()
    out = list(inc.evidence)
    for e in inc.cascade:
        key = (e.signature, e.line.rank, e.line.local_rank)
        if key in seen or e.severity == "info":
            continue
        seen.add(key)
        out.append(e)
        if len(out) >= limit:
            break
    return out


def document(analysis: Analysis) -> dict[str, Any]:
    world: World = analysis.extra["world"]
    job = analysis.job
    v = analysis.verdict
    return {
        "schema_version": SCHEMA_VERSION,
        "inputs": [
            {
                "path": i.path,
                "bytes": i.bytes,
                "lines": i.lines,
                "compression": i.compression,
                "warnings": list(i.warnings),
            }
            for i in analysis.inputs
        ],
        "job": {
            "outcome": job.outcome.value,
            "outcome_reason": job.outcome_reason,
            "world_size": job.world_size,
            "hosts": list(job.hosts),
            "start": _iso(job.start),
            "end": _iso(job.end),
            "first_iteration": job.first_iteration,
            "last_iteration": job.last_iteration,
            "train_iters": job.train_iters,
            "last_progress": _iso(job.last_progress),
        },
        "verdict": None
        if v is None
        else {"incident": v.id, "category": v.category, "summary": summary(analysis)},
        "incidents": [incident_doc(i, world) for i in analysis.incidents],
        "unrecognized": [
            {
                "template": t.template,
                "count": t.count,
                "example": {
                    "file": t.example.path,
                    "line": t.example.lineno,
                    "text": t.example.raw,
                },
            }
            for t in analysis.unrecognized
        ],
    }


def summary(analysis: Analysis) -> str:
    """One sentence: what ended the job, where."""
    v = analysis.verdict
    if v is None:
        return f"Job {analysis.job.outcome.value}: no incident found."
    where = []
    if v.culprit and v.culprit.rank is not None:
        where.append(f"rank {v.culprit.rank}")
    elif v.culprit and v.culprit.local_rank is not None:
        where.append(f"local rank {v.culprit.local_rank}")
    host = (v.culprit.host if v.culprit else None) or v.root_cause.line.host
    if host:
        where.append(f"on {host}")
    if v.iteration is not None and f"iteration {v.iteration}" not in v.title:
        where.append(f"after iteration {v.iteration}")
    loc = (" " + " ".join(where)) if where else ""
    return (
        f"Job {analysis.job.outcome.value}: {v.title}{loc} "
        f"({v.root_cause.line.path}:{v.root_cause.line.lineno})."
    )
