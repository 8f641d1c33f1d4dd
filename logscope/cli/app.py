"""The command line's shared parts: the typer apps, option types, exit codes, and the helpers
every command uses."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, NoReturn

import typer

from ..errors import LogscopeError
from ..model import Analysis

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


def fail(err: LogscopeError | str) -> NoReturn:
    typer.echo(f"logscope: error: {err}", err=True)
    raise typer.Exit(EXIT_ERROR)


def color() -> bool:
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
