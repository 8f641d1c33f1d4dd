"""Records that cross stage borders: lines, events, incidents, the analysis."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


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


CATEGORIES = (
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
)
SEVERITIES = ("fatal", "error", "warning", "info")
ROLES = ("cause", "symptom", "summary", "end")
KINDS = (
    "failure",
    "iteration",
    "checkpoint_save",
    "checkpoint_saved",
    "checkpoint_load",
    "validation",
    "exit",
    "launch",
    "status",
)


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


@dataclass(frozen=True, slots=True)
class Event:
    """A line matched by a signature."""

    signature: str
    kind: str
    line: Line
    fields: dict[str, str] = field(default_factory=dict)
    category: str | None = None
    severity: str | None = None
    role: str | None = None
    time: datetime | None = None
    """The event's time: the line's own stamp, a time captured by the signature, or derived."""
    time_exact: bool = False


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
    category: str
    severity: str
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


@dataclass(frozen=True, slots=True)
class Analysis:
    inputs: tuple[InputInfo, ...]
    job: Job
    incidents: tuple[Incident, ...]
    verdict: Incident | None
    unrecognized: tuple[Template, ...]
    progress: tuple[Event, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
