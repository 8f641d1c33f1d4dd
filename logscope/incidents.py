"""Events to incidents: root cause versus cascade, the culprit rank, and the job's outcome."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from .events import EXIT_SIGNALS, FAILURE_ENTRY, UNRECOGNIZED
from .model import (
    Culprit,
    Event,
    Incident,
    Job,
    Line,
    Outcome,
    Progress,
    duration,
    field_int,
)
from .patterns import Library

_ROLE_RANK = {"cause": 3, "summary": 2, "symptom": 1, "end": 0}
_SEVERITY_RANK = {"fatal": 3, "error": 2, "warning": 1, "info": 0}
_SERIOUS = ("fatal", "error")
_END_OUTCOME = {
    "timelimit": Outcome.timelimit,
    "cancelled": Outcome.cancelled,
    "preemption": Outcome.preempted,
    "node_failure": Outcome.node_failure,
}
# Progress lines between two failures that make them separate incidents: a rank can print
# an iteration line or two while the cascade of a failure is already under way.
_SPLIT_AFTER_PROGRESS = 3
# A burst: the lines of one failure of one rank (terminate + what() + frames, a traceback).
_BURST_LINES = 40
_LEAD_LINES = 5
"""A warning this many lines or fewer before an error of the same stream may be its cause (NCCL
prints `NCCL WARN <what failed>`, then the error code unwinding its stack)."""
HANG_FLOOR_S = 30.0
"""Silence before a time limit or cancel shorter than this is not called a hang."""
HANG_CADENCE_FACTOR = 5.0


Who = tuple[int | None, str | None, int | None, int | None]


@dataclass(frozen=True, slots=True)
class World:
    """The ranks of a job, and how to name the rank of any line."""

    nodes: int
    nproc_per_node: int | None
    size: int | None
    ranks: frozenset[int]
    multi_node_tee: bool
    """Several nodes print the same `[defaultN]:` headers with nothing to tell them apart."""

    def rank_of(self, line: Line) -> int | None:
        return self.rank_of_who((line.task, line.host, line.local_rank, line.rank))

    def rank_of_who(self, w: Who) -> int | None:
        task, _host, local_rank, rank = w
        if rank is not None:
            return rank
        if local_rank is None:
            return None
        if self.nodes <= 1 and not self.multi_node_tee:
            return local_rank
        if task is not None and self.nproc_per_node:
            # srun --ntasks-per-node=1 runs one torchrun agent per node: task id = node index
            return task * self.nproc_per_node + local_rank
        return None


def build_world(streams: Sequence[Who], declared_size: int | None = None) -> World:
    """The job's ranks from every stream seen, and how tee headers map to global ranks."""
    nodes = {(t, h) for t, h, lr, _r in streams if lr is not None}
    max_local = max((lr for _t, _h, lr, _r in streams if lr is not None), default=None)
    nproc = max_local + 1 if max_local is not None else None
    explicit = max((r for *_x, r in streams if r is not None), default=-1) + 1
    tee = nproc * max(1, len(nodes)) if nproc else 0
    size = declared_size or max(explicit, tee) or None
    # BLOOM's merged main_log.txt: 48 nodes all print `[default3]:` with nothing to tell the
    # nodes apart, so a bare tee header names a local rank only (FORMATS.md §1.1)
    multi_node_tee = bool(nproc and size and size > nproc and len(nodes) <= 1)
    world = World(len(nodes), nproc, size, frozenset(), multi_node_tee)
    ranks = {r for w in streams if (r := world.rank_of_who(w)) is not None}
    return World(world.nodes, nproc, size, frozenset(ranks), multi_node_tee)


def _order(e: Event) -> int:
    return e.seq


def _just_before(w: Event, e: Event) -> bool:
    """`w` is a warning of `e`'s stream at most _LEAD_LINES lines before it."""
    return (
        w.line.path == e.line.path
        and 0 <= e.line.lineno - w.line.lineno <= _LEAD_LINES
        and who_of(w.line) == who_of(e.line)
    )


def who_of(line: Line) -> Who:
    return (line.task, line.host, line.local_rank, line.rank)


