"""Deaths that are consequences: a process that reported a failure, then died of it, and the
deaths a launcher reports after the failure that started them.

Deaths a launcher reports that did not start the failure:
- one torchrun reports after a collective timeout in the same log (its agent polls its workers
  and would have reported the death before the others' wait ran out);
- an entry of torchrun's failure block whose worker died of a signal after another entry's
  worker had failed (the agent stopping the group: SIGTERM, then SIGKILL after its grace);
- SIGABRTs of two or more ranks of a node in the same second (aborted_together): each rank's
  watchdog taking its process down over one collective.

Two shapes of a process taking itself down over a failure it already stated:
- a SIGABRT that a launcher reports for a rank whose watchdog timed out first (ProcessGroupNCCL:
  `To avoid data inconsistency, we are taking the entire process down`), or for a rank the log
  holds no line of, after another rank's watchdog took its process down;
- a C++ `terminate called after throwing an instance of 'T'` whose `what():` line, printed right
  after it by libstdc++'s verbose terminate handler, is a known symptom (a watchdog timeout, a
  peer that closed the connection), or that comes right after ProcessGroupNCCL said it takes the
  process down (its watchdog logs `To avoid data inconsistency, we are taking the entire process
  down.`, then rethrows the failure it reported): the terminate is how that symptom ended the
  process, whether or not its `what():` line made it into the log.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..match.failure_block import FAILURE_ENTRY
from ..model import Event, Stream, World, field_int, input_of

SERIOUS = ("fatal", "error")
WHAT_WITHIN = 3
"""libstdc++ prints `  what():  <message>` on the line after `terminate called ...`; a few lines
of slack for another thread's line interleaved between them."""
TERMINATE = "cpp.terminate"
TAKING_DOWN = "nccl.taking_process_down"
BLOCK_SPAN = 200
"""Lines a torchrun failure block may span (7 a failure entry)."""


ABORT_STATUS = 128 + 6
"""A shell's exit status of a process SIGABRT ended, which launchers that pass the status through
report as its exit code (HPE PALS's `rank 0 exited with code 134`)."""


def is_abort(e: Event) -> bool:
    """A launcher's report of a death by SIGABRT (exit code -6 or 134, or the signal named)."""
    code = field_int(e, "exit_code")
    return code in (-6, ABORT_STATUS) or e.fields.get("signal_name") == "SIGABRT"


def consequent_death(death: Event, serious: Sequence[Event], world: World) -> bool:
    """A launcher's report of a death by a signal that did not start the failure: the rank's own
    abort over what it reported (own_abort), a death torchrun reports after a collective
    timeout, or a worker its agent killed after another had failed. `serious`: the incident's
    fatal and error events (own_abort reads no others)."""
    return (
        own_abort(death, serious, world)
        or _after_timeout(death, serious)
        or _killed_in_teardown(death, serious)
    )


def own_abort(death: Event, events: Sequence[Event], world: World) -> bool:
    """A SIGABRT of a rank that reported a failure first: its watchdog took the process down, so
    the death is a symptom of what that rank reported, not a cause. A takedown line that no
    prefix gives a rank (`To avoid data inconsistency, we are taking the entire process down`)
    counts for whichever rank the launcher reports."""
    if not is_abort(death):
        return False
    rank = field_int(death, "rank")
    if rank is None:
        local = field_int(death, "local_rank")
        if local is not None:
            rank = world.rank_of_stream(Stream(death.line.task, death.line.host, local, None))
    for e in events:
        if e.seq >= death.seq or e.role != "symptom" or e.severity not in SERIOUS:
            continue
        if e.signature == FAILURE_ENTRY:
            continue  # the launcher's own report of the death, not the rank's
        said = world.rank_of(e.line)
        if rank is not None and said == rank:
            return True
        if said is None and _takes_down(e):
            # a process with no rank prefix said it takes itself down: the SIGABRT that follows
            # is that, unless a prefix shows it was another rank's
            return True
        if _takes_down(e) and rank is not None and rank not in world.ranks:
            # a rank whose output the log does not hold (a launcher that keeps rank 0's only)
            # died of SIGABRT after another rank's watchdog took its process down: the ranks
            # time out the same collective, and it was the same takedown
            return True
    return False


