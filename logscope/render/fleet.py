"""The fleet summary as text, JSON, CSV, or an `--exclude=` host list."""

from __future__ import annotations

import csv
import json
from typing import TextIO

from ..fleet import Summary, summary_doc
from ..model import duration
from . import FleetFormat

BAD_NODE_COLUMNS = ("host", "failures", "jobs", "score", "p_value", "exclude", "lost_gpu_hours")
TOP = 10


def render(s: Summary, fmt: FleetFormat, out: TextIO) -> None:
    if fmt is FleetFormat.json:
        json.dump(summary_doc(s), out, indent=1)
        out.write("\n")
    elif fmt is FleetFormat.csv:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(BAD_NODE_COLUMNS)
        for b in summary_doc(s)["bad_nodes"]:
            writer.writerow([b[c] for c in BAD_NODE_COLUMNS])
    else:
        out.write(text(s))


def exclude_list(s: Summary) -> str:
    """`node042,node017`: the hosts clearly worse than the fleet, for `sbatch --exclude=`."""
    return ",".join(b.host for b in s.bad_nodes if b.exclude)


def text(s: Summary) -> str:
    lo, hi = s.mtbf_ci_s
    mtbf = (
        f"{duration(s.mtbf_s)} (95% CI {duration(lo)} to {duration(hi) if hi else 'unbounded'})"
        if s.mtbf_s is not None
        else f"no failure in {duration(s.wall_s)} (95% lower bound {duration(lo)})"
    )
    ettr = f"{s.ettr:.1%}" if s.ettr is not None else "-"
    lines = [
        f"Fleet  {s.jobs} jobs, {s.failures} failures, wall {duration(s.wall_s)}, ETTR {ettr}",
        f"MTBF   {mtbf}",
        "",
        "Failures by category                 count   lost GPU-h",
    ]
    for cat, n in s.failures_by_category.items():
        lines.append(f"  {cat:<32} {n:>7}   {s.lost_gpu_hours_by_category.get(cat, 0.0):>10,.2f}")
    n = len(s.ettr_by_date)
    last = f", the last {TOP}" if n > TOP else ""
    lines += ["", f"ETTR by date ({n} date{'s' if n != 1 else ''}{last})"]
    for d in s.ettr_by_date[-TOP:]:
        e = f"{d['ettr']:.1%}" if d["ettr"] is not None else "-"
        lines.append(f"  {d['date']:<12} {d['jobs']:>5} jobs  {e:>6}")
    lines += [
        "",
        f"Bad nodes (failures that implicate the node: fleet rate {s.fleet_rate:.3f} per host "
        "per job; score shrunk towards it)",
        "  host              failures   jobs   score   p-value   exclude",
    ]
    for b in s.bad_nodes[:TOP]:
        flag = "yes" if b.exclude else ""
        row = (
            f"  {b.host:<16} {b.failures:>9} {b.jobs:>6}  {b.score:.3f}  {b.p_value:>8.2g}   {flag}"
        )
        lines.append(row.rstrip())
    flagged = [b for b in s.bad_nodes if b.exclude]
    if flagged:
        lines += ["", "Why"] + [f"  {b.reason}" for b in flagged]
    excl = exclude_list(s)
    lines += ["", f"Exclude  --exclude={excl}" if excl else "Exclude  no host stands out"]
    return "\n".join(lines) + "\n"
