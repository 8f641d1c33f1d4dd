"""Fleet view: analyses stored as Hive-partitioned Parquet, failure statistics, bad nodes."""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import hashlib
import math
import os
import re
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from glob import glob, has_magic
from pathlib import Path
from statistics import NormalDist
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds

from .culprits import World
from .engine import analyze, default_library
from .errors import LogscopeError
from .model import Analysis, Event, Incident, rounded
from .patterns import Library

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
SCHEMAS = {"jobs": JOBS, "incidents": INCIDENTS, "events": EVENTS}
PARTITIONING = ds.partitioning(pa.schema([("date", pa.string())]), flavor="hive")

NOT_FAILURES = frozenset({"timelimit", "cancelled", "preemption"})
"""Incident categories that end a job without anything failing: not counted in MTBF or nodes."""
CASCADE_EVENTS = 16
"""Cascade events stored per incident, one per (pattern, host, rank): the rest is repetition."""
TEXT_CHARS = 2000
PRIOR_JOBS = 10.0
"""Weight of the fleet-wide rate in a host's score, in jobs: a host seen in 2 jobs with 1
failure scores near the fleet rate, one seen in 50 jobs with 25 failures near 0.5."""
_SLURM_ID = re.compile(r"^\d+$")
_SLURM_OUT = re.compile(r"slurm-(\d+(?:_\d+)?)\.out")


@dataclass(frozen=True, slots=True)
class JobTables:
    job_id: str
    date: str
    tables: dict[str, pa.Table]


@dataclass(frozen=True, slots=True)
class Ingested:
    """One path given to `fleet ingest`: the job it became, or why it failed."""

    path: str
    job_id: str | None
    bytes: int
    error: str | None = None


def job_id_of(analysis: Analysis, paths: Sequence[str]) -> str:
    """The SLURM job id the logs name (one only) or their `slurm-<id>.out` names do, else a
    stable hash of the inputs' file names (not their directories: moving logs keeps the id)."""
    ids: set[str] = set()
    for inc in analysis.incidents:
        for e in (inc.root_cause, *inc.evidence, *inc.cascade):
            if _SLURM_ID.match(e.fields.get("job_id", "")):
                ids.add(e.fields["job_id"])
    names = sorted(Path(p).name for p in (paths or ["stdin"]))
    if not ids:
        # SLURM's default output name, `slurm-%j.out` (`slurm-%A_%a.out` for an array task)
        ids = {m.group(1) for n in names if (m := _SLURM_OUT.fullmatch(n))}
        ids = ids if len(ids) == 1 and all(_SLURM_OUT.fullmatch(n) for n in names) else set()
    if len(ids) == 1:
        return ids.pop()
    return "h" + hashlib.sha256("\0".join(names).encode()).hexdigest()[:16]


def _date(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d") if t is not None else "unknown"


def _rank(e: Event, world: World) -> int | None:
    v = e.fields.get("rank") if e.role == "summary" else None
    return int(v) if v is not None and v.isdigit() else world.rank_of(e.line)


def _host(inc: Incident, hosts: Sequence[str]) -> str | None:
    """Culprit host, else root-cause host, else the job's only host."""
    c = inc.culprit
    host = (c.host if c else None) or inc.root_cause.line.host or inc.root_cause.fields.get("host")
    return host or (hosts[0] if len(hosts) == 1 else None)


def tables(analysis: Analysis, job_id: str) -> JobTables:
    """The job's rows of the `jobs`, `incidents` and `events` tables."""
    job = analysis.job
    world: World = analysis.extra["world"]
    ledger = analysis.extra.get("ledger")
    date = _date(job.start)
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
                "host": _host(inc, job.hosts),
                "confidence": c.confidence if c else None,
                "time": root.time or (cost.failure if cost else None),
                "wasted_progress_s": cost.wasted_progress_s if cost else None,
                "hang_s": cost.hang_s if cost else None,
                "restart_s": cost.restart_s if cost else None,
                "lost_gpu_hours": cost.lost_gpu_hours if cost else None,
                "root_cause_pattern": root.signature,
                "root_cause_file": root.line.path,
                "root_cause_line": root.line.lineno,
                "root_cause_text": root.line.raw[:TEXT_CHARS],
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
    for a in analysis.extra.get("attempts", ()):
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
        "hosts": list(job.hosts),
        "start": job.start,
        "end": job.end,
        "wall_s": ledger.wall_s if ledger is not None else None,
        "productive_s": ledger.productive_s if ledger is not None else None,
        "ettr": ledger.ettr if ledger is not None else None,
        "lost_gpu_hours": ledger.lost_gpu_hours if ledger is not None else None,
        "n_incidents": len(analysis.incidents),
        "n_failures": sum(1 for r in incidents if r["failure"]),
    }
    rows = {"jobs": [job_row], "incidents": incidents, "events": events}
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
        "text": e.line.raw[:TEXT_CHARS],
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


