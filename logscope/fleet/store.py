"""The fleet store: each analysis as rows of the `jobs`, `incidents`, `events` and `findings`
tables, written as Hive-partitioned Parquet (one file per job and table in each date partition)
and read back as DataFrames, with DuckDB when installed."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds

from ..errors import LogscopeError
from ..model import Analysis, Event, World, hosts_joined, magnitude
from .blame import incident_node, job_nodes, node_evidence

# Plain Parquet types only (string, int64, float64, bool, list<string>, timestamp[us] without a
# time zone), so Spark, Trino and DuckDB open the store unchanged. Times are wall-clock times as
# the logs print them: logs carry no zone, and converting would invent one.
TS = pa.timestamp("us")
JOBS = pa.schema(
    [
        ("job_id", pa.string()),
        ("inputs", pa.list_(pa.string())),
        ("input_bytes", pa.int64()),
        ("outcome", pa.string()),
        ("verdict_category", pa.string()),
        ("world_size", pa.int64()),
        ("gpus", pa.int64()),
        ("hosts", pa.list_(pa.string())),
        ("start", TS),
        ("end", TS),
        ("wall_s", pa.float64()),
        ("productive_s", pa.float64()),
        ("ettr", pa.float64()),
        ("lost_gpu_hours", pa.float64()),
        ("n_incidents", pa.int64()),
        ("n_failures", pa.int64()),
        ("date", pa.string()),
    ]
)
INCIDENTS = pa.schema(
    [
        ("job_id", pa.string()),
        ("incident", pa.string()),
        ("category", pa.string()),
        ("severity", pa.string()),
        ("title", pa.string()),
        ("failure", pa.bool_()),
        ("rank", pa.int64()),
        ("local_rank", pa.int64()),
        ("host", pa.string()),
        ("node_evidence", pa.string()),
        ("confidence", pa.float64()),
        ("time", TS),
        ("wasted_progress_s", pa.float64()),
        ("hang_s", pa.float64()),
        ("restart_s", pa.float64()),
        ("lost_gpu_hours", pa.float64()),
        ("root_cause_pattern", pa.string()),
        ("root_cause_file", pa.string()),
        ("root_cause_line", pa.int64()),
        ("root_cause_text", pa.string()),
        ("date", pa.string()),
    ]
)
EVENTS = pa.schema(
    [
        ("job_id", pa.string()),
        ("incident", pa.string()),
        ("role", pa.string()),
        ("kind", pa.string()),
        ("pattern", pa.string()),
        ("category", pa.string()),
        ("rank", pa.int64()),
        ("host", pa.string()),
        ("file", pa.string()),
        ("line", pa.int64()),
        ("time", TS),
        ("iteration", pa.int64()),
        ("text", pa.string()),
        ("date", pa.string()),
    ]
)
FINDINGS = pa.schema(
    [
        ("job_id", pa.string()),
        ("kind", pa.string()),
        ("severity", pa.string()),
        ("title", pa.string()),
        ("attempt", pa.int64()),
        ("start_iteration", pa.int64()),
        ("end_iteration", pa.int64()),
        ("start", TS),
        ("end", TS),
        ("magnitude", pa.float64()),
        ("lost_s", pa.float64()),
        ("lost_gpu_hours", pa.float64()),
        ("hosts_joined", pa.list_(pa.string())),
        ("file", pa.string()),
        ("line", pa.int64()),
        ("date", pa.string()),
    ]
)
SCHEMAS = MappingProxyType(
    {"jobs": JOBS, "incidents": INCIDENTS, "events": EVENTS, "findings": FINDINGS}
)
PARTITIONING = ds.partitioning(pa.schema([("date", pa.string())]), flavor="hive")

NOT_FAILURES = frozenset({"timelimit", "cancelled", "preemption"})
"""Incident categories that end a job without anything failing: not counted in MTBF or nodes."""
CASCADE_EVENTS = 16
"""Cascade events stored per incident, one per (pattern, host, rank): the rest is repetition."""
TEXT_CHARS = 2000


@dataclass(frozen=True, slots=True)
class JobTables:
    job_id: str
    date: str
    tables: dict[str, pa.Table]


def _date(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d") if t is not None else "unknown"


def _rank(e: Event, world: World) -> int | None:
    v = e.fields.get("rank") if e.role == "summary" else None
    return int(v) if v is not None and v.isdigit() else world.rank_of(e.line)


def tables(analysis: Analysis, job_id: str) -> JobTables:
    """The job's rows of the `jobs`, `incidents`, `events` and `findings` tables."""
    job = analysis.job
    world = analysis.world
    ledger = analysis.ledger
    date = _date(job.start)
    nodes = job_nodes(analysis)
    costs = {i.incident: i for i in ledger.incidents} if ledger is not None else {}
    incidents: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for inc in analysis.incidents:
        root, c, cost = inc.root_cause, inc.culprit, costs.get(inc.id)
        incidents.append(
            {
                "incident": inc.id,
                "category": inc.category,
                "severity": inc.severity,
                "title": inc.title,
                "failure": inc.category not in NOT_FAILURES,
                "rank": c.rank if c and c.rank is not None else _rank(root, world),
                "local_rank": c.local_rank if c else root.line.local_rank,
                "host": incident_node(inc, nodes),
                "node_evidence": node_evidence(inc),
                "confidence": c.confidence if c else None,
                "time": root.time or (cost.failure if cost else None),
                "wasted_progress_s": cost.wasted_progress_s if cost else None,
                "hang_s": cost.hang_s if cost else None,
                "restart_s": cost.restart_s if cost else None,
                "lost_gpu_hours": cost.lost_gpu_hours if cost else None,
                "root_cause_pattern": root.signature,
                "root_cause_file": root.line.path,
                "root_cause_line": root.line.lineno,
                "root_cause_text": root.line.shown[:TEXT_CHARS],
            }
        )
        events.append(_event(root, "root_cause", inc.id, world))
        events.extend(_event(e, "evidence", inc.id, world) for e in inc.evidence)
        seen: set[tuple[str, str | None, int | None]] = set()
        for e in inc.cascade:
            key = (e.signature, e.line.host, world.rank_of(e.line))
            if key not in seen and len(seen) < CASCADE_EVENTS:
                seen.add(key)
                events.append(_event(e, "cascade", inc.id, world))
    for a in analysis.attempts:
        events.extend(
            {
                "role": "checkpoint",
                "kind": "checkpoint_saved",
                "time": s.end,
                "iteration": s.iteration,
            }
            for s in a.saves
        )
    ends = (analysis.progress.first, analysis.progress.last)
    events.extend(_event(p, "progress", None, world) for p in ends if p is not None)
    gpus = ledger.gpus if ledger is not None else job.world_size
    job_row = {
        "inputs": [i.path for i in analysis.inputs],
        "input_bytes": sum(i.bytes for i in analysis.inputs),
        "outcome": job.outcome.value,
        "verdict_category": analysis.verdict.category if analysis.verdict else None,
        "world_size": job.world_size,
        "gpus": gpus,
        "hosts": nodes,
        "start": job.start,
        "end": job.end,
        "wall_s": ledger.wall_s if ledger is not None else None,
        "productive_s": ledger.productive_s if ledger is not None else None,
        "ettr": ledger.ettr if ledger is not None else None,
        "lost_gpu_hours": ledger.lost_gpu_hours if ledger is not None else None,
        "n_incidents": len(analysis.incidents),
        "n_failures": sum(1 for r in incidents if r["failure"]),
    }
    findings = [
        {
            "kind": f.kind,
            "severity": f.severity,
            "title": f.title[:TEXT_CHARS],
            "attempt": f.attempt,
            "start_iteration": f.start_iteration,
            "end_iteration": f.end_iteration,
            "start": f.start,
            "end": f.end,
            "magnitude": magnitude(f.detail),
            "lost_s": f.lost_s,
            "lost_gpu_hours": f.lost_gpu_hours,
            "hosts_joined": list(hosts_joined(f.detail)),
            "file": f.file,
            "line": f.line,
        }
        for f in analysis.findings
    ]
    rows = {"jobs": [job_row], "incidents": incidents, "events": events, "findings": findings}
    return JobTables(
        job_id,
        date,
        {
            name: pa.Table.from_pylist(
                [{**r, "job_id": job_id, "date": date} for r in rows[name]], schema=schema
            )
            for name, schema in SCHEMAS.items()
        },
    )


