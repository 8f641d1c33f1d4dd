"""The lost-compute ledger and checkpoint advice: pure functions of attempts and incidents.
A failed attempt's work counts up to its last checkpoint saved before the failure; then come
wasted progress, the hang and the restart. Productive time and the lost-time buckets (with
start-up, checkpointing, slowdowns and the last attempt's tail) sum to wall time."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from datetime import datetime

from ..model import (
    Advice,
    Attempt,
    Event,
    Finding,
    Incident,
    Ledger,
    LedgerIncident,
    WhatIf,
    duration,
    gpu_hours_of,
    input_of,
)
from .clock import timestamp


def owner(incident: Incident, attempts: Sequence[Attempt]) -> int | None:
    """The attempt an incident belongs to: its root cause's."""
    return attempt_of(incident.root_cause, attempts, incident.start or incident.root_cause.time)


def attempt_of(e: Event, attempts: Sequence[Attempt], t: datetime | None = None) -> int | None:
    """The attempt a line belongs to: its job's when it is in a job's `.out`, by position in the
    same input, else by its time `t`."""
    inp = input_of(e.seq)
    for a in attempts:
        if inp in a.companions:
            return a.index  # a line of the attempt's own job file (its .out)
        if inp == a.input and a.first_seq <= e.seq <= a.last_seq:
            return a.index
    same = [a for a in attempts if a.input == inp and a.first_seq <= e.seq]
    if same:
        return same[-1].index  # after the attempt's last line, before the next one
    v = timestamp(t)
    if v is None:
        return None
    found = None
    for a in attempts:
        start = timestamp(a.loop_start) or timestamp(a.start)
        if start is not None and start <= v:
            found = a.index
    return found


def failure_time(
    incident: Incident | None, attempt: Attempt, cadence_s: float | None
) -> tuple[float | None, bool]:
    """When the attempt failed, and whether a log line says so exactly.

    A stamped root cause is the failure time. With a watchdog timeout in the cascade, the stuck
    collective began `ran for N ms` before the first stamp after it (FORMATS.md §2.2). Otherwise
    the failure came during the iteration after the last progress line: its middle is the best
    guess. A hang (or an end banner) fails at the last progress line.
    """
    last = timestamp(attempt.last_progress)
    if incident is None or incident.category in ("hang", "timelimit", "cancelled", "preemption"):
        return last, last is not None
    root = incident.root_cause
    if root.time is not None and root.time_exact:
        return root.time.timestamp(), True
    elapsed = [
        float(e.fields["elapsed_ms"]) / 1000 for e in incident.cascade if "elapsed_ms" in e.fields
    ]
    stamped = [
        e.time.timestamp()
        for e in incident.cascade
        if e.time is not None and e.time_exact and e.seq > root.seq
    ]
    if elapsed and stamped:
        t = min(stamped) - max(elapsed)
        if last is None or t >= last:
            return t, False
    if last is None:
        return (root.time.timestamp() if root.time else None), False
    return last + (cadence_s or 0.0) / 2, False


def _last_save_before(attempt: Attempt, t: float | None) -> tuple[float | None, int | None]:
    best: tuple[float | None, int | None] = (None, None)
    for s in attempt.saves:
        end = timestamp(s.end)
        if end is not None and (t is None or end <= t):
            best = (end, s.iteration)
    return best


