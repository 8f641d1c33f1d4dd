"""`logscope tail` and `logscope collect-local`: watching a job while it runs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ..engine.feed import Engine, default_library
from ..errors import LogscopeError
from .app import (
    EXIT_HEALTHY,
    EXIT_INCIDENTS,
    PatternDirs,
    app,
    fail,
    parse_duration,
)


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
    from ..live.actions import Actions, HangCollect, command_argv, run_tail
    from ..live.bounded import find_tools
    from ..live.watcher import Watcher
    from ..render.stream import TailPrinter

    try:
        stall = None if stall_after == "auto" else parse_duration(stall_after)
        limit = parse_duration(max_duration) if max_duration else None
        if on_incident is not None:
            command_argv(on_incident, os.environ)  # a command that cannot run fails now
        library = default_library(patterns or [])
    except LogscopeError as err:
        fail(err)
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
    from ..live.bounded import find_tools
    from ..live.collect import collect_node, write_node

    try:
        node = collect_node(out, find_tools(), logs or (), job=job)
        write_node(out, node)
    except OSError as err:
        fail(f"{out}: {err.strerror or err}")
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
