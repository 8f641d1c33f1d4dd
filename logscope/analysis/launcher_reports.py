"""torchrun's failure block and launchers' summaries read as reports: the block's `Root Cause`
entry (which says how the worker ended), a kill list's report, the remote error a driver's
wrapper (Ray's RayTaskError) carries, and the worker or srun task a summary says failed."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..match.failure_block import CHILD_FAILED, FAILURE_ENTRY
from ..model import Culprit, Event, Stream, World, field_int
from .aborts import BLOCK_SPAN
from .launcher_clues import KILL_LIST


def first_below(
    head: Event, events: Sequence[Event], keep: Callable[[Event], bool]
) -> Event | None:
    """The first of `events` that `keep` takes, below `head` in its file and within a block of
    a launcher's report (`BLOCK_SPAN` lines)."""
    return next(
        (
            e
            for e in events
            if e.line.path == head.line.path
            and 0 < e.line.lineno - head.line.lineno <= BLOCK_SPAN
            and keep(e)
        ),
        None,
    )


def is_root_entry(e: Event) -> bool:
    """torchrun's `Root Cause (first observed failure)` entry of its failure block."""
    return e.signature == FAILURE_ENTRY and e.fields.get("root") == "1"


def first_observed(failures: Sequence[Event]) -> Event:
    """The first of `failures` in the log; but when that is torchrun's failure block (its
    `ChildFailedError` header, or an entry above the others), the block's `Root Cause (first
    observed failure)` entry, printed below them, which says how that worker ended (exit code 1:
    it raised; a signal: it was killed)."""
    first = failures[0]
    if first.signature not in (FAILURE_ENTRY, CHILD_FAILED) or is_root_entry(first):
        return first
    return first_below(first, failures, is_root_entry) or first


def past_kill_list(first: Event, summaries: Sequence[Event]) -> Event:
    """A launcher's kill list (`Killing subprocess N`) is its reaction to a worker's failure; the
    report that follows it in the same block (`... exits with return code = 1`) says what
    failed, and is the root where there is one."""
    if first.signature != KILL_LIST:
        return first
    return first_below(first, summaries, lambda e: e.signature != KILL_LIST) or first


RAY_TASK_ERROR = "ray.task_error"
"""Ray's RayTaskError(<type>) line (patterns/ray.toml): the driver's wrapper of a remote error."""


def past_wrappers(first: Event, summaries: Sequence[Event]) -> Event:
    """Ray's `RayTaskError(<type>): ray::<task>()` wraps the remote task's error, whose
    traceback follows it and ends with that error's own report (`ActorDiedError: The actor
    died ...`): that report, where the log holds it, says what failed."""
    if first.signature != RAY_TASK_ERROR:
        return first
    return first_below(first, summaries, lambda e: e.signature != RAY_TASK_ERROR) or first


def reported_worker(summary: Event, world: World) -> Culprit | None:
    """The worker a launcher's summary says failed (torchrun's `failed (exitcode: 1) local_rank:
    3`, Composer's `Rank 3 crashed with exit code 1.`) when no line of the worker's own says why:
    the first failure the launcher saw. (DeepSpeed's `... exits with return code` names the last
    worker it started, not the failed one: patterns/deepspeed.toml.)"""
    rank = field_int(summary, "rank")
    local = field_int(summary, "local_rank")
    if summary.role != "summary" or (rank is None and local is None):
        return None
    code = summary.fields.get("exit_code")
    said = f" (exit code {code})" if code is not None else ""
    host = summary.fields.get("host") or summary.line.host
    if rank is None:
        rank = world.rank_of_stream(Stream(summary.line.task, host, local, None))
    return Culprit(
        rank=rank,
        local_rank=local,
        host=host,
        task=summary.line.task,
        confidence=0.7,
        reason=f"the launcher reports this worker failed{said}; its own error is not in the log",
    )


def reported_task(summary: Event, world: World) -> Culprit | None:
    """The one srun task a summary says died (`srun: error: node12: task 1: Segmentation
    fault`): its rank where the log ties the task to one, else, where no line shows a rank or a
    launcher's local rank of its own (srun started the ranks itself), the task id, which SLURM
    gives each task as SLURM_PROCID, its rank."""
    tasks = summary.fields.get("tasks", "")
    if summary.role != "summary" or not tasks.isdigit():
        return None
    task = int(tasks)
    host = summary.fields.get("host") or summary.line.host
    rank = world.rank_of_stream(Stream(task, host, None, None))
    how = "the log ties the task to this rank"
    if rank is None and world.srun_started_ranks:
        rank, how = task, "srun started the ranks itself (no launcher's rank shows): task id = rank"
    if rank is None:
        return None
    return Culprit(
        rank=rank,
        local_rank=None,
        host=host,
        task=task,
        confidence=0.6,
        reason=f"srun reports task {task} as the first that failed; {how}",
    )


def own_report(summary: Event, world: World) -> Culprit | None:
    """A report the failed process printed itself, as its last act (OpenMPI's signal handler,
    running in the process that caught the signal, prints its backtrace frames there): its line
    carries that process's rank, and no launcher's report names another."""
    rank = world.rank_of(summary.line)
    if summary.role != "summary" or rank is None:
        return None
    return Culprit(
        rank=rank,
        local_rank=summary.line.local_rank,
        host=summary.fields.get("host") or summary.line.host,
        task=summary.line.task,
        confidence=0.7,
        reason=f"the report is the failed process's own: its line carries rank {rank}'s prefix",
    )
