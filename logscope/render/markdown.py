"""`--format md`: the postmortem as Markdown, for a ticket or a chat message."""

from __future__ import annotations

import re
from typing import Any

from ..model import duration, gpu_hours, rank_ranges
from .document import culprit_name, hang_line, survived_rows


def _cell(text: object) -> str:
    return _inline(text).replace("|", "\\|")


def _inline(text: object) -> str:
    """Text that may quote the log, outside a fence: HTML in it stays text in any renderer."""
    return (
        str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")
    )


_CODE = re.compile(r"`([^`]+)`")


def _prose(text: str) -> str:
    """Explanations and remedies: `code` spans kept (a `<rank>` in one shows as written),
    the rest escaped like any inline text (a bare `<rank>` would vanish as an HTML tag)."""
    parts = _CODE.split(text)
    return "".join(f"`{p}`" if k % 2 else _inline(p) for k, p in enumerate(parts))


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in the (untrusted) text."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}\n{text}\n{ticks}"


def render(doc: dict[str, Any]) -> str:
    job = doc["job"]
    out = [f"# logscope postmortem: {job['outcome']}", ""]
    out.append(_inline(doc["verdict"]["summary"] if doc["verdict"] else job["outcome_reason"]))
    out.append("")
    failures = doc["verdict"].get("failures", []) if doc["verdict"] else []
    if len(failures) > 1:
        out += [f"- {_inline(line)}" for line in failures]
        out.append("")
    out.append(
        f"- world: {job['world_size'] or '?'} ranks; iterations {job['first_iteration']} to "
        f"{job['last_iteration']}; {job['start'] or '?'} to {job['end'] or '?'}"
    )
    ledger = doc.get("ledger")
    if ledger:
        lost = ledger["lost_gpu_hours"]
        ettr = f"{ledger['ettr']:.1%}" if ledger["ettr"] is not None else "-"
        out.append(
            f"- wall {duration(ledger['wall_s'])}, productive {duration(ledger['productive_s'])}, "
            f"ETTR {ettr}" + (f", **{gpu_hours(lost)} GPU-hours lost**" if lost is not None else "")
        )
    for inc in doc["incidents"]:
        rc = inc["root_cause"]
        out += ["", f"## {inc['id']} {inc['category']}: {_cell(inc['title'])}", ""]
        where = f"`{rc['file'].replace('`', chr(39))}:{rc['line']}`"  # a code span shows it as is
        if rc["rank"] is not None:
            where += f", rank {rc['rank']}"
        if rc["host"]:
            where += f", host {_inline(rc['host'])}"
        if rc["time"]:
            where += f", {rc['time']}"
        out.append(f"Root cause at {where}:")
        out.append("")
        lines = inc.get("context") or [{"line": rc["line"], "text": rc["text"]}]
        marks = sorted(inc.get("context_marks") or [], key=lambda m: m["after_line"])
        rows: list[str] = []
        for c in lines:
            while marks and marks[0]["after_line"] < c["line"]:
                rows.append(f"{'':>7}  {marks.pop(0)['text']}")
            rows.append(f"{c['line']:>7}  {c['text']}")
        rows += [f"{'':>7}  {m['text']}" for m in marks]
        out.append(_fence("\n".join(rows)))
        c = inc["culprit"]
        if c:
            who = culprit_name(c["rank"], c["local_rank"], c["host"], c.get("task"))
            out += [
                "",
                f"Culprit: **{_inline(who)}** (confidence {c['confidence']:.2f}): "
                f"{_inline(c['reason'])}",
            ]
        ranks = rank_ranges(inc["cascade"]["ranks"])
        out += [
            "",
            f"Cascade: {inc['cascade']['count']} lines" + (f" from ranks {ranks}" if ranks else ""),
        ]
        if inc["explanation"]:
            out += ["", _prose(inc["explanation"])]
        if inc["remedies"]:
            out += ["", *[f"- {_prose(r)}" for r in inc["remedies"]]]
    findings = doc.get("findings") or []
    if findings:
        out += ["", "## Findings", ""]
        out.append("| severity | kind | what | iterations | time lost | GPU-hours | where |")
        out.append("|---|---|---|---:|---:|---:|---|")
        for f in findings:
            span = f["start_iteration"] if f["start_iteration"] is not None else "-"
            if f["end_iteration"] not in (None, f["start_iteration"]):
                span = f"{span} to {f['end_iteration']}"
            where = f"`{f['file']}:{f['line']}`" if f["file"] else ""
            out.append(
                f"| {f['severity']} | {f['kind']} | {_cell(f['title'])} | {span} | "
                f"{duration(f['lost_s'])} | {gpu_hours(f['lost_gpu_hours'])} | {where} |"
            )
        for f in findings:
            if not f["explanation"]:
                continue
            out += ["", f"**{f['kind']}**: {_prose(f['explanation'])}", ""]
            out += [f"- {_prose(r)}" for r in f["remedies"]]
            out += ["", "Evidence:", ""]
            out.append(
                _fence("\n".join(f"{e['file']}:{e['line']}: {e['text']}" for e in f["evidence"]))
            )
    if ledger and ledger["incidents"]:
        out += ["", "## Lost compute", ""]
        out.append("| incident | attempt | kind | wasted progress | hang | restart | GPU-hours |")
        out.append("|---|---:|---|---:|---:|---:|---:|")
        for i in ledger["incidents"]:
            gpu_h = gpu_hours(i["lost_gpu_hours"])
            out.append(
                f"| {i['incident'] or '-'} | {i['attempt'] + 1} | {i['kind']} | "
                f"{duration(i['wasted_progress_s'])} | {duration(i['hang_s'])} | "
                f"{duration(i['restart_s'])} | {gpu_h} |"
            )
    advice = doc.get("checkpoint_advice")
    if advice:
        out += ["", "## Checkpoint advice", "", _cell(advice["verdict"])]
    hang = doc.get("hang_dumps")
    if hang:
        out += ["", "## Hang dumps", "", _cell(hang_line(doc) or "")]
        out += [
            "",
            "| rank | collective | op | sizes | called at | process |",
            "|---:|---|---|---|---|---|",
        ]
        for r in hang["ranks"]:
            coll = f"#{r['seq']} {r['group']}" if r["seq"] is not None else "no dump"
            rank = f"**{r['rank']}**" if r["odd"] else str(r["rank"])
            cells = [coll, r["op"] or "", r["sizes"] or "", r["where"] or "", r["process"] or ""]
            out.append(f"| {rank} | " + " | ".join(_cell(c) for c in cells) + " |")
    survived = survived_rows(doc)
    if survived:
        out += ["", "## Survived", ""]
        out.append("Errors the run outlived (never the verdict):")
        out += ["", "| kind | count | first line | who, where | why it is not the failure |"]
        out.append("|---|---:|---|---|---|")
        out += [
            f"| {s['kind']} | {s['count']} | {_cell(s['first']['text'].strip())} | "
            f"{_cell(s['where'])} | {_cell(s['reason'])} |"
            for s in survived[:10]
        ]
        if len(survived) > 10:
            out += ["", f"{len(survived) - 10} more in the JSON document."]
    unrecognized = doc.get("unrecognized") or []
    if unrecognized:
        out += ["", "## Unrecognized error lines", ""]
        out.append("Error-looking lines no signature knows (count, first example):")
        out.append("")
        shown = unrecognized[:10]
        width = max(len(str(u["count"])) for u in shown)
        out.append(
            _fence(
                "\n".join(
                    f"{u['count']:>{width}}x  {u['example']['file']}:{u['example']['line']}  "
                    f"{u['example']['text']}"
                    for u in shown
                )
            )
        )
        if len(unrecognized) > len(shown):
            out += ["", f"{len(unrecognized) - len(shown)} more in the JSON document."]
    return "\n".join(out) + "\n"
