"""What `tail` does about an incident: run a command, create a kill-switch file, keep metrics.
Log text never reaches a shell: the command is split with shlex and run without one, and the
incident's facts travel in `LOGSCOPE_*` variables and as JSON on its standard input."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ..compact_column import Packed
from ..engine.analyze import analyze
from ..errors import LogscopeError
from ..model import Event
from ..read.sources import expand
from .bounded import Limits, Tools
from .collect import Evidence, collect
from .follow import Chunk, Notice, follow
from .watcher import Alert, HealthWarning, Outlived, Watcher

COMMAND_TIMEOUT_S = 120.0
_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@dataclass(frozen=True, slots=True)
class ActionResult:
    action: str
    ok: bool
    detail: str


def incident_env(alert: Alert) -> dict[str, str]:
    """The incident's facts as environment variables (values are log text: data, not code)."""
    env = {
        "LOGSCOPE_INCIDENT_ID": alert.id,
        "LOGSCOPE_KIND": alert.kind,
        "LOGSCOPE_CATEGORY": alert.category,
        "LOGSCOPE_TITLE": alert.title,
        "LOGSCOPE_REASON": alert.reason,
    }
    optional = {
        "LOGSCOPE_RANK": alert.rank,
        "LOGSCOPE_LOCAL_RANK": alert.local_rank,
        "LOGSCOPE_HOST": alert.host,
        "LOGSCOPE_ITERATION": alert.iteration,
        "LOGSCOPE_LAST_CHECKPOINT": alert.last_checkpoint_iteration,
        "LOGSCOPE_SINCE_PROGRESS_S": None
        if alert.since_progress_s is None
        else f"{alert.since_progress_s:.1f}",
    }
    env.update({k: str(v) for k, v in optional.items() if v is not None})
    if alert.event is not None:
        env["LOGSCOPE_FILE"] = alert.event.line.path
        env["LOGSCOPE_LINE"] = str(alert.event.line.lineno)
        env["LOGSCOPE_TEXT"] = alert.event.line.shown[:4096]
    return env