def build_ledger(
    attempts: Sequence[Attempt],
    endings: dict[int, tuple[str, Incident | None]],
    gpus: int | None,
    cadence_s: float | None,
    findings: Sequence[Finding] = (),
) -> Ledger | None:
    """The ledger of a run. `endings` maps a failed attempt to (kind, incident)."""
    timed = [
        (a, loop, end)
        for a in attempts
        if (loop := timestamp(a.loop_start)) is not None and (end := timestamp(a.end)) is not None
    ]
    if not timed:
        return None
    first, first_loop, _ = timed[0]
    e_last = timed[-1][2]
    s1 = min(timestamp(first.start) or first_loop, first_loop)
    wall = max(0.0, e_last - s1)
    buckets = dict.fromkeys(
        (
            "wasted_progress",
            "hang",
            "disruption_recovery",
            "checkpointing",
            "slowdown",
            "startup",
            "other",
        ),
        0.0,
    )
    productive = 0.0
    buckets["startup"] = first_loop - s1
    rows: list[LedgerIncident] = []
    for i, (a, loop, end) in enumerate(timed):
        nxt_loop = timed[i + 1][1] if i + 1 < len(timed) else None
        kind, incident = endings.get(a.index, ("", None))
        if kind:
            f, exact = failure_time(incident, a, cadence_s)
            f = min(max(f if f is not None else end, loop), end)
            u, ckpt_it = _last_save_before(a, f)
            u = loop if u is None else max(u, loop)
            restart = max(0.0, nxt_loop - end) if nxt_loop is not None else None
            row = LedgerIncident(
                incident=incident.id if incident is not None else None,
                attempt=a.index,
                kind=kind,
                failure=datetime.fromtimestamp(f),
                failure_exact=exact,
                last_checkpoint_iteration=ckpt_it if ckpt_it is not None else a.resumed_from,
                wasted_progress_s=f - u,
                hang_s=end - f,
                restart_s=restart,
                lost_gpu_hours=gpu_hours_of(f - u + end - f + (restart or 0.0), gpus),
            )
            rows.append(row)
            buckets["wasted_progress"] += row.wasted_progress_s
            buckets["hang"] += row.hang_s
        else:
            u = timestamp(a.last_progress) or loop
            buckets["other"] += max(0.0, end - u)
        ckpt = sum(s.duration_s for s in a.saves if (timestamp(s.end) or math.inf) <= u)
        buckets["checkpointing"] += ckpt
        useful = max(0.0, u - loop - ckpt)
        slow = min(useful, _slowdown_within(findings, a.index, loop, u))
        buckets["slowdown"] += slow
        productive += useful - slow
        if nxt_loop is not None:
            buckets["disruption_recovery"] += max(0.0, nxt_loop - end)
    return Ledger(gpus, wall, productive, buckets, tuple(rows))


def _slowdown_within(findings: Sequence[Finding], attempt: int, lo: float, hi: float) -> float:
    """The time an attempt's slowdowns cost between lo and hi: each one's cost in the share of
    its span that falls there (a slowdown costs evenly over its steps)."""
    total = 0.0
    for f in findings:
        if f.kind != "slowdown" or f.attempt != attempt or not f.lost_s or f.lost_s <= 0:
            continue
        a, b = timestamp(f.start), timestamp(f.end)
        if a is None or b is None or b <= a:
            continue
        total += f.lost_s * max(0.0, min(b, hi) - max(a, lo)) / (b - a)
    return total


def headline(
    incidents: Sequence[Incident],
    ledger: Ledger | None,
    ended_by: Incident | None,
) -> Incident | None:
    """The incident a run's verdict names. A run that did not finish is explained by the
    failure that ended it (`ended_by`); otherwise the failure that cost the most GPU-hours
    leads; without costs, the last incident."""
    if not incidents:
        return None
    if ended_by is not None:
        return ended_by
    by_id = {i.id: i for i in incidents}
    costs = [
        (row.lost_gpu_hours or 0.0, row.wasted_progress_s + row.hang_s, by_id[row.incident])
        for row in (ledger.incidents if ledger else ())
        if row.incident in by_id
    ]
    if costs:
        return max(costs, key=lambda c: (c[0], c[1]))[2]
    return incidents[-1]


# -- checkpoint advice ---------------------------------------------------------------------------


def current_interval(attempts: Sequence[Attempt]) -> float | None:
    """The run's checkpoint interval in iterations: the usual gap between consecutive completed
    saves (the most common one; the median of the most common when several tie), counting the
    checkpoint an attempt resumed from. A save with no iteration after it in its attempt (at
    an exit, the kill switch, the end of training) is no interval's end."""
    gaps: list[int] = []
    for a in attempts:
        its = [s.iteration for s in a.saves if s.iteration is not None]
        if its and a.last_iteration is not None and its[-1] >= a.last_iteration:
            its.pop()  # saved on the way out
        if a.resumed_from is not None:
            its.insert(0, a.resumed_from)
        gaps += [b - x for x, b in itertools.pairwise(its) if b > x]
    if not gaps:
        return None
    return float(statistics.median(statistics.multimode(gaps)))


def young(save_s: float, mtbf_s: float) -> float:
    """Young (1974): the interval that minimises save + rework overhead, sqrt(2 C M)."""
    return math.sqrt(2 * save_s * mtbf_s)


def daly(save_s: float, mtbf_s: float) -> float:
    """Daly (2006), higher-order: sqrt(2CM)(1 + sqrt(C/2M)/3 + C/18M) - C, for C < 2M."""
    if save_s >= 2 * mtbf_s:
        return mtbf_s
    x = save_s / (2 * mtbf_s)
    return math.sqrt(2 * save_s * mtbf_s) * (1 + math.sqrt(x) / 3 + x / 9) - save_s


