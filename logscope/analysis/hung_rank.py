"""The rank a hung job waits for, from the dumps taken of it: Flight Recorder traces aligned by
process group and `collective_seq_id`, py-spy stacks and process states.

Every rank of a process group calls its collectives in the same order, so its n-th collective
(`collective_seq_id` n) must be the same op with the same sizes and dtypes on every rank. Hence:

- a rank whose n-th collective differs from the others' (another op, other sizes or dtypes) is
  out of step: a desync, and the others wait in a collective it never joins;
- a rank whose last collective is n-1 while the others are in n never entered n: it is stuck
  outside communication (its stack says where), and the others wait for it;
- a rank of the group that left no trace could not write one (stopped, killed, wedged): when
  the others agree with each other, it is the one they wait for;
- without traces, the rank whose main thread is outside torch.distributed while the majority
  waits inside it, or whose process is stopped (`State: T`), is the one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeGuard

from ..dumps import Collective, DumpSet, Frame, ProcessStack, ProcStatus, RankTrace
from ..dumps.flight_recorder import user_frame
from ..model import HangDumps, RankState

DESYNC_CONFIDENCE = 0.95
BEHIND_CONFIDENCE = 0.85
"""A rank one collective behind; 0.95 when its stack shows it outside communication."""
MISSING_CONFIDENCE = 0.6
"""Only the absence of its dump names it; 0.9 with a stopped state or no readable stack."""
STACK_CONFIDENCE = 0.8


@dataclass(frozen=True, slots=True)
class _Verdict:
    ranks: tuple[int, ...]
    kind: str
    reason: str
    confidence: float
    group: str | None


def _signature(c: Collective) -> tuple[object, ...]:
    return (c.op, c.input_sizes, c.output_sizes, c.input_dtypes, c.output_dtypes)


def _ranks_text(ranks: Iterable[int]) -> str:
    rs = sorted(ranks)
    return f"rank {rs[0]}" if len(rs) == 1 else "ranks " + ", ".join(map(str, rs))


def _call(c: Collective, seq: bool = False) -> str:
    """`all_reduce [[4160]] Float (called at train.py:98 in step)`; with `seq`, the collective's
    sequence number and process group first."""
    where = user_frame(c.frames)
    at = f"called at {where.label()}" if where else ""
    place = f"collective {c.seq} of process group {c.group_label}" if seq else ""
    paren = ", ".join(x for x in (place, at) if x)
    return f"{c.op} {c.sizes_text()}" + (f" ({paren})" if paren else "")


def _collectives(trace: RankTrace) -> dict[str, dict[int, Collective]]:
    """Per process group, the trace's collectives by sequence number (p2p ops left out)."""
    out: dict[str, dict[int, Collective]] = {}
    for c in trace.entries:
        if c.is_p2p or c.seq is None or c.seq <= 0:
            continue
        out.setdefault(c.group, {})[c.seq] = c
    return out


def _default_first(group: str) -> tuple[bool, str]:
    """Process groups in order: the default group (`0`, or the empty name) first, then by name."""
    return (group not in ("0", ""), group)


def _group_members(traces: Iterable[RankTrace], group: str, seen: Iterable[int]) -> set[int]:
    """The group's ranks as `pg_config` lists them, else the ranks seen in it. The default
    group's entries say `0`; its `pg_config` key is `0` in NCCL's dumps and the empty name in
    gloo's (torch 2.13)."""
    names = (group, "") if group in ("0", "") else (group,)
    for t in traces:
        for name in names:
            if t.groups.get(name):
                return set(t.groups[name])
    return set(seen)


def _desync(group: str, by_rank: Mapping[int, dict[int, Collective]]) -> _Verdict | None:
    common = set.intersection(*(set(s) for s in by_rank.values())) if by_rank else set()
    for seq in sorted(common):
        sigs = {r: _signature(s[seq]) for r, s in by_rank.items()}
        counts = Counter(sigs.values())
        if len(counts) < 2:
            continue
        (major, n), *rest = counts.most_common()
        tie = bool(rest) and rest[0][1] == n
        odd = sorted(r for r, s in sigs.items() if s != major)
        good = sorted(r for r, s in sigs.items() if s == major)
        a, b = by_rank[odd[0]][seq], by_rank[good[0]][seq]
        if a.op != b.op:
            kind, what = "desync_op", "another collective"
        elif (a.input_sizes, a.output_sizes) != (b.input_sizes, b.output_sizes):
            kind, what = "desync_sizes", "other sizes"
        else:
            kind, what = "desync_dtypes", "other dtypes"
        reason = (
            f"Flight Recorder: at collective {seq} of process group {b.group_label}, "
            f"{_ranks_text(odd)} called {_call(a)} while {_ranks_text(good)} called {_call(b)}: "
            f"a desync ({what} at the same sequence number), so the collective never completes"
        )
        confidence = DESYNC_CONFIDENCE if not tie else 0.5
        return _Verdict(tuple(odd), kind, reason, confidence, group)
    return None


