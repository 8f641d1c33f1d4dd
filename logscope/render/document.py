"""The analysis as the stable JSON document (`schema_version` 1): plain dicts and lists."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..analysis.incidents import cascade_ranks
from ..model import (
    Advice,
    Analysis,
    Attempt,
    Event,
    Finding,
    HangDumps,
    Incident,
    Ledger,
    LedgerIncident,
    Progress,
    Survived,
    World,
    duration,
    finding_doc,
    gpu_hours,
    rank_ranges,
    rounded,
)
from .training import training_doc

SCHEMA_VERSION = 1


def culprit_name(
    rank: int | None, local_rank: int | None, host: str | None, task: int | None = None
) -> str:
    """How every renderer names a culprit: `rank 3 on node7`, `local rank 3`, `srun task 4`,
    `unknown rank`."""
    if rank is not None:
        who = f"rank {rank}"
    elif local_rank is not None:
        who = f"local rank {local_rank}"
    elif task is not None:
        who = f"srun task {task}"
    else:
        who = "unknown rank"
    return f"{who} on {host}" if host else who


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t is not None else None


def _int(v: str | None) -> int | None:
    return int(v) if v is not None and v.lstrip("-").isdigit() else None


def _line_ref(e: Event) -> dict[str, Any]:
    return {"file": e.line.path, "line": e.line.lineno, "text": e.line.shown}


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


def incident_doc(
    inc: Incident,
    world: World,
    context: Sequence[tuple[int, str]] | None = None,
    marks: Sequence[tuple[int, str]] | None = None,
) -> dict[str, Any]:
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
            "task": c.task,
            "confidence": round(c.confidence, 2),
            "reason": c.reason,
        },
        "cascade": {"count": len(inc.cascade), "ranks": cascade_ranks(inc, world)},
        "iteration": inc.iteration,
        "start": _iso(inc.start),
        "end": _iso(inc.end),
        "evidence": [_line_ref(e) for e in _evidence(inc)],
        "context": [{"line": n, "text": t} for n, t in (context or [])],
        "context_marks": [{"after_line": n, "text": t} for n, t in (marks or [])],
    }


def survived_doc(s: Survived, world: World) -> dict[str, Any]:
    return {
        "kind": s.kind,
        "category": s.category,
        "title": s.title,
        "template": s.template,
        "count": s.count,
        "ranks": [{"rank": r, "count": n} for r, n in s.ranks],
        "tasks": [{"task": t, "count": n} for t, n in s.tasks],
        "first": _root(s.first, world),
        "reason": s.reason,
    }


def survived_where(s: Survived) -> str:
    """Who printed a survived error and where it was first: `ranks 0-7, first at f.log:12`."""
    return _who_where(
        [r for r, _ in s.ranks], [t for t, _ in s.tasks], s.first.line.path, s.first.line.lineno
    )


def survived_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The document's survived notes (one from before they existed has none), each with who
    printed it and where it was first (`where`)."""
    return [
        {
            **s,
            "where": _who_where(
                [r["rank"] for r in s["ranks"]],
                [t["task"] for t in s["tasks"]],
                s["first"]["file"],
                s["first"]["line"],
            ),
        }
        for s in doc.get("survived") or []
    ]


def _who_where(ranks: list[int], tasks: list[int], path: str, lineno: int) -> str:
    who = [f"ranks {rank_ranges(ranks)}"] if ranks else []
    if tasks:
        who.append(f"tasks {rank_ranges(tasks)}")
    return ", ".join([*who, f"first at {path}:{lineno}"])


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


def ledger_doc(ledger: Ledger | None) -> dict[str, Any] | None:
    if ledger is None:
        return None
    return {
        "gpus": ledger.gpus,
        "wall_s": rounded(ledger.wall_s),
        "productive_s": rounded(ledger.productive_s),
        "ettr": rounded(ledger.ettr, 4),
        "badput_s": {k: rounded(v) for k, v in ledger.badput_s.items()},
        "lost_gpu_hours": rounded(ledger.lost_gpu_hours, 3),
        "incidents": [
            {
                "incident": i.incident,
                "attempt": i.attempt,
                "kind": i.kind,
                "failure": _iso(i.failure),
                "failure_exact": i.failure_exact,
                "last_checkpoint_iteration": i.last_checkpoint_iteration,
                "wasted_progress_s": rounded(i.wasted_progress_s),
                "hang_s": rounded(i.hang_s),
                "restart_s": rounded(i.restart_s),
                "lost_gpu_hours": rounded(i.lost_gpu_hours, 3),
            }
            for i in ledger.incidents
        ],
    }