def symptom_terminates(events: Sequence[Event]) -> frozenset[int]:
    """The order keys of `terminate called ...` lines that end a known symptom: a symptom's
    `what():` line of the same stream at most WHAT_WITHIN lines after it, or ProcessGroupNCCL's
    `taking the entire process down` at most WHAT_WITHIN lines before it."""
    whats = {
        (e.line.path, e.line.stream, e.line.lineno)
        for e in events
        if e.role == "symptom" and e.severity in SERIOUS and "what():" in e.line.text
    }
    downs = {(e.line.path, e.line.stream, e.line.lineno) for e in events if _takes_down(e)}
    if not whats and not downs:
        return frozenset()
    return frozenset(
        t.seq
        for t in events
        if t.signature == TERMINATE
        and any(
            (t.line.path, t.line.stream, t.line.lineno + k) in whats
            or (t.line.path, t.line.stream, t.line.lineno - k) in downs
            for k in range(1, WHAT_WITHIN + 1)
        )
    )


def _takes_down(e: Event) -> bool:
    """ProcessGroupNCCL's watchdog saying it takes its process down: its own line since torch
    2.0, or a line a signature reads the takedown at the end of (`takes_down`: 1.x's `Some NCCL
    operations have failed or timed out. ... we are taking the entire process down.`)."""
    return e.signature == TAKING_DOWN or "takes_down" in e.fields


_AS_IT_HAPPENS = ("slurm.srun_task_signaled", "slurm.srun_task_segfault")
"""srun's reports of tasks a signal ended, which it prints as each task exits (besides
torchrun's)."""


def _after_timeout(death: Event, serious: Sequence[Event]) -> bool:
    """A launcher that reports a worker's death as it happens: torchrun's agent within seconds
    (it polls its workers), srun as the task exits. A death it reports after a collective timeout
    in the same log came after that wait ran out, so it did not cause it (the takedown that
    followed, or a rank killed while stuck)."""
    if not death.signature.startswith("torchrun.") and death.signature not in _AS_IT_HAPPENS:
        return False
    inp = input_of(death.seq)
    return any(
        e.category == "collective_timeout"
        and e.role == "symptom"
        and e.seq < death.seq
        and input_of(e.seq) == inp
        for e in serious
    )


def _killed_in_teardown(death: Event, serious: Sequence[Event]) -> bool:
    """An entry of torchrun's failure block whose worker died of a signal after another entry's
    worker had already failed: the agent's own stop of the group (SIGTERM, then SIGKILL after
    its grace period), not a failure of its own."""
    if death.signature != FAILURE_ENTRY or death.time is None:
        return False
    return any(
        e.signature == FAILURE_ENTRY
        and e.time is not None
        and e.time < death.time
        and e.line.path == death.line.path
        and abs(e.line.lineno - death.line.lineno) <= BLOCK_SPAN
        for e in serious
    )


def aborted_together(root: Event, deaths: Sequence[Event]) -> list[str]:
    """The ranks that died of SIGABRT in the same second as `root` (one of them), when there are
    two or more: ProcessGroupNCCL's watchdog aborts each rank whose collective failed, so ranks
    aborting together with no error text of their own were taken down over one collective."""
    if root.time is None or not is_abort(root):
        return []
    host = root.fields.get("host") or root.line.host
    ranks = {
        e.fields.get("rank") or e.fields.get("local_rank") or ""
        for e in deaths
        if is_abort(e) and e.time == root.time and (e.fields.get("host") or e.line.host) == host
    }
    ranks.discard("")
    return sorted(ranks, key=int) if len(ranks) >= 2 else []