# `[PG ID 0 PG GUID 0(default_pg) Rank 7]`, `[PG 0 (default_pg) Rank 12]`, `[Rank 7]` at the start
# of a ProcessGroupNCCL message: the rank within the process group that reports (FORMATS §2).
_PG_RANK = re.compile(r"^\s*\[(?:PG (?:ID )?(?P<pg>\d+)\b[^\]]*?)?Rank (?P<rank>\d+)\]")


def _strength(e: Event) -> tuple[int, int]:
    return (_ROLE_RANK.get(e.role or "", 0), _SEVERITY_RANK.get(e.severity or "", 0))


def signal_death(e: Event) -> bool:
    """A launcher's report that a process died of a signal it did not get from the launcher."""
    if e.role != "summary":
        return False
    code = field_int(e, "exit_code")
    name = e.fields.get("signal_name", "")
    if code is not None:
        if code in EXIT_SIGNALS:
            return EXIT_SIGNALS[code][0] != "SIGTERM"
        return code < 0 or code > 128
    return bool(name) and name != "SIGTERM"


@dataclass(frozen=True, slots=True)
class _Pick:
    root: Event
    culprit: Culprit | None
    category: str


def _pick(events: Sequence[Event], world: World, library: Library) -> _Pick:
    ends = [e for e in events if e.role == "end"]
    if ends:
        # Everything after the scheduler ended the job is its consequence (SIGTERMs, the
        # launcher's SignalException, srun's exit codes): only what came before can be a cause.
        before = [e for e in events if _order(e) < _order(ends[0])]
        if any(e.severity in _SERIOUS and e.role in ("cause", "symptom") for e in before) or any(
            signal_death(e) for e in before
        ):
            return _pick(before, world, library)
        return _Pick(ends[0], None, ends[0].category or "cancelled")
    serious = [e for e in events if e.severity in _SERIOUS]
    causes = [
        e
        for e in serious
        if e.role == "cause" and not _after_own_symptom(e, serious, world, library)
    ]
    if causes:
        root = _refine(causes[0], causes, world)
        rank = world.rank_of(root.line)
        culprit = Culprit(
            rank=rank,
            local_rank=root.line.local_rank,
            host=root.line.host or root.fields.get("host"),
            task=root.line.task,
            confidence=0.9 if rank is not None else 0.6,
            reason=f"first error that is not a symptom of another rank's failure: {root.signature}"
            + (
                f"; its node is unknown: every node prints the same [{root.line.role}N]: headers"
                if rank is None and world.multi_node_tee and root.line.role
                else ""
            ),
        )
        culprit = _locate(culprit, events)
        if culprit.rank is None and culprit.local_rank is None:
            culprit = _attribute(culprit, root, events, world)
        if culprit.rank is None:
            culprit = _pg_culprit(culprit, root)
        category = root.category or "python_exception"
        if category == "cuda_error" and any(e.category == "gpu_hardware" for e in causes):
            # an Xid 79 / ECC error in the same incident says why CUDA failed: the GPU broke
            category = "gpu_hardware"
        return _Pick(root, culprit, category)
    deaths = [e for e in serious if signal_death(e) and not _own_abort(e, events, world)]
    if deaths:
        root = deaths[0]
        rank = field_int(root, "rank")
        if rank is None:
            rank = world.rank_of(root.line)
        local = field_int(root, "local_rank")
        code_s = root.fields.get("exit_code", "")
        code = field_int(root, "exit_code")
        name = root.fields.get("signal_name") or (
            EXIT_SIGNALS[code][0] if code in EXIT_SIGNALS else None
        )
        sig = f"{name} (exit code {code_s})" if name and code_s else name or f"exit code {code_s}"
        culprit = Culprit(
            rank=rank if rank is not None else (local if world.nodes <= 1 else None),
            local_rank=local,
            host=root.fields.get("host") or root.line.host,
            task=root.line.task,
            confidence=0.85,
            reason=f"the launcher reports this rank died of {sig} and it printed no error itself",
        )
        category = (
            EXIT_SIGNALS[code][1] if code in EXIT_SIGNALS else root.category or "process_killed"
        )
        return _Pick(root, culprit, category)
    symptoms = [e for e in serious if e.role == "symptom"]
    if symptoms:
        timeouts = [e for e in symptoms if e.category == "collective_timeout"] or symptoms
        root = timeouts[0]
        lead = next((w for w in events if w.severity == "warning" and _just_before(w, root)), None)
        if lead is not None:
            root = lead  # `NCCL WARN <what failed>` before the error code it returned
        # what the ranks say beats the launcher's first failure: torchrun's Root Cause names the
        # first rank its watchdog took down, a victim when another rank hung
        named = _silent_culprit(events, world) or _reported_culprit(events)
        return _Pick(root, named, root.category or "comm_error")
    summaries = [e for e in serious if e.role == "summary"]
    root = summaries[0] if summaries else events[0]
    return _Pick(root, None, root.category or "launcher_error")


