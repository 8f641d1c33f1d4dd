"""A log whose only word of a failure is torchrun closing its workers: the elastic agent's
`_close` (torch/distributed/elastic/multiprocessing/api.py) walks its workers in local-rank order
and logs `Sending process <pid> closing signal SIGTERM` (`Closing process <pid> via signal
SIGTERM` under start_method spawn) for each one still running. It closes them when one worker
exited or when the agent itself was signalled (which it says first: `Received SIGTERM death
signal`, an end of its own). A worker that exited 0 is no failure: the agent waits for the
others. With neither an error nor a stop said before, the workers it closes are the survivors of
one that exited non-zero: the job crashed, of a cause the log does not show. One process's own exit
said before (ProcessGroupNCCL's destructor warning) does not change that; the run's completion
does (the caller's test: the lines after it are teardown).

Workers are started one after another in local-rank order, so their pids usually rise by one:
where the closed pids run on by one but for a single skipped pid, that skipped worker is the one
that had exited, its local rank its place in the run."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from ..model import Culprit, Event, Incident, Progress, World
from .job_outcome import incident_at

CLOSING = "torchrun.sending_sigterm"

_CLOSES = (
    "The torchrun agent sends the closing signal only to workers still running, after one of "
    "them exited (or when it is stopped itself, which it says first). "
)
_EXPLANATION = _CLOSES + (
    "No error of the worker that exited is in the log: it was killed from outside (the "
    "kernel's OOM killer, a SIGKILL) or its output went elsewhere."
)
_EXITING = _CLOSES + (
    "Another process was shutting down on its own just before (ProcessGroupNCCL's destructor "
    "warned as its interpreter exited; a process killed by a signal prints nothing): the "
    "workers were leaving together, one of them with an error whose output is not in the log."
)
_REMEDIES = (
    "Find the worker torchrun reports next (`failed (exitcode: ...) local_rank: N`) and its own "
    "output (--tee 3, --log-dir)",
    "Exit code -9 with nothing printed is most often the host's OOM killer: check `dmesg -T | "
    "grep -i 'killed process'` on the node",
)


def closed_after_exit(
    failures: Sequence[Event], progress: Progress, world: World, exits: Sequence[Event] = ()
) -> Incident | None:
    """The crash told only by torchrun's closing signals (the job's ending follows from it:
    crashed): the first closing line of an input whose every later failure line is a closing
    one of the same input, with no step after it. None where any other failure line comes after
    it. `exits`: the processes' own exit lines; one of the same input before the closing, after
    the last step, says the workers were leaving of themselves: its cause is unknown, not a
    kill."""
    closing = [e for e in failures if e.signature == CLOSING]
    if not closing:
        return None
    first = closing[0]
    later = [e for e in failures if e.seq >= first.seq]
    if any(e.signature != CLOSING or e.line.path != first.line.path for e in later):
        return None
    if progress.steps_after(first.seq):
        return None
    closed = [e for e in later if e.fields.get("signal_name") == "SIGTERM"]
    if not closed:
        return None
    title = f"A worker exited with no error logged; torchrun closed the {len(closed)} still running"
    leaving = any(
        "process_exit" in m.fields
        and m.line.path == first.line.path
        and m.seq < first.seq
        and not progress.count_after(m.seq)
        for m in exits
    )
    return incident_at(
        first,
        "unknown" if leaving else "process_killed",
        title,
        _EXITING if leaving else _EXPLANATION,
        _REMEDIES,
        _skipped_worker(closed, world),
        tuple(closed[1:]),
    )


def _skipped_worker(closed: Sequence[Event], world: World) -> Culprit | None:
    """The one worker missing from a run of pids that rises by one in local-rank order (on one
    node, its local rank is its rank)."""
    pids = [int(e.fields["pid"]) for e in closed]  # the signature's regex always captures it
    if len(pids) < 2:
        return None
    steps = [b - a for a, b in pairwise(pids)]
    if sorted(steps) != [1] * (len(steps) - 1) + [2]:
        return None
    local = steps.index(2) + 1
    return Culprit(
        rank=local if world.nodes <= 1 and not world.multi_node_tee else None,
        local_rank=local,
        host=closed[0].line.host,
        confidence=0.5,
        reason=f"torchrun closed its workers in local-rank order, pids {pids[0]} to {pids[-1]} "
        f"rising by one but for pid {pids[local - 1] + 1}: local rank {local}, the worker that "
        "had exited",
    )