def _event(e: Event, role: str, incident: str | None, world: World) -> dict[str, Any]:
    it = e.fields.get("iteration")
    return {
        "incident": incident,
        "role": role,
        "kind": e.kind,
        "pattern": e.signature,
        "category": e.category,
        "rank": _rank(e, world),
        "host": e.line.host or e.fields.get("host"),
        "file": e.line.path,
        "line": e.line.lineno,
        "time": e.time,
        "iteration": int(it) if it is not None and it.isdigit() else None,
        "text": e.line.shown[:TEXT_CHARS],
    }


def _own_file(job_id: str) -> re.Pattern[str]:
    return re.compile(re.escape(job_id) + r"-\d+\.parquet")


def write(store: Path, job: JobTables) -> None:
    """Write the job's files, then delete its older files in every partition, and nothing else.

    Files are staged under `store/.staging` (readers skip dot directories) and moved into place
    with a rename, so a reader sees the old files or the new ones, never a half-written one;
    SLURM array tasks writing different jobs into one store do not touch each other's files."""
    staging = store / ".staging" / f"{job.job_id}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        for name, table in job.tables.items():
            written: set[Path] = set()
            if table.num_rows:
                ds.write_dataset(
                    table,
                    staging / name,
                    format="parquet",
                    partitioning=PARTITIONING,
                    basename_template=f"{job.job_id}-{{i}}.parquet",
                    existing_data_behavior="overwrite_or_ignore",
                )
                for f in (staging / name).rglob("*.parquet"):
                    dest = store / name / f.relative_to(staging / name)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    f.replace(dest)
                    written.add(dest)
            own = _own_file(job.job_id)
            for old in (store / name).glob(f"date=*/{job.job_id}-*.parquet"):
                if own.fullmatch(old.name) and old not in written:
                    old.unlink()
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        with contextlib.suppress(OSError):  # another writer may be staging in it
            staging.parent.rmdir()


