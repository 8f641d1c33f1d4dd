"""The terminal summary: verdict first, then each incident, what the run survived, the findings,
the ledger and the unrecognized error lines."""

from __future__ import annotations

import io
import math
import statistics
from collections.abc import Sequence
from types import MappingProxyType
from typing import TextIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..analysis.incidents import cascade_ranks
from ..model import (
    Advice,
    Analysis,
    Incident,
    Ledger,
    Outcome,
    Survived,
    World,
    duration,
    gpu_hours,
    rank_ranges,
)
from .document import (
    culprit_name,
    failure_lines,
    hang_dumps_doc,
    hang_line,
    summary,
    survived_where,
)
from .training import training_doc

_OUTCOME_STYLE = MappingProxyType(
    {
        Outcome.completed: "bold green",
        Outcome.truncated: "bold yellow",
        Outcome.unknown: "bold yellow",
    }
)


def render(analysis: Analysis, out: TextIO, color: bool = False, width: int = 100) -> None:
    # rich pads table cells to the width: laid out here, then written without the padding that
    # `diff`, `grep $` and review tools would show as trailing whitespace
    buf = io.StringIO()
    _render(analysis, buf, color, width)
    out.write("".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines()))


def _render(analysis: Analysis, out: TextIO, color: bool, width: int) -> None:
    console = Console(
        file=out, force_terminal=color, no_color=not color, width=width, highlight=False
    )
    job = analysis.job
    world = analysis.world
    style = _OUTCOME_STYLE.get(job.outcome, "bold red")
    console.print(f"[{style}]{job.outcome.value.upper()}[/] {escape(summary(analysis))}")
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="dim")
    facts.add_column()
    facts.add_row("outcome", escape(f"{job.outcome.value}: {job.outcome_reason}"))
    if job.exit_code is not None:
        facts.add_row("exit", f"the job's own exit code after it completed: {job.exit_code}")
    lines = failure_lines(analysis)
    if len(lines) > 1:
        for n, line in enumerate(lines):
            facts.add_row("failures" if n == 0 else "", escape(line))
    size = f"{job.world_size} ranks" if job.world_size else "world size unknown"
    hosts = ", ".join(job.hosts[:8]) + (" ..." if len(job.hosts) > 8 else "")
    facts.add_row("world", escape(size + (f" on {hosts}" if hosts else "")))
    if job.last_iteration is not None:
        of = f" of {job.train_iters}" if job.train_iters else ""
        facts.add_row("progress", f"iterations {job.first_iteration} to {job.last_iteration}{of}")
    if job.start or job.end:
        facts.add_row("time", f"{_t(job.start)} to {_t(job.end)}")
    inputs = ", ".join(f"{i.path} ({i.lines} lines)" for i in analysis.inputs)
    facts.add_row("inputs", escape(inputs))
    console.print(facts)
    for inc in analysis.incidents:
        console.print()
        _incident(console, inc, world, analysis.context_marks.get(inc.id, ()))
    if analysis.hang_dumps is not None:
        console.print()
        _hang_dumps(console, analysis)
    if analysis.survived:
        console.print()
        _survived(console, analysis.survived)
    spark = _spark(analysis)
    if analysis.findings or spark:
        console.print()
        _findings(console, analysis, spark)
    ledger = analysis.ledger
    if ledger is not None:
        console.print()
        _ledger(console, ledger, analysis.advice)
    if analysis.unrecognized:
        console.print()
        console.print("[bold]Unrecognized error lines[/] (no signature knows them)")
        for t in analysis.unrecognized[:10]:
            ex = t.example
            console.print(f"  {t.count:>6}x  {escape(t.template[:120])}")
            console.print(f"           [dim]{escape(ex.path)}:{ex.lineno}[/]")
    for i in analysis.inputs:
        for w in i.warnings:
            console.print(f"[yellow]warning:[/] {escape(w)}")


def _hang_dumps(console: Console, analysis: Analysis) -> None:
    doc = hang_dumps_doc(analysis.hang_dumps)
    if doc is None:
        return
    console.print("[bold]Hang dumps[/] (Flight Recorder traces, py-spy stacks, process states)")
    line = hang_line({"hang_dumps": doc})
    if line:
        console.print(f"  {escape(line)}")
    table = Table.grid(padding=(0, 2))
    for _ in range(4):
        table.add_column()
    table.add_row("  rank", "last collective", "call", "where")
    for r in doc["ranks"]:
        mark = ">" if r["odd"] else " "
        coll = f"#{r['seq']} {r['group']}" if r["seq"] is not None else "no dump"
        call = f"{r['op']} {r['sizes']}" if r["op"] else ""
        where = r["process"] or (f"at {r['where']}" if r["where"] else "")
        table.add_row(f"{mark} {r['rank']}", escape(coll), escape(call), escape(where))
    console.print(table)
    for w in doc["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(w)}")


def _survived(console: Console, notes: Sequence[Survived]) -> None:
    console.print("[bold]Survived[/] (errors the run outlived: not what ended it)")
    for s in notes[:10]:
        console.print(f"  {s.kind:<8} {s.count:>6}x  {escape(s.template[:110])}")
        console.print(f"           [dim]{escape(survived_where(s))}[/]")
        console.print(f"           [dim]{escape(s.reason)}[/]")
    if len(notes) > 10:
        console.print(f"  [dim]{len(notes) - 10} more in the JSON document[/]")


_BARS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 60