def overhead(interval_s: float, save_s: float, mtbf_s: float, lost_per_failure_s: float) -> float:
    """First-order expected overhead: C/tau for saving, (tau/2 + D + R)/M per failure."""
    if interval_s <= 0 or mtbf_s <= 0:
        return math.inf
    return save_s / interval_s + (interval_s / 2 + lost_per_failure_s) / mtbf_s


def advise(
    attempts: Sequence[Attempt],
    ledger: Ledger | None,
    iteration_s: float | None,
    mtbf_s: float | None = None,
) -> Advice:
    # a save shorter than a millisecond is a log's rounding, not a measurement
    durations = [s.duration_s for a in attempts for s in a.saves if s.duration_s >= 1e-3]
    save_s = statistics.median(durations) if durations else None
    interval_it = current_interval(attempts)
    interval_s = interval_it * iteration_s if interval_it and iteration_s else None
    failures = [i for i in ledger.incidents if i.kind in ("crash", "hang")] if ledger else []
    source = "given" if mtbf_s else "none"
    if mtbf_s is None and ledger is not None and failures:
        mtbf_s = ledger.wall_s / len(failures)
        source = "observed"
    hangs = [i.hang_s for i in failures]
    restarts = [i.restart_s for i in failures if i.restart_s is not None]
    detection = statistics.mean(hangs) if hangs else 0.0
    restart = statistics.mean(restarts) if restarts else 0.0
    y = young(save_s, mtbf_s) if save_s and mtbf_s else None
    d = daly(save_s, mtbf_s) if save_s and mtbf_s else None
    now = (
        overhead(interval_s, save_s, mtbf_s, detection + restart)
        if (interval_s and save_s and mtbf_s)
        else None
    )
    best = overhead(y, save_s, mtbf_s, restart + 60.0) if y and save_s and mtbf_s else None
    rows: list[WhatIf] = []
    if save_s and mtbf_s:
        named = [("now", interval_s), ("Young", y), ("Daly", d)]
        if interval_s:
            named += [("half now", interval_s / 2), ("twice now", interval_s * 2)]
        candidates: dict[float, str] = {}
        for label, c in named:
            if c:
                candidates.setdefault(round(c, 3), label)
        rows = [
            WhatIf(
                label=candidates[tau],
                interval_s=tau,
                interval_iterations=tau / iteration_s if iteration_s else None,
                detection_s=det,
                overhead=overhead(tau, save_s, mtbf_s, det + restart),
            )
            for tau in sorted(candidates)
            for det in sorted({round(detection, 3), 60.0})
        ]
    verdict = _verdict(interval_s, y, detection, save_s, mtbf_s, iteration_s)
    return Advice(
        save_s=save_s,
        interval_iterations=interval_it,
        interval_s=interval_s,
        iteration_s=iteration_s,
        mtbf_s=mtbf_s,
        mtbf_source=source,
        young_interval_s=y,
        young_interval_iterations=y / iteration_s if y and iteration_s else None,
        daly_interval_s=d,
        overhead_now=now,
        overhead_optimal=best,
        detection_s=detection,
        restart_s=restart,
        what_if=tuple(rows),
        verdict=verdict,
    )


def _verdict(
    interval_s: float | None,
    young_s: float | None,
    detection_s: float,
    save_s: float | None,
    mtbf_s: float | None,
    iteration_s: float | None,
) -> str:
    if not save_s:
        return "No checkpoint save time in the log: cannot advise an interval."
    if not mtbf_s:
        return "No failure observed: give --mtbf (e.g. --mtbf 7d) for interval advice."
    if young_s is None:
        return "No interval advice."
    per_it = f" ({young_s / iteration_s:.0f} iterations)" if iteration_s else ""
    advice = f"Optimal interval (Young): {duration(young_s)}{per_it}."
    if interval_s:
        rework = interval_s / 2
        if detection_s > rework:
            return (
                f"{advice} Detection latency dominates: failures went unnoticed for "
                f"{detection_s / 3600:.1f} h on average, more than the {rework / 3600:.1f} h of "
                "work a failure costs at today's interval. Watch the run (logscope tail) "
                "before tuning the interval."
            )
        ratio = interval_s / young_s
        if 0.7 <= ratio <= 1.4:
            return f"{advice} Today's interval ({duration(interval_s)}) is close to it."
        return f"{advice} Today's interval is {duration(interval_s)}: change it."
    return advice
