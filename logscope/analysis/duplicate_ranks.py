"""Two processes of one attempt that say they are the same global rank (Lightning's
`Initializing distributed: GLOBAL_RANK: 2, MEMBER: 3/8` from srun task 0 and from task 1): the
launch started each node as if it were the job's only one (ntasks-per-node against the GPUs,
a node rank every node took as 0, a script run without srun on several nodes), so the process
group cannot form and the ranks wait at init. A derived failure: no single line says it.
Announcements no prefix tells apart count only in the shape such a launch leaves: the world's
count of them, ranks 0 to d-1 each the same number of times."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from ..model import Attempt, Event, field_int, input_of
from .ledger import attempt_of

DUPLICATE_RANK = "launch.duplicate_rank"
"""The derived event's signature id (no pattern file has it: incident_text reads TEXT)."""

TEXT = (
    "Two processes claim global rank {rank} of {world_size}: the launch is misconfigured",
    "Every process of a job must have its own global rank. Two that announce the same one were "
    "started as if each node were the whole job (srun's --ntasks-per-node not matching the "
    "processes each node starts, every node given node rank 0, or the script run on several "
    "nodes without srun), so the process group cannot form: the ranks wait at init until they "
    "time out.",
    (
        "Under SLURM, start one task per GPU (`--ntasks-per-node` = GPUs per node) and let the "
        "framework read SLURM's variables, or one task per node that runs torchrun with "
        "`--node_rank=$SLURM_NODEID`",
        "Check that WORLD_SIZE equals nodes x processes per node, and that no rank repeats "
        "among the `GLOBAL_RANK` lines",
    ),
)
"""Title (filled from the event's fields), explanation and remedies."""


class Claims:
    """The global ranks announced so far, each by its first process; `claim` answers a second
    process claiming one. Fed line by line (live.watcher) or over a whole log (duplicate_ranks)."""

    def __init__(self) -> None:
        self._first: dict[tuple[int | None, int, int, int], Event] = {}
        self._flagged: set[tuple[int | None, int, int, int]] = set()
        self._unnamed: dict[tuple[int | None, int, int], list[tuple[int, Event]]] = {}

    def claim(self, m: Event, attempt: int | None = None) -> Event | None:
        """The derived hang event when `m` (a launch line: the callers pass no other) is the
        first second process to claim its rank in its attempt and input, else None."""
        rank, world = field_int(m, "rank"), field_int(m, "world_size")
        if rank is None or world is None:
            return None
        key = (attempt, input_of(m.seq), rank, world)
        seen = self._first.setdefault(key, m)
        if m.line.task is None and m.line.host is None:
            return self._unnamed_claim(m, rank, (attempt, input_of(m.seq), world))
        if seen is m or key in self._flagged or not _other_process(seen, m):
            return None
        self._flagged.add(key)
        return _derived(m, seen)

    def _unnamed_claim(
        self, m: Event, rank: int, group: tuple[int | None, int, int]
    ) -> Event | None:
        """Announcements no task or host tells apart: one process may say its rank twice (a
        console and a file handler), so a repeat alone proves nothing. But when the world's
        count of them has come and they are ranks 0 to d-1, each exactly k = world / d times
        (k >= 2), every node started its processes as if it were the job's only one: k nodes
        that each took node rank 0."""
        claims = self._unnamed.setdefault(group, [])
        claims.append((rank, m))
        world = group[2]
        if len(claims) != world:
            return None
        counts = Counter(r for r, _ in claims)
        nodes = world // len(counts)
        if nodes < 2 or counts != dict.fromkeys(range(len(counts)), nodes):
            return None
        first: dict[int, Event] = {}
        for r, c in claims:
            if r in first:
                return _derived(c, first[r])
            first[r] = c
        return None


def _derived(m: Event, seen: Event) -> Event:
    """The launch's failure, at the second claim `m` of the rank `seen` claimed first."""
    return replace(
        m,
        # the fault is the launch's, not the process that printed the line: no stream of its
        # own, so that no rank is named its culprit
        line=replace(m.line, host=None, rank=None, local_rank=None, task=None),
        signature=DUPLICATE_RANK,
        kind="failure",
        fields={**m.fields, "first_line": str(seen.line.lineno)},
        category="hang",
        severity="error",
        role="cause",
    )


def duplicate_ranks(markers: Sequence[Event], attempts: Sequence[Attempt]) -> list[Event]:
    """One derived hang event per global rank that a second process of the same attempt
    announced, at that second announcement. Two processes are told apart by the srun task or
    host their lines carry: lines that name neither may be one process saying it twice."""
    claims = Claims()
    out: list[Event] = []
    for m in markers:
        if m.kind == "launch":
            d = claims.claim(m, attempt_of(m, attempts) if attempts else None)
            if d is not None:
                out.append(d)
    return out


def _other_process(a: Event, b: Event) -> bool:
    """Whether two lines come from two processes, by the srun task or host they carry."""
    for x, y in ((a.line.task, b.line.task), (a.line.host, b.line.host)):
        if x is not None and y is not None and x != y:
            return True
    return False