@dataclass(frozen=True, slots=True)
class Fleet:
    """The store's tables as DataFrames."""

    jobs: pd.DataFrame
    incidents: pd.DataFrame


def load(store: Path, engine: str = "auto") -> Fleet:
    """Read the store with DuckDB when installed (`logscope[fleet]`) or `engine="duckdb"`, else
    with pyarrow; both give the same DataFrames."""
    if not (store / "jobs").is_dir():
        raise LogscopeError(f"{store}: no fleet store here (no jobs/ directory)")
    use_duckdb = engine == "duckdb"
    if engine == "auto":
        try:
            import duckdb  # noqa: F401
        except ImportError:
            pass
        else:
            use_duckdb = True
    read = _read_duckdb if use_duckdb else _read_arrow
    return Fleet(read(store, "jobs"), read(store, "incidents"))


def _read_arrow(store: Path, name: str) -> pd.DataFrame:
    if not (store / name).is_dir():
        return SCHEMAS[name].empty_table().to_pandas()
    data = ds.dataset(
        store / name, format="parquet", partitioning=PARTITIONING, schema=SCHEMAS[name]
    )
    return data.to_table().to_pandas()


def _read_duckdb(store: Path, name: str) -> pd.DataFrame:
    import duckdb

    if not any((store / name).glob("date=*/*.parquet")):
        return SCHEMAS[name].empty_table().to_pandas()
    glob_ = str(store / name / "*" / "*.parquet")
    rel = duckdb.sql(
        "SELECT * FROM read_parquet(?, hive_partitioning = true, hive_types = {'date': VARCHAR})",
        params=[glob_],
    )
    if rel is None:  # duckdb types a query's relation optional; a SELECT always has one
        return SCHEMAS[name].empty_table().to_pandas()
    df: pd.DataFrame = rel.df()
    return df