def _own_abort(death: Event, events: Sequence[Event], world: World) -> bool:
    """A SIGABRT of a rank that reported a failure first: its watchdog took the process down
    (`To avoid data inconsistency, we are taking the entire process down`), so the death is a
    symptom of what that rank reported, not a cause."""
    if field_int(death, "exit_code") != -6 and death.fields.get("signal_name") != "SIGABRT":
        return False
    rank = field_int(death, "rank")
    if rank is None:
        local = field_int(death, "local_rank")
        if local is not None:
            rank = world.rank_of_who((death.line.task, death.line.host, local, None))
    if rank is None:
        return False
    return any(
        e.role == "symptom"
        and e.severity in _SERIOUS
        and e.signature != FAILURE_ENTRY
        and _order(e) < _order(death)
        and world.rank_of(e.line) == rank
        for e in events
    )


def _after_own_symptom(
    cause: Event, serious: Sequence[Event], world: World, library: Library
) -> bool:
    """A catch-all error (an exception line, an unrecognized line) of a rank that already
    reported a failed or timed-out collective: the consequence of that failure (the watchdog's
    abort, `DDP expects same model` after an aborted allgather), not a new cause."""
    sig = library.by_id(cause.signature)
    if cause.signature != UNRECOGNIZED and (sig is None or not sig.classify):
        return False
    rank = world.rank_of(cause.line)
    if rank is None:
        return False
    return any(
        e.role == "symptom"
        and e.category in ("collective_timeout", "comm_error")
        and _order(e) < _order(cause)
        and world.rank_of(e.line) == rank
        for e in serious
    )


def _attribute(culprit: Culprit, root: Event, events: Sequence[Event], world: World) -> Culprit:
    """A cause printed without any rank prefix: when the launcher reports exactly one failed
    worker, the error is that worker's (a bare `terminate called ...` then torchrun's `failed
    (exitcode: -6) local_rank: 0`)."""
    named = {
        (field_int(e, "rank"), field_int(e, "local_rank"))
        for e in events
        if e.role == "summary"
        and _order(e) > _order(root)
        and e.fields.get("signal_name") != "SIGTERM"
        and (field_int(e, "rank") is not None or field_int(e, "local_rank") is not None)
    }
    if len(named) != 1:
        return culprit
    rank, local = named.pop()
    if rank is None and local is not None and world.nodes <= 1 and not world.multi_node_tee:
        rank = local
    which = f"rank {rank}" if rank is not None else f"local rank {local}"
    return replace(
        culprit,
        rank=rank,
        local_rank=local,
        confidence=0.7,
        reason=f"{culprit.reason}; the error carries no rank, and the launcher reports one "
        f"failed worker only ({which})",
    )


def _pg_culprit(culprit: Culprit, root: Event) -> Culprit:
    """A ProcessGroupNCCL message names the rank within its process group; in the default group
    that is the global rank (said outright by `[PG ID 0 ... default_pg ...]`, assumed, with less
    confidence, by the old `[Rank N]` that names no group)."""
    m = _PG_RANK.match(root.line.text)
    if m is None:
        return culprit
    pg = m["pg"]
    if pg is not None and pg != "0" and "default_pg" not in m.group(0):
        return culprit
    named = pg is not None
    return replace(
        culprit,
        rank=int(m["rank"]),
        confidence=0.7 if named else 0.5,
        reason=f"{culprit.reason}; no prefix names the rank, and the message names rank "
        f"{m['rank']} of "
        + ("the default process group" if named else "its process group (taken as the default)"),
    )