def _behind(group: str, by_rank: Mapping[int, dict[int, Collective]]) -> _Verdict | None:
    last = {r: max(s) for r, s in by_rank.items() if s}
    if len(last) < 2:
        return None
    frontier = max(last.values())
    behind = sorted(r for r, n in last.items() if n < frontier)
    if not behind:
        return None
    lowest = min(last[r] for r in behind)
    odd = sorted(r for r in behind if last[r] == lowest)
    ahead = sorted(r for r, n in last.items() if n > lowest)
    nxt = lowest + 1
    waiting = next((by_rank[r][nxt] for r in ahead if nxt in by_rank[r]), None)
    prev = by_rank[odd[0]][lowest]
    into = f" {_call(waiting)}" if waiting else ""
    reason = (
        f"Flight Recorder: {_ranks_text(odd)} never entered collective {nxt} of process group "
        f"{prev.group_label}: its last is collective {lowest}, {_call(prev)}; "
        f"{_ranks_text(ahead)} {'is' if len(ahead) == 1 else 'are'} in it"
        + (f":{into}" if into else "")
    )
    confidence = BEHIND_CONFIDENCE if len(odd) < len(ahead) else 0.5
    return _Verdict(tuple(odd), "missing", reason, confidence, group)


def _missing(
    group: str, members: set[int], by_rank: Mapping[int, dict[int, Collective]]
) -> _Verdict | None:
    absent = sorted(members - set(by_rank))
    if not absent or not by_rank or len(absent) * 2 >= len(members):
        return None  # most ranks without a dump: their absence singles none out
    last = {r: max(s) for r, s in by_rank.items() if s}
    if not last:
        return None
    frontier = max(last.values())
    r0 = next(r for r, n in last.items() if n == frontier)
    c = by_rank[r0][frontier]
    reason = (
        f"Flight Recorder: {_ranks_text(absent)} of process group {c.group_label} left no dump, "
        f"while {_ranks_text(last)} dumped theirs, last in {_call(c, seq=True)}"
    )
    return _Verdict(tuple(absent), "missing", reason, MISSING_CONFIDENCE, group)


def _from_traces(traces: Mapping[int, RankTrace], world: set[int]) -> _Verdict | None:
    per_group: dict[str, dict[int, dict[int, Collective]]] = {}
    for rank, t in traces.items():
        for group, seqs in _collectives(t).items():
            per_group.setdefault(group, {})[rank] = seqs
    # a subgroup's finding is looked for after the default group's
    groups = sorted(per_group, key=_default_first)
    for rule in ("desync", "behind", "missing"):
        for group in groups:
            by_rank = per_group[group]
            if rule == "desync":
                v = _desync(group, by_rank)
            elif rule == "behind":
                v = _behind(group, by_rank)
            else:
                members = _group_members(traces.values(), group, by_rank) | (
                    world if group == "0" else set()
                )
                v = _missing(group, members, by_rank)
            if v is not None:
                return v
    return None


_DEEPSPEED_COMM = ("deepspeed/comm/comm.py", "deepspeed/comm/torch.py")
_ZERO_GATHERS = "deepspeed/runtime/zero/partition_parameters.py"


def _in_collective(frames: Sequence[Frame]) -> Frame | None:
    """The communication frame a stack waits in, if any (py-spy shortens site-packages paths to
    `torch/distributed/...`): torch.distributed's, DeepSpeed's communication API, or a ZeRO-3
    parameter gather (`all_gather_coalesced`, its handles' `wait`), which block like the
    collective they run."""
    for f in frames:
        if "torch/distributed/" in f.file and f.name not in ("wrapper",):
            return f
        if f.file.endswith(_DEEPSPEED_COMM) and f.name not in ("get_rank", "get_world_size"):
            return f
        if f.file.endswith(_ZERO_GATHERS) and (f.name == "wait" or "gather" in f.name):
            return f
    return None


