"""Wall-clock times as the analysis computes with them: seconds since the epoch (float), with
None for a time not known."""

from __future__ import annotations

import math
from datetime import datetime


def timestamp(t: datetime | None) -> float | None:
    return t.timestamp() if t is not None else None


def from_timestamp(v: float | None) -> datetime | None:
    if v is None or math.isinf(v) or math.isnan(v):
        return None
    return datetime.fromtimestamp(v)
