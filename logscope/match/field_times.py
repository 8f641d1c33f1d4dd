"""Times a signature captures in a message (`time` fields), as their emitters print them."""

from __future__ import annotations

import re
from datetime import datetime

_DATE_CMD = re.compile(
    r"(?P<rest>[A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d)"
    r"(?: [A-Z]{2,5}| [+-]\d{4})? (?P<year>\d{4})"
)
_TIME_FORMATS = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%d_%H:%M:%S", "%Y-%m-%d %H:%M:%S")


def parse_time(value: str) -> datetime | None:
    """A time captured by a signature: ISO, torchrun's `2024-03-12_02:29:19`, or `date`'s."""
    m = _DATE_CMD.match(value)
    if m:
        # `date` prints a zone name (CET, UTC) that strptime cannot map; the clock is local
        value = f"{m['rest']} {m['year']}"
        try:
            return datetime.strptime(value, "%a %b %d %H:%M:%S %Y")
        except ValueError:
            return None
    for fmt in _TIME_FORMATS:
        try:
            return datetime.strptime(value[:19], fmt)
        except ValueError:
            continue
    return None
