"""Which SLURM job each attempt was: the job id its own output file is named after (`%x-%j.out`,
`slurm-%A_%a.out`) or the one its banners name (`*** JOB N ON host CANCELLED AT`). A `.out` with
no stamped line, which no time can place, goes to the attempt whose job id it bears."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from ..model import Attempt

_JOB_IN_NAME = re.compile(r"(?:^|[-_.])(\d{2,})(?:_\d+)?\.(?:out|err|log)(?:\.\w+)?$")
"""The `%j` (or `%A_%a`) that sbatch's default and usual `--output` patterns put last."""


def job_in_name(path: str) -> str | None:
    """The job id a SLURM output file is named after: `tr11-176B-ml-1528874.out` → 1528874."""
    m = _JOB_IN_NAME.search(Path(path).name)
    return m.group(1) if m else None


def name_jobs(
    attempts: Sequence[Attempt],
    paths: Mapping[int, str],
    banners: Iterable[tuple[int, str]],
) -> list[Attempt]:
    """Attempts with their `job_id`, and progress-less inputs that no time placed given to the
    attempt whose job they name. `paths`: input index → path; `banners`: (attempt, job id) of
    each line that names a job."""
    named: dict[int, str] = {}
    for a in attempts:
        for inp in a.companions:
            job = job_in_name(paths.get(inp, ""))
            if job is not None:
                named.setdefault(a.index, job)
    for index, job in banners:
        named.setdefault(index, job)
    out = [replace(a, job_id=named.get(a.index)) for a in attempts]
    placed = {inp for a in attempts for inp in (a.input, *a.companions)}
    by_job = {job: i for i, job in reversed(list(named.items()))}
    for inp, path in sorted(paths.items()):
        job = job_in_name(path)
        if inp in placed or job is None or job not in by_job:
            continue
        i = by_job[job]
        out[i] = replace(out[i], companions=(*out[i].companions, inp))
    return out
