"""Culprit clues beyond a rank prefix on the root cause's own line: what the other lines of the
log say about which rank it was. Each clue names a culprit only when it points at exactly one
rank, and says so in `culprit.reason`. What launchers report of their processes (pids, kill
lists, Slurm tasks, the first exit) is read in `launcher_clues`; here:

- the root cause's error printed by one rank only (`[rank5]: torch.OutOfMemoryError` while the
  root's copy carries no prefix); an error logged with no prefix right before one rank's
  traceback opens (a logger line, then torch's excepthook's `[rankN]: Traceback`); an error
  printed with no prefix whose message the next lines repeat under one rank's prefix (a
  program's excepthook logging `Uncaught <Error>: <message>`);
- a barrier's report names the rank absent from it (Gloo's monitored barrier: `[Rank 0]: Rank 3
  failed to pass monitoredBarrier`), or a store-based barrier counted all ranks but one and one
  rank of the world never showed itself;
- the traceback mp.spawn prints under `-- Process N terminated with the following error:` is
  child N's, N its spawn index (by convention the local rank); the output Composer's launcher
  quotes between `Begin global rank N STDERR` and `End global rank N STDERR` is rank N's;
- a launcher's report that names the process on one line and its end on the next (Hydra's
  `=   RANK 3 PID 1234 RUNNING AT host`, then `=   KILLED BY SIGNAL: 9`);
- an srun `--label` task where srun started the ranks itself.
What NCCL's own lines say of their process is read in `nccl_clues`; the device an OOM names in
`device_clues`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType

from ..lines.decode import nccl_head
from ..match.events import TRACEBACK_START
from ..match.signatures import Library
from ..model import Culprit, Event, Line, Stream, World, field_int

MONITORED_BARRIER = "gloo.monitored_barrier"
STORE_BARRIER = frozenset({"torchrun.store_barrier_timeout", "torchrun.store_barrier_waiting"})
TRACEBACK_HEADS: Mapping[str, str] = MappingProxyType(
    {
        "spawn.process_raised": "mp.spawn",
        "ray.train_worker_errors": "Ray Train",
        "composer.rank_output_begin": "Composer's launcher",
    }
)
"""Headers a parent prints above the traceback it quotes for one worker: mp.spawn's `-- Process N
terminated with the following error:` (N its local rank), Ray Train's `[Rank N]:` in a
WorkerGroupError (N its world rank), Composer's `Begin global rank N STDERR` (N its global rank)."""
QUOTE_ENDS: Mapping[str, str] = MappingProxyType(
    {"composer.rank_output_end": "Composer's launcher"}
)
"""Lines that close a worker's quoted output: Composer's `End global rank N STDERR`. The lines
above one, back to the marker before it, are worker N's, where its Begin line is not in the log
(an excerpt that starts inside the quote)."""
QUOTED_TRACEBACK_LINES = 400
"""How far a quoted traceback under its header may run (deep stacks, chained exceptions)."""


def prefixed(line: Line) -> bool:
    """A prefix of the line (a rank, a launcher's local rank, an srun task) says which process
    printed it."""
    return line.rank is not None or line.local_rank is not None or line.task is not None


def with_rank(
    culprit: Culprit, rank: int | None, local: int | None, why: str, conf: float
) -> Culprit:
    """`culprit` naming `rank` (and `local`) by a clue: `why` joins its reason."""
    return replace(
        culprit,
        rank=rank,
        local_rank=local if local is not None else culprit.local_rank,
        confidence=max(conf, culprit.confidence if culprit.rank is not None else 0.0),
        reason=f"{culprit.reason}; {why}" if culprit.reason else why,
    )


def own_rank_culprit(culprit: Culprit, root: Event) -> Culprit:
    """An error whose own words name the rank that prints it (a signature's `own_rank` field:
    Megatron's `Unexpected result nan on rank 3`), or the rank that failed (`failed_rank`: a
    coordinator's report that a process stopped heartbeating), where no prefix names it."""
    rank = field_int(root, "own_rank")
    if rank is not None:
        return with_rank(culprit, rank, None, f"the error names its own rank ({rank})", 0.85)
    rank = field_int(root, "failed_rank")
    if rank is not None:
        why = f"the report names the process that failed (rank {rank})"
        return with_rank(culprit, rank, None, why, 0.85)
    return culprit


REPORT_LINES = 5
"""How far apart two lines of one multi-line error report may be (an exception's message, the
trailer a runtime appends to it, the runtime's own message after that)."""


def report_rank_culprit(culprit: Culprit, root: Event, events: Sequence[Event]) -> Culprit:
    """An unprefixed root, and a line of the same report right beside it, also unprefixed, that
    names the rank of its process (`own_rank`: torch_npu's error trailer `(PID:p, Device:d,
    RankID:r)` between the exception and the CANN runtime's message): that rank's. NCCL's lines
    name their process by `host:pid` (`nccl_clues` reads them)."""
    if (
        prefixed(root.line)
        or field_int(root, "own_rank") is not None
        or nccl_head(root.line.raw) is not None
    ):
        return culprit
    for e in events:
        rank = field_int(e, "own_rank")
        if (
            rank is not None
            and e is not root
            and e.line.path == root.line.path
            and abs(e.line.lineno - root.line.lineno) <= REPORT_LINES
            and not prefixed(e.line)
            and nccl_head(e.line.raw) is None
            and e.line.stream.agrees(root.line.stream)
        ):
            why = (
                f"line {e.line.lineno}, of the same error report, names its process's rank ({rank})"
            )
            return with_rank(culprit, rank, None, why, 0.8)
    return culprit


def own_file_culprit(culprit: Culprit, root: Event, world: World) -> Culprit:
    """An unprefixed root in a file that is one rank's own output from a line on (World.file_ranks:
    detectron2's `Rank of current process: N` in `log.txt.rankN`, Paddle's TCPStore master in rank
    0's workerlog), at or after that line: an earlier line says nothing of whose it is."""
    if prefixed(root.line):
        return culprit
    found = next(
        (
            (r, n)
            for path, r, n in world.file_ranks
            if path == root.line.path and n <= root.line.lineno
        ),
        None,
    )
    if found is None:
        return culprit
    rank, n = found
    why = f"the file is rank {rank}'s own log: line {n} is printed by rank {rank}'s process only"
    return with_rank(culprit, rank, None, why, 0.8)


def primary_rank(root: Event, library: Library) -> Culprit | None:
    """Rank 0, for an error whose emitter prints from the primary rank only (a signature's
    `primary_rank_only`: detectron2's console logger), where no prefix names the rank."""
    sig = library.by_id(root.signature)
    if sig is None or not sig.primary_rank_only or prefixed(root.line):
        return None
    why = f"{root.signature} is printed by rank 0 only"
    return Culprit(rank=0, local_rank=None, host=root.line.host, confidence=0.7, reason=why)


def primary_rank_culprit(culprit: Culprit, root: Event, library: Library) -> Culprit:
    """A culprit with no rank yet, named by primary_rank."""
    found = primary_rank(root, library)
    return culprit if found is None else with_rank(culprit, 0, None, found.reason, found.confidence)


def shared_failure_culprit(culprit: Culprit, root: Event, library: Library) -> Culprit:
    """No one, for a failure every rank meets alike (a signature's `every_rank_alike`: a state
    the ranks share, such as the fp16 scaler's under synchronized gradients): whichever rank logs
    it first is an accident of timing, and so is any clue to the first process that exited."""
    sig = library.by_id(root.signature)
    if sig is None or not sig.every_rank_alike:
        return culprit
    why = f"every rank meets {root.signature} alike: the first to log it is not to blame"
    return Culprit(rank=None, local_rank=None, host=None, confidence=0.0, reason=why)


REPORT_LINES = 3
"""How far above a launcher's line of how a process ended the same report names it."""


def report_culprit(
    culprit: Culprit, root: Event, events: Sequence[Event], library: Library
) -> Culprit:
    """The process a launcher's report names on a line of its own just above the line that says
    how it ended (Hydra's `RUNNING AT` line above its `KILLED BY SIGNAL`): a line of the same
    emitter (the same pattern file) within REPORT_LINES lines that names a rank or a host."""
    sig = library.by_id(root.signature)
    if sig is None or root.role != "summary":
        return culprit
    above = [
        e
        for e in events
        if e.line.path == root.line.path
        and 0 < root.line.lineno - e.line.lineno <= REPORT_LINES
        and (other := library.by_id(e.signature)) is not None
        and other.source == sig.source
        and (e.fields.get("rank") or e.fields.get("host"))
    ]
    if not above:
        return culprit
    named = max(above, key=lambda e: e.line.lineno)
    rank = field_int(named, "rank")
    host = named.fields.get("host") or culprit.host
    why = f"the launcher's report names the process on the line above (line {named.line.lineno})"
    found = replace(culprit, host=host)
    if rank is None:
        reason = f"{culprit.reason}; {why}: host {host}" if culprit.reason else why
        return replace(found, reason=reason)
    return with_rank(found, rank, None, why, 0.85)


CUDA_WARNING = "cuda.check_warning"
"""c10's `CUDA warning: <error>`: a later CUDA call of the process whose context the error broke."""
KERNEL_ASSERTION = "cuda.kernel_assertion"
DEVICE_SIDE_ASSERT = "cuda.device_side_assert"
"""A kernel's failed assertion (`block: [..], thread: [..] Assertion ... failed`, the device's
printf, flushed with no rank of the host's) reaches the host of the same process as its next CUDA
call's `CUDA error: device-side assert triggered`."""


def _same_error(e: Event, root: Event) -> bool:
    """`e` reports the root cause's error: its signature as a cause, an out-of-memory error of
    its category, c10's CUDA warning naming the root's CUDA error, or the host's report of the
    device-side assert a kernel's assertion raised."""
    if e.signature == CUDA_WARNING:
        message = e.fields.get("message") or ""
        return root.category == "cuda_error" and bool(message) and message in root.line.text
    if root.signature == KERNEL_ASSERTION and e.signature == DEVICE_SIDE_ASSERT:
        return True
    oom = root.category in ("oom_gpu", "oom_host")
    return e.role == "cause" and (
        e.signature == root.signature
        or (oom and e.category == root.category)
        or _same_exception(e, root)
    )


def _same_exception(e: Event, root: Event) -> bool:
    """`e` reports the exception the root raised, by its type's name and its message (an
    excepthook's log of it: OLMo's `Uncaught <type>: <message>`)."""
    message = root.fields.get("message")
    kind = (root.fields.get("exception") or "").rsplit(".", 1)[-1]
    return (
        bool(message and kind)
        and e.fields.get("message") == message
        and (e.fields.get("exception") or "").rsplit(".", 1)[-1] == kind
    )


def same_error_culprit(
    culprit: Culprit, root: Event, events: Sequence[Event], world: World
) -> Culprit:
    """The root cause's error printed with no rank, and the same error (its signature, or its
    category of out-of-memory, or a CUDA warning of the process whose context it broke)
    printed by one rank only: that rank's."""
    if root.category is None:
        return culprit
    same = [
        (r, e) for e in events if _same_error(e, root) if (r := world.rank_of(e.line)) is not None
    ]
    ranks = {r for r, _ in same}
    if len(ranks) != 1:
        return culprit
    r = ranks.pop()
    if all(e.signature == CUDA_WARNING for _, e in same):
        why = f"rank {r} alone reports a later CUDA call failing with the same error"
    elif all(e.signature == DEVICE_SIDE_ASSERT for _, e in same):
        why = f"rank {r} alone reports the device-side assert the kernel's assertion raised"
    else:
        what = "out-of-memory error" if root.category in ("oom_gpu", "oom_host") else "error"
        why = f"the same {what} is printed with a rank by rank {r} only"
    return with_rank(culprit, r, None, why, 0.7)


RAISED_WITHIN = 3
"""How close after a logged error the traceback it raised opens (a blank line, a detail line of
the message between them)."""


def raised_after_culprit(culprit: Culprit, root: Event, events: Sequence[Event]) -> Culprit:
    """The root cause logged with no rank, and a traceback opening right after it under one
    rank's prefix: a program that logs an error and then raises it (a loader's last try), whose
    logger writes no prefix where torch's excepthook does, printed both."""
    if root.line.rank is not None:
        return culprit
    first = min(
        (
            e
            for e in events
            if e.signature == TRACEBACK_START
            and e.line.path == root.line.path
            and 0 < e.line.lineno - root.line.lineno <= RAISED_WITHIN
        ),
        key=lambda e: e.line.lineno,
        default=None,
    )
    if first is None or first.line.rank is None:
        return culprit
    why = (
        f"the traceback that opens right after it (line {first.line.lineno}) is rank"
        f" {first.line.rank}'s: the error logged, then raised"
    )
    return with_rank(culprit, first.line.rank, first.line.local_rank, why, 0.6)


ECHO_MIN = 20
"""Characters of a root cause's message an echo must repeat: enough that only the same report
repeats them."""


def echoed_culprit(culprit: Culprit, root: Event, events: Sequence[Event], world: World) -> Culprit:
    """The root cause printed with no rank, and its message repeated right after it by a line
    that one rank's prefix names: the process's own logger reporting the exception it is dying
    of (OLMo's excepthook logs `Uncaught OutOfMemoryError: <message>` under its `host:rank`
    prefix as Python's handler prints the traceback bare). Where every rank dies of the same
    error, the echo next to the line tells whose it is."""
    if prefixed(root.line):
        return culprit
    _, colon, message = root.line.text.partition(": ")
    message = message.strip()
    if not colon or len(message) < ECHO_MIN:
        return culprit
    found = next(
        (
            (e, rank)
            for e in events
            if e.line.path == root.line.path
            and 0 < e.line.lineno - root.line.lineno <= RAISED_WITHIN
            and message[:120] in e.line.text
            and (rank := world.rank_of(e.line)) is not None
        ),
        None,
    )
    if found is None:
        return culprit
    echo, rank = found
    why = (
        f"line {echo.line.lineno}, right after it, repeats its message under rank {rank}'s"
        " prefix: that process's logger reporting the error it died of"
    )
    return with_rank(culprit, rank, echo.line.local_rank, why, 0.6)


def barrier_culprit(events: Sequence[Event]) -> Culprit | None:
    """The one rank the reports of absent ranks name (a signature's `missing` field: Gloo's
    monitored barrier, Horovod's stall inspector; or its `ready` field, the ranks that arrived, of
    which a gap below the highest is the one absent)."""
    missing: set[int] = set()
    said: set[str] = set()
    for e in events:
        if e.fields.get("missing"):
            missing.update(int(x) for x in e.fields["missing"].split(",") if x.strip().isdigit())
            said.add(e.signature)
        elif e.fields.get("ready"):
            # the ranks that did submit (Horovod 0.1x): those below the highest that did not
            ready = {int(x) for x in e.fields["ready"].split(",") if x.strip().isdigit()}
            missing.update(set(range(max(ready))) - ready)
            said.add(e.signature)
    if len(missing) != 1:
        return None
    r = missing.pop()
    if said == {MONITORED_BARRIER}:
        reason = (
            f"rank 0's monitored barrier reports rank {r} as the only rank that failed to pass it"
        )
    else:
        names = ", ".join(sorted(said))
        reason = f"the ranks' wait reports ({names}) name rank {r} as the only one missing"
    return Culprit(rank=r, local_rank=None, host=None, confidence=0.85, reason=reason)


def store_barrier_culprit(events: Sequence[Event], world: World) -> Culprit | None:
    """A store-based barrier joined by all ranks but one (`world_size=N, num_workers_joined=N-1`)
    and one rank of N that no line shows at all (neither a report nor any other line)."""
    counts = {
        (n, j)
        for e in events
        if e.signature in STORE_BARRIER
        if (n := field_int(e, "world_size")) is not None
        and (j := field_int(e, "joined")) is not None
    }
    if not counts or any(j != n - 1 for n, j in counts) or len({n for n, _ in counts}) != 1:
        return None
    n = next(iter(counts))[0]
    seen = set(world.ranks)
    seen |= {
        r for e in events if e.signature in STORE_BARRIER if (r := field_int(e, "rank")) is not None
    }
    absent = sorted(set(range(n)) - seen)
    if len(absent) != 1:
        return None
    r = absent[0]
    return Culprit(
        rank=r,
        local_rank=None,
        host=None,
        confidence=0.75,
        reason=f"the store-based barrier counted {n - 1} of {n} ranks, and rank {r} is the only "
        "rank that never shows in the log: the one that did not reach it",
    )


def quoted_culprit(culprit: Culprit, root: Event, events: Sequence[Event], world: World) -> Culprit:
    """An error with no rank on its line inside the output a parent quotes for one worker: the
    nearest marker above it in the same file is a header (`TRACEBACK_HEADS`), or, when the
    nearest above is none, the nearest below closes the quote it is in (`QUOTE_ENDS`)."""
    near = [
        e
        for e in events
        if (e.signature in TRACEBACK_HEADS or e.signature in QUOTE_ENDS)
        and e.line.path == root.line.path
        and 0 < abs(root.line.lineno - e.line.lineno) <= QUOTED_TRACEBACK_LINES
    ]
    above = [e for e in near if e.line.lineno < root.line.lineno]
    head = max(above, key=lambda e: e.line.lineno) if above else None
    if head is not None and head.signature in QUOTE_ENDS:
        return culprit  # the quote above was closed before the root
    if head is None:
        below = [e for e in near if e.line.lineno > root.line.lineno]
        head = min(below, key=lambda e: e.line.lineno) if below else None
        if head is None or head.signature not in QUOTE_ENDS:
            return culprit
    rank, local = field_int(head, "rank"), field_int(head, "local_rank")
    if rank is None and local is None:
        return culprit
    if rank is None:
        rank = world.rank_of_stream(Stream(head.line.task, head.line.host, local, None))
    who = f"process {local}" if local is not None else f"rank {rank}"
    quoter = TRACEBACK_HEADS.get(head.signature) or QUOTE_ENDS[head.signature]
    why = f"the error is in the output {quoter} quotes for {who} (line {head.line.lineno})"
    named = with_rank(culprit, rank, local, why, 0.8)
    return replace(named, host=culprit.host or head.line.host)


def task_culprit(culprit: Culprit, root: Event, world: World) -> Culprit:
    """An error on an srun `--label` line that names no rank, or a culprit another clue named
    by its srun task only, where no line shows a rank or a launcher's local rank (srun started
    the ranks itself): the task id, which SLURM gives each task as SLURM_PROCID, its rank."""
    task = root.line.task
    if task is None:
        # the srun task another clue named (a cgroup OOM kill's `task N: Out Of Memory`)
        task = culprit.task
        if task is None or not world.srun_started_ranks:
            return culprit
        why = "srun started the ranks itself: task id = rank"
        return with_rank(culprit, task, None, why, min(0.6, culprit.confidence))
    if not world.srun_started_ranks:
        return culprit
    why = f"its srun task is {task}, and srun started the ranks itself: task id = rank"
    return with_rank(culprit, task, None, why, 0.6)
