"""Dumps given beside the logs: told apart from the logs by content, read, and what they say
about a hang joined to the analysis (the hang's culprit, reason and evidence)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType

from ..analysis.hung_rank import (
    DUMPED_EXPLANATION,
    DUMPED_REMEDIES,
    StoppedAt,
    name_hung_rank,
    stopped_at,
)
from ..analysis.job_outcome import hang_at
from ..dumps import DumpKind, read_dumps
from ..dumps.recognize import sniff
from ..model import Analysis, Culprit, Event, HangDumps, Incident, Line, Outcome
from ..read.sources import Source

HANG_CATEGORIES = frozenset(
    {"hang", "collective_timeout", "comm_error", "timelimit", "cancelled", "unknown"}
)
"""The verdicts a hung rank explains: a silent log, the others' timeouts and the errors of the
teardown (a peer's closed connection, a launcher or scheduler stopping the job). Any other
verdict takes the dumps' culprit only when it names the same rank (a stopped rank the launcher
then killed)."""


def split_dumps(sources: Sequence[Source]) -> tuple[list[Source], list[tuple[str, DumpKind]]]:
    """The logs, and the dumps (by content) with their kind."""
    logs: list[Source] = []
    dumps: list[tuple[str, DumpKind]] = []
    for src in sources:
        kind = sniff(src.path)
        if kind is None:
            logs.append(src)
        else:
            dumps.append((src.path, kind))
    return logs, dumps


def join_dumps(analysis: Analysis, files: Sequence[tuple[str, DumpKind]]) -> Analysis:
    """The analysis with what the dumps say: `hang_dumps`, and when they name a rank, the
    hang's incident (the verdict) with that culprit, its reason and the dump lines."""
    if not files:
        return analysis
    dumps = read_dumps(files)
    hang = name_hung_rank(dumps, analysis.world.ranks)
    if hang is None:
        return analysis
    analysis = replace(analysis, hang_dumps=hang)
    v = analysis.verdict
    if hang.culprit_rank is None:
        stopped = stopped_at(dumps)
        if v is None and stopped is not None:
            return _stack_found(analysis, stopped)
        return analysis
    if v is None:
        return _hang_found(analysis, hang)
    same = v.culprit is not None and v.culprit.rank == hang.culprit_rank
    if v.category not in HANG_CATEGORIES and not same:
        return analysis  # another failure the hung rank does not explain
    joined = _joined(v, hang)
    incidents = tuple(joined if i is v else i for i in analysis.incidents)
    return replace(analysis, verdict=joined, incidents=incidents)


HANG_EXPLANATION = (
    "Every rank of a process group calls its collectives in the same order. The dumps taken "
    "while the job hung show one rank out of that order, or outside communication while the "
    "others wait in a collective: they wait for it until their timeout, or forever."
)
HANG_REMEDIES = (
    "Look at the named rank's frame: a collective on one rank only (behind a condition on the "
    "rank, the data or a NaN), another collective or other sizes there, or a wait outside "
    "communication (a lock, a sleep, I/O, a data loader)",
    "Set TORCH_FR_BUFFER_SIZE (Flight Recorder) and a process-group timeout short enough that "
    "a hang ends with dumps from every rank",
)


def _hang_found(analysis: Analysis, hang: HangDumps) -> Analysis:
    """A log that says nothing of the hang (a silent, still running job): the dumps' rank is
    the incident, and a job whose outcome the log could not tell is hung."""
    evidence = _evidence(hang)
    rank = hang.culprit_rank
    root = next((e for e in evidence if e.line.text.startswith(f"rank {rank}:")), None)
    if root is None:
        return analysis
    return _with_hang(
        analysis,
        title=f"Hung job {_what(hang)}",
        texts=(HANG_EXPLANATION, HANG_REMEDIES),
        root=root,
        culprit=Culprit(rank, None, _host(hang), hang.confidence, hang.reason),
        evidence=evidence,
        reason=f"the hang dumps name rank {rank}",
    )


