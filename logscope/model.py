"""Records that cross stage borders: lines, events, incidents, the analysis."""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, get_args

import numpy as np

from .compact_column import NUMPY_TYPES, Packed


def gpu_hours(value: float | None) -> str:
    """GPU-hours for people: one decimal for big figures, two for the small ones a short job
    loses."""
    if value is None:
        return "-"
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.2f}"


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


class Outcome(StrEnum):
    completed = "completed"
    crashed = "crashed"
    hung = "hung"
    timelimit = "timelimit"
    cancelled = "cancelled"
    preempted = "preempted"
    node_failure = "node_failure"
    truncated = "truncated"
    unknown = "unknown"


Category = Literal[
    "gpu_hardware",
    "cuda_error",
    "collective_timeout",
    "comm_error",
    "oom_gpu",
    "oom_host",
    "process_killed",
    "segfault",
    "python_exception",
    "data_error",
    "io_error",
    "launcher_error",
    "hang",
    "timelimit",
    "cancelled",
    "preemption",
    "node_failure",
    "unknown",
]
CATEGORIES: tuple[Category, ...] = get_args(Category)
NODE_EVIDENCE: Mapping[str, str] = MappingProxyType(
    {
        # the hardware failed: the node is to blame
        "gpu_hardware": "strong",
        "node_failure": "strong",
        # the node's GPU, link or NIC may be at fault, or the program
        "cuda_error": "weak",
        "comm_error": "weak",
        "segfault": "weak",
        # a rank that stopped answering: its node, when the log says which rank that was
        "hang": "culprit",
        "collective_timeout": "culprit",
        # the program, its data, its size or the scheduler: never the node
        "oom_gpu": "none",
        "oom_host": "none",
        "process_killed": "none",
        "python_exception": "none",
        "data_error": "none",
        "io_error": "none",
        "launcher_error": "none",
        "timelimit": "none",
        "cancelled": "none",
        "preemption": "none",
        "unknown": "none",
    }
)
"""How strongly an incident of each category implicates the node it happened on (the fleet's
bad-node list counts only `strong` and `weak` ones; `culprit` is `weak` when a culprit rank with
its host is named, else `none`)."""
Severity = Literal["fatal", "error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
Role = Literal["cause", "symptom", "summary", "end"]
ROLES: tuple[Role, ...] = get_args(Role)
Kind = Literal[
    "failure",
    "iteration",
    "checkpoint_save",
    "checkpoint_saved",
    "checkpoint_load",
    "validation",
    "exit",
    "launch",
    "status",
    "config",
]
KINDS: tuple[Kind, ...] = get_args(Kind)


class Stream(NamedTuple):
    """Where a line came from, as its prefixes say: the one identity of a rank's output."""

    task: int | None
    """srun `--label` task id."""
    host: str | None
    local_rank: int | None
    rank: int | None
    """Global rank."""


@dataclass(frozen=True, slots=True)
class Line:
    """One record of a log: a physical line, or one `\\r` state or glued piece of it."""

    path: str
    lineno: int
    """1-based physical line number, as `less -N` shows it."""
    raw: str
    """The physical line as in the file (decoded, newline stripped)."""
    text: str
    """The message: what is left after every routing and logger prefix is stripped."""
    host: str | None = None
    rank: int | None = None
    """Global rank, when a prefix says it (c10 `[rank3]:`, excepthook, OpenMPI)."""
    local_rank: int | None = None
    task: int | None = None
    """srun `--label` task id (the node index when one task runs per node)."""
    role: str | None = None
    """torchrun `--role` of the tee header (`default`)."""
    level: str | None = None
    time: datetime | None = None
    truncated: bool = False

    @property
    def stream(self) -> Stream:
        return Stream(self.task, self.host, self.local_rank, self.rank)


@dataclass(frozen=True, slots=True)
class Event:
    """A line matched by a signature."""

    signature: str
    kind: Kind
    line: Line
    fields: dict[str, str] = field(default_factory=dict)
    category: Category | None = None
    severity: Severity | None = None
    role: Role | None = None
    time: datetime | None = None
    """The event's time: the line's own stamp, a time captured by the signature, or derived."""
    time_exact: bool = False
    seq: int = 0
    """Order key: the input's position in the run, then the line number."""


@dataclass(frozen=True, slots=True)
class Culprit:
    rank: int | None
    local_rank: int | None
    host: str | None
    confidence: float
    reason: str
    task: int | None = None


@dataclass(frozen=True, slots=True)
class Incident:
    id: str
    category: Category
    severity: Severity
    title: str
    explanation: str
    remedies: tuple[str, ...]
    references: tuple[str, ...]
    root_cause: Event
    culprit: Culprit | None
    cascade: tuple[Event, ...]
    evidence: tuple[Event, ...]
    iteration: int | None
    start: datetime | None
    end: datetime | None


SurvivedKind = Literal["survived", "teardown"]


@dataclass(frozen=True, slots=True)
class Survived:
    """Errors of one template the run outlived: training went on after them (`survived`), or
    they came after the run said it had completed (`teardown`). Never a verdict."""

    kind: SurvivedKind
    title: str
    category: Category
    signature: str
    template: str
    """The first line's message, numbers, paths and ranks masked."""
    count: int
    ranks: tuple[tuple[int, int], ...]
    """(rank, lines) for each rank the lines name, by rank."""
    tasks: tuple[tuple[int, int], ...]
    """(srun task, lines) for the lines that name a task but no rank."""
    first: Event
    reason: str
    """What shows the run outlived them."""


@dataclass(frozen=True, slots=True)
class Template:
    """Error-looking lines that match no signature, masked into one template."""

    template: str
    count: int
    example: Line


@dataclass(frozen=True, slots=True)
class InputInfo:
    path: str
    bytes: int
    lines: int
    compression: str | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Job:
    outcome: Outcome
    outcome_reason: str
    world_size: int | None
    hosts: tuple[str, ...]
    start: datetime | None
    end: datetime | None
    first_iteration: int | None
    last_iteration: int | None
    train_iters: int | None = None
    last_progress: datetime | None = None


# Progress markers kept compact: a row of numbers per iteration line, so memory stays flat.
# A 5 GB log has hundreds of thousands of iteration lines; keeping each as an Event (with its line
# text) grew peak RSS by ~1.6 KB per line (measured on bench/ logs). Only the first and last events
# are kept whole.


INPUT_SHIFT = 40
"""An order key (`Event.seq`) is the input's index shifted by this, or'ed with the line number:
lines of one input sort by line, inputs in the order they were given."""


def order_key(input_index: int, lineno: int) -> int:
    """The order key of line `lineno` (1-based) of the input given `input_index`-th."""
    return (input_index << INPUT_SHIFT) | lineno


def input_of(seq: int) -> int:
    """The index of the input an order key's line is in."""
    return seq >> INPUT_SHIFT


def lineno_of(seq: int) -> int:
    """The line number an order key stands for."""
    return seq & ((1 << INPUT_SHIFT) - 1)


def field_int(e: Event, name: str) -> int | None:
    """An event field as an integer (exit codes may be negative), or None."""
    v = e.fields.get(name)
    return int(v) if v is not None and v.lstrip("-").isdigit() else None


def line_seconds(e: Event, iterations: int = 1) -> float:
    """Seconds a progress line covers: its time per iteration x the iterations since the last
    line (a log interval above 1); NaN if it reports none."""
    if "iter_s" in e.fields:
        return float(e.fields["iter_s"]) * iterations
    if "iter_ms" in e.fields:
        return float(e.fields["iter_ms"]) * iterations / 1000
    return math.nan


def to_float(v: str | None) -> float:
    """A field as a float (`nan` and `inf` as written), NaN if absent or not a number."""
    if v is None:
        return math.nan
    try:
        return float(v)
    except ValueError:
        return math.nan


@dataclass(slots=True)
class Progress:
    """Iteration lines in log order (their `seq` ascending)."""

    seq: array[int] = field(default_factory=lambda: array("q"))
    iteration: Packed = field(default_factory=lambda: Packed("q"))
    """-1 where the line has no iteration number (an HF log dict)."""
    time: Packed = field(default_factory=lambda: Packed("d"))
    """POSIX seconds of the line's time (exact or derived); NaN if unknown."""
    iter_s: Packed = field(default_factory=lambda: Packed("d"))
    """Seconds the line covers (its time per iteration x the iterations since the last line);
    NaN if it reports none."""
    # training health, NaN where the line does not say
    loss: Packed = field(default_factory=lambda: Packed("d"))
    """The training loss; NaN if absent or not finite (see `nonfinite`)."""
    nonfinite: Packed = field(default_factory=lambda: Packed("b"))
    """1 where the line reports a NaN or infinite loss."""
    grad_norm: Packed = field(default_factory=lambda: Packed("d"))
    loss_scale: Packed = field(default_factory=lambda: Packed("d"))
    skipped: Packed = field(default_factory=lambda: Packed("d"))
    """Iterations skipped since the last line (fp16 overflow), as Megatron counts them."""
    nan_iters: Packed = field(default_factory=lambda: Packed("d"))
    """Iterations with a NaN loss since the last line, as Megatron counts them."""
    batch: Packed = field(default_factory=lambda: Packed("d"))
    """Global batch size (it ramps up in some runs: step time is compared per sample)."""
    train_iters: int | None = None
    first: Event | None = None
    _latest: tuple[int, Event | Callable[[], Event]] | None = None
    """The last line added, with its index: its Event, or how to build it (when asked)."""

    @property
    def last(self) -> Event | None:
        """The last iteration line, with the time the timeline gave it (built on demand: one
        Event per line would cost more than the rest of its bookkeeping)."""
        if not self.seq:
            return None
        e = self.event(len(self.seq) - 1)
        if e is None or math.isnan(self.time[-1]):
            return e
        return replace(e, time=datetime.fromtimestamp(self.time[-1]))

    def event(self, idx: int) -> Event | None:
        """The Event of line `idx`: the first and the last line are kept, no other."""
        if idx == 0 and self.first is not None:
            return self.first
        if self._latest is not None and self._latest[0] == idx:
            e = self._latest[1]
            if not isinstance(e, Event):
                e = e()
                self._latest = (idx, e)
            return e
        return None

    def keep(self, idx: int, e: Event | Callable[[], Event]) -> None:
        """Hold the Event of line `idx` (the latest so far), or how to build it."""
        if idx == 0:
            self.first = e if isinstance(e, Event) else e()
        self._latest = (idx, e)

    def add(self, e: Event, iteration: int | None, seconds: float) -> int:
        """Add an iteration line (its iteration number and the seconds it covers, as the
        engine parsed them); returns its index."""
        self.seq.append(e.seq)
        self.iteration.append(iteration if iteration is not None else -1)
        self.time.append(e.time.timestamp() if e.time is not None else math.nan)
        self.iter_s.append(seconds)
        f = e.fields
        loss = to_float(f.get("loss"))
        bad = "loss" in f and not math.isfinite(loss)
        self.loss.append(math.nan if bad else loss)
        self.nonfinite.append(1 if bad else 0)
        self.grad_norm.append(to_float(f.get("grad_norm")))
        self.loss_scale.append(to_float(f.get("loss_scale")))
        self.skipped.append(to_float(f.get("skipped")))
        self.nan_iters.append(to_float(f.get("nan_iters")))
        self.batch.append(to_float(f.get("batch")))
        total = field_int(e, "train_iters")
        if total is not None:
            self.train_iters = total
        self.keep(len(self.seq) - 1, e)
        return len(self.seq) - 1

    def extend(self, columns: Mapping[str, Any], train_iters: int | None) -> int:
        """Add lines parsed in bulk: equal-length numpy arrays named like this class's columns,
        of their types (`time` NaN until the timeline gives one); returns the first one's
        index."""
        first = len(self.seq)
        for name in _BULK_COLUMNS:
            column = getattr(self, name)
            values = columns[name]
            if values.dtype != NUMPY_TYPES[column.typecode]:
                values = values.astype(NUMPY_TYPES[column.typecode])
            if isinstance(column, Packed):
                column.extend(values)
            else:
                column.frombytes(values.tobytes())  # no Python number made
        if train_iters is not None:
            self.train_iters = train_iters
        return first

    def __len__(self) -> int:
        return len(self.seq)

    def count_between(self, after: int, before: int) -> int:
        """Progress lines strictly between two order keys."""
        return max(0, bisect_left(self.seq, before) - bisect_right(self.seq, after))

    def count_after(self, seq: int) -> int:
        return len(self.seq) - bisect_right(self.seq, seq)

    def last_iteration_before(self, seq: int) -> int | None:
        its = self.iteration.numpy()[: bisect_left(self.seq, seq)]
        numbered = np.flatnonzero(its >= 0)  # numpy: a log of HF dicts numbers none
        return int(its[numbered[-1]]) if len(numbered) else None

    def iterations(self) -> tuple[int | None, int | None]:
        """The first and last iteration numbers logged."""
        its = self.iteration.numpy()
        numbered = np.flatnonzero(its >= 0)
        if not len(numbered):
            return None, None
        return int(its[numbered[0]]), int(its[numbered[-1]])

    def median_interval_s(self) -> float | None:
        """Typical seconds per logged progress line: from the lines' own durations, else times."""
        values = self.iter_s.numpy()
        values = values[~np.isnan(values)]
        if not len(values):
            t = self.time.numpy()
            gaps = np.diff(t[~np.isnan(t)])
            values = gaps[gaps > 0]
        # the middle value, or the mean of the two middle ones (statistics.median's floats)
        return float(np.median(values)) if len(values) else None

    def last_time(self) -> datetime | None:
        known = np.flatnonzero(~np.isnan(self.time.numpy()))
        return datetime.fromtimestamp(float(self.time[int(known[-1])])) if len(known) else None


_BULK_COLUMNS = (
    "seq",
    "iteration",
    "time",
    "iter_s",
    "loss",
    "nonfinite",
    "grad_norm",
    "loss_scale",
    "skipped",
    "nan_iters",
    "batch",
)

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
    magnitude: float
    """slowdown: the fraction slower than the baseline (0.05); spikes: peak / baseline; NaN
    and skipped steps: the iterations affected; loss-scale collapse: the scale it fell to."""
    baseline: float | None
    """What the magnitude is measured against (seconds per iteration, the loss, the norm)."""
    lost_s: float | None
    """Wall time lost to it (slowdown: against the baseline; skipped steps: their time)."""
    lost_gpu_hours: float | None
    file: str | None
    line: int | None
    """The line where it begins."""
    recovered_after: int | None = None
    """Spikes: iterations until the value was back near its baseline (None: it never was)."""
    hosts_joined: tuple[str, ...] = ()
    """A slowdown that began with an attempt: the nodes it ran on that the one before did not."""
    explanation: str = ""
    remedies: tuple[str, ...] = ()
    evidence: tuple[tuple[str, int, str], ...] = ()
    """Configuration findings: the lines that show it, (file, line, text)."""


def finding_doc(f: Finding) -> dict[str, Any]:
    """A finding as plain JSON values: the document's `findings`, `tail --json`'s warnings."""
    return {
        "kind": f.kind,
        "severity": f.severity,
        "title": f.title,
        "attempt": f.attempt,
        "start_iteration": f.start_iteration,
        "end_iteration": f.end_iteration,
        "start": f.start.isoformat() if f.start is not None else None,
        "end": f.end.isoformat() if f.end is not None else None,
        "magnitude": rounded(f.magnitude, 4),
        "baseline": rounded(f.baseline, 6),
        "lost_s": rounded(f.lost_s),
        "lost_gpu_hours": rounded(f.lost_gpu_hours, 3),
        "recovered_after": f.recovered_after,
        "hosts_joined": list(f.hosts_joined),
        "file": f.file,
        "line": f.line,
        "explanation": f.explanation or None,
        "remedies": list(f.remedies),
        "evidence": [{"file": p, "line": n, "text": t} for p, n, t in f.evidence],
    }


@dataclass(frozen=True, slots=True)
class World:
    """The ranks of a job, and how to name the rank of any line."""

    nodes: int
    nproc_per_node: int | None
    size: int | None
    ranks: frozenset[int]
    multi_node_tee: bool
    """Several nodes print the same `[defaultN]:` headers with nothing to tell them apart."""

    def rank_of(self, line: Line) -> int | None:
        return self.rank_of_stream(line.stream)

    def rank_of_stream(self, stream: Stream) -> int | None:
        task, _host, local_rank, rank = stream
        if rank is not None:
            return rank
        if local_rank is None:
            return None
        if self.nodes <= 1 and not self.multi_node_tee:
            return local_rank
        if task is not None and self.nproc_per_node:
            # srun --ntasks-per-node=1 runs one torchrun agent per node: task id = node index
            return task * self.nproc_per_node + local_rank
        return None


@dataclass(frozen=True, slots=True)
class Save:
    """A checkpoint save that completed."""

    iteration: int | None
    start: datetime | None
    end: datetime | None
    duration_s: float
    """Measured by the log (`save-checkpoint: ms`, or two stamped lines); 0 when it says nothing."""


@dataclass(frozen=True, slots=True)
class Attempt:
    index: int
    input: int
    """The input whose progress lines make this attempt."""
    first_seq: int
    last_seq: int
    boundary: str
    """What started it: `start`, `launch`, `checkpoint_load`, `iteration_reset`, `input`."""
    start: datetime | None
    """When the attempt began (the job's `START TIME`, or its first stamped line)."""
    loop_start: datetime | None
    """When its first training iteration began."""
    end: datetime | None
    """The last moment the attempt is known to exist (its last stamped line, an end banner)."""
    last_progress: datetime | None
    first_iteration: int | None
    last_iteration: int | None
    resumed_from: int | None
    """The iteration of the checkpoint it loaded."""
    saves: tuple[Save, ...]
    unfinished_saves: tuple[int | None, ...]
    """Iterations of saves that started and never completed: they are no checkpoint."""
    progress: tuple[int, int]
    """Index range [first, last] of its lines in the run's Progress."""
    last_event: Event | None
    ended_saving: bool = False
    """A checkpoint save had started and not completed when the attempt ended."""
    job_id: str | None = None
    """The SLURM job it ran in, when a file name or a banner says (slurm_jobs.name_jobs)."""
    companions: tuple[int, ...] = ()
    """Inputs without progress that belong to this attempt's job (its `.out`): every line of
    theirs is this attempt's, never another's."""


@dataclass(frozen=True, slots=True)
class LedgerIncident:
    incident: str | None
    """The incident id, or None for an attempt that ended by its time limit or a cancel."""
    attempt: int
    kind: str
    """crash, hang or end (a time limit or cancel while still progressing)."""
    failure: datetime | None
    failure_exact: bool
    last_checkpoint_iteration: int | None
    wasted_progress_s: float
    hang_s: float
    restart_s: float | None
    lost_gpu_hours: float | None


@dataclass(frozen=True, slots=True)
class Ledger:
    gpus: int | None
    wall_s: float
    productive_s: float
    badput_s: dict[str, float]
    """wasted_progress, hang, disruption_recovery, checkpointing, slowdown, startup, other."""
    incidents: tuple[LedgerIncident, ...]

    @property
    def ettr(self) -> float | None:
        return self.productive_s / self.wall_s if self.wall_s > 0 else None

    @property
    def lost_gpu_hours(self) -> float | None:
        if self.gpus is None:
            return None
        lost = sum(i.wasted_progress_s + i.hang_s + (i.restart_s or 0.0) for i in self.incidents)
        return lost * self.gpus / 3600


@dataclass(frozen=True, slots=True)
class WhatIf:
    label: str
    """What the interval is: `now` (the run's), `Young`, `Daly`, `half now`, `twice now`."""
    interval_s: float
    interval_iterations: float | None
    detection_s: float
    overhead: float
    """Expected fraction of wall time lost: saving, redone work, detection, restart."""


@dataclass(frozen=True, slots=True)
class Advice:
    save_s: float | None
    interval_iterations: float | None
    interval_s: float | None
    iteration_s: float | None
    mtbf_s: float | None
    mtbf_source: str
    """`given` (--mtbf), `observed` (wall time / failures) or `none`."""
    young_interval_s: float | None
    young_interval_iterations: float | None
    daly_interval_s: float | None
    overhead_now: float | None
    overhead_optimal: float | None
    detection_s: float
    restart_s: float
    what_if: tuple[WhatIf, ...]
    verdict: str


@dataclass(frozen=True, slots=True)
class Analysis:
    inputs: tuple[InputInfo, ...]
    job: Job
    incidents: tuple[Incident, ...]
    verdict: Incident | None
    unrecognized: tuple[Template, ...]
    world: World
    attempts: tuple[Attempt, ...]
    ledger: Ledger | None
    """None when no attempt has a known loop start and end (ledger.build_ledger)."""
    advice: Advice
    progress: Progress = field(default_factory=lambda: Progress())
    findings: tuple[Finding, ...] = ()
    context: Mapping[str, Sequence[tuple[int, str]]] = field(default_factory=dict)
    """Per incident id: its root-cause line with the lines of the same rank around it, as
    (line number, text) (context.root_context); empty until the inputs are read again."""
    last_seen: tuple[tuple[int, str, int], ...] = ()
    """(rank, file, line) of the last line each rank printed (context.last_seen)."""
    survived: tuple[Survived, ...] = ()
    """Errors the run outlived, and teardown errors after it completed (analysis.survived)."""

    @property
    def empty(self) -> bool:
        """No input held a byte: nothing says whether the job ran."""
        return all_empty(self.inputs)


def all_empty(inputs: Sequence[InputInfo]) -> bool:
    """There were inputs, and none held a byte."""
    return bool(inputs) and not any(i.bytes for i in inputs)