def advice_doc(advice: Advice | None) -> dict[str, Any] | None:
    if advice is None:
        return None
    return {
        "save_s": rounded(advice.save_s),
        "interval_iterations": rounded(advice.interval_iterations),
        "interval_s": rounded(advice.interval_s),
        "iteration_s": rounded(advice.iteration_s, 3),
        "mtbf_s": rounded(advice.mtbf_s),
        "mtbf_source": advice.mtbf_source,
        "young_interval_s": rounded(advice.young_interval_s),
        "young_interval_iterations": rounded(advice.young_interval_iterations),
        "daly_interval_s": rounded(advice.daly_interval_s),
        "overhead_now": rounded(advice.overhead_now, 4),
        "overhead_optimal": rounded(advice.overhead_optimal, 4),
        "detection_s": rounded(advice.detection_s),
        "restart_s": rounded(advice.restart_s),
        "what_if": [
            {
                "label": w.label,
                "interval_s": rounded(w.interval_s),
                "interval_iterations": rounded(w.interval_iterations),
                "detection_s": rounded(w.detection_s),
                "overhead": rounded(w.overhead, 4),
            }
            for w in advice.what_if
        ],
        "verdict": advice.verdict,
    }


def findings_doc(findings: tuple[Finding, ...]) -> list[dict[str, Any]]:
    """What cost the run without stopping it, in the order they began."""
    return [finding_doc(f) for f in findings]


PROGRESS_POINTS = 400
"""Progress points kept for the timeline: enough to draw it, small for a 5 GB log."""


def progress_doc(progress: Progress) -> list[list[Any]]:
    """[time, iteration] pairs, evenly thinned, always keeping the first and last line."""
    n = len(progress)
    if n == 0:
        return []
    step = max(1, math.ceil(n / PROGRESS_POINTS))
    picks = sorted({*range(0, n, step), n - 1})
    out = []
    for i in picks:
        t = progress.time[i]
        it = progress.iteration[i]
        if math.isnan(t) or it < 0:
            continue
        out.append([datetime.fromtimestamp(t).isoformat(), it])
    return out


def attempts_doc(attempts: tuple[Attempt, ...]) -> list[dict[str, Any]]:
    return [
        {
            "index": a.index,
            "job_id": a.job_id,
            "boundary": a.boundary,
            "start": _iso(a.start),
            "loop_start": _iso(a.loop_start),
            "end": _iso(a.end),
            "last_progress": _iso(a.last_progress),
            "first_iteration": a.first_iteration,
            "last_iteration": a.last_iteration,
            "resumed_from": a.resumed_from,
            "checkpoints": [
                {"iteration": s.iteration, "end": _iso(s.end), "save_s": rounded(s.duration_s)}
                for s in a.saves
            ],
            "unfinished_saves": list(a.unfinished_saves),
        }
        for a in attempts
    ]


def hang_dumps_doc(hang: HangDumps | None) -> dict[str, Any] | None:
    """The dumps given beside the logs: the rank they name and each rank's last collective."""
    if hang is None:
        return None
    return {
        "files": list(hang.files),
        "culprit_rank": hang.culprit_rank,
        "kind": hang.kind,
        "confidence": hang.confidence,
        "reason": hang.reason,
        "ranks": [
            {
                "rank": r.rank,
                "host": r.host,
                "group": r.group,
                "seq": r.seq,
                "op": r.op,
                "sizes": r.sizes,
                "state": r.state,
                "where": r.where,
                "process": r.process,
                "source": r.source,
                "odd": r.odd,
            }
            for r in hang.rows
        ],
        "evidence": [{"file": f, "line": n, "text": t} for f, n, t in hang.evidence],
        "warnings": list(hang.warnings),
    }


def hang_line(doc: dict[str, Any]) -> str | None:
    """One sentence on what the dumps say, for every renderer."""
    hang = doc.get("hang_dumps")
    if not hang:
        return None
    n = len(hang["files"])
    if hang["culprit_rank"] is None:
        return f"{n} dump file{'s' if n != 1 else ''} read; they single out no rank"
    return (
        f"{n} dump file{'s' if n != 1 else ''} name rank {hang['culprit_rank']} "
        f"(confidence {hang['confidence']:.2f}): {hang['reason']}"
    )


