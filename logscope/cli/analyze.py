"""`logscope analyze` and `logscope report`: a postmortem of logs that have ended."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any

import typer

from ..engine.analyze import analyze as run_analysis
from ..engine.feed import default_library
from ..errors import LogscopeError
from ..render import Format, ReportFormat, markdown
from ..render import json as json_render
from ..render.document import SCHEMA_VERSION, document
from .app import (
    Force,
    PatternDirs,
    ReportDir,
    app,
    color,
    default_jobs,
    exit_code,
    fail,
    parse_duration,
)


@app.command()
def analyze(
    paths: Annotated[
        list[str],
        typer.Argument(
            help=(
                "Log files, globs, directories, or - for stdin; Flight Recorder dumps, py-spy "
                "dumps and /proc status files among them are told apart by content."
            )
        ),
    ],
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.text,
    patterns: PatternDirs = None,
    gpus: Annotated[
        int | None, typer.Option(help="GPUs of the job, for GPU-hours (default: world size).")
    ] = None,
    mtbf: Annotated[
        str | None,
        typer.Option(help="Mean time between failures for checkpoint advice: 7d, 36h, 90m, 3600."),
    ] = None,
    html: Annotated[
        bool, typer.Option("--html", help="Also write the HTML postmortem (see --out).")
    ] = False,
    out: ReportDir = Path("reports"),
    force: Force = False,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            "-j",
            help="Worker processes for large files (0: one per usable CPU, at most 8).",
            min=0,
        ),
    ] = 0,
    store: Annotated[
        Path | None,
        typer.Option("--store", help="Also add this analysis to a fleet store (see fleet)."),
    ] = None,
) -> None:
    """Explain why a training job died or hung, and what it cost.

    Exit status: 0 healthy run, 1 incidents found (or a completed run whose job exited non-zero),
    2 usage or input error, 3 every input was empty.

    Example: logscope analyze slurm-1234.out main_log.txt.gz --format json
    """
    warnings: list[str] = []
    try:
        mtbf_s = parse_duration(mtbf) if mtbf else None
        library = default_library(patterns or [])
        with progress_bar(paths) as on_progress:
            analysis = run_analysis(
                paths,
                library,
                warn=warnings,
                gpus=gpus,
                mtbf_s=mtbf_s,
                jobs=jobs or default_jobs(),
                on_progress=on_progress,
            )
    except LogscopeError as err:
        fail(err)
    for w in warnings:
        typer.echo(f"logscope: warning: {w}", err=True)
    if fmt is Format.json:
        json_render.render(analysis, sys.stdout)
    elif fmt is Format.md:
        sys.stdout.write(markdown.render(document(analysis)))
    else:
        from ..render import terminal  # rich: not for a document's start-up

        terminal.render(analysis, sys.stdout, color=color())
    if html:
        _write_report(document(analysis), out, force)
    if store is not None:
        from ..fleet import ingest_analysis  # pandas and pyarrow.dataset: not for tail's start-up

        try:
            ingest_analysis(analysis, paths, store)
        except (OSError, ValueError) as err:
            fail(f"{store}: cannot store the analysis: {err}")
    raise typer.Exit(exit_code(analysis))


@contextlib.contextmanager
def progress_bar(paths: list[str]) -> Iterator[Callable[[int], None] | None]:
    """A progress bar on stderr for long runs on a terminal; nothing otherwise."""
    sizes = [Path(p).stat().st_size for p in paths if p != "-" and Path(p).is_file()]
    if not sys.stderr.isatty() or sum(sizes) < 200 << 20:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    with Progress(
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        transient=True,
        console=Console(stderr=True),
    ) as bar:
        task = bar.add_task("reading", total=sum(sizes))
        yield lambda done: bar.update(task, completed=done)


def _version() -> str:
    try:
        return metadata.version("logscope")
    except metadata.PackageNotFoundError:
        return "(not installed)"


def _write_report(doc: dict[str, Any], out: Path, force: bool) -> None:
    from ..render.report import write_report  # jinja2: only when a report is written

    try:
        path = write_report(doc, out, force=force, generated=_version())
    except LogscopeError as err:
        fail(err)
    typer.echo(f"logscope: wrote {path}", err=True)


@app.command()
def report(
    analysis_json: Annotated[Path, typer.Argument(help="A document from analyze --format json.")],
    fmt: Annotated[
        ReportFormat,
        typer.Option("--format", "-f", help="html (a file under --out) or md (stdout)."),
    ] = ReportFormat.html,
    out: ReportDir = Path("reports"),
    force: Force = False,
) -> None:
    """Write the HTML postmortem (or Markdown) from a saved analysis.

    Example: logscope analyze job.out --format json > a.json && logscope report a.json
    """
    try:
        doc = json.loads(analysis_json.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        fail(f"{analysis_json}: not an analysis document: {err}")
    if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA_VERSION:
        fail(f"{analysis_json}: not a logscope analysis document (schema_version 1)")
    if fmt is ReportFormat.md:
        sys.stdout.write(markdown.render(doc))
        return
    _write_report(doc, out, force)
