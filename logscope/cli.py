"""Command line: a thin shell over the library (`logscope.analyze`, `logscope.load_library`)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
from collections.abc import Callable, Iterator
from enum import StrEnum
from importlib import metadata
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, NoReturn

import typer

from .engine.analyze import analyze as run_analysis
from .engine.feed import Engine, default_library
from .errors import LogscopeError
from .match.loader import builtin_dirs, load_library
from .match.samples import check_samples
from .model import Analysis
from .render import FleetFormat, Format, ReportFormat, markdown
from .render import json as json_render
from .render.document import SCHEMA_VERSION, document

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Log forensics for distributed training jobs: root cause, culprit rank, outcome.",
)
patterns_app = typer.Typer(no_args_is_help=True, help="List and check failure signatures.")
app.add_typer(patterns_app, name="patterns")
fleet_app = typer.Typer(
    no_args_is_help=True, help="Store analyses as Parquet; failure statistics and bad nodes."
)
app.add_typer(fleet_app, name="fleet")

EXIT_HEALTHY, EXIT_INCIDENTS, EXIT_ERROR, EXIT_EMPTY = 0, 1, 2, 3

ReportDir = Annotated[
    Path, typer.Option("--out", help="Directory for the HTML postmortem (default ./reports).")
]
Force = Annotated[bool, typer.Option("--force", help="Overwrite an existing report.")]
Store = Annotated[
    Path, typer.Option("--store", help="Fleet store directory (Hive-partitioned Parquet).")
]
PatternDirs = Annotated[
    list[Path] | None,
    typer.Option("--patterns", help="Extra signature directory (repeatable); same id overrides."),
]


def default_jobs() -> int:
    """One worker per CPU this process may run on (a SLURM step's, not the node's), at most 8:
    more would only wait for this process, which feeds the engine (bench/RESULTS.md)."""
    return max(1, min(8, len(os.sched_getaffinity(0))))


def _fail(err: LogscopeError | str) -> NoReturn:
    typer.echo(f"logscope: error: {err}", err=True)
    raise typer.Exit(EXIT_ERROR)


def _color() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ


_UNITS = MappingProxyType({"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800})


def parse_duration(text: str) -> float:
    """`7d`, `36h`, `90m`, `45s` or plain seconds."""
    value = text.strip().lower()
    unit = value[-1] if value and value[-1] in _UNITS else "s"
    number = value[:-1] if value and value[-1] in _UNITS else value
    try:
        seconds = float(number) * _UNITS[unit]
    except ValueError:
        raise LogscopeError(f"not a duration: {text!r} (use e.g. 7d, 36h, 90m, 3600)") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise LogscopeError(f"a duration must be positive: {text!r}")
    return seconds


def exit_code(analysis: Analysis) -> int:
    if analysis.verdict is None and analysis.empty:
        return EXIT_EMPTY  # nothing was read: not a healthy run
    if analysis.verdict is None and analysis.job.exit_code is None:
        return EXIT_HEALTHY
    return EXIT_INCIDENTS  # an incident, or a completed run whose job exited non-zero


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
        _fail(err)
    for w in warnings:
        typer.echo(f"logscope: warning: {w}", err=True)
    if fmt is Format.json:
        json_render.render(analysis, sys.stdout)
    elif fmt is Format.md:
        sys.stdout.write(markdown.render(document(analysis)))
    else:
        from .render import terminal  # rich: not for a document's start-up

        terminal.render(analysis, sys.stdout, color=_color())
    if html:
        _write_report(document(analysis), out, force)
    if store is not None:
        from .fleet import ingest_analysis  # pandas and pyarrow.dataset: not for tail's start-up

        try:
            ingest_analysis(analysis, paths, store)
        except (OSError, ValueError) as err:
            _fail(f"{store}: cannot store the analysis: {err}")
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
    from .render.report import write_report  # jinja2: only when a report is written

    try:
        path = write_report(doc, out, force=force, generated=_version())
    except LogscopeError as err:
        _fail(err)
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
        _fail(f"{analysis_json}: not an analysis document: {err}")
    if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA_VERSION:
        _fail(f"{analysis_json}: not a logscope analysis document (schema_version 1)")
    if fmt is ReportFormat.md:
        sys.stdout.write(markdown.render(doc))
        return
    _write_report(doc, out, force)


@patterns_app.command("list")
def patterns_list(patterns: PatternDirs = None) -> None:
    """List every signature: id, kind, category, severity, role and title.

    Example: logscope patterns list --patterns ./my-patterns
    """
    try:
        library = default_library(patterns or [])
    except LogscopeError as err:
        _fail(err)
    for s in library.signatures:
        typer.echo(
            f"{s.id:<40} {s.kind:<16} {s.category or '-':<18} {s.severity or '-':<8} "
            f"{s.role or '-':<8} {s.title}"
        )


@patterns_app.command("test")
def patterns_test(
    dirs: Annotated[list[Path] | None, typer.Argument(help="Directories to check.")] = None,
) -> None:
    """Check that every sample matches its signature and no counter-sample does, and that
    every classification rule decides its own samples.

    User libraries are checked together with the built-in one, so a sample that a built-in
    signature wins over is reported. Exit status 1 when a check fails.

    Example: logscope patterns test ./my-patterns
    """
    try:
        library = load_library([*builtin_dirs(), *(dirs or [])])
    except LogscopeError as err:
        _fail(err)
    only = None
    if dirs:
        only = [s for s in library.sources if any(Path(s).parent == Path(d) for d in dirs)]
    problems = check_samples(library, only)
    for p in problems:
        typer.echo(str(p))
    checked = [s for s in library.signatures if only is None or s.source in only]
    rules = [r for r in library.rules if only is None or r.source in only]
    typer.echo(
        f"{len(checked)} signatures and {len(rules)} classification rules checked, "
        f"{len(problems)} problems"
    )
    raise typer.Exit(1 if problems else 0)


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
    from .fleet import Ingested, ingest, job_paths

    def report(r: Ingested) -> None:
        if r.error is not None:
            typer.echo(f"logscope: {r.path}: skipped: {r.error}", err=True)

    try:
        results = ingest(job_paths(paths), store, jobs, patterns or [], gpus, on_result=report)
    except (LogscopeError, OSError) as err:
        _fail(str(err))
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
    from .fleet import load, summarize
    from .render.fleet import exclude_list, render

    try:
        summary = summarize(load(store))
    except LogscopeError as err:
        _fail(err)
    if exclude:
        typer.echo(exclude_list(summary))
        return
    render(summary, fmt, sys.stdout)


class OnHang(StrEnum):
    act = "act"
    collect = "collect"


@app.command()
def tail(
    paths: Annotated[list[str], typer.Argument(help="Log files, globs or directories to follow.")],
    from_start: Annotated[
        bool, typer.Option("--from-start", help="Replay what the files hold, then follow.")
    ] = False,
    stall_after: Annotated[
        str,
        typer.Option(help="Silence that is a hang: a duration (90s, 10m) or auto (learned)."),
    ] = "auto",
    on_incident: Annotated[
        str | None,
        typer.Option(
            help="Command to run on each incident, without a shell: $VARS come from the "
            "environment, the incident is in LOGSCOPE_* variables and as JSON on stdin."
        ),
    ] = None,
    kill_switch: Annotated[
        Path | None, typer.Option(help="Create this file on an incident (Megatron kill switch).")
    ] = None,
    exit_on_incident: Annotated[
        bool, typer.Option("--exit-on-incident", help="Exit 1 once an incident's actions ran.")
    ] = False,
    metrics_file: Annotated[
        Path | None, typer.Option(help="Keep a Prometheus textfile here, rewritten atomically.")
    ] = None,
    json_lines: Annotated[
        bool, typer.Option("--json", help="One JSON object per event and incident on stdout.")
    ] = False,
    poll: Annotated[
        float, typer.Option(help="Seconds between polls of the files.", min=0.01)
    ] = 0.25,
    max_duration: Annotated[
        str | None, typer.Option(help="Stop watching after this long (e.g. 12h).")
    ] = None,
    on_hang: Annotated[
        OnHang,
        typer.Option(
            help="collect: before acting on a hang, save each rank's py-spy stack, process "
            "state and Flight Recorder into a folder under --out, and name the culprit."
        ),
    ] = OnHang.act,
    job: Annotated[
        str | None,
        typer.Option(help="SLURM job id: --on-hang collect runs on every node of it via srun."),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="Directory for --on-hang collect's evidence folders.")
    ] = Path("reports"),
    patterns: PatternDirs = None,
) -> None:
    """Follow growing logs; raise crashes at once and silent hangs after a stall.

    Polls the files (works on NFS and Lustre), follows rotation and truncation, picks up files
    that appear later. Exit status: 0 stopped with no incident, 1 incidents raised, 2 usage error.

    Example: logscope tail 'logs/*.out' --stall-after 20m --on-incident 'scancel $SLURM_JOB_ID'
    """
    # imported here: `analyze` starts ~0.1 s sooner without them (its workers wait for it)
    from .live.actions import Actions, HangCollect, command_argv, run_tail
    from .live.bounded import find_tools
    from .live.watcher import Watcher
    from .render.stream import TailPrinter

    try:
        stall = None if stall_after == "auto" else parse_duration(stall_after)
        limit = parse_duration(max_duration) if max_duration else None
        if on_incident is not None:
            command_argv(on_incident, os.environ)  # a command that cannot run fails now
        library = default_library(patterns or [])
    except LogscopeError as err:
        _fail(err)
    watcher = Watcher(Engine(library), stall_after_s=stall)
    actions = Actions(on_incident, kill_switch, metrics_file, dict(os.environ))
    if on_hang is OnHang.collect:
        actions.hang_collect = HangCollect(out, tuple(paths), find_tools(), job)
        actions.warn = lambda message: typer.echo(f"logscope: warning: {message}", err=True)
    live = sys.stderr.isatty() and not json_lines
    printer = TailPrinter(sys.stdout, sys.stderr, json_lines=json_lines, live=live)
    try:
        with _stop_on_signals():
            result = run_tail(
                paths,
                watcher,
                actions,
                from_start=from_start,
                poll_s=poll,
                exit_on_incident=exit_on_incident,
                max_seconds=limit,
                on_alert=printer.alert,
                on_warning=printer.warning,
                on_outlived=printer.outlived,
                on_event=printer.event if json_lines else None,
                on_notice=printer.notice,
                on_tick=(lambda now: printer.status(watcher.status(now))) if live else None,
            )
    except KeyboardInterrupt:
        printer.done()
        raise typer.Exit(EXIT_INCIDENTS if watcher.alerts else EXIT_HEALTHY) from None
    printer.done()
    raise typer.Exit(EXIT_INCIDENTS if result.alerts else EXIT_HEALTHY)


@app.command("collect-local")
def collect_local(
    out: Annotated[Path, typer.Option("--out", help="Directory to write the evidence into.")],
    job: Annotated[
        str | None, typer.Option(help="Only the ranks of this SLURM job (SLURM_JOB_ID).")
    ] = None,
    logs: Annotated[
        list[str] | None,
        typer.Option("--log", help="Only the ranks of the torchrun agent writing this file."),
    ] = None,
) -> None:
    """Save this machine's torchrun ranks' py-spy stacks, states and Flight Recorders.

    What `tail --on-hang collect` runs on each node of a SLURM job (through srun); prints what
    it found as one JSON object, also written to DIR/collect-<host>.json. Exit status: 0 ranks
    found, 1 none, 2 usage error.

    Example: logscope collect-local --out reports/now --log run.log
    """
    from .live.bounded import find_tools
    from .live.collect import collect_node, write_node

    try:
        node = collect_node(out, find_tools(), logs or (), job=job)
        write_node(out, node)
    except OSError as err:
        _fail(f"{out}: {err.strerror or err}")
    typer.echo(json.dumps(node.doc(), ensure_ascii=False))
    raise typer.Exit(EXIT_HEALTHY if node.ranks else EXIT_INCIDENTS)


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """SIGINT and SIGTERM stop a watcher cleanly (exit status by its incidents), also when it
    was started in the background with SIGINT ignored, or by a scheduler that sends SIGTERM."""

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def main() -> None:
    app()