def _with_hang(
    analysis: Analysis,
    title: str,
    texts: tuple[str, tuple[str, ...]],
    root: Event,
    culprit: Culprit | None,
    evidence: tuple[Event, ...],
    reason: str,
) -> Analysis:
    """The analysis with the dumps' hang as its verdict (`texts`: its explanation and remedies),
    and a job whose outcome the log could not tell hung."""
    inc = replace(
        hang_at(root, title, texts[0], texts[1], culprit),
        id=f"I{len(analysis.incidents) + 1}",
        evidence=evidence,
        iteration=analysis.job.last_iteration,
    )
    job = analysis.job
    if job.outcome in (Outcome.truncated, Outcome.unknown):
        job = replace(job, outcome=Outcome.hung, outcome_reason=reason)
    return replace(analysis, job=job, incidents=(*analysis.incidents, inc), verdict=inc)


def _stack_found(analysis: Analysis, stopped: StoppedAt) -> Analysis:
    """A log that says nothing of a hang, or none at all, and dumps that name no rank: the first
    dumped process's innermost frame is where the job stood, and a job whose outcome the log
    could not tell is hung. It names no culprit: a process waiting in a collective is a victim,
    and one waiting elsewhere may be only the one someone dumped."""
    job = analysis.job
    if job.outcome not in (Outcome.truncated, Outcome.unknown):
        return analysis  # the log says how it ended; the dumps are of something else
    stack = stopped.stack
    root = Event(
        "hang_dump",
        "status",
        Line(stack.path, stopped.lineno, stopped.text, stopped.text),
        category="hang",
        severity="error",
        role="cause",
    )
    return _with_hang(
        analysis,
        title=f"Hung process: its main thread is {stopped.where}",
        texts=(DUMPED_EXPLANATION, DUMPED_REMEDIES),
        root=root,
        culprit=None,
        evidence=_evidence(analysis.hang_dumps) if analysis.hang_dumps else (),
        reason=f"the stacks of process {stack.pid} were dumped ({stack.path}), and no line "
        "says it ended",
    )


def _joined(inc: Incident, hang: HangDumps) -> Incident:
    rank = hang.culprit_rank
    host = _host(hang)
    old = inc.culprit
    reason = hang.reason
    if old is not None and old.rank != rank:
        said = f"rank {old.rank}" if old.rank is not None else "no rank"
        reason += f" (the log alone named {said}: {old.reason})"
    elif old is not None:
        reason += f" (the log: {old.reason})"
    culprit = Culprit(
        rank,
        None,
        host or (old.host if old and old.rank == rank else None),
        hang.confidence,
        reason,
    )
    title = f"{_ANSWERING.sub('', inc.title)} {_what(hang)}"
    return replace(inc, title=title, culprit=culprit, evidence=_evidence(hang) + inc.evidence)


def _host(hang: HangDumps) -> str | None:
    """The culprit's host, as its row shows it."""
    return next((r.host for r in hang.rows if r.rank == hang.culprit_rank), None)


def _what(hang: HangDumps) -> str:
    """`(rank 2 never entered the collective)`: the title's account of the culprit."""
    return f"(rank {hang.culprit_rank} {_WHAT.get(hang.kind or '', 'hung')})"


def _evidence(hang: HangDumps) -> tuple[Event, ...]:
    return tuple(_event(path, n, text) for path, n, text in hang.evidence)


_ANSWERING = re.compile(r" \(rank \d+ stopped answering\)$")
"""The title's culprit from the log alone (analysis.incidents)."""
_WHAT = MappingProxyType(
    {
        "desync_op": "called another collective",
        "desync_sizes": "called the collective with other sizes",
        "desync_dtypes": "called the collective with other dtypes",
        "missing": "never entered the collective",
        "outside": "is stuck outside communication",
        "stopped": "is stopped",
    }
)


def _event(path: str, lineno: int, text: str) -> Event:
    return Event(
        "hang_dump",
        "status",
        Line(path, lineno, text, text),
        category=None,
        severity="info",
        role="cause",
    )