def document(analysis: Analysis) -> dict[str, Any]:
    world = analysis.world
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
            "exit_code": job.exit_code,
        },
        "verdict": None
        if v is None
        else {
            "incident": v.id,
            "category": v.category,
            "summary": summary(analysis),
            "failures": failure_lines(analysis),
        },
        "incidents": [
            incident_doc(i, world, analysis.context.get(i.id), analysis.context_marks.get(i.id))
            for i in analysis.incidents
        ],
        "attempts": attempts_doc(analysis.attempts),
        "progress": progress_doc(analysis.progress),
        "last_seen": [{"rank": r, "file": f, "line": n} for r, f, n in analysis.last_seen],
        "findings": findings_doc(analysis.findings),
        "training": training_doc(analysis),
        "ledger": ledger_doc(analysis.ledger),
        "checkpoint_advice": advice_doc(analysis.advice),
        "survived": [survived_doc(s, world) for s in analysis.survived],
        "hang_dumps": hang_dumps_doc(analysis.hang_dumps),
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
    """One sentence: what ended the job, where; with several failures, what they cost."""
    v = analysis.verdict
    if v is None:
        return f"Job {analysis.job.outcome.value}: no incident found{_found(analysis)}."
    ref = f"({v.root_cause.line.path}:{v.root_cause.line.lineno})"
    costs = failures(analysis)
    ledger = analysis.ledger
    total = ledger.lost_gpu_hours if ledger else None
    several = (
        f"{len(costs)} failures cost {gpu_hours(total)} GPU-h" if len(costs) > 1 and total else ""
    )
    if analysis.job.outcome.value in ("completed", "truncated"):
        state = "completed" if analysis.job.outcome.value == "completed" else "still running or cut"
        if several:
            return f"Job {state}; {several}, the costliest: {v.title}{where(v)} {ref}."
        n = len(analysis.incidents)
        return f"Job {state} after {n} incident{'s' if n > 1 else ''}; the last: {v.title} {ref}."
    tail = f" {several[0].upper()}{several[1:]}." if several else ""
    return f"Job {analysis.job.outcome.value}: {v.title}{where(v)} {ref}.{tail}"


def _found(analysis: Analysis) -> str:
    """`; 3 findings, slowdowns cost 2.06 h`: what cost a run that no incident stopped."""
    n = len(analysis.findings)
    if not n:
        return ""
    lost = sum(f.lost_s or 0.0 for f in analysis.findings if f.kind == "slowdown")
    cost = f", slowdowns cost {duration(lost)}" if lost > 0 else ""
    return f"; {n} finding{'s' if n > 1 else ''}{cost}"


def where(v: Incident) -> str:
    """` rank 3 on node7 after iteration 12`: the parts the incident's title does not say."""
    parts = []
    if v.culprit and v.culprit.rank is not None:
        if f"rank {v.culprit.rank}" not in v.title:
            parts.append(f"rank {v.culprit.rank}")
    elif v.culprit and v.culprit.local_rank is not None:
        parts.append(f"local rank {v.culprit.local_rank}")
    host = (v.culprit.host if v.culprit else None) or v.root_cause.line.host
    if host:
        parts.append(f"on {host}")
    if v.iteration is not None and f"iteration {v.iteration}" not in v.title:
        parts.append(f"after iteration {v.iteration}")
    return (" " + " ".join(parts)) if parts else ""


def failures(analysis: Analysis) -> list[tuple[Incident, LedgerIncident]]:
    """The failures that cost the run compute (the ledger's rows with an incident), the
    costliest first."""
    ledger = analysis.ledger
    by_id = {i.id: i for i in analysis.incidents}
    rows = [
        (by_id[r.incident], r) for r in (ledger.incidents if ledger else ()) if r.incident in by_id
    ]
    return sorted(rows, key=lambda p: -(p[1].lost_gpu_hours or 0.0))


def failure_lines(analysis: Analysis) -> list[str]:
    """One line per failure that cost compute, the costliest first (failure_line)."""
    jobs = {a.index: a.job_id for a in analysis.attempts}
    return [failure_line(inc, row, jobs.get(row.attempt)) for inc, row in failures(analysis)]


def failure_line(inc: Incident, row: LedgerIncident, job_id: str | None = None) -> str:
    """One failure and its cost, for a banner: `I1 crash in attempt 2: <title> rank 3 on node7
    after iteration 12: 3,836.1 GPU-h (7.30 h redone, 30.4 min hung, 2.19 h to restart)`."""
    parts = [f"{duration(row.wasted_progress_s)} redone"]
    if row.hang_s >= 1:
        parts.append(f"{duration(row.hang_s)} {'hung' if row.kind == 'hang' else 'until it ended'}")
    if row.restart_s:
        parts.append(f"{duration(row.restart_s)} to restart")
    cost = f"{gpu_hours(row.lost_gpu_hours)} GPU-h" if row.lost_gpu_hours is not None else "cost"
    job = f" (job {job_id})" if job_id else ""
    return (
        f"{inc.id} {row.kind} in attempt {row.attempt + 1}{job}: {inc.title}{where(inc)}: "
        f"{cost} ({', '.join(parts)})"
    )
