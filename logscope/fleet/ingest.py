"""`fleet ingest`: each path analysed as one job, in parallel processes, and stored; the job's id
from the logs (its SLURM job id) or a stable hash of its file names."""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from glob import glob, has_magic
from pathlib import Path

import pyarrow as pa

from ..engine.analyze import analyze
from ..engine.feed import default_library
from ..errors import LogscopeError
from ..match.signatures import Library
from ..model import Analysis
from .store import tables, write

_SLURM_ID = re.compile(r"^\d+$")
_SLURM_OUT = re.compile(r"slurm-(\d+(?:_\d+)?)\.out")


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
