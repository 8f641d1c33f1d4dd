"""Who is to blame: the ranks of a job, and the rules that name a culprit from what the log shows
(a rank prefix, torchrun's failure block, the ranks that stayed silent or say they wait, a
launcher's report, a process group's rank)."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import replace

from ..match.failure_block import FAILURE_ENTRY
from ..model import Culprit, Event, Stream, World, field_int, rank_ranges


def build_world(
    streams: Sequence[Stream],
    declared_size: int | None = None,
    tasks: Collection[int] = (),
    hosts: Collection[str] = (),
) -> World:
    """The job's ranks from every stream seen, and how tee headers map to global ranks. `tasks`:
    the srun task ids seen; when no launcher's rank prefix shows (no agent under srun) and
    the tasks are exactly the declared world, srun started each rank: its task id is its rank
    (SLURM_PROCID, which Megatron, NeMo and Lightning take as the global rank)."""
    nodes = {(t, h) for t, h, lr, _r in streams if lr is not None}
    max_local = max((lr for _t, _h, lr, _r in streams if lr is not None), default=None)
    nproc = max_local + 1 if max_local is not None else None
    explicit = max((r for *_x, r in streams if r is not None), default=-1) + 1
    tee = nproc * max(1, len(nodes)) if nproc else 0
    size = declared_size or max(explicit, tee) or None
    # BLOOM's merged main_log.txt: 48 nodes all print `[default3]:` with nothing to tell the
    # nodes apart, so a bare tee header names a local rank only (FORMATS.md §1.1)
    multi_node_tee = bool(nproc and size and size > nproc and len(nodes) <= 1)
    tasks_are_ranks = bool(
        not streams and declared_size and len(tasks) > 1 and set(tasks) == set(range(declared_size))
    )
    task_ranks = _task_ranks(streams)
    world = World(
        len(nodes),
        nproc,
        size,
        frozenset(),
        multi_node_tee,
        tasks_are_ranks,
        task_ranks,
        frozenset(hosts),
        declared_size=declared_size,
    )
    ranks = {r for w in streams if (r := world.rank_of_stream(w)) is not None}
    if tasks_are_ranks:
        ranks |= set(tasks)
    return replace(world, ranks=frozenset(ranks))


def _task_ranks(streams: Sequence[Stream]) -> tuple[tuple[int, int], ...]:
    """The srun tasks whose lines name one rank and no local rank (`7: [rank7]:`), with it: a
    line of that task that names no rank is that rank's. A task seen with two ranks (several
    ranks a task) ties none."""
    seen: dict[int, set[int]] = {}
    for task, _host, local_rank, rank in streams:
        if task is not None and rank is not None and local_rank is None:
            seen.setdefault(task, set()).add(rank)
    return tuple(sorted((t, next(iter(rs))) for t, rs in seen.items() if len(rs) == 1))


# `[PG ID 0 PG GUID 0(default_pg) Rank 7]`, `[PG 0 (default_pg) Rank 12]`, `[Rank 7]` at the start
# of a ProcessGroupNCCL message: the rank within the process group that reports (FORMATS §2). The
# message may be an exception's that libstdc++'s terminate handler prints behind `  what():  `.
_PG_RANK = re.compile(
    r"^\s*(?:what\(\):\s*)*\[(?:PG (?:ID )?(?P<pg>\d+)\b[^\]]*?)?Rank (?P<rank>\d+)\]"
)


def one_failed_worker(root: Event, events: Sequence[Event], world: World) -> Culprit | None:
    """The one worker the launcher reports failed after `root` (torchrun's `failed (exitcode:
    -6) local_rank: 0`), its own SIGTERMs of the others left out; None when it names none or
    several."""
    named = {
        (field_int(e, "rank"), field_int(e, "local_rank"))
        for e in events
        if e.role == "summary"
        and e.seq > root.seq
        and e.fields.get("signal_name") != "SIGTERM"
        and (field_int(e, "rank") is not None or field_int(e, "local_rank") is not None)
    }
    if len(named) != 1:
        return None
    rank, local = named.pop()
    if rank is None and local is not None and world.nodes <= 1 and not world.multi_node_tee:
        rank = local
    which = f"rank {rank}" if rank is not None else f"local rank {local}"
    return Culprit(
        rank=rank,
        local_rank=local,
        host=None,
        confidence=0.7,
        reason="the error carries no rank, and the launcher reports one failed worker only "
        f"({which})",
    )


def attribute(culprit: Culprit, root: Event, events: Sequence[Event], world: World) -> Culprit:
    """A cause printed without any rank prefix: when the launcher reports exactly one failed
    worker, the error is that worker's (a bare `terminate called ...` then torchrun's `failed
    (exitcode: -6) local_rank: 0`)."""
    found = one_failed_worker(root, events, world)
    if found is None:
        return culprit
    return replace(
        culprit,
        rank=found.rank,
        local_rank=found.local_rank,
        confidence=found.confidence,
        reason=f"{culprit.reason}; {found.reason}",
    )


def pg_culprit(culprit: Culprit, root: Event, events: Sequence[Event], burst_lines: int) -> Culprit:
    """A ProcessGroupNCCL message names the rank within its process group; in the default group
    that is the global rank (said outright by `[PG ID 0 ... default_pg ...]`, assumed, with less
    confidence, by the old `[Rank N]` that names no group). The root's own message, else that of
    the first later line of the same stream in its burst (its watchdog reporting the same error
    a few lines on)."""
    later = (
        e
        for e in events
        if e.seq > root.seq
        and e.line.path == root.line.path
        and e.line.stream == root.line.stream
        and 0 < e.line.lineno - root.line.lineno <= burst_lines
        and e.category == root.category
    )
    for e in (root, *later):
        stated = field_int(e, "pg_rank")
        if stated is not None and e is not root:
            # the error's own last line names its rank in its process group (DDP's reducer)
            return replace(
                culprit,
                rank=stated,
                confidence=0.6,
                reason=f"{culprit.reason}; no prefix names the rank, and line {e.line.lineno} of "
                f"the same error names rank {stated} of its process group (the default)",
            )
        m = _PG_RANK.match(e.line.text)
        if m is None:
            continue
        pg = m["pg"]
        if pg is not None and pg != "0" and "default_pg" not in m.group(0):
            return culprit
        named = pg is not None
        where = "the message" if e is root else f"line {e.line.lineno} of the same stream"
        return replace(
            culprit,
            rank=int(m["rank"]),
            confidence=(0.7 if named else 0.5) - (0 if e is root else 0.1),
            reason=f"{culprit.reason}; no prefix names the rank, and {where} names rank "
            f"{m['rank']} of "
            + ("the default process group" if named else "its process group (the default)"),
        )
    return culprit


def reported_culprit(events: Sequence[Event]) -> Culprit | None:
    """The one rank a launcher names as the first to fail (mpirun's `Process name: [[j,s],R]`,
    torchrun's Root Cause entry), when the ranks' own lines are only symptoms."""
    named = {
        r
        for e in events
        if e.role == "summary"
        and e.fields.get("signal_name") != "SIGTERM"
        and (e.signature != FAILURE_ENTRY or e.fields.get("root") == "1")
        if (r := field_int(e, "rank")) is not None
    }
    if len(named) != 1:
        return None
    r = named.pop()
    return Culprit(
        rank=r,
        local_rank=None,
        host=None,
        confidence=0.7,
        reason=f"no rank's own line says what failed; the launcher reports rank {r} as the first "
        "process that failed",
    )


def locate(culprit: Culprit, events: Sequence[Event]) -> Culprit:
    """A culprit known by local rank only: torchrun's failure block may say its global rank and
    host (each node's agent prints its own block), when exactly one entry fits."""
    if culprit.rank is not None:
        if culprit.host is None:
            # the block's `host :` is the agent's node: the failed rank's node
            hosts = {
                e.fields["host"]
                for e in events
                if e.signature == FAILURE_ENTRY
                and field_int(e, "rank") == culprit.rank
                and e.fields.get("host")
            }
            if len(hosts) == 1:
                return replace(culprit, host=hosts.pop())
        return culprit
    if culprit.local_rank is None:
        return culprit
    fits = {
        (field_int(e, "rank"), e.fields.get("host"))
        for e in events
        if e.signature == FAILURE_ENTRY
        and field_int(e, "local_rank") == culprit.local_rank
        and e.fields.get("signal_name") != "SIGTERM"
        and field_int(e, "rank") is not None
    }
    if len(fits) != 1:
        return culprit
    rank, host = fits.pop()
    return replace(
        culprit,
        rank=rank,
        host=culprit.host or host,
        confidence=max(culprit.confidence, 0.8),
        reason=f"{culprit.reason.split('; its node is unknown')[0]}; torchrun's failure block "
        f"names local rank {culprit.local_rank} as rank {rank}" + (f" on {host}" if host else ""),
    )


NCCL_WARN = "nccl.warn"
"""NCCL's catch-all: any `NCCL WARN` line no narrower signature knows (patterns/nccl.toml)."""
NCCL_RETURN_FRAME = "nccl.error_return"
"""NCCL's `file.cc:line -> code` frame of an error on its way to the caller (patterns/nccl.toml)."""


def _own_failure(e: Event) -> bool:
    """NCCL's catch-all WARN, or an error code other than a remote error (6) returned up its
    call stack: the rank's own call failed."""
    if e.signature == NCCL_WARN:
        return True
    return e.signature == NCCL_RETURN_FRAME and e.fields.get("code") != "6"


def _reports(events: Sequence[Event], world: World) -> list[tuple[Event, int]]:
    """The failures the ranks report of themselves, with the reporting rank: its prefix, or
    the rank a symptom's own text names."""
    return [
        (e, r)
        for e in events
        if e.role in ("symptom", "cause") and e.signature != FAILURE_ENTRY
        if (r := world.rank_of(e.line)) is not None
        or (e.role == "symptom" and (r := field_int(e, "rank")) is not None)
    ]


def silent_culprit(events: Sequence[Event], world: World) -> Culprit | None:
    """With collective timeouts, the culprit is the rank that did not time out (FORMATS §2.7)."""
    reports = _reports(events, world)
    # NCCL's bare WARN and its return trace say where the rank's own call failed (a topology
    # file it cannot read, a device it cannot open), nothing of waiting for a peer: ranks that
    # only say so do not point at the one that said nothing
    if all(_own_failure(e) for e, _ in reports):
        reports = []
    reporters = {r for _, r in reports}
    if world.size and not reporters:
        # no prefix names a reporter: the rank of the default process group its own message
        # gives (`[Rank 1] Watchdog caught collective operation timeout`) is its global rank
        reporters = _default_pg_reporters(events)
    # a waiting rank may name the world it waits for (`world_size=8, worker_count=7`)
    declared = max((n for e in events if (n := field_int(e, "world_size")) is not None), default=0)
    if declared > (world.size or 0):
        world = replace(world, size=declared)
    # ranks the launcher only reports as SIGTERMed said nothing themselves
    behind: dict[int, int] = {}
    for e in events:
        enq = field_int(e, "last_enqueued")
        r = world.rank_of(e.line)
        if enq is not None and r is not None:
            behind[r] = min(enq, behind.get(r, enq))
    if world.size and reporters:
        silent = sorted(set(range(world.size)) - reporters)
        if len(silent) == 1:
            r = silent[0]
            return Culprit(
                rank=r,
                local_rank=r % world.nproc_per_node if world.nproc_per_node else None,
                host=None,
                confidence=0.8,
                reason=(
                    f"{len(reporters)} of {world.size} ranks report a timed-out or failed "
                    f"collective; rank {r} reported nothing, so it is the one they waited for"
                ),
            )
        # a guess among several silent ranks, where the ranks that waited are the many: with
        # more silent than reporting ranks (a world known only from the highest rank seen),
        # the few that report are as likely the ones that hung
        if 1 < len(silent) <= 8 and len(reporters) > len(silent):
            lst = ", ".join(map(str, silent))
            return Culprit(
                rank=silent[0],
                local_rank=None,
                host=None,
                confidence=0.3,
                reason=f"ranks {lst} reported no timeout; any of them may be the one that hung",
            )
    elif len(said := reporters | _default_pg_reporters(events)) >= 2:
        # the world's size unknown (no prefix, no size said): the ranks below the highest that
        # reports are of the world too, and one of them alone said nothing
        reporters = said
        silent = sorted(set(range(max(reporters))) - reporters)
        if len(silent) == 1:
            r = silent[0]
            return Culprit(
                rank=r,
                local_rank=None,
                host=None,
                confidence=0.4,
                reason=f"ranks {rank_ranges(sorted(reporters))} report a timed-out or "
                f"failed collective; rank {r}, the only rank below them that reported nothing, "
                "is the one they waited for (the world's size is not in the log)",
            )
    if len(behind) > 1:
        r = min(behind, key=lambda k: behind[k])
        if list(behind.values()).count(behind[r]) == 1:
            return Culprit(
                rank=r,
                local_rank=None,
                host=None,
                confidence=0.6,
                reason=f"rank {r} has the lowest last enqueued collective ({behind[r]})",
            )
    return None


def own_failure_culprit(root: Event, events: Sequence[Event], world: World) -> Culprit | None:
    """A root where the rank's own NCCL call failed (_own_failure), and no other rank reports
    anything: the failure is that rank's. Where several ranks report, each may have failed on
    its own (a node's setup shared by all), and none is named."""
    rank = world.rank_of(root.line)
    if rank is None or not _own_failure(root):
        return None
    if any(r != rank for _, r in _reports(events, world)):
        return None
    return Culprit(
        rank=rank,
        local_rank=None,
        host=root.line.host,
        confidence=0.6,
        reason=f"rank {rank}'s own NCCL call failed, and no other rank reports a failure",
    )


def silent_rank_culprit(culprit: Culprit, events: Sequence[Event], world: World) -> Culprit:
    """A root cause that names no rank, where the other ranks report failing or timed-out waits
    and one rank alone said nothing (silent_culprit, not its guess among several): the error is
    that rank's, the one the others waited for. Not where a clue named the error's srun task."""
    if culprit.task is not None:
        return culprit
    found = silent_culprit(events, world)
    if found is None or found.rank is None or found.confidence < 0.4:
        return culprit
    return replace(
        culprit,
        rank=found.rank,
        local_rank=found.local_rank if found.local_rank is not None else culprit.local_rank,
        confidence=min(found.confidence, 0.6),
        reason=f"{culprit.reason}; the error carries no rank, and {found.reason}",
    )


def default_pg_rank(e: Event) -> int | None:
    """The rank a ProcessGroupNCCL message gives its reporter (`pg_rank`), where the message
    names no process group or the default one (`[Rank 3]`, `[PG ID 0 ... Rank 3]`): there it is
    the global rank."""
    rank = field_int(e, "pg_rank")
    m = _PG_RANK.match(e.line.text)
    if m is not None and m["pg"] not in (None, "0") and "default_pg" not in m.group(0):
        return None
    return rank


def _default_pg_reporters(events: Sequence[Event]) -> set[int]:
    """The ranks whose timed-out or failed collective names them by their rank in the default
    process group, where no prefix does."""
    return {r for e in events if e.role == "symptom" and (r := default_pg_rank(e)) is not None}


def mismatch_culprit(events: Sequence[Event], world: World) -> Culprit | None:
    """The ranks of a process group issue the same collectives in the same order, so at one
    sequence number every rank waits in the same operation. A rank whose timed-out work at that
    number is another operation than the one two or more others wait in took another code path
    (a collective mismatch, which ProcessGroupNCCL's watchdog reports only as timeouts): it alone
    differs, so it is the culprit."""
    ops: dict[tuple[str | None, str], dict[int, str]] = {}
    for e in events:
        seq, op = e.fields.get("seq"), e.fields.get("op_type")
        if e.category != "collective_timeout" or seq is None or op is None:
            continue
        m = _PG_RANK.match(e.line.text)
        pg = m["pg"] if m is not None else None
        rank = world.rank_of(e.line)
        if rank is None:
            rank = default_pg_rank(e)
        if rank is not None:
            ops.setdefault((pg, seq), {})[rank] = op
    for (_pg, seq), by_rank in ops.items():
        counts: dict[str, list[int]] = {}
        for rank, op in by_rank.items():
            counts.setdefault(op, []).append(rank)
        if len(counts) != 2:
            continue
        (one, alone), (many, agree) = sorted(counts.items(), key=lambda kv: len(kv[1]))
        if len(alone) == 1 and len(agree) >= 2:
            return Culprit(
                rank=alone[0],
                local_rank=None,
                host=None,
                confidence=0.7,
                reason=f"at collective #{seq} rank {alone[0]} waited in {one} while ranks "
                f"{', '.join(map(str, sorted(agree)))} waited in {many}: it took another path",
            )
    return None


def fingerprint_culprit(culprit: Culprit, root: Event, world: World) -> Culprit:
    """ProcessGroupWrapper's `Rank R is running collective: ..., but Rank S is running ...`:
    rank R compared the fingerprints of ranks 0, 1, ... with its own and stopped at the first
    that differs, so ranks 0..S-1 and R agree and S took another path. Where those are most of
    the ranks the log knows of, S is the culprit; a report of rank 0 against rank 1 tells
    nothing of which of the two is odd, and leaves the culprit as it was."""
    reporter, other = field_int(root, "rank"), field_int(root, "differing_rank")
    if reporter is None or other is None or reporter == other:
        return culprit
    agree = len(set(range(other)) | {reporter})
    ranks = max(world.size or 0, reporter + 1, other + 1)
    if 2 * agree <= ranks:  # (one agreeing rank never is: the report names two ranks)
        return culprit
    return Culprit(
        rank=other,
        local_rank=None,
        host=None,
        task=None,
        confidence=0.75,
        reason=f"rank {reporter}'s collective matches every rank below {other}, and rank "
        f"{other}'s differs ({root.signature} names the first rank that differs): it took "
        "another code path",
    )
