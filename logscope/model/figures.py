"""How figures are written: for people (GPU-hours, durations) and for JSON documents."""

from __future__ import annotations


def gpu_hours(value: float | None) -> str:
    """GPU-hours for people: one decimal for big figures, two for the small ones a short job
    loses."""
    if value is None:
        return "-"
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.2f}"


def gpu_hours_of(seconds: float | None, gpus: int | None) -> float | None:
    """GPU-hours that `seconds` of wall time cost on `gpus` GPUs; None when either is unknown
    (no GPU count is not zero GPUs)."""
    if seconds is None or not gpus:
        return None
    return seconds * gpus / 3600


def rounded(v: float | None, digits: int = 1) -> float | None:
    """A figure for a JSON document, None kept."""
    return round(v, digits) if v is not None else None


def duration(seconds: float | None) -> str:
    """A duration for people: `42 s`, `7.5 min`, `6.98 h`."""
    if seconds is None:
        return "-"
    if abs(seconds) >= 3600:
        return f"{seconds / 3600:.2f} h"
    if abs(seconds) >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.0f} s" if abs(seconds) >= 10 else f"{seconds:.1f} s"


def rank_ranges(ranks: list[int]) -> str:
    """`0-2,4-7`: ranges of consecutive ranks ('' for none)."""
    out: list[str] = []
    if not ranks:
        return ""
    start = prev = ranks[0]
    for r in [*ranks[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(out)
