"""The result of an analysis: the job's world, its attempts, the ledger of what it lost,
checkpoint advice, and the Analysis that holds them all."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .figures import gpu_hours_of
from .findings import Finding
from .hangs import HangDumps
from .progress import Progress
from .records import Event, Incident, InputInfo, Job, Line, Stream, Survived, Template


@dataclass(frozen=True, slots=True)
class World:
    """The ranks of a job, and how to name the rank of any line."""

    nodes: int
    nproc_per_node: int | None
    size: int | None
    ranks: frozenset[int]
    multi_node_tee: bool
    """Several nodes print the same `[defaultN]:` headers with nothing to tell them apart."""
    tasks_are_ranks: bool = False
    """srun started every rank itself (one task a rank): a `--label` task id is the rank."""
    task_ranks: tuple[tuple[int, int], ...] = ()
    """(srun task, rank) where the log's own lines tie a task to one rank (`7: [rank7]:`)."""
    hosts: frozenset[str] = frozenset()
    """The hosts any line named (prefixes, NCCL's `host:pid:tid`)."""
    file_ranks: tuple[tuple[str, int, int], ...] = ()
    """(file, rank, line) where the file is one rank's own output from that line on: a line its
    emitter writes only there (a signature's `own_log_file`: detectron2's rank line in
    `log.txt.rank<N>`, Paddle's TCPStore master, which rank 0 alone starts) names that rank, and
    none names another."""
    nccl_ranks: tuple[tuple[str, str, int], ...] = ()
    """(host, pid, rank) of the processes whose NCCL INFO lines give them one rank in their
    largest communicator (the job's world group): a line with that `host:pid` head is theirs."""
    declared_size: int | None = None
    """The world size a launcher or the trainer stated (not one counted from the ranks seen)."""

    @property
    def srun_started_ranks(self) -> bool:
        """No line shows a rank or a launcher's local rank: srun started the ranks itself, so a
        task id is the rank SLURM gave that task (SLURM_PROCID)."""
        return not self.ranks and self.nproc_per_node is None

    def rank_of(self, line: Line) -> int | None:
        return self.rank_of_stream(line.stream)

    def rank_of_stream(self, stream: Stream) -> int | None:
        task, _host, local_rank, rank = stream
        if rank is not None:
            return rank
        if local_rank is None:
            if task is None:
                return None
            if self.tasks_are_ranks:
                return task
            return next((r for t, r in self.task_ranks if t == task), None)
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
    last_validated: datetime | None = None
    """When its last validation result (an evaluation every rank ran) was logged."""
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
        lost = sum(i.wasted_progress_s + i.hang_s + (i.restart_s or 0.0) for i in self.incidents)
        return gpu_hours_of(lost, self.gpus)


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
    context_marks: Mapping[str, Sequence[tuple[int, str]]] = field(default_factory=dict)
    """Per incident id: (line, text) of where its attempt begins or ends near its context, shown
    after the context's lines up to `line` (context.context_marks)."""
    last_seen: tuple[tuple[int, str, int], ...] = ()
    """(rank, file, line) of the last line each rank printed (context.last_seen)."""
    survived: tuple[Survived, ...] = ()
    """Errors the run outlived, and teardown errors after it completed (analysis.survived)."""
    hang_dumps: HangDumps | None = None
    """Flight Recorder traces and py-spy stacks given beside the logs (analysis.hung_rank)."""

    @property
    def empty(self) -> bool:
        """No input held a byte: nothing says whether the job ran."""
        return all_empty(self.inputs)


def all_empty(inputs: Sequence[InputInfo]) -> bool:
    """There were inputs, and none held a byte."""
    return bool(inputs) and not any(i.bytes for i in inputs)
