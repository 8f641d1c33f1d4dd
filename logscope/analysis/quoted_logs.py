"""A launcher that raises an exception whose message is the failed worker's log (ESPnet's
launch.py: a bare `RuntimeError: `, then `#### The last 1000 lines of <log> ####` and the log): the
worker's own failure is inside the quote, and the launcher's exception only carries it."""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Event

QUOTED_LOG = "quoted_log"
"""The field of a line that opens a quoted log (a signature's named group: the log's path)."""

_CARRIER_LINES = 2
"""Lines from the exception that carries a quote to the quote's opening line (its message begins
on the next line, or after one blank line)."""


def past_carrier(causes: list[Event], events: Sequence[Event]) -> list[Event]:
    """The causes inside a quoted log, when the first cause is the exception that carries the
    quote (it ends just above the line that opens the quote) and the quote holds a cause of its
    own; else the causes as they are."""
    if not causes:
        return causes
    carrier = causes[0]
    opening = next(
        (
            e
            for e in events
            if QUOTED_LOG in e.fields
            and e.line.path == carrier.line.path
            and 0 < e.line.lineno - carrier.line.lineno <= _CARRIER_LINES
        ),
        None,
    )
    if opening is None:
        return causes
    inside = [
        e
        for e in causes
        if e.line.path == opening.line.path and e.line.lineno > opening.line.lineno
    ]
    return inside or causes
