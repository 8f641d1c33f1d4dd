"""`tail` output: one line per incident (or JSON lines), notices, a live status line on a TTY."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TextIO

from ..live.actions import ActionResult
from ..live.follow import Notice
from ..live.watcher import Alert, HealthWarning, Outlived
from ..model import Event


@dataclass(slots=True)
class TailPrinter:
    out: TextIO
    err: TextIO
    json_lines: bool = False
    live: bool = False
    _status_shown: bool = False

    def _clear(self) -> None:
        if self._status_shown:
            self.err.write("\r\x1b[2K")
            self._status_shown = False

    def alert(self, alert: Alert, results: list[ActionResult]) -> None:
        self._clear()
        if self.json_lines:
            doc = alert.doc()
            doc["actions"] = [{"action": r.action, "ok": r.ok, "detail": r.detail} for r in results]
            self.out.write(json.dumps(doc, ensure_ascii=False) + "\n")
        else:
            where = ""
            if alert.event is not None:
                where = f" at {alert.event.line.path}:{alert.event.line.lineno}"
            who = f" rank {alert.rank}" if alert.rank is not None else ""
            if not who and alert.local_rank is not None:
                who = f" local rank {alert.local_rank}"
            self.out.write(
                f"INCIDENT {alert.id} {alert.kind} {alert.category}:{who} {alert.title}{where}"
                + (f" ({alert.reason})" if alert.reason else "")
                + "\n"
            )
            for r in results:
                self.out.write(f"  {r.action}: {'ok' if r.ok else 'FAILED'} {r.detail}\n")
        self.out.flush()

    def warning(self, w: HealthWarning) -> None:
        """A finding while the job runs: a line (or a JSON object), no action."""
        self._clear()
        if self.json_lines:
            self.out.write(json.dumps(w.doc(), ensure_ascii=False) + "\n")
        else:
            f = w.finding
            where = f" at {f.file}:{f.line}" if f.file else ""
            self.out.write(f"WARNING {w.id} {f.kind}: {f.title}{where}\n")
        self.out.flush()

    def outlived(self, o: Outlived) -> None:
        """An alert the job went on after: a line (or a JSON object)."""
        self._clear()
        if self.json_lines:
            self.out.write(json.dumps(o.doc(), ensure_ascii=False) + "\n")
        else:
            at = f", now at iteration {o.iteration}" if o.iteration is not None else ""
            self.out.write(
                f"SURVIVED {o.alert.id}: training went on after it ({o.progress_after} "
                f"{o.unit}{at}); watching for crashes again\n"
            )
        self.out.flush()

    def event(self, e: Event) -> None:
        doc = {
            "type": "event",
            "kind": e.kind,
            "pattern": e.signature,
            "category": e.category,
            "file": e.line.path,
            "line": e.line.lineno,
            "rank": e.line.rank,
            "local_rank": e.line.local_rank,
            "time": e.time.isoformat() if e.time else None,
            "fields": e.fields,
        }
        self.out.write(json.dumps(doc, ensure_ascii=False) + "\n")
        self.out.flush()

    def notice(self, notice: Notice) -> None:
        self._clear()
        self.err.write(f"logscope: {notice.message}\n")
        self.err.flush()

    def status(self, line: str) -> None:
        self.err.write("\r\x1b[2K" + line[:200])
        self.err.flush()
        self._status_shown = True

    def done(self) -> None:
        if self._status_shown:
            self.err.write("\n")
            self._status_shown = False