def ingest_analysis(analysis: Analysis, paths: Sequence[str], store: Path) -> str:
    """Store one finished analysis (what `analyze --store` does); returns its job id."""
    job = tables(analysis, job_id_of(analysis, paths))
    write(store, job)
    return job.job_id


def job_paths(args: Iterable[str]) -> list[str]:
    """Each argument is one job: a file or a directory; a quoted glob gives one job per match."""
    out: list[str] = []
    for a in args:
        if Path(a).exists():
            out.append(a)
        elif has_magic(a) and (matches := sorted(glob(a))):  # noqa: PTH207 - a user's glob
            out.extend(matches)
        else:
            raise LogscopeError(f"{a}: no such file or directory")
    return out


def _ingest_batch(
    paths: list[str], store: str, pattern_dirs: list[str], gpus: int | None
) -> list[Ingested]:
    """A worker's share: one pattern library loaded for many jobs."""
    library: Library = default_library(pattern_dirs)
    out: list[Ingested] = []
    for path in paths:
        try:
            analysis = analyze([path], library, warn=[], gpus=gpus)
            job_id = ingest_analysis(analysis, [path], Path(store))
            out.append(Ingested(path, job_id, sum(i.bytes for i in analysis.inputs)))
        except (LogscopeError, OSError, ValueError, pa.ArrowException) as err:
            out.append(Ingested(path, None, 0, str(err)))
    return out


def ingest(
    paths: Sequence[str],
    store: Path,
    workers: int | None = None,
    pattern_dirs: Sequence[Path | str] = (),
    gpus: int | None = None,
    on_result: Callable[[Ingested], None] | None = None,
) -> list[Ingested]:
    """Analyze each path as one job, in parallel processes, and store it. Never raises for a
    job that fails to analyze: its `Ingested.error` says why."""
    default_library(pattern_dirs)  # a broken pattern library is a usage error, raised here
    store.mkdir(parents=True, exist_ok=True)
    dirs = [str(d) for d in pattern_dirs]
    n = max(1, min(workers or os.cpu_count() or 1, len(paths)))
    # a few batches per worker: the library loads once per batch, and a slow job can't
    # hold back a whole worker's share
    size = max(1, math.ceil(len(paths) / (n * 4)))
    batches = [list(paths[i : i + size]) for i in range(0, len(paths), size)]
    results: list[Ingested] = []

    def done(batch: list[Ingested]) -> None:
        for r in batch:
            results.append(r)
            if on_result is not None:
                on_result(r)

    if n == 1:
        for b in batches:
            done(_ingest_batch(b, str(store), dirs, gpus))
        return results
    with cf.ProcessPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(_ingest_batch, b, str(store), dirs, gpus) for b in batches]
        for f in cf.as_completed(futures):
            done(f.result())
    return results


# --- statistics --------------------------------------------------------------------------------


def gamma_p(a: float, x: float) -> float:
    """Regularized lower incomplete gamma P(a, x): series below a+1, continued fraction above
    (Numerical Recipes 6.2), to ~1e-14."""
    if x <= 0:
        return 0.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        n = a
        while abs(term) > abs(total) * 1e-15:
            n += 1
            term *= x / n
            total += term
        return min(1.0, total * math.exp(log_front))
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return max(0.0, 1.0 - math.exp(log_front) * h)


