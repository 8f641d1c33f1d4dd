"""`logscope fleet`: analyses stored as Parquet, failure statistics, the nodes to drain."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from ..errors import LogscopeError
from ..render import FleetFormat
from .app import (
    EXIT_HEALTHY,
    EXIT_INCIDENTS,
    PatternDirs,
    Store,
    fail,
    fleet_app,
)


@fleet_app.command("ingest")
def fleet_ingest(
    paths: Annotated[
        list[str], typer.Argument(help="One job per file or directory (a quoted glob: per match).")
    ],
    store: Store,
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", min=1, help="Processes (default: CPU count).")
    ] = None,
    gpus: Annotated[
        int | None, typer.Option(help="GPUs of every job (default: world size).")
    ] = None,
    patterns: PatternDirs = None,
) -> None:
    """Analyze each path as one job, in parallel, and store it as Parquet.

    Re-ingesting a job replaces its own files and nothing else. A job that cannot be analyzed
    is reported and skipped. Exit status: 0 all stored, 1 some failed, 2 usage error.

    Example: logscope fleet ingest logs/job-* --store /shared/logscope-store --jobs 8
    """
    from ..fleet import Ingested, ingest, job_paths

    def report(r: Ingested) -> None:
        if r.error is not None:
            typer.echo(f"logscope: {r.path}: skipped: {r.error}", err=True)

    try:
        results = ingest(job_paths(paths), store, jobs, patterns or [], gpus, on_result=report)
    except (LogscopeError, OSError) as err:
        fail(str(err))
    ok = sum(1 for r in results if r.error is None)
    typer.echo(f"logscope: stored {ok} of {len(results)} jobs in {store}", err=True)
    raise typer.Exit(EXIT_INCIDENTS if ok < len(results) else EXIT_HEALTHY)


@fleet_app.command("summary")
def fleet_summary(
    store: Store,
    fmt: Annotated[
        FleetFormat, typer.Option("--format", "-f", help="text, json, or csv (bad nodes).")
    ] = FleetFormat.text,
    exclude: Annotated[
        bool,
        typer.Option("--exclude-list", help="Print only the bad hosts, comma-separated."),
    ] = False,
) -> None:
    """Failure mix, lost GPU-hours, MTBF with its confidence interval, ETTR and bad nodes.

    Example: sbatch --exclude=$(logscope fleet summary --store store --exclude-list) train.sh
    """
    from ..fleet import load, summarize
    from ..render.fleet import exclude_list, render

    try:
        summary = summarize(load(store))
    except LogscopeError as err:
        fail(err)
    if exclude:
        typer.echo(exclude_list(summary))
        return
    render(summary, fmt, sys.stdout)