def _spark(analysis: Analysis) -> str | None:
    """Step time along the run in one line of block characters (each the median of a stretch of
    progress lines, lowest to highest), or None without step times."""
    training = training_doc(analysis)
    steps = [v for v in (training or {}).get("step_s", []) if v is not None]
    if len(steps) < 8:
        return None
    size = math.ceil(len(steps) / SPARK_WIDTH)
    cells = [statistics.median(steps[k : k + size]) for k in range(0, len(steps), size)]
    # at least +-10% of the median: noise of a few percent stays flat, a 5% step shows
    mid = statistics.median(cells)
    lo, hi = min(min(cells), mid * 0.9), max(max(cells), mid * 1.1)
    span = (hi - lo) or 1.0
    bars = "".join(_BARS[min(7, int((v - lo) / span * 8))] for v in cells)
    return f"{bars}  {min(cells):.3g} to {max(cells):.3g} s/iteration"


def _findings(console: Console, analysis: Analysis, spark: str | None) -> None:
    found = analysis.findings
    slow = [f for f in found if f.kind == "slowdown" and f.lost_s]
    cost = ""
    if slow:
        gpu_h = sum(f.lost_gpu_hours or 0.0 for f in slow)
        lost = duration(sum(f.lost_s or 0.0 for f in slow))
        cost = f"; slowdowns cost {lost}" + (f", {gpu_hours(gpu_h)} GPU-h" if gpu_h else "")
    console.print(f"[bold]Findings[/]  {len(found)} without an incident{cost}")
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    for f in found:
        where = f"  [dim]{escape(f.file or '')}:{f.line}[/]" if f.file else ""
        style = "yellow" if f.severity == "warning" else "dim"
        grid.add_row(f"[{style}]{f.kind}[/]", escape(f.title) + where)
    if spark:
        grid.add_row("step time", spark)
    console.print(grid)


def _ledger(console: Console, ledger: Ledger, advice: Advice | None) -> None:
    ettr = f"{ledger.ettr:.1%}" if ledger.ettr is not None else "-"
    gpu_h = f", {gpu_hours(ledger.lost_gpu_hours)} GPU-hours lost" if ledger.lost_gpu_hours else ""
    console.print(
        f"[bold]Ledger[/]  wall {duration(ledger.wall_s)}, "
        f"productive {duration(ledger.productive_s)}, "
        f"ETTR {ettr}{gpu_h}" + (f" ({ledger.gpus} GPUs)" if ledger.gpus else "")
    )
    if ledger.incidents:
        table = Table(box=None, padding=(0, 2), show_edge=False)
        for col in ("incident", "attempt", "kind", "wasted progress", "hang", "restart", "GPU-h"):
            table.add_column(col, justify="left" if col in ("incident", "kind") else "right")
        for i in ledger.incidents:
            table.add_row(
                i.incident or "-",
                str(i.attempt + 1),
                i.kind,
                duration(i.wasted_progress_s),
                duration(i.hang_s),
                duration(i.restart_s),
                gpu_hours(i.lost_gpu_hours),
            )
        console.print(table)
    badput = ", ".join(
        f"{k.replace('_', ' ')} {duration(v)}" for k, v in ledger.badput_s.items() if v
    )
    if badput:
        console.print(f"  badput: {badput}")
    if advice is not None:
        console.print(f"[bold]Checkpoint advice[/]  {escape(advice.verdict)}")
        if advice.what_if:
            table = Table(box=None, padding=(0, 2), show_edge=False)
            table.add_column("")
            for col in ("interval", "iterations", "detection", "expected overhead"):
                table.add_column(col, justify="right")
            for w in advice.what_if:
                its = f"{w.interval_iterations:.0f}" if w.interval_iterations else "-"
                table.add_row(
                    w.label,
                    duration(w.interval_s),
                    its,
                    duration(w.detection_s),
                    f"{w.overhead:.1%}",
                )
            console.print(table)


def _t(value: object) -> str:
    return value.isoformat(sep=" ") if value is not None else "?"  # type: ignore[attr-defined]


def _incident(
    console: Console, inc: Incident, world: World, marks: Sequence[tuple[int, str]] = ()
) -> None:
    console.print(
        f"[bold]Incident {inc.id}[/]  [magenta]{inc.category}[/]  {inc.severity}  "
        f"[bold]{escape(inc.title)}[/]"
    )
    rc = inc.root_cause
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    who = []
    rank = world.rank_of(rc.line)
    if rank is not None:
        who.append(f"rank {rank}")
    if rc.line.host:
        who.append(f"host {rc.line.host}")
    if rc.time:
        who.append(rc.time.isoformat(sep=" ") + ("" if rc.time_exact else " (derived)"))
    grid.add_row("root cause", escape(f"{rc.line.path}:{rc.line.lineno}  {'  '.join(who)}"))
    grid.add_row("", f"[red]{escape(rc.line.shown.strip()[:400])}[/]")
    for _line, text in marks:
        grid.add_row("attempt", escape(text.strip("— ")))
    if inc.culprit:
        c = inc.culprit
        name = culprit_name(c.rank, c.local_rank, c.host, c.task)
        grid.add_row("culprit", escape(f"{name} (confidence {c.confidence:.2f}): {c.reason}"))
    ranks = cascade_ranks(inc, world)
    grid.add_row(
        "cascade",
        f"{len(inc.cascade)} lines" + (f" from ranks {rank_ranges(ranks)}" if ranks else ""),
    )
    if inc.iteration is not None:
        grid.add_row("iteration", str(inc.iteration))
    if inc.explanation:
        grid.add_row("why", escape(inc.explanation))
    for i, r in enumerate(inc.remedies):
        grid.add_row("what to do" if i == 0 else "", escape(f"- {r}"))
    console.print(grid)