def _reported_culprit(events: Sequence[Event]) -> Culprit | None:
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
        reason=f"the ranks' own lines are symptoms; the launcher reports rank {r} as the first "
        "process that failed",
    )


def _locate(culprit: Culprit, events: Sequence[Event]) -> Culprit:
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


def _refine(first: Event, causes: Sequence[Event], world: World) -> Event:
    """The most telling line of the first failing rank's burst (e.g. `what():` over `terminate`)."""
    rank = world.rank_of(first.line)
    best = first
    for e in causes:
        if e.line.path != first.line.path or e.line.lineno - first.line.lineno > _BURST_LINES:
            break
        same = (
            world.rank_of(e.line) == rank
            and e.line.local_rank == first.line.local_rank
            and e.line.task == first.line.task
        )
        if same and _strength(e) > _strength(best):
            best = e
    return best


def _silent_culprit(events: Sequence[Event], world: World) -> Culprit | None:
    """With collective timeouts, the culprit is the rank that did not time out (FORMATS §2.7)."""
    reporters = {
        r
        for e in events
        if e.role in ("symptom", "cause") and e.signature != FAILURE_ENTRY
        if (r := world.rank_of(e.line)) is not None
        or (e.role == "symptom" and (r := field_int(e, "rank")) is not None)
    }
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
    if world.size:
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
        if 1 < len(silent) <= 8:
            lst = ", ".join(map(str, silent))
            return Culprit(
                rank=silent[0],
                local_rank=None,
                host=None,
                confidence=0.3,
                reason=f"ranks {lst} reported no timeout; any of them may be the one that hung",
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


def _text(library: Library, e: Event) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
    sig = library.by_id(e.signature)
    if e.signature == FAILURE_ENTRY:
        sig = library.by_id("torchrun.child_failed")
        what = e.fields.get("signal_name") or f"exit code {e.fields.get('exit_code')}"
        rank = e.fields.get("rank", "?")
        title = f"Rank {rank} exited with {what}"
        if sig is None:
            return title, "", (), ()
        return title, sig.explanation, sig.remedy, sig.references
    if e.signature == UNRECOGNIZED:
        return (
            f"Unrecognized error: {e.fields.get('message', '')[:TITLE_FIELD_MAX]}",
            _UNRECOGNIZED_EXPLANATION,
            _UNRECOGNIZED_REMEDIES,
            (),
        )
    if sig is None:
        return e.signature, "", (), ()
    title = fill_title(sig.title, e.fields)
    xid = field_int(e, "xid")
    if xid is not None and xid in library.xid:
        title = f"{title}: Xid {xid}, {library.xid[xid].get('title', '')}".rstrip(", ")
    return title, sig.explanation, sig.remedy, sig.references


_UNRECOGNIZED_EXPLANATION = (
    "No signature knows this line, but it reads as an error and nothing else in the log "
    "explains how the job failed: it is the earliest such line. Its category comes from the "
    "library's classification rules where one fits its words (`unknown` where none does)."
)
_UNRECOGNIZED_REMEDIES = (
    "Read the lines around it (`logscope analyze --format markdown` shows them)",
    "Teach logscope the message: add a signature with `samples` in a `--patterns DIR`",
)

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_UNFILLED = re.compile(r"\s*[:,-]?\s*\{\w+\}")
TITLE_FIELD_MAX = 120


def fill_title(title: str, fields: dict[str, str]) -> str:
    """A signature title with `{field}` placeholders filled from the match; a placeholder with
    no value is dropped together with the separator before it."""

    def value(m: re.Match[str]) -> str:
        v = fields.get(m.group(1), "").strip()
        return v[:TITLE_FIELD_MAX] if v else m.group(0)

    filled = _PLACEHOLDER.sub(value, title)
    return _UNFILLED.sub("", filled).strip()


def split_incidents(failures: Sequence[Event], progress: Progress) -> list[list[Event]]:
    """Group failure events, in order: a group starts at a serious event (or an end banner),
    and a new one once training made progress again."""
    groups: list[list[Event]] = []
    current: list[Event] = []
    recent: deque[Event] = deque(maxlen=_LEAD_LINES)
    for e in sorted(failures, key=_order):
        if current and progress.count_between(current[-1].seq, e.seq) >= _SPLIT_AFTER_PROGRESS:
            groups.append(current)
            current = []
        if current:
            current.append(e)
        elif e.severity in _SERIOUS or e.role == "end":
            # the warnings right before a group's first error may say what failed
            current = [w for w in recent if _just_before(w, e)] + [e]
        else:
            recent.append(e)
    if current:
        groups.append(current)
    return groups


def build_incidents(
    failures: Sequence[Event],
    progress: Progress,
    world: World,
    library: Library,
) -> list[Incident]:
    out: list[Incident] = []
    for n, group in enumerate(split_incidents(failures, progress), 1):
        pick = _pick(group, world, library)
        root = pick.root
        title, explanation, remedy, refs = _text(library, root)
        culprit_rank = pick.culprit.rank if pick.culprit else None
        cascade = tuple(e for e in group if e is not root and e.role != "end")
        evidence = tuple(e for e in group if e is not root and e.role == "end")
        last_iter = progress.last_iteration_before(root.seq)
        times = [e.time for e in group if e.time is not None]
        category = pick.category
        if (
            pick.culprit
            and category in ("collective_timeout", "comm_error")
            and culprit_rank is not None
        ):
            title = f"{title} (rank {culprit_rank} stopped answering)"
        out.append(
            Incident(
                id=f"I{n}",
                category=category,
                severity=root.severity or "error",
                title=title,
                explanation=explanation,
                remedies=remedy,
                references=refs,
                root_cause=root,
                culprit=pick.culprit,
                cascade=cascade,
                evidence=evidence,
                iteration=last_iter,
                start=min(times) if times else None,
                end=max(times) if times else None,
            )
        )
    return out


def cascade_ranks(incident: Incident, world: World) -> list[int]:
    culprit = incident.culprit.rank if incident.culprit else None
    ranks = set()
    for e in incident.cascade:
        r = field_int(e, "rank") if e.signature == FAILURE_ENTRY else world.rank_of(e.line)
        if r is not None and r != culprit:
            ranks.add(r)
    return sorted(ranks)


@dataclass(frozen=True, slots=True)
class Ending:
    outcome: Outcome
    reason: str
    hang_s: float | None = None


def hang_threshold(cadence_s: float | None) -> float:
    """Silence before an end that makes a hang: five logged intervals, at least 30 s."""
    return max(HANG_FLOOR_S, HANG_CADENCE_FACTOR * (cadence_s or 0.0))


def decide_outcome(
    incidents: Sequence[Incident],
    progress: Progress,
    exits: Sequence[Event],
    last_progress: datetime | None,
    end_time: datetime | None,
    cadence: float | None,
    started: bool = False,
) -> Ending:
    """How the job ended, from the last incident, the end banners and the progress cadence
    (`Progress.median_interval_s`, which the caller has)."""
    final = incidents[-1] if incidents else None
    if final is not None and progress.count_after(final.root_cause.seq) >= _SPLIT_AFTER_PROGRESS:
        final = None  # training went on after the last incident
    threshold = hang_threshold(cadence)
    gap = (end_time - last_progress).total_seconds() if end_time and last_progress else None

    if final is not None:
        end = final.root_cause
        if final.category == "hang" and not any(
            e.role in ("summary", "end") or e.category != "hang" for e in final.cascade
        ):
            # the log ends while ranks say they wait (for a rank at init, a barrier)
            return Ending(Outcome.hung, f"the log ends while ranks wait: {final.title}")
        if end.role != "end":
            return Ending(Outcome.crashed, f"{final.title} ({end.signature})")
        end_at = end.time or end_time
        gap = (end_at - last_progress).total_seconds() if end_at and last_progress else gap
        if gap is not None and gap > threshold and end.category in ("timelimit", "cancelled"):
            return Ending(
                Outcome.hung,
                f"no progress for {duration(gap)} before the job was "
                f"{'killed at its time limit' if end.category == 'timelimit' else 'cancelled'}",
                gap,
            )
        outcome = _END_OUTCOME.get(end.category or "", Outcome.cancelled)
        return Ending(outcome, final.title)
    _first, it = progress.iterations()
    total = progress.train_iters
    if it is not None and total is not None and it >= total:
        return Ending(Outcome.completed, f"reached the last iteration ({it}/{total})")
    if exits:
        return Ending(Outcome.completed, f"the job says it exited: {exits[-1].line.text.strip()}")
    if gap is not None and gap > threshold:
        return Ending(Outcome.hung, f"no progress for the last {duration(gap)} of the log", gap)
    if len(progress):
        return Ending(Outcome.truncated, "the log ends while training was still progressing")
    if started or end_time is not None:
        # the job ran (a launch banner, stamped lines) and nothing says it ended: the log stops
        # while it runs (a window of a longer log, or a job still going)
        return Ending(Outcome.truncated, "the log ends with no sign that the job ended")
    return Ending(Outcome.unknown, "no progress markers and no failure found")


def make_job(
    ending: Ending,
    world: World,
    hosts: Sequence[str],
    start: datetime | None,
    end: datetime | None,
    progress: Progress,
    last_progress: datetime | None,
) -> Job:
    first_it, last_it = progress.iterations()
    return Job(
        outcome=ending.outcome,
        outcome_reason=ending.reason,
        world_size=world.size,
        hosts=tuple(sorted(set(hosts))),
        start=start,
        end=end,
        first_iteration=first_it,
        last_iteration=last_it,
        train_iters=progress.train_iters,
        last_progress=last_progress,
    )


_HANG_EXPLANATION = (
    "Progress stopped and no rank reported an error: a rank is stuck (a dead GPU, a deadlock, "
    "a collective some rank never entered) and the others wait for it. Without a watchdog "
    "timeout nothing ends the job, so the time until it was killed is lost."
)
_HANG_REMEDIES = (
    "Watch the job with `logscope tail` and a stall timeout, so a hang is acted on in minutes",
    "Set TORCH_NCCL_ASYNC_ERROR_HANDLING=1 and a process-group timeout shorter than the "
    "time you can afford to lose; TORCH_NCCL_DUMP_ON_TIMEOUT=1 records what each rank "
    "waited on",
    "Run `py-spy dump --pid PID` on every rank of a hung job to see where each one is stuck",
)


def as_hang(incident: Incident | None, last: Event | None, reason: str) -> Incident | None:
    """A hang: `incident` (an end banner after a long silence) recategorised, or, with no
    incident, a new one rooted at the last progress line."""
    stopped = f" after iteration {field_int(last, 'iteration')}" if last is not None else ""
    title = f"Training hung{stopped}: {reason}"
    if incident is not None:
        return replace(
            incident,
            category="hang",
            severity="error",
            title=title,
            explanation=_HANG_EXPLANATION + " " + incident.explanation,
            remedies=_HANG_REMEDIES + incident.remedies,
            start=last.time if last is not None else incident.start,
        )
    if last is None:
        return None
    return Incident(
        id="",
        category="hang",
        severity="error",
        title=title,
        explanation=_HANG_EXPLANATION,
        remedies=_HANG_REMEDIES,
        references=(),
        root_cause=last,
        culprit=None,
        cascade=(),
        evidence=(),
        iteration=field_int(last, "iteration"),
        start=last.time,
        end=None,
    )


def hang_incident(
    incidents: Sequence[Incident], last: Event | None, ending: Ending
) -> list[Incident]:
    """Name the final hang of an attempt whose last progress line is `last`: its last incident
    (an end banner) becomes `hang`, or, with no incident at all, a hang incident rooted there."""
    out = list(incidents)
    if out and out[-1].root_cause.role == "end":
        out[-1] = as_hang(out[-1], last, ending.reason) or out[-1]
    elif not out:
        hung = as_hang(None, last, ending.reason)
        if hung is not None:
            out.append(hung)
    return out