def chi2_ppf(q: float, df: float) -> float:
    """Quantile of the chi-square distribution: Wilson–Hilferty's start, refined by Newton
    steps on the exact CDF (the regularized gamma function)."""
    if not 0 < q < 1 or df <= 0:
        raise ValueError(f"chi2_ppf needs 0 < q < 1 and df > 0, got q={q}, df={df}")
    z = NormalDist().inv_cdf(q)
    k = 2 / (9 * df)
    x = max(df * (1 - k + z * math.sqrt(k)) ** 3, 1e-8)
    a = df / 2
    for _ in range(50):
        pdf = math.exp((a - 1) * math.log(x / 2) - x / 2 - math.lgamma(a)) / 2
        step = (gamma_p(a, x / 2) - q) / pdf if pdf > 0 else 0.0
        new = x - step
        x = new if new > 0 else x / 2
        if abs(step) < 1e-12 * max(1.0, x):
            break
    return x


def mtbf_interval(total_s: float, failures: int, level: float = 0.95) -> tuple[float, float | None]:
    """Two-sided confidence interval of an exponential MTBF from `failures` in `total_s`:
    [2T / chi2(1-α/2, 2n+2), 2T / chi2(α/2, 2n)]; no upper bound without a failure."""
    alpha = 1 - level
    lower = 2 * total_s / chi2_ppf(1 - alpha / 2, 2 * failures + 2)
    upper = 2 * total_s / chi2_ppf(alpha / 2, 2 * failures) if failures else None
    return lower, upper


def poisson_sf(k: int, mean: float) -> float:
    """P(X >= k) for X ~ Poisson(mean)."""
    return 1.0 if k <= 0 else gamma_p(k, mean)


# --- summary -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fleet:
    """The store's tables as DataFrames."""

    jobs: pd.DataFrame
    incidents: pd.DataFrame


@dataclass(frozen=True, slots=True)
class BadNode:
    host: str
    failures: int
    jobs: int
    """Jobs that ran on the host (it is in the job's hosts, or a failure names it)."""
    score: float
    """Shrunk failure rate per job: (failures + PRIOR_JOBS·rate) / (jobs + PRIOR_JOBS)."""
    p_value: float
    """P(at least this many failures) if the host failed at the fleet rate (Poisson)."""
    exclude: bool
    """Clearly worse than the fleet: p_value below 0.05 / hosts, and 2 failures or more."""
    lost_gpu_hours: float


@dataclass(frozen=True, slots=True)
class Summary:
    jobs: int
    failures: int
    failures_by_category: dict[str, int]
    lost_gpu_hours_by_category: dict[str, float]
    lost_gpu_hours_by_host: dict[str, float]
    wall_s: float
    mtbf_s: float | None
    mtbf_ci_s: tuple[float, float | None]
    mtbf_by_gpus: list[dict[str, Any]]
    ettr: float | None
    """Productive time over wall time, all jobs together."""
    ettr_by_date: list[dict[str, Any]]
    ettr_by_job: list[dict[str, Any]]
    fleet_rate: float
    """Attributed failures per host per job, the prior of every host's score."""
    bad_nodes: list[BadNode]


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
    df: pd.DataFrame = rel.df()
    return df


def summarize(fleet: Fleet) -> Summary:
    jobs, inc = fleet.jobs, fleet.incidents
    fail = inc[inc["failure"].astype(bool)]
    by_cat = fail.groupby("category").size().sort_values(ascending=False)
    lost = inc.groupby("category")["lost_gpu_hours"].sum(min_count=1).dropna()
    lost_host = inc.dropna(subset=["host"]).groupby("host")["lost_gpu_hours"].sum(min_count=1)
    wall = float(jobs["wall_s"].fillna(0).sum())
    n = len(fail)
    productive = float(jobs["productive_s"].fillna(0).sum())
    timed = jobs.dropna(subset=["wall_s"])
    by_date = timed.groupby("date")[["wall_s", "productive_s"]].sum()
    counts = timed.groupby("date").size()
    by_gpus = []
    for gpus, group in jobs.dropna(subset=["gpus"]).groupby("gpus"):
        w, f = float(group["wall_s"].fillna(0).sum()), int(group["n_failures"].sum())
        by_gpus.append(
            {
                "gpus": int(gpus),
                "jobs": len(group),
                "failures": f,
                "wall_s": w,
                "mtbf_s": _div(w, f),
            }
        )
    fleet_rate, nodes = _bad_nodes(jobs, fail)
    return Summary(
        jobs=len(jobs),
        failures=n,
        failures_by_category={str(k): int(v) for k, v in by_cat.items()},
        lost_gpu_hours_by_category=_rounded(lost),
        lost_gpu_hours_by_host=_rounded(lost_host),
        wall_s=wall,
        mtbf_s=_div(wall, n),
        mtbf_ci_s=mtbf_interval(wall, n) if wall > 0 else (0.0, None),
        mtbf_by_gpus=by_gpus,
        ettr=_div(productive, wall),
        ettr_by_date=[
            {"date": str(d), "jobs": int(counts[d]), "ettr": _div(r.productive_s, r.wall_s)}
            for d, r in by_date.iterrows()
        ],
        ettr_by_job=[
            {"job_id": r.job_id, "date": r.date, "ettr": None if pd.isna(r.ettr) else float(r.ettr)}
            for r in jobs.sort_values(["date", "job_id"]).itertuples()
        ],
        fleet_rate=fleet_rate,
        bad_nodes=nodes,
    )


