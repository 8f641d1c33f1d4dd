"""Writing the postmortem file: a name from the job, written atomically, never over a file
unless forced."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import LogscopeError
from ..live.actions import write_atomic
from . import html


def report_name(doc: dict[str, Any]) -> str:
    """`<job>-postmortem.html`: the SLURM job id of a one-attempt job if a banner names it,
    else the first input's name (a run of several jobs is named after its merged log)."""
    jobs = {
        job
        for inc in doc.get("incidents", [])
        if (job := inc["root_cause"].get("fields", {}).get("job_id"))
    }
    if len(jobs) == 1 and len(doc.get("attempts") or []) <= 1:
        return f"job-{_safe(jobs.pop())}-postmortem.html"  # a user signature captures any text
    inputs = doc.get("inputs") or [{"path": "stdin"}]
    stem = Path(inputs[0]["path"]).name or "stdin"
    stem = re.sub(r"\.(gz|bz2|xz)$", "", stem)
    stem = re.sub(r"\.(log|out|txt|err)$", "", stem)
    return f"{_safe(stem)}-postmortem.html"


def _safe(name: str) -> str:
    """A file name part: no separators, no leading dot."""
    return re.sub(r"[^\w.-]+", "_", name).strip("._") or "job"


def write_report(doc: dict[str, Any], out: Path, *, force: bool, generated: str) -> Path:
    path = out / report_name(doc)
    if path.exists() and not force:
        raise LogscopeError(f"{path}: exists; use --force to overwrite it")
    try:
        write_atomic(path, html.render(doc, generated))
    except OSError as err:
        raise LogscopeError(f"{path}: cannot write: {err.strerror or err}") from None
    return path
