"""`--format md`: the postmortem as Markdown, for a ticket or a chat message."""

from __future__ import annotations

import re
from typing import Any

from .html import _hours, _ranks


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in the (untrusted) text."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}\n{text}\n{ticks}"


def render(doc: dict[str, Any]) -> str:
    job = doc["job"]
    out = [f"# logscope postmortem: {job['outcome']}", ""]
    out.append(doc["verdict"]["summary"] if doc["verdict"] else job["outcome_reason"])
    out.append("")
    out.append(
        f"- world: {job['world_size'] or '?'} ranks; iterations {job['first_iteration']} to "
        f"{job['last_iteration']}; {job['start'] or '?'} to {job['end'] or '?'}"
    )
    ledger = doc.get("ledger")
    if ledger:
        lost = ledger["lost_gpu_hours"]
        out.append(
            f"- wall {_hours(ledger['wall_s'])}, productive {_hours(ledger['productive_s'])}, "
            f"ETTR {ledger['ettr']:.1%}"
            + (f", **{lost:,.1f} GPU-hours lost**" if lost is not None else "")
        )
    for inc in doc["incidents"]:
        rc = inc["root_cause"]
        out += ["", f"## {inc['id']} {inc['category']}: {_cell(inc['title'])}", ""]
        where = f"`{rc['file']}:{rc['line']}`"
        if rc["rank"] is not None:
            where += f", rank {rc['rank']}"
        if rc["host"]:
            where += f", host {rc['host']}"
        if rc["time"]:
            where += f", {rc['time']}"
        out.append(f"Root cause at {where}:")
        out.append("")
        lines = inc.get("context") or [{"line": rc["line"], "text": rc["text"]}]
        out.append(_fence("\n".join(f"{c['line']:>7}  {c['text']}" for c in lines)))
        c = inc["culprit"]
        if c:
            who = (
                f"rank {c['rank']}"
                if c["rank"] is not None
                else f"local rank {c['local_rank']}"
                if c["local_rank"] is not None
                else "unknown"
            )
            out += ["", f"Culprit: **{who}** (confidence {c['confidence']:.2f}): {c['reason']}"]
        ranks = _ranks(inc["cascade"]["ranks"])
        out += [
            "",
            f"Cascade: {inc['cascade']['count']} lines" + (f" from ranks {ranks}" if ranks else ""),
        ]
        if inc["explanation"]:
            out += ["", inc["explanation"]]
        if inc["remedies"]:
            out += ["", *[f"- {r}" for r in inc["remedies"]]]
    if ledger and ledger["incidents"]:
        out += ["", "## Lost compute", ""]
        out.append("| incident | attempt | kind | wasted progress | hang | restart | GPU-hours |")
        out.append("|---|---:|---|---:|---:|---:|---:|")
        for i in ledger["incidents"]:
            gpu_h = f"{i['lost_gpu_hours']:,.1f}" if i["lost_gpu_hours"] is not None else "-"
            out.append(
                f"| {i['incident'] or '-'} | {i['attempt'] + 1} | {i['kind']} | "
                f"{_hours(i['wasted_progress_s'])} | {_hours(i['hang_s'])} | "
                f"{_hours(i['restart_s'])} | {gpu_h} |"
            )
    advice = doc.get("checkpoint_advice")
    if advice:
        out += ["", "## Checkpoint advice", "", _cell(advice["verdict"])]
    return "\n".join(out) + "\n"