def command_argv(command: str, environ: Mapping[str, str]) -> list[str]:
    """Split a command like a shell would, expand `$VAR` / `${VAR}` from `environ`, no shell.

    `environ` is the user's: the LOGSCOPE_* variables hold log text, and pasted into a command
    line they would reach a shell the user starts (`sh -c 'echo "$LOGSCOPE_TEXT"'`, quoted to
    be safe, would run `$(...)` from the log). They reach the command in its environment only.
    """
    try:
        parts = shlex.split(command)
    except ValueError as err:
        raise LogscopeError(f"--on-incident: cannot parse {command!r}: {err}") from None
    if not parts:
        raise LogscopeError("--on-incident: empty command")

    def expand(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return environ.get(name, m.group(0))

    return [_VAR.sub(expand, p) for p in parts]


def run_command(
    command: str, alert: Alert, environ: Mapping[str, str], extra: Mapping[str, str] | None = None
) -> ActionResult:
    user = {k: v for k, v in environ.items() if not k.startswith("LOGSCOPE_")}
    try:
        argv = command_argv(command, user)
    except LogscopeError as err:
        return ActionResult("on-incident", False, str(err))
    env = {**environ, **incident_env(alert), **(extra or {})}
    try:
        proc = subprocess.run(
            argv,
            input=json.dumps(alert.doc()),
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return ActionResult("on-incident", False, f"{argv[0]}: {err}")
    detail = (proc.stderr or proc.stdout).strip()[-500:]
    return ActionResult("on-incident", proc.returncode == 0, f"exit {proc.returncode} {detail}")


def kill_switch(path: Path) -> ActionResult:
    """Megatron's `--kill-switch-path`: the job saves a checkpoint and exits at its next step."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    except OSError as err:
        return ActionResult("kill-switch", False, f"{path}: {err.strerror or err}")
    return ActionResult("kill-switch", True, str(path))


def _read_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


_UMASK = _read_umask()
"""Read once: setting it to read it, on every write, would open a window for other threads."""


def write_atomic(path: Path, text: str) -> None:
    """Write a whole file so a reader never sees half of it (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o666 & ~_UMASK)  # mkstemp makes 0600; a report is for sharing
            f.write(text)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _last_finite(values: Packed, back: int = 64) -> float | None:
    """The last finite value among the last `back`."""
    for v in reversed(values.numpy()[-back:].tolist()):
        if math.isfinite(v):
            return float(v)
    return None


def metrics_text(watcher: Watcher, now: float) -> str:
    """The Prometheus textfile-collector format."""
    progress = watcher.engine.progress
    last_it = progress.iterations()[1]
    per, last_t = watcher.cadence()
    since = now - watcher.last_progress_at if watcher.last_progress_at is not None else None
    step, loss = _last_finite(progress.iter_s), _last_finite(progress.loss)
    lines = [
        "# HELP logscope_up 1 while logscope tail is watching.",
        "# TYPE logscope_up gauge",
        "logscope_up 1",
    ]

    def gauge(name: str, help_: str, value: float | None) -> None:
        if value is None:
            return
        lines.extend((f"# HELP {name} {help_}", f"# TYPE {name} gauge", f"{name} {value:g}"))

    gauge("logscope_iteration", "Last training iteration seen.", last_it)
    gauge("logscope_iteration_seconds", "Median seconds per iteration.", per)
    gauge(
        "logscope_last_progress_timestamp_seconds",
        "Log time of the last progress line (UNIX seconds).",
        last_t.timestamp() if last_t else None,
    )
    gauge("logscope_seconds_since_progress", "Seconds since a progress line was seen.", since)
    gauge(
        "logscope_step_seconds",
        "Seconds the last progress line covers (per iteration x log interval).",
        step,
    )
    gauge("logscope_loss", "Training loss of the last progress line that has one.", loss)
    counts: dict[str, int] = {}
    for a in watcher.alerts:
        counts[a.category] = counts.get(a.category, 0) + 1
    lines += [
        "# HELP logscope_incidents_total Incidents raised.",
        "# TYPE logscope_incidents_total counter",
    ]
    lines += [f'logscope_incidents_total{{category="{c}"}} {n}' for c, n in sorted(counts.items())]
    kinds: dict[str, int] = {}
    for w in watcher.warnings:
        kinds[w.finding.kind] = kinds.get(w.finding.kind, 0) + 1
    lines += [
        "# HELP logscope_warnings_total Findings raised (slowdowns, loss spikes, NaN losses).",
        "# TYPE logscope_warnings_total counter",
    ]
    lines += [f'logscope_warnings_total{{kind="{k}"}} {n}' for k, n in sorted(kinds.items())]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class HangCollect:
    """`--on-hang collect`: evidence of a hang, collected before acting on it."""

    base: Path
    """The folder the evidence folder goes in (beside the reports)."""
    logs: tuple[str, ...]
    """The followed paths: their torchrun agent is the job's, and they are analyzed after."""
    tools: Tools
    job: str | None = None
    """A SLURM job id: collect on every node of the job through srun."""
    limits: Limits = field(default_factory=Limits)


def gather(spec: HangCollect, alert: Alert) -> tuple[Evidence | None, ActionResult]:
    try:
        ev = collect(
            spec.base, spec.logs, spec.tools, job=spec.job, limits=spec.limits, trigger=alert.doc()
        )
    except OSError as err:
        return None, ActionResult("collect", False, f"{spec.base}: {err.strerror or err}")
    return ev, ActionResult("collect", bool(ev.ranks), ev.summary())


def name_culprit(logs: tuple[str, ...], evidence: Evidence) -> ActionResult | None:
    """The culprit by the analysis of the logs and the evidence together (the files the tools
    wrote: the manifest is no log); None when neither names one (the folder is in the collect
    line)."""
    try:
        files = [s.path for s in expand(list(logs)) if s.path != "-"]
        verdict = analyze([*files, *map(str, evidence.dumps())]).verdict
    except (LogscopeError, OSError) as err:
        return ActionResult("culprit", False, f"analysis failed: {err}")
    c = verdict.culprit if verdict is not None else None
    if c is None or (c.rank is None and c.host is None):
        return None
    who = f"rank {c.rank}" if c.rank is not None else "a rank"
    where = f" on {c.host}" if c.host else ""
    return ActionResult("culprit", True, f"{who}{where}: {c.reason}")


@dataclass(slots=True)
class Actions:
    """The actions chosen on the command line; each incident triggers them once. With
    `hang_collect`, a hang's evidence is collected first, and the culprit named after acting."""

    command: str | None = None
    kill_switch_path: Path | None = None
    metrics_path: Path | None = None
    environ: Mapping[str, str] = field(default_factory=dict)
    hang_collect: HangCollect | None = None
    warn: Callable[[str], None] | None = None
    """Where collection warnings go (one line each)."""

    def on_alert(self, alert: Alert) -> list[ActionResult]:
        out = []
        evidence: Evidence | None = None
        extra: dict[str, str] = {}
        if alert.kind == "hang" and self.hang_collect is not None:
            evidence, result = gather(self.hang_collect, alert)
            out.append(result)
            if evidence is not None:
                extra["LOGSCOPE_EVIDENCE"] = str(evidence.folder)
                for w in evidence.warnings:
                    if self.warn is not None:
                        self.warn(w)
        if self.kill_switch_path is not None:
            out.append(kill_switch(self.kill_switch_path))
        if self.command:
            out.append(run_command(self.command, alert, self.environ, extra))
        if evidence is not None and self.hang_collect is not None:
            named = name_culprit(self.hang_collect.logs, evidence)
            out.extend(() if named is None else (named,))
        return out

    def metrics(self, watcher: Watcher, now: float) -> ActionResult | None:
        """Rewrite the textfile; a failure (disk full, directory gone) is reported, not fatal:
        the watcher matters more than its metrics."""
        if self.metrics_path is None:
            return None
        try:
            write_atomic(self.metrics_path, metrics_text(watcher, now))
        except OSError as err:
            return ActionResult(
                "metrics-file", False, f"{self.metrics_path}: {err.strerror or err}"
            )
        return None


@dataclass(slots=True)
class TailResult:
    alerts: list[Alert]
    exited_on_incident: bool


def run_tail(
    patterns: list[str],
    watcher: Watcher,
    actions: Actions,
    *,
    from_start: bool = False,
    poll_s: float = 0.25,
    exit_on_incident: bool = False,
    max_seconds: float | None = None,
    on_alert: Callable[[Alert, list[ActionResult]], None] | None = None,
    on_event: Callable[[Event], None] | None = None,
    on_notice: Callable[[Notice], None] | None = None,
    on_tick: Callable[[float], None] | None = None,
    on_warning: Callable[[HealthWarning], None] | None = None,
    on_outlived: Callable[[Outlived], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> TailResult:
    """Follow the logs, feed the watcher, act on each new alert once."""
    start = clock()
    stop_now = False

    def stop() -> bool:
        return stop_now or (max_seconds is not None and clock() - start >= max_seconds)

    years: dict[str, int] = {}
    metrics_error: str | None = None
    for item in follow(patterns, from_start=from_start, poll_s=poll_s, stop=stop, clock=clock):
        if isinstance(item, Notice):
            if on_notice is not None:
                on_notice(item)
            continue
        if isinstance(item, Chunk):
            year = years.setdefault(item.path, datetime.now().year)
            new = watcher.feed(item.path, item.block, clock(), year)
            if on_event is not None:
                for e in watcher.recent:
                    on_event(e)
            for o in watcher.take_outlived():
                if on_outlived is not None:
                    on_outlived(o)
        else:
            new = watcher.tick(item.now)
            for w in watcher.look(item.now):
                if on_warning is not None:
                    on_warning(w)
            failed = actions.metrics(watcher, item.now)
            error = failed.detail if failed is not None else None
            if error is not None and error != metrics_error and on_notice is not None:
                on_notice(Notice(str(actions.metrics_path), "error", f"metrics-file: {error}"))
            metrics_error = error
            if on_tick is not None:
                on_tick(item.now)
        for alert in new:
            results = actions.on_alert(alert)
            if on_alert is not None:
                on_alert(alert, results)
            if exit_on_incident:
                stop_now = True
    return TailResult(list(watcher.alerts), stop_now)
