"""Culprit clues beyond a rank prefix on the root cause's own line: what the other lines of the
log say about which rank it was. Each clue names a culprit only when it points at exactly one
rank, and says so in `culprit.reason`:

- a kernel or cgroup OOM-kill report names the process killed: its pid, matched to the rank
  torchrun's failure report gives that pid, or to its place in a launcher's kill list
  (DeepSpeed's `Killing subprocess <pid>` lines, local rank 0 first); or its Slurm task
  (`task_memcg=.../task_3`, srun's `task 3: Out Of Memory`), a rank when the log ties tasks to
  ranks;
- the root cause's own process id (OpenMPI's `[host:pid] Signal: ...` backtrace, a kernel's
  segfault line) in a launcher's report that names that pid with a rank (mpirun's `process rank
  0 with PID 19474`, torchrun's failure block);
- the root cause's error printed by one rank only (`[rank5]: torch.OutOfMemoryError` while the
  root's copy carries no prefix);
- a barrier's report names the rank absent from it (Gloo's monitored barrier: `[Rank 0]: Rank 3
  failed to pass monitoredBarrier`), or a store-based barrier counted all ranks but one and one
  rank of the world never showed itself;
- the traceback mp.spawn prints under `-- Process N terminated with the following error:` is
  child N's, N its spawn index (by convention the local rank);
- a launcher's report that names the process on one line and its end on the next (Hydra's
  `=   RANK 3 PID 1234 RUNNING AT host`, then `=   KILLED BY SIGNAL: 9`);
- the launcher's first exit that is not a SIGTERM it sent (torchrun's failure block lists its
  peers' `exitcode: -15` beside the real failure; srun reports each task's end as it happens,
  `task 5: Exited with exit code 1` before its peers' `Terminated`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from ..lines.hostlist import expand_hostlist
from ..match.events import FAILURE_ENTRY
from ..match.signatures import Library
from ..model import Culprit, Event, Line, Stream, World, field_int

OOM_KILLS = frozenset({"signals.kernel_oom_kill", "signals.kernel_oom_constraint"})
"""Kernel reports that name the process the OOM killer killed (`pid`)."""
SLURM_OOM = frozenset({"signals.slurm_oom_kill", "signals.srun_oom", *OOM_KILLS})
KILL_LIST = "deepspeed.killing_subprocess"
"""DeepSpeed's launcher (and torch.distributed.launch before torchrun) logs `Killing subprocess
<pid>` for its workers in the order it started them: local rank 0 first."""
MONITORED_BARRIER = "gloo.monitored_barrier"
STORE_BARRIER = frozenset({"torchrun.store_barrier_timeout", "torchrun.store_barrier_waiting"})
TRACEBACK_HEADS: Mapping[str, str] = MappingProxyType(
    {"spawn.process_raised": "mp.spawn", "ray.train_worker_errors": "Ray Train"}
)
"""Headers a parent prints above the traceback it quotes for one worker: mp.spawn's `-- Process N
terminated with the following error:` (N its local rank), Ray Train's `[Rank N]:` in a
WorkerGroupError (N its world rank)."""
QUOTED_TRACEBACK_LINES = 400
"""How far a quoted traceback under its header may run (deep stacks, chained exceptions)."""


def _prefixed(line: Line) -> bool:
    """A prefix of the line (a rank, a launcher's local rank, an srun task) says which process
    printed it."""
    return line.rank is not None or line.local_rank is not None or line.task is not None


def _named(culprit: Culprit, rank: int | None, local: int | None, why: str, conf: float) -> Culprit:
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
        return _named(culprit, rank, None, f"the error names its own rank ({rank})", 0.85)
    rank = field_int(root, "failed_rank")
    if rank is not None:
        why = f"the report names the process that failed (rank {rank})"
        return _named(culprit, rank, None, why, 0.85)
    return culprit


def own_file_culprit(culprit: Culprit, root: Event, world: World) -> Culprit:
    """An unprefixed root in a file that is one rank's own log (World.file_ranks: detectron2's
    `Rank of current process: N` in `log.txt.rankN`)."""
    if _prefixed(root.line):
        return culprit
    rank = next((r for path, r in world.file_ranks if path == root.line.path), None)
    if rank is None:
        return culprit
    return _named(culprit, rank, None, f"the file is rank {rank}'s own log", 0.8)


def primary_rank(root: Event, library: Library) -> Culprit | None:
    """Rank 0, for an error whose emitter prints from the primary rank only (a signature's
    `primary_rank_only`: detectron2's console logger), where no prefix names the rank."""
    sig = library.by_id(root.signature)
    if sig is None or not sig.primary_rank_only or _prefixed(root.line):
        return None
    why = f"{root.signature} is printed by rank 0 only"
    return Culprit(rank=0, local_rank=None, host=root.line.host, confidence=0.7, reason=why)


def primary_rank_culprit(culprit: Culprit, root: Event, library: Library) -> Culprit:
    """A culprit with no rank yet, named by primary_rank."""
    found = primary_rank(root, library)
    return culprit if found is None else _named(culprit, 0, None, found.reason, found.confidence)


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
    return _named(found, rank, None, why, 0.85)


def _tasks(text: str) -> list[int]:
    """srun's task list (`3`, `0-3,5`, `[0-3]`) as task ids: SLURM's range syntax, expanded as
    a node list's brackets are (bounded: a hostile `0-99999999999` is not expanded)."""
    return [int(t) for t in expand_hostlist("[" + text.strip().strip("[]") + "]")]


def oom_culprit(culprit: Culprit, root: Event, events: Sequence[Event], world: World) -> Culprit:
    """An OOM kill with no rank on its line: the process it names, as the launcher's report
    of that pid or the Slurm task's rank names it."""
    if root.category != "oom_host":
        return culprit
    pids = {p for e in events if e.signature in OOM_KILLS if (p := field_int(e, "pid")) is not None}
    named = _launcher_names(pids, events, world, None)
    if named is not None:
        pid = ", ".join(map(str, sorted(pids)))
        why = f"the OOM killer killed pid {pid}, which {named.how}"
        return _named(culprit, named.rank, named.local, why, named.confidence)
    tasks: set[int] = set()
    for e in events:
        if e.signature in SLURM_OOM:
            if (t := field_int(e, "task")) is not None:
                tasks.add(t)
            elif e.fields.get("tasks"):
                tasks.update(_tasks(e.fields["tasks"]))
    if len(tasks) != 1:
        return culprit
    task = tasks.pop()
    rank = world.rank_of_stream(Stream(task, None, None, None))
    why = f"the OOM kill report names srun task {task} only" + (
        f", which is rank {rank}" if rank is not None else ""
    )
    out = _named(culprit, rank, None, why, 0.75 if rank is not None else 0.5)
    return replace(out, task=task)


def kill_list_ranks(events: Sequence[Event]) -> dict[int, int]:
    """The local rank of each pid a launcher's kill list names (KILL_LIST): the list's lines of
    one file and host, a few lines apart at most, in the order the launcher started them."""
    ranks: dict[int, int] = {}
    runs: dict[tuple[str, str | None], tuple[int, int]] = {}  # (last line, length) of each list
    for e in events:
        pid = field_int(e, "pid")
        if e.signature != KILL_LIST or pid is None:
            continue
        key = (e.line.path, e.line.host)
        last, length = runs.get(key, (-10, 0))
        length = length if 0 < e.line.lineno - last <= 3 else 0
        runs[key] = (e.line.lineno, length + 1)
        ranks.setdefault(pid, length)
    return ranks


def pid_culprit(culprit: Culprit, root: Event, events: Sequence[Event], world: World) -> Culprit:
    """A root that names its process (a `pid` field) while a launcher names that pid, on the
    root's host if both say one, with a rank: that rank."""
    pid = field_int(root, "pid")
    if pid is None:
        return culprit
    host = root.fields.get("host") or root.line.host
    named = _launcher_names({pid}, [e for e in events if e is not root], world, host)
    if named is None:
        return culprit
    why = f"the root line's process is pid {pid}, which {named.how}"
    return _named(culprit, named.rank, named.local, why, named.confidence)


@dataclass(frozen=True, slots=True)
class LauncherName:
    """The rank a launcher gives a process."""

    rank: int | None
    local: int | None
    how: str
    """How the launcher said so, to follow `which` in a culprit's reason."""
    confidence: float


def _launcher_names(
    pids: set[int], events: Sequence[Event], world: World, host: str | None
) -> LauncherName | None:
    """The one (rank, local rank) a launcher gives `pids`, how it said so and how sure that is:
    a report naming the pid with a rank (torchrun's failure block `exitcode : -9 (pid: 4712)`,
    its agent's `failed (...) local_rank: 2 (pid: 4712)`, mpirun's `process rank 0 with PID
    4712`), else the pid's place in its kill list (KILL_LIST)."""
    if not pids:
        return None
    fits = {
        (field_int(e, "rank"), field_int(e, "local_rank"))
        for e in events
        if e.role == "summary"
        and field_int(e, "pid") in pids
        and not (host and (other := e.fields.get("host") or e.line.host) and other != host)
        and (field_int(e, "rank") is not None or field_int(e, "local_rank") is not None)
    }
    if len(fits) == 1:
        rank, local = fits.pop()
        how, conf = "the launcher reports as {}", 0.8
    else:
        started = kill_list_ranks(events)
        kills = {started[p] for p in pids if p in started}
        if len(kills) != 1:
            return None
        rank, local = None, kills.pop()
        how = "the launcher's kill list (workers in the order it started them) gives as {}"
        conf = 0.7
    if rank is None and local is not None:
        rank = world.rank_of_stream(Stream(None, host, local, None))
        if rank is None and world.nodes <= 1 and not world.multi_node_tee:
            rank = local
    which = f"rank {rank}" if rank is not None else f"local rank {local}"
    return LauncherName(rank, local, how.format(which), conf)


def same_error_culprit(
    culprit: Culprit, root: Event, events: Sequence[Event], world: World
) -> Culprit:
    """The root cause's error printed with no rank, and the same error (its signature, or its
    category of out-of-memory) printed by one rank only: that rank's."""
    if root.category is None:
        return culprit
    oom = root.category in ("oom_gpu", "oom_host")
    ranks = {
        r
        for e in events
        if e.role == "cause"
        and (e.signature == root.signature or (oom and e.category == root.category))
        if (r := world.rank_of(e.line)) is not None
    }
    if len(ranks) != 1:
        return culprit
    r = ranks.pop()
    what = "out-of-memory error" if oom else "error"
    why = f"the same {what} is printed with a rank by rank {r} only"
    return _named(culprit, r, None, why, 0.7)


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


SRUN_EXITS = frozenset(
    {"slurm.srun_exit_code", "slurm.srun_task_signaled", "slurm.srun_task_segfault"}
)
"""srun's `srun: error: <host>: task[s] <list>: <how it ended>` lines (patterns/slurm.toml)."""


def first_exit(events: Sequence[Event], world: World) -> Culprit | None:
    """The launcher's first reported exit that is not a SIGTERM (its own shutdown of the
    others): the earliest by the times torchrun's failure block states, when it states them;
    else srun's first report of a task's end (srun prints each as the task ends) that is not a
    `Terminated`, when it names one task that the log ties to a rank."""
    return _torchrun_first(events) or _srun_first(events, world)


def _srun_first(events: Sequence[Event], world: World) -> Culprit | None:
    ends = [e for e in events if e.signature in SRUN_EXITS and e.fields.get("tasks")]
    ends.sort(key=lambda e: (e.line.path, e.line.lineno))
    first = next((e for e in ends if e.fields.get("signal_name") != "Terminated"), None)
    if first is None:
        return None
    tasks = _tasks(first.fields["tasks"])
    if len(tasks) != 1:
        return None
    rank = world.rank_of_stream(Stream(tasks[0], None, None, None))
    if rank is None:
        return None
    how = first.fields.get("signal_name") or f"exit code {first.fields.get('exit_code')}"
    return Culprit(
        rank=rank,
        local_rank=None,
        host=first.fields.get("host"),
        task=tasks[0],
        confidence=0.6,
        reason=f"the launcher's first reported end of a task that is not its own SIGTERM is srun "
        f"task {tasks[0]}'s ({how}), rank {rank}",
    )


def _torchrun_first(events: Sequence[Event]) -> Culprit | None:
    timed = [
        (e.time, r, e)
        for e in events
        if e.signature == FAILURE_ENTRY
        and e.role == "summary"  # a SIGTERMed entry is a symptom (match.events)
        and e.time_exact
        and e.time is not None
        and (r := field_int(e, "rank")) is not None
    ]
    if not timed:
        return None
    first = min(t for t, _, _ in timed)
    ranks = {r for t, r, _ in timed if t == first}
    if len(ranks) != 1:
        return None
    r = ranks.pop()
    terms = sum(
        1
        for e in events
        if e.signature == FAILURE_ENTRY and e.fields.get("signal_name") == "SIGTERM"
    )
    hosts = {e.fields["host"] for _, rank, e in timed if rank == r and e.fields.get("host")}
    peers = f" ({terms} peers it sent SIGTERM)" if terms else ""
    return Culprit(
        rank=r,
        local_rank=None,
        host=hosts.pop() if len(hosts) == 1 else None,
        confidence=0.65,
        reason=f"the launcher's first reported exit that is not its own SIGTERM{peers} is "
        f"rank {r}'s",
    )


def launcher_culprit(culprit: Culprit, events: Sequence[Event], world: World) -> Culprit:
    """A culprit with no rank yet named by the launcher's first exit that is not a SIGTERM."""
    found = first_exit(events, world)
    if found is None or found.rank is None:
        return culprit
    why = found.reason.replace("the launcher's", "the error carries no rank, and the launcher's")
    named = _named(culprit, found.rank, None, why, 0.6)
    return replace(named, host=culprit.host or found.host, task=culprit.task or found.task)


def quoted_culprit(culprit: Culprit, root: Event, events: Sequence[Event], world: World) -> Culprit:
    """An error with no rank on its line inside the traceback a parent quotes for one worker (the
    nearest header above it in the same file: `TRACEBACK_HEADS`)."""
    heads = [
        e
        for e in events
        if e.signature in TRACEBACK_HEADS
        and e.line.path == root.line.path
        and 0 < root.line.lineno - e.line.lineno <= QUOTED_TRACEBACK_LINES
    ]
    if not heads:
        return culprit
    head = max(heads, key=lambda e: e.line.lineno)
    rank, local = field_int(head, "rank"), field_int(head, "local_rank")
    if rank is None and local is None:
        return culprit
    if rank is None:
        rank = world.rank_of_stream(Stream(head.line.task, head.line.host, local, None))
    who = f"process {local}" if local is not None else f"rank {rank}"
    quoter = TRACEBACK_HEADS[head.signature]
    why = f"the error is in the traceback {quoter} quotes for {who} (line {head.line.lineno})"
    named = _named(culprit, rank, local, why, 0.8)
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
        return _named(culprit, task, None, why, min(0.6, culprit.confidence))
    if not world.srun_started_ranks:
        return culprit
    why = f"its srun task is {task}, and srun started the ranks itself: task id = rank"
    return _named(culprit, task, None, why, 0.6)


def sole_worker(events: Sequence[Event], world: World) -> Culprit | None:
    """The launcher's kill list names one worker in all (`Killing subprocess <pid>` once, one
    host, the log showing no other host and no larger world): the job ran one process, local
    rank 0, rank 0."""
    lists = {(e.line.path, e.line.host) for e in events if e.signature == KILL_LIST}
    pids = {field_int(e, "pid") for e in events if e.signature == KILL_LIST}
    hosts = {h for e in events if (h := e.line.host or e.fields.get("host"))} | world.hosts
    if len(lists) != 1 or len(pids) != 1 or None in pids or len(hosts) > 1 or (world.size or 1) > 1:
        return None
    return Culprit(
        rank=0,
        local_rank=0,
        host=hosts.pop() if hosts else None,
        confidence=0.6,
        reason=f"the launcher's kill list names one worker (pid {pids.pop()}): the job ran one "
        "process, rank 0",
    )


def sole_worker_culprit(culprit: Culprit, events: Sequence[Event], world: World) -> Culprit:
    """A culprit with no rank yet, in a job whose launcher had one worker (sole_worker)."""
    found = sole_worker(events, world)
    if found is None:
        return culprit
    return _named(culprit, 0, 0, found.reason, found.confidence)


_NCCL_PROCESS = re.compile(r"(?:^|\s|\])(?P<host>[\w.-]+):(?P<pid>\d+):\d+ \[\d+\] ")
"""NCCL's `host:pid:tid [cudaDev] ` line head: which process printed the line."""
_PROXY_SERVICE = re.compile(r"\[Proxy Service (?P<rank>\d+)\]")
"""NCCL proxy.cc: `[Proxy Service %d] Failed to execute operation ...` with the process's own
rank (comm->rank, tpRank from 2.19: its rank in the top-level communicator)."""


def nccl_process(e: Event) -> tuple[str, str] | None:
    """The (host, pid) of the process that printed an NCCL line (`host:pid:tid [dev] `)."""
    head = _NCCL_PROCESS.search(e.line.raw)
    return (head["host"], head["pid"]) if head is not None else None


def nccl_process_rank(root: Event, events: Sequence[Event]) -> Culprit | None:
    """A root printed by NCCL (`host:pid:tid [dev]`): the rank another NCCL line of the same
    process gives itself (its proxy thread's `[Proxy Service N]`)."""
    process = nccl_process(root)
    if process is None:
        return None
    ranks = set()
    for e in events:
        said = _PROXY_SERVICE.search(e.line.text)
        if said and nccl_process(e) == process:
            ranks.add(int(said["rank"]))
    if len(ranks) != 1:
        return None
    rank = ranks.pop()
    return Culprit(
        rank=rank,
        local_rank=None,
        host=process[0],
        confidence=0.75,
        reason=f"NCCL's proxy thread of the same process ({process[0]}:{process[1]}) names "
        f"its rank: [Proxy Service {rank}]",
    )


def nccl_process_culprit(culprit: Culprit, root: Event, events: Sequence[Event]) -> Culprit:
    """A culprit with no rank yet, named by its own process's NCCL lines (nccl_process_rank)."""
    found = nccl_process_rank(root, events)
    if found is None:
        return culprit
    return _named(culprit, found.rank, None, found.reason, found.confidence)
