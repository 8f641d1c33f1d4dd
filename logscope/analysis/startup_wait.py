"""A log that ends while the job's processes wait to form the job: every rank says it starts to
wait for the others (an `init_wait` field: Lightning's `Initializing distributed: GLOBAL_RANK: r,
MEMBER: m/N` right before init_process_group), the word that the wait ended (an `init_done`
field: rank 0's `All distributed processes registered`) never comes, no step and no failure is
logged, and ranks of the world never announced themselves. init_process_group blocks until every
rank joined, silently: the run hung at start-up, waiting for processes that never started or
cannot reach the others. (Where every rank announced itself, a log cut right after its start-up
looks the same: no hang is called.)"""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Culprit, Event, Incident, Outcome, Progress, field_int
from .job_outcome import Ending, hang_at

WAIT_FIELD = "init_wait"
DONE_FIELD = "init_done"

_EXPLANATION = (
    "The ranks announced that they wait for the rest of the job in init_process_group, which "
    "returns once all world_size ranks joined, and the log ends before the wait ended, with "
    "ranks of the world never heard of: they never started, were started with another rank or "
    "world size, or cannot reach the master address. The wait is silent until its timeout "
    "(30 minutes by default)."
)
_REMEDIES = (
    "Check that every node started the job, with the same MASTER_ADDR/MASTER_PORT and the "
    "same world size, and that the ranks it assigns are distinct",
    "Under SLURM, match --ntasks-per-node and --nodes to the devices and nodes the trainer "
    "is given (Lightning's `devices` x `num_nodes`)",
    "Check that the master's port is reachable from every node (firewall, the interface "
    "NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME names)",
)


def startup_hang(markers: Sequence[Event], progress: Progress) -> tuple[Incident, Ending] | None:
    """The hang at start-up of a log with no step, and the job's ending (hung): rank 0's last
    `init_wait` marker (rank 0 says the wait ended) with no `init_done` after it in its file,
    where ranks of the world size it names never announced themselves. One absent rank is the
    culprit."""
    if len(progress):
        return None
    wait = next(
        (m for m in reversed(markers) if WAIT_FIELD in m.fields and field_int(m, "rank") == 0),
        None,
    )
    if wait is None or any(
        DONE_FIELD in m.fields and m.line.path == wait.line.path and m.seq > wait.seq
        for m in markers
    ):
        return None
    size = field_int(wait, "world_size") or 0
    seen = {
        r
        for m in markers
        if m.signature == wait.signature and (r := field_int(m, "rank")) is not None
    }
    missing = sorted(set(range(size)) - seen)
    if not missing:
        # every rank of the world said it waits: a log cut right after its start-up looks
        # the same, and nothing says one of them is missing
        return None
    what = wait.fields[WAIT_FIELD]
    title = (
        f"Waiting at start-up for the other processes when the log ends (`{what}`; "
        f"{len(seen)} of {size} ranks announced themselves)"
    )
    culprit = (
        Culprit(
            rank=missing[0],
            local_rank=None,
            host=None,
            confidence=0.5,
            reason=f"the only rank of the {size} that never announced itself",
        )
        if len(missing) == 1
        else None
    )
    incident = hang_at(wait, title, _EXPLANATION, _REMEDIES, culprit)
    return incident, Ending(Outcome.hung, title[0].lower() + title[1:])
