"""What a log is read into: lines, events, incidents and the job, with the vocabulary
they are named in (outcomes, categories, severities, roles, event kinds)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Literal, NamedTuple, get_args


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

    def agrees(self, other: Stream) -> bool:
        """Nothing one of the two names contradicts the other: what one line's prefixes leave
        unsaid (a traceback's host, which only NCCL's prefix names) is the other's."""
        return all(a == b or a is None or b is None for a, b in zip(self, other, strict=True))


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

    @property
    def shown(self) -> str:
        """The physical line; where `\r` redraws it (a progress bar's states, then a record
        glued to the last one), the state that holds this record, as a terminal shows it."""
        raw = self.raw
        if "\r" not in raw or not self.text:
            return raw
        return next((s for s in raw.split("\r") if self.text in s), raw)


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
    exit_code: int | None = None
    """A completed run's own exit code where a launcher or the scheduler reported one after the
    run said it completed (srun's `Exited with exit code 134` over a teardown), else None."""


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


def to_float(v: str | None) -> float:
    """A field as a float (`nan` and `inf` as written), NaN if absent or not a number."""
    if v is None:
        return math.nan
    try:
        return float(v)
    except ValueError:
        return math.nan