def _where(stack: ProcessStack) -> str:
    main = stack.main
    if main is None or not main.frames:
        return "no stack"
    coll = _in_collective(main.frames)
    user = user_frame(main.frames)
    at = f" at {user.label()}" if user else ""
    if coll:
        return f"in {coll.name}{at}"
    inner = main.frames[0]
    if user is inner:  # py-spy shows no Python frame below: a sleep, a lock, I/O, native code
        inner_txt = ", waiting in native code it calls there (a sleep, a lock, I/O)"
    else:
        inner_txt = f", innermost {inner.label()}"
    return f"outside communication{at}{inner_txt} ({main.status})"


def _stopped(status: ProcStatus | None) -> TypeGuard[ProcStatus]:
    return status is not None and status.state in ("T", "t")


def _state_text(status: ProcStatus) -> str:
    word = f" ({status.state_word})" if status.state_word else ""
    return f"State: {status.state}{word}"


def _from_stacks(
    stacks: Mapping[int, ProcessStack], statuses: Mapping[int, ProcStatus]
) -> _Verdict | None:
    stopped = sorted(r for r, s in statuses.items() if _stopped(s))
    if stopped:
        others = sorted((set(stacks) | set(statuses)) - set(stopped))
        r = stopped[0]
        reason = (
            f"process state: {_ranks_text(stopped)} is stopped ({_state_text(statuses[r])} in "
            f"{statuses[r].path}), so it cannot join any collective"
            + (
                f"; {_ranks_text(others)} {'is' if len(others) == 1 else 'are'} not"
                if others
                else ""
            )
        )
        return _Verdict(tuple(stopped), "stopped", reason, 0.85, None)
    inside = {r: _in_collective(s.main.frames) for r, s in stacks.items() if s.main}
    waiting = sorted(r for r, f in inside.items() if f is not None)
    outside = sorted(r for r, f in inside.items() if f is None)
    if waiting and outside and len(outside) < len(waiting):
        r = outside[0]
        w = waiting[0]
        reason = (
            f"py-spy: {_ranks_text(outside)} is {_where(stacks[r])}, while "
            f"{_ranks_text(waiting)} wait {_where(stacks[w])}"
        )
        return _Verdict(tuple(outside), "outside", reason, STACK_CONFIDENCE, None)
    return None


DUMPED_EXPLANATION = (
    "Nobody dumps the stacks of a process that runs well: it was stopped where its main "
    "thread's frames show, the innermost first. Inside a collective or barrier it waits for a "
    "peer; elsewhere (a lock, a file, a data loader, a GPU synchronization in backward) the "
    "wait is the process's own."
)
DUMPED_REMEDIES = (
    "Read the main thread's frames: the innermost says what it waits for, the first of your "
    "code where; a lock file (torch's extension build `FileBaton`, a dataset cache) left by a "
    "killed run is removed by hand",
    "Dump every rank (`py-spy dump --pid PID` on each node) and give the dumps as files with "
    "the log: logscope compares them and names the rank the others wait for",
)
"""What a dumped process that names no rank says, given as a file or pasted into the log."""


@dataclass(frozen=True, slots=True)
class StoppedAt:
    """Where a dumped process stood: its main thread's innermost frame."""

    stack: ProcessStack
    lineno: int
    """The frame's line in the dump file."""
    text: str
    """The frame as py-spy prints it: `    <function> (<file>:<line>)`."""
    where: str
    """What the stack shows: `in all_reduce at train.py:87 in step`, or outside communication."""


def stopped_at(dumps: DumpSet) -> StoppedAt | None:
    """The first dumped process whose main thread py-spy could read, and the innermost frame it
    stood in: where the process was when someone dumped it. Nobody dumps the stacks of a process
    that runs well, so a dump that names no rank still says where the job was stuck."""
    for stack in dumps.stacks:
        main = stack.main
        if main is None or not main.frames:
            continue
        f = main.frames[0]
        at = f"{f.file}:{f.line}" if f.line is not None else f.file
        return StoppedAt(stack, main.lineno + 1, f"    {f.name} ({at})", _where(stack))
    return None


def _by_rank_stacks(dumps: DumpSet) -> tuple[dict[int, ProcessStack], dict[int, ProcStatus]]:
    statuses = {s.rank: s for s in dumps.statuses if s.rank is not None}
    pid_rank = {s.pid: s.rank for s in dumps.statuses if s.pid is not None and s.rank is not None}
    stacks: dict[int, ProcessStack] = {}
    for st in dumps.stacks:
        rank = st.rank if st.rank is not None else pid_rank.get(st.pid)
        if rank is not None:
            stacks[rank] = st
    return stacks, statuses


