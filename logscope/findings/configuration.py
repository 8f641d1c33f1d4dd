"""Configuration findings: the pitfalls a log already shows in how the job was set up, each only
where its evidence lines are in the log, never guessed from what it does not say. Evidence is
`config` signatures (patterns/config.toml) and failure lines; what each finding says is the
library's `[[finding]]` entries."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ..match.signatures import Library
from ..model import (
    Event,
    EvidenceDetail,
    Finding,
    FindingKind,
    Incident,
    Ledger,
    Severity,
    duration,
    gpu_hours,
    gpu_hours_of,
)

DETECT_S = 600.0
"""How soon a job set up against hangs ends after a failure: a 10-minute process-group timeout
(the watchdog then aborts, srun ends the step at once with --kill-on-bad-exit)."""
TORCH_TIMEOUT_S = 1800.0
"""torch's default process-group timeout (`default_pg_timeout`, 30 min; NCCL's own default is
10 min since torch 2.2): a hang longer than it, and than every timeout the log states, is one
no watchdog ended."""
LONG_TIMEOUT_MS = 3_600_000
"""A process-group timeout this long or longer lets a stuck collective sit for hours."""
CUDA_CATEGORIES = frozenset({"gpu_hardware", "cuda_error", "oom_gpu"})
_SIZE = re.compile(r"([\d.]+) ([KMGT]?)i?B")
_KILL_ON_BAD_EXIT = re.compile(r"(?:^|\s)(?:--kill-on-bad-exit(?:=1)?|-K1?)(?:\s|$)")


def _where(e: Event) -> tuple[str, int, str]:
    return e.line.path, e.line.lineno, e.line.raw


def find_configs(
    configs: Sequence[Event],
    failures: Sequence[Event],
    ledger: Ledger | None,
    library: Library,
    incidents: Sequence[Incident] = (),
) -> list[Finding]:
    """The configuration findings of a run."""
    out = [
        *_hang_exposure(configs, failures, ledger, library, incidents),
        *_gloo_on_gpu(configs, failures, library),
        *_duplicate_gpu(failures, library),
        *_mixed_gpu_memory(configs, failures, library),
        *_device_order(configs, library),
    ]
    return [f for f in out if f is not None]


def _finding(
    library: Library,
    text_id: str,
    kind: FindingKind,
    severity: Severity,
    detail: str,
    evidence: Sequence[Event],
    lost_s: float | None = None,
    lost_gpu_hours: float | None = None,
) -> Finding | None:
    text = library.findings.get(text_id)
    if text is None:  # a user library that dropped it
        return None
    first = evidence[0]
    return Finding(
        kind=kind,
        severity=severity,
        title=f"{text.title}: {detail}",
        attempt=None,
        start_iteration=None,
        end_iteration=None,
        start=first.time,
        end=None,
        detail=EvidenceDetail(tuple(_where(e) for e in evidence)),
        lost_s=lost_s,
        lost_gpu_hours=lost_gpu_hours,
        file=first.line.path,
        line=first.line.lineno,
        explanation=text.explanation,
        remedies=text.remedies,
    )


def _first(events: Sequence[Event], test: Callable[[Event], bool]) -> Event | None:
    return next((e for e in events if test(e)), None)


def _hang_exposure(
    configs: Sequence[Event],
    failures: Sequence[Event],
    ledger: Ledger | None,
    library: Library,
    incidents: Sequence[Incident] = (),
) -> list[Finding | None]:
    async_off = _first(configs, lambda e: e.fields.get("async_error_handling") == "0")
    timeouts = [e for e in (*configs, *failures) if e.fields.get("timeout_ms", "").isdigit()]
    long_timeout = _first(timeouts, lambda e: int(e.fields["timeout_ms"]) >= LONG_TIMEOUT_MS)
    no_kill = _first(
        configs,
        lambda e: "srun_args" in e.fields and not _KILL_ON_BAD_EXIT.search(e.fields["srun_args"]),
    )
    reasons = []
    if async_off is not None:
        reasons.append(f"NCCL async error handling is off ({async_off.fields['variable']}: 0)")
    timeout = long_timeout or (timeouts[0] if async_off is not None and timeouts else None)
    if timeout is not None:
        reasons.append(
            f"the process-group timeout is {duration(int(timeout.fields['timeout_ms']) / 1000)}"
        )
    if no_kill is not None:
        reasons.append("srun runs without --kill-on-bad-exit")
    unended = _unended_hang(timeouts, ledger, incidents)
    if async_off is None and long_timeout is None and no_kill is None and unended is None:
        return []
    evidence = [e for e in (async_off, timeout, no_kill) if e is not None]
    if unended is not None:
        evidence.append(unended[0])
        reasons.append(unended[1])
    detail = "; ".join(reasons)
    rows = [r for r in (ledger.incidents if ledger else ()) if r.kind in ("hang", "crash")]
    waited = [r.hang_s for r in rows if r.hang_s > DETECT_S]
    saved = sum(h - DETECT_S for h in waited)
    gpu_h = gpu_hours_of(saved, ledger.gpus if ledger is not None else None)
    if waited:
        longest = max(waited)
        cost = f", saving {gpu_hours(gpu_h)} GPU-h" if gpu_h is not None else ""
        detail += (
            f". After its failures this run waited {duration(sum(waited))} in all (the longest "
            f"{duration(longest)}); with async error handling, a 10 min timeout and srun "
            f"--kill-on-bad-exit=1 each would have ended in ~10 min{cost}"
        )
    severity: Severity = "warning" if waited else "info"
    return [
        _finding(
            library,
            "config.hang_exposure",
            "hang_exposure",
            severity,
            detail,
            evidence,
            saved or None,
            gpu_h if saved else None,
        )
    ]


def _unended_hang(
    timeouts: Sequence[Event], ledger: Ledger | None, incidents: Sequence[Incident]
) -> tuple[Event, str] | None:
    """The longest hang that outlasted every timeout the log states (torch's default when it
    states none): nothing ended it, so no watchdog was set to. Its root cause (the last
    progress line) and what it cost against what it would have with one."""
    limit = max((int(e.fields["timeout_ms"]) / 1000 for e in timeouts), default=TORCH_TIMEOUT_S)
    by_id = {i.id: i for i in incidents}
    hangs = [
        (r, by_id[r.incident])
        for r in (ledger.incidents if ledger else ())
        if r.kind == "hang" and r.incident in by_id and r.hang_s > max(limit, DETECT_S)
    ]
    if not hangs:
        return None
    row, inc = max(hangs, key=lambda p: p[0].hang_s)
    said = (
        f"{duration(limit)} timeout the log states"
        if timeouts
        else f"torch's default {duration(TORCH_TIMEOUT_S)} timeout"
    )
    text = f"hang {inc.id} ran {duration(row.hang_s)}, longer than the {said}: nothing ended it"
    if ledger is not None and ledger.gpus and row.lost_gpu_hours is not None:
        would = row.lost_gpu_hours - (gpu_hours_of(row.hang_s - DETECT_S, ledger.gpus) or 0.0)
        text += (
            f"; with a watchdog that ends it (async error handling, a shorter timeout, srun "
            f"--kill-on-bad-exit=1), or `logscope tail --stall-after 10m`, it would have cost "
            f"~{gpu_hours(would)} GPU-h instead of {gpu_hours(row.lost_gpu_hours)}"
        )
    return inc.root_cause, text


def _gloo_on_gpu(
    configs: Sequence[Event], failures: Sequence[Event], library: Library
) -> list[Finding | None]:
    gloo = _first(configs, lambda e: e.fields.get("backend", "").lower() == "gloo")
    if gloo is None:
        return []
    cuda = _first(configs, lambda e: e.signature == "config.cuda_in_use") or _first(
        failures, lambda e: e.category in CUDA_CATEGORIES
    )
    if cuda is None:
        return []  # gloo on CPUs is what gloo is for
    detail = f"{gloo.line.raw.strip()[:120]!r} while {cuda.line.raw.strip()[:120]!r}"
    return [_finding(library, "config.gloo_on_gpu", "gloo_on_gpu", "warning", detail, [gloo, cuda])]


def _duplicate_gpu(failures: Sequence[Event], library: Library) -> list[Finding | None]:
    shared: dict[tuple[str | None, str], list[Event]] = {}
    for e in failures:
        if "other_rank" in e.fields and "device" in e.fields:
            shared.setdefault((e.line.host, e.fields["device"]), []).append(e)
    out: list[Finding | None] = []
    for (host, device), events in shared.items():
        ranks = sorted({int(e.fields[k]) for e in events for k in ("rank", "other_rank")})
        where = f" on {host}" if host else ""
        detail = f"ranks {', '.join(map(str, ranks))} all use CUDA device {device}{where}"
        out.append(
            _finding(
                library, "config.duplicate_gpu", "duplicate_gpu", "warning", detail, events[:4]
            )
        )
    return out


def _gib(size: str) -> float | None:
    m = _SIZE.fullmatch(size.strip())
    if m is None:
        return None
    scale = {"": 2**-30, "K": 2**-20, "M": 2**-10, "G": 1.0, "T": 2**10}[m.group(2)]
    return float(m.group(1)) * scale


def _mixed_gpu_memory(
    configs: Sequence[Event], failures: Sequence[Event], library: Library
) -> list[Finding | None]:
    ooms = [
        (e, gib)
        for e in failures
        if e.category == "oom_gpu" and "total" in e.fields and (gib := _gib(e.fields["total"]))
    ]
    if not ooms:
        return []
    cards = [(e, int(e.fields["total_mib"]) / 1024) for e in configs if "total_mib" in e.fields]
    known = [*ooms, *cards]
    largest_event, largest = max(known, key=lambda p: p[1])
    # a card 10% smaller than the largest is another model, not rounding
    small = [(e, gib) for e, gib in ooms if gib < 0.9 * largest]
    if not small:
        return []
    who = sorted(
        {
            f"{e.line.host + ' ' if e.line.host else ''}{_rank(e)} ({gib:.1f} GiB)"
            for e, gib in small
        }
    )
    detail = (
        f"{', '.join(who)} ran out of memory while the job also has {largest:.1f} GiB cards "
        "(DDP replicates the model: the smallest card sets the limit)"
    )
    evidence = [e for e, _ in small[:3]] + [largest_event]
    return [
        _finding(
            library, "config.mixed_gpu_memory", "mixed_gpu_memory", "warning", detail, evidence
        )
    ]


def _device_order(configs: Sequence[Event], library: Library) -> list[Finding | None]:
    """A rank's card, as NCCL reports it (its CUDA index and its nvidia-smi index), is not the
    nvidia-smi GPU that CUDA_VISIBLE_DEVICES named for that CUDA index (on the same host)."""
    visible: dict[str | None, tuple[Event, list[int]]] = {}
    for e in configs:
        if "visible" in e.fields:
            digits = [int(v) for v in re.findall(r"\d+", e.fields["visible"])]
            if digits:
                visible.setdefault(e.line.host, (e, digits))
    wrong: list[tuple[Event, Event, int]] = []
    for e in configs:
        if "nvml_dev" not in e.fields:
            continue
        named = visible.get(e.line.host) or visible.get(None)
        if named is None:
            continue
        cuda, nvml = int(e.fields["cuda_dev"]), int(e.fields["nvml_dev"])
        if cuda < len(named[1]) and named[1][cuda] != nvml:
            wrong.append((named[0], e, named[1][cuda]))
    if not wrong:
        return []
    first_visible, first, asked = wrong[0]
    detail = (
        f"rank {first.fields['comm_rank']} was given GPU {asked} and runs on nvidia-smi GPU "
        f"{first.fields['nvml_dev']}"
        + (f" (bus {first.fields['bus_id']})" if "bus_id" in first.fields else "")
    )
    if len(wrong) > 1:
        detail += f"; {len(wrong) - 1} more rank{'s' if len(wrong) > 2 else ''} likewise"
    evidence = [first_visible, *[e for _, e, _ in wrong[:3]]]
    return [_finding(library, "config.device_order", "device_order", "warning", detail, evidence)]


def _rank(e: Event) -> str:
    if e.line.rank is not None:
        return f"rank {e.line.rank}"
    if e.line.local_rank is not None:
        return f"local rank {e.line.local_rank}"
    return f"GPU {e.fields.get('gpu', '?')}"
