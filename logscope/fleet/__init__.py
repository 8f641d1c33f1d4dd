"""Fleet view: analyses stored as Hive-partitioned Parquet (store), ingested in parallel
(ingest), failure statistics and bad nodes (stats)."""

from .ingest import Ingested, ingest, ingest_analysis, job_id_of, job_paths
from .stats import (
    BadNode,
    Summary,
    chi2_ppf,
    gamma_p,
    mtbf_interval,
    poisson_sf,
    summarize,
    summary_doc,
)
from .store import (
    EVENTS,
    FINDINGS,
    INCIDENTS,
    JOBS,
    NOT_FAILURES,
    PARTITIONING,
    SCHEMAS,
    Fleet,
    JobTables,
    load,
    tables,
    write,
)

__all__ = [
    "EVENTS",
    "FINDINGS",
    "INCIDENTS",
    "JOBS",
    "NOT_FAILURES",
    "PARTITIONING",
    "SCHEMAS",
    "BadNode",
    "Fleet",
    "Ingested",
    "JobTables",
    "Summary",
    "chi2_ppf",
    "gamma_p",
    "ingest",
    "ingest_analysis",
    "job_id_of",
    "job_paths",
    "load",
    "mtbf_interval",
    "poisson_sf",
    "summarize",
    "summary_doc",
    "tables",
    "write",
]