def name_hung_rank(dumps: DumpSet, world: Iterable[int] = ()) -> HangDumps | None:
    """What the dumps say: the per-rank table and the rank the others wait for. `world`: the
    job's ranks as the log shows them (a rank without any dump is one of them)."""
    if dumps.empty:
        return None
    warnings = list(dumps.warnings)
    traces: dict[int, RankTrace] = {}
    for t in dumps.traces:
        if t.rank is None:
            continue
        if t.rank in traces:
            warnings.append(f"{t.path}: a second dump of rank {t.rank}, left out")
            continue
        traces[t.rank] = t
    stacks, statuses = _by_rank_stacks(dumps)
    world_set = set(world)
    verdict = _from_traces(traces, world_set) or _from_stacks(stacks, statuses)
    kind: str | None = None
    reason = ""
    confidence = 0.0
    ranks: tuple[int, ...] = ()
    if verdict is not None:
        ranks, kind = verdict.ranks, verdict.kind
        reason, confidence = verdict.reason, verdict.confidence
        culprit = ranks[0]
        notes: list[str] = []
        status = statuses.get(culprit)
        if verdict.kind != "stopped" and _stopped(status):
            notes.append(f"its process is stopped ({_state_text(status)})")
            kind = "stopped"
            confidence = max(confidence, 0.9)
        stack = stacks.get(culprit)
        if stack is not None and verdict.kind != "outside":
            main = stack.main
            if main is None or not main.frames:
                where = "unreadable by py-spy" + _pyspy_error(stack)
                if kind == "missing":
                    confidence = max(confidence, 0.9)
            else:
                where = _where(stack)
                if kind == "missing" and _in_collective(main.frames) is None:
                    confidence = max(confidence, 0.95)
            notes.append(f"py-spy: rank {culprit} is {where}")
        if notes:
            reason += "; " + "; ".join(notes)
    members = set(traces) | set(stacks) | set(statuses) | world_set
    for t in traces.values():
        for rs in t.groups.values():
            members |= set(rs)
    rows, evidence = _rows(sorted(members), traces, stacks, statuses, verdict)
    return HangDumps(
        files=dumps.files,
        rows=tuple(rows),
        culprit_rank=ranks[0] if ranks else None,
        confidence=round(confidence, 2),
        reason=reason,
        kind=kind,
        evidence=tuple(evidence),
        warnings=tuple(warnings),
    )


def _pyspy_error(stack: ProcessStack) -> str:
    return f" ({stack.error})" if stack.error else " (no thread in its dump)"


def _rows(
    ranks: Sequence[int],
    traces: Mapping[int, RankTrace],
    stacks: Mapping[int, ProcessStack],
    statuses: Mapping[int, ProcStatus],
    verdict: _Verdict | None,
) -> tuple[list[RankState], list[tuple[str, int, str]]]:
    rows: list[RankState] = []
    evidence: list[tuple[str, int, str]] = []
    odd = set(verdict.ranks) if verdict else set()
    group = verdict.group if verdict and verdict.group is not None else None
    for r in ranks:
        t = traces.get(r)
        last: Collective | None = None
        if t is not None:
            seqs = _collectives(t)
            g = group if group in seqs else min(seqs, key=_default_first, default=None)
            if g is not None and seqs[g]:
                last = seqs[g][max(seqs[g])]
        stack, status = stacks.get(r), statuses.get(r)
        where_stack = _where(stack) if stack is not None else None
        process = f"stopped ({_state_text(status)})" if _stopped(status) else where_stack
        sources = [x.path for x in (t, stack, status) if x is not None]
        where = user_frame(last.frames) if last else None
        state = None
        if last is not None:
            state = last.state or ""
            if last.retired:
                state = f"{state}, retired" if state else "retired"
        rows.append(
            RankState(
                rank=r,
                host=(t.host if t else None) or (stack.host if stack else None),
                group=last.group_label if last else None,
                seq=last.seq if last else None,
                op=last.op if last else None,
                sizes=last.sizes_text() if last else None,
                state=state,
                where=where.label() if where else None,
                process=process,
                source=", ".join(sources) if sources else "no dump",
                odd=r in odd,
            )
        )
        if t is not None and last is not None:
            evidence.append(
                (t.path, last.index + 1, f"rank {r}: last collective {_call(last, seq=True)}")
            )
        elif t is None and r in odd:
            evidence.append(("(no dump)", 0, f"rank {r}: no Flight Recorder dump"))
        if stack is not None:
            evidence.append((stack.path, stack.lineno, f"rank {r}: py-spy: {where_stack}"))
        if status is not None and (_stopped(status) or r in odd):
            evidence.append((status.path, 1, f"rank {r}: {_state_text(status)}"))
    return rows, evidence