def _div(a: float, b: float) -> float | None:
    return float(a) / float(b) if b else None


def _rounded(s: pd.Series) -> dict[str, float]:
    return {str(k): round(float(v), 3) for k, v in s.sort_values(ascending=False).items()}


def _bad_nodes(jobs: pd.DataFrame, fail: pd.DataFrame) -> tuple[float, list[BadNode]]:
    """Hosts ranked by an empirical-Bayes failure rate: each host's failures per job, shrunk
    towards the fleet-wide rate, so one failure on a rarely used node does not top the list."""
    ran = jobs[["job_id", "hosts"]].explode("hosts").dropna().rename(columns={"hosts": "host"})
    ran = pd.concat([ran, fail[["job_id", "host"]].dropna()]).drop_duplicates()
    jobs_on = ran.groupby("host")["job_id"].nunique()
    attributed = fail.dropna(subset=["host"])
    failures = attributed.groupby("host").size()
    lost = attributed.groupby("host")["lost_gpu_hours"].sum()
    slots = int(jobs_on.sum())
    rate = len(attributed) / slots if slots else 0.0
    hosts = len(jobs_on)
    out = []
    for host, f in failures.items():
        j = int(jobs_on.get(host, 0))
        p = poisson_sf(int(f), j * rate)
        out.append(
            BadNode(
                host=str(host),
                failures=int(f),
                jobs=j,
                score=(int(f) + PRIOR_JOBS * rate) / (j + PRIOR_JOBS),
                p_value=p,
                exclude=int(f) >= 2 and p < 0.05 / max(1, hosts),
                lost_gpu_hours=round(float(lost.get(host, 0.0)), 3),
            )
        )
    out.sort(key=lambda b: (-b.score, -b.failures, b.host))
    return rate, out


def summary_doc(s: Summary) -> dict[str, Any]:
    """The summary as the `fleet summary --format json` document."""
    return {
        "jobs": s.jobs,
        "failures": s.failures,
        "failures_by_category": s.failures_by_category,
        "lost_gpu_hours_by_category": s.lost_gpu_hours_by_category,
        "lost_gpu_hours_by_host": s.lost_gpu_hours_by_host,
        "wall_s": round(s.wall_s, 1),
        "mtbf_s": rounded(s.mtbf_s),
        "mtbf_ci_s": [rounded(s.mtbf_ci_s[0]), rounded(s.mtbf_ci_s[1])],
        "mtbf_by_gpus": [
            {**g, "wall_s": rounded(g["wall_s"]), "mtbf_s": rounded(g["mtbf_s"])}
            for g in s.mtbf_by_gpus
        ],
        "ettr": rounded(s.ettr, 4),
        "ettr_by_date": [{**d, "ettr": rounded(d["ettr"], 4)} for d in s.ettr_by_date],
        "ettr_by_job": [{**d, "ettr": rounded(d["ettr"], 4)} for d in s.ettr_by_job],
        "fleet_rate": round(s.fleet_rate, 4),
        "bad_nodes": [
            {
                "host": b.host,
                "failures": b.failures,
                "jobs": b.jobs,
                "score": round(b.score, 4),
                "p_value": float(f"{b.p_value:.3g}"),
                "exclude": b.exclude,
                "lost_gpu_hours": b.lost_gpu_hours,
            }
            for b in s.bad_nodes
        ],
    }
