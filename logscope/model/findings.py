"""Findings: what cost a run without stopping it, each with the detail its kind measures,
and the plain JSON the document and `tail --json` give of one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, assert_never, get_args

from .figures import rounded
from .records import Severity

FindingKind = Literal[
    "slowdown",
    "loss_spike",
    "grad_norm_spike",
    "nan_loss",
    "skipped_steps",
    "loss_scale_collapse",
    # configuration pitfalls the log shows
    "hang_exposure",
    "gloo_on_gpu",
    "duplicate_gpu",
    "mixed_gpu_memory",
    "device_order",
]
FINDING_KINDS: tuple[FindingKind, ...] = get_args(FindingKind)


@dataclass(frozen=True, slots=True)
class SlowdownDetail:
    """A slowdown: a stretch of steps slower than the attempt's baseline regime."""

    fraction_slower: float
    """How much slower than the baseline (0.05: 5 % slower)."""
    baseline_s_per_iteration: float
    """Seconds per iteration of the baseline regime, at the slow stretch's batch size."""
    hosts_joined: tuple[str, ...] = ()
    """A slowdown that began with an attempt: the nodes it ran on that the one before did not."""


@dataclass(frozen=True, slots=True)
class SpikeDetail:
    """A loss or gradient-norm spike."""

    peak_ratio: float
    """The peak over the baseline."""
    baseline: float
    """The value before the spike: the median of its last few lines."""
    recovered_after: int | None = None
    """Loss spikes: iterations until the loss was back near its baseline (None: it never was,
    or, for a gradient norm, not measured)."""


@dataclass(frozen=True, slots=True)
class CountDetail:
    """NaN losses or skipped steps: how many iterations they took."""

    iterations: float
    """Iterations affected (summed from the progress columns, so a float)."""


@dataclass(frozen=True, slots=True)
class ScaleDetail:
    """A collapsed fp16 loss scale."""

    fell_to: float
    """The scale it fell to."""
    held: float
    """The highest scale it held since the scaler settled, before it fell."""


@dataclass(frozen=True, slots=True)
class EvidenceDetail:
    """A configuration finding: the log lines that show it."""

    lines: tuple[tuple[str, int, str], ...]
    """(file, line, text) of each, the first where the finding begins."""


FindingDetail = SlowdownDetail | SpikeDetail | CountDetail | ScaleDetail | EvidenceDetail


@dataclass(frozen=True, slots=True)
class Finding:
    """Something that cost the run without stopping it: a slowdown, a loss spike, NaN losses,
    a burst of skipped steps. Never an incident: nothing here ends a job."""

    kind: FindingKind
    """One of FINDING_KINDS."""
    severity: Severity
    """`warning` or `info`."""
    title: str
    attempt: int | None
    start_iteration: int | None
    end_iteration: int | None
    start: datetime | None
    end: datetime | None
    detail: FindingDetail
    """What the kind measures: slowdown SlowdownDetail; loss and gradient-norm spikes
    SpikeDetail; NaN losses and skipped steps CountDetail; loss-scale collapse ScaleDetail;
    configuration findings EvidenceDetail."""
    lost_s: float | None
    """Wall time lost to it (slowdown: against the baseline; skipped steps: their time)."""
    lost_gpu_hours: float | None
    file: str | None
    line: int | None
    """The line where it begins."""
    explanation: str = ""
    remedies: tuple[str, ...] = ()


def magnitude(d: FindingDetail) -> float:
    """A finding's one figure, as the document and the fleet store give it: the fraction slower,
    the peak ratio, the iterations, the scale it fell to, or the number of evidence lines."""
    match d:
        case SlowdownDetail():
            return d.fraction_slower
        case SpikeDetail():
            return d.peak_ratio
        case CountDetail():
            return d.iterations
        case ScaleDetail():
            return d.fell_to
        case EvidenceDetail():
            return float(len(d.lines))
        case _:
            assert_never(d)


def baseline(d: FindingDetail) -> float | None:
    """What `magnitude` is measured against: seconds per iteration, the loss or norm before a
    spike, the scale before a collapse; None for counts and evidence."""
    match d:
        case SlowdownDetail():
            return d.baseline_s_per_iteration
        case SpikeDetail():
            return d.baseline
        case ScaleDetail():
            return d.held
        case CountDetail() | EvidenceDetail():
            return None
        case _:
            assert_never(d)


def hosts_joined(d: FindingDetail) -> tuple[str, ...]:
    """The nodes a slowdown's attempt ran on that the one before did not; () for other kinds."""
    return d.hosts_joined if isinstance(d, SlowdownDetail) else ()


def finding_doc(f: Finding) -> dict[str, Any]:
    """A finding as plain JSON values: the document's `findings`, `tail --json`'s warnings."""
    d = f.detail
    return {
        "kind": f.kind,
        "severity": f.severity,
        "title": f.title,
        "attempt": f.attempt,
        "start_iteration": f.start_iteration,
        "end_iteration": f.end_iteration,
        "start": f.start.isoformat() if f.start is not None else None,
        "end": f.end.isoformat() if f.end is not None else None,
        "magnitude": rounded(magnitude(d), 4),
        "baseline": rounded(baseline(d), 6),
        "lost_s": rounded(f.lost_s),
        "lost_gpu_hours": rounded(f.lost_gpu_hours, 3),
        "recovered_after": d.recovered_after if isinstance(d, SpikeDetail) else None,
        "hosts_joined": list(hosts_joined(d)),
        "file": f.file,
        "line": f.line,
        "explanation": f.explanation or None,
        "remedies": list(f.remedies),
        "evidence": [
            {"file": p, "line": n, "text": t}
            for p, n, t in (d.lines if isinstance(d, EvidenceDetail) else ())
        ],
    }
