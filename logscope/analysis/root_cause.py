"""Within one incident's events: which is the root cause, who is to blame, and what category
the incident is (`pick_root`); what came first, what is a cascade of it and what only reports it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from ..match.events import CUT_TRACEBACK, OPENED_AT, TRACEBACK_START, UNRECOGNIZED
from ..match.exit_codes import EXIT_SIGNALS, signal_exit
from ..match.signatures import Library
from ..model import (
    Category,
    Culprit,
    Event,
    World,
    field_int,
)
from .aborts import aborted_together, consequent_death, symptom_terminates
from .clues import (
    barrier_culprit,
    echoed_culprit,
    own_file_culprit,
    own_rank_culprit,
    primary_rank,
    primary_rank_culprit,
    quoted_culprit,
    raised_after_culprit,
    report_culprit,
    report_rank_culprit,
    same_error_culprit,
    shared_failure_culprit,
    store_barrier_culprit,
    task_culprit,
)
from .culprits import (
    NCCL_RETURN_FRAME,
    attribute,
    fingerprint_culprit,
    locate,
    mismatch_culprit,
    one_failed_worker,
    own_failure_culprit,
    pg_culprit,
    reported_culprit,
    silent_culprit,
    silent_rank_culprit,
)
from .device_clues import device_culprit
from .launcher_clues import (
    first_exit,
    launcher_culprit,
    oom_culprit,
    pid_culprit,
    sole_worker,
    sole_worker_culprit,
)
from .launcher_reports import (
    first_observed,
    own_report,
    past_kill_list,
    past_wrappers,
    reported_task,
    reported_worker,
)
from .nccl_clues import (
    nccl_pid_culprit,
    nccl_process,
    nccl_process_culprit,
    nccl_process_rank,
    raised_nccl_culprit,
)
from .own_failures import BURST_LINES, after_own_failure, catch_all
from .quoted_logs import past_carrier
from .reasons import stated_reason, states_a_reason
from .worker_names import dead_worker, dead_worker_culprit

_ROLE_RANK = MappingProxyType({"cause": 3, "summary": 2, "symptom": 1, "end": 0})
_SEVERITY_RANK = MappingProxyType({"fatal": 3, "error": 2, "warning": 1, "info": 0})
SERIOUS = ("fatal", "error")
LEAD_LINES = 5
"""A warning this many lines or fewer before an error of the same stream may be its cause (NCCL
prints `NCCL WARN <what failed>`, then the error code unwinding its stack)."""
ENDS_SAYING_WHY = frozenset({"timelimit", "preemption", "node_failure"})
"""The scheduler's ends that say why it stopped the job (a plain cancel does not)."""


def log_order(e: Event) -> int:
    """An event's place in the log (its inputs read in order)."""
    return e.seq


def last_reason(events: Iterable[Event]) -> Event | None:
    """The last of `events` that says why the scheduler stopped the job (ENDS_SAYING_WHY)."""
    return max((e for e in events if e.category in ENDS_SAYING_WHY), key=log_order, default=None)


def just_before(w: Event, e: Event) -> bool:
    """`w` is a line of `e`'s process (Stream.agrees) at most LEAD_LINES lines before it."""
    a, b = w.line, e.line
    return a.path == b.path and 0 <= b.lineno - a.lineno <= LEAD_LINES and a.stream.agrees(b.stream)


def _leads(w: Event, e: Event) -> bool:
    """`w` is a warning a signature knows, just before `e` in the same process."""
    return w.severity == "warning" and w.signature != UNRECOGNIZED and just_before(w, e)


def _reason_precedes(e: Event, library: Library) -> bool:
    sig = library.by_id(e.signature)
    return sig is not None and sig.reason_precedes


def _stated_before(root: Event, events: Sequence[Event]) -> Event:
    """The first failure line its own process printed in the burst before a report whose
    emitter states the reason first (Signature.reason_precedes: NCCL's proxy thread, after the
    WARN of the call that failed; the return-code frames it unwound say where, not what), or
    the report itself. A report with no NCCL process head takes the first failure of its
    stream in that burst."""
    process = nccl_process(root)
    for e in events:
        if e.seq >= root.seq:
            break
        if (
            e.signature not in (UNRECOGNIZED, NCCL_RETURN_FRAME)
            and e.severity in ("warning", *SERIOUS)
            and e.line.path == root.line.path
            and 0 < root.line.lineno - e.line.lineno <= BURST_LINES
            and e.line.stream.agrees(root.line.stream)
            and (process is None or nccl_process(e) == process)
        ):
            return e
    return root


def _strength(e: Event, library: Library) -> tuple[int, int, int]:
    """Role, then severity, then a signature of its own over a catch-all (a C++ `what():` that a
    CUDA signature knows tells more than one no signature knows)."""
    return (
        _ROLE_RANK.get(e.role or "", 0),
        _SEVERITY_RANK.get(e.severity or "", 0),
        0 if catch_all(e, library) else 1,
    )


def signal_death(e: Event) -> bool:
    """A launcher's report that a process died of a signal it did not get from the launcher."""
    if e.role != "summary":
        return False
    code = field_int(e, "exit_code")
    name = e.fields.get("signal_name", "")
    if code is not None:
        if code in EXIT_SIGNALS:
            return EXIT_SIGNALS[code][0] != "SIGTERM"
        return signal_exit(code)
    return bool(name) and name != "SIGTERM"


_SIGNAL_CATEGORY: Mapping[str, Category] = MappingProxyType(dict(EXIT_SIGNALS.values()))
"""A signal's category by its name, where a report names the signal and gives no exit code
(`process 0 terminated with signal SIGBUS`)."""


def _launcher_took_down(events: Sequence[Event]) -> bool:
    """A launcher ended the job itself (a signature's `takedown` field) after a process exited
    non-zero: srun's kill-on-bad-exit, whose step's bare CANCELLED banner follows (Slurm < 25.05
    states no reason), or Lightning's launcher terminating the other processes (its report of
    the failed child is the takedown), whose SIGTERM they then log. The failed exit is what
    ended the job, not what stopped it after."""
    down = next((e for e in events if "takedown" in e.fields), None)
    return down is not None and any(
        e.role == "summary"
        and (field_int(e, "exit_code") or 0) != 0
        and log_order(e) <= log_order(down)
        for e in events
    )


@dataclass(frozen=True, slots=True)
class RootPick:
    """What pick_root found in one incident's events."""

    root: Event
    culprit: Culprit | None
    category: Category


def pick_root(events: Sequence[Event], world: World, library: Library) -> RootPick:
    """The root cause among one incident's events, its culprit (the clues in `clues`,
    `launcher_clues` and `culprits`, the first that names a rank) and the incident's category."""
    ends = [e for e in events if e.role == "end"]
    if ends:
        # Everything after the scheduler ended the job is its consequence (SIGTERMs, the
        # launcher's SignalException, srun's exit codes): only what came before can be a cause.
        before = [e for e in events if log_order(e) < log_order(ends[0])]
        # an error-looking line no signature knows is the failure of last resort, for a log
        # where nothing else says how the job ended: the scheduler's end says it
        if (
            any(
                e.severity in SERIOUS
                and e.role in ("cause", "symptom")
                and e.signature != UNRECOGNIZED
                for e in before
            )
            or any(signal_death(e) for e in before)
            or _launcher_took_down(before)
        ):
            return pick_root(before, world, library)
        # a plain cancel first (the step's), then the job's end with its reason (`DUE TO
        # PREEMPTION`): one stop, and the later banner says why
        first = ends[0].category or "cancelled"
        why = last_reason(ends) if first == "cancelled" else None
        return RootPick(ends[0], None, (why.category if why else None) or first)
    serious = [e for e in events if e.severity in SERIOUS]
    # a process's abort over a failure it stated, an error after its own failed collective
    consequences = symptom_terminates(serious) | after_own_failure(serious, world, library)
    causes = [e for e in serious if e.role == "cause" and e.seq not in consequences]
    # a connect attempt its client says it retries (`retrying`) is a wait still under way: a
    # failure that came after it is what went wrong (the wait's own timeout among them)
    causes = [e for e in causes if not e.fields.get("retrying")] or causes
    causes = past_carrier(causes, events)
    if causes:
        root = _refine(causes[0], causes, world, library)
        said = root  # the line whose kind of failure is the incident's category
        if root.signature == UNRECOGNIZED and root.fields.get("message") == CUT_TRACEBACK:
            # a traceback cut before its exception says nothing of what failed: a warning the
            # process printed just before it does (`NCCL WARN Call to bind failed`)
            root = said = next((w for w in events if _leads(w, root)), root)
        elif _reason_precedes(root, library):
            root = _stated_before(root, events)
            # the line that began the failure names its kind when a signature of a cause knows
            # it (`NCCL WARN Cuda failure 'out of memory'`); a generic warning only says where
            # it began, and the report's own category (and the reason it states after) stands.
            # So does a catch-all's: a Python exception whose message goes on to the next line
            # (`RuntimeError: work = pg.broadcast(...): ` then `NCCL error in: ...`) is the
            # same report, its head naming no kind
            said = root if states_a_reason(root) and not catch_all(root, library) else said
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
            )
            + (
                f"; its process is the prefix of line {root.fields[OPENED_AT]}, which opens the"
                " traceback it ends"
                if OPENED_AT in root.fields
                else ""
            ),
        )
        culprit = locate(culprit, events)
        culprit = fingerprint_culprit(culprit, root, world)
        # the clues in order of trust, until one names the rank: the root's own words, then
        # what other lines say of the process that failed (analysis.clues)
        clues: tuple[Callable[[Culprit], Culprit], ...] = (
            lambda c: own_rank_culprit(c, root),
            lambda c: report_rank_culprit(c, root, events),
            lambda c: own_file_culprit(c, root, world),
            lambda c: primary_rank_culprit(c, root, library),
            lambda c: attribute(c, root, events, world),
            # no prefix at all: a process-group rank is the only name the log gives the rank
            # (with a tee header, `[Rank N]` is a rank of some group of that local rank)
            lambda c: pg_culprit(c, root, events, BURST_LINES),
            lambda c: oom_culprit(c, root, events, world),
            lambda c: pid_culprit(c, root, events, world),
            lambda c: same_error_culprit(c, root, events, world),
            lambda c: raised_after_culprit(c, root, events),
            lambda c: echoed_culprit(c, root, events, world),
            lambda c: quoted_culprit(c, root, events, world),
            lambda c: dead_worker_culprit(c, events),
            lambda c: launcher_culprit(c, events, world),
            lambda c: nccl_process_culprit(c, root, events, world),
            lambda c: raised_nccl_culprit(c, root, events, world),
            lambda c: task_culprit(c, root, world),
            lambda c: sole_worker_culprit(c, events, world),
            lambda c: device_culprit(c, root, events, world),
            lambda c: silent_rank_culprit(c, events, world),
        )
        for clue in clues:
            if culprit.rank is not None or culprit.local_rank is not None:
                break
            culprit = clue(culprit)
        culprit = shared_failure_culprit(culprit, root, library)
        category = stated_reason(said, events, library) or said.category or "python_exception"
        if category == "unknown":
            category = _burst_category(root, causes, library) or category
        if category == "cuda_error" and any(e.category == "gpu_hardware" for e in causes):
            # an Xid 79 / ECC error in the same incident says why CUDA failed: the GPU broke
            category = "gpu_hardware"
        return RootPick(root, culprit, category)
    deaths = [e for e in serious if signal_death(e) and not consequent_death(e, serious, world)]
    if deaths:
        root = first_observed(deaths)
        rank = field_int(root, "rank")
        if rank is None:
            rank = world.rank_of(root.line)
        local = field_int(root, "local_rank")
        code_s = root.fields.get("exit_code", "")
        code = field_int(root, "exit_code")
        name = root.fields.get("signal_name") or (
            EXIT_SIGNALS[code][0] if code is not None and code in EXIT_SIGNALS else None
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
        if field_int(root, "rank") is None and world.rank_of(root.line) is None:
            culprit = nccl_pid_culprit(culprit, root, world)
        if culprit.rank is None:
            culprit = report_culprit(culprit, root, events, library)
        if culprit.rank is None:
            culprit = pid_culprit(culprit, root, events, world)
        if culprit.rank is None and culprit.local_rank is None:
            culprit = sole_worker_culprit(culprit, events, world)
        category = (
            EXIT_SIGNALS[code][1]
            if code is not None and code in EXIT_SIGNALS
            else _SIGNAL_CATEGORY.get(name or "") or root.category or "process_killed"
        )
        together = aborted_together(root, deaths)
        if together:
            # each rank's watchdog took its own process down when the collective they were in
            # failed: they are the victims, and the rank they waited for is not named
            culprit = Culprit(
                rank=None,
                local_rank=None,
                host=culprit.host,
                task=None,
                confidence=0.0,
                reason=f"ranks {', '.join(together)} aborted in the same second with no error of "
                "their own: their watchdogs' takedown after a failed collective, the rank they "
                "waited for is not named",
            )
            category = "collective_timeout"
        return RootPick(root, culprit, category)
    symptoms = [e for e in serious if e.role == "symptom"]
    if symptoms:
        timeouts = [e for e in symptoms if e.category == "collective_timeout"] or symptoms
        # of the waits that timed out, the one report that names who never came (a monitored
        # barrier's `Rank 2 failed to pass`) says more than the first bare timeout, and one that
        # names the work (its op, its sequence number) more than a line that only says the
        # process goes down over it (`we are taking the entire process down`); reports that name
        # different ranks (Horovod's stall list with a line per rank: each waits for another) name
        # no one who never came
        named_missing = [e for e in timeouts if e.fields.get("missing")]
        root = (
            named_missing[0]
            if len({e.fields["missing"] for e in named_missing}) == 1
            else next((e for e in timeouts if _names_work(e)), timeouts[0])
        )
        lead = next((w for w in events if _leads(w, root)), None)
        if lead is not None:
            root = lead  # `NCCL WARN <what failed>` before the error code it returned
        elif _reason_precedes(root, library):
            root = _stated_before(root, events)
        elif root.signature == NCCL_RETURN_FRAME:
            # a frame of NCCL's return trace only points at an error; with no WARN before it,
            # the error its caller reported (`unhandled system error`, an XLA status) says what
            root = next(
                (e for e in symptoms if e.seq > root.seq and e.signature != NCCL_RETURN_FRAME),
                root,
            )
        # what the ranks say beats the launcher's first failure: torchrun's Root Cause names the
        # first rank its watchdog took down, a victim when another rank hung
        # (a barrier's report of who did not arrive first: it names them outright)
        named = (
            barrier_culprit(events)
            or store_barrier_culprit(events, world)
            or mismatch_culprit(events, world)
            or silent_culprit(events, world)
            or own_failure_culprit(root, events, world)
            or reported_culprit(events)
            or first_exit(events, world)
            or nccl_process_rank(root, events, world)
            or _sole_failure(root, events, world)
        )
        category = stated_reason(root, events, library) or root.category or "comm_error"
        return RootPick(root, named, category)
    summaries = [e for e in serious if e.role == "summary"]
    root = (
        past_wrappers(past_kill_list(first_observed(summaries), summaries), summaries)
        if summaries
        else events[0]
    )
    # only a launcher's report: the one rank it names as failed (`MPI_ABORT was invoked on rank
    # N`, `Process name: [[j,s],N]`), or the worker its summary names, is the culprit
    named = (
        reported_culprit(events)
        or reported_worker(root, world)
        or reported_task(root, world)
        or sole_worker(events, world)
        or primary_rank(root, library)
        or dead_worker(events)
        or own_report(root, world)
    )
    return RootPick(root, named, root.category or "launcher_error")


def _sole_failure(root: Event, events: Sequence[Event], world: World) -> Culprit | None:
    """A communication error with no rank of its own, and one worker the launcher reports
    failed after it: that worker's (a timeout's reporter is a victim: not named so)."""
    if root.category == "collective_timeout" or world.rank_of(root.line) is not None:
        return None
    return one_failed_worker(root, events, world)


def _names_work(e: Event) -> bool:
    """A timeout that says which work timed out: its op type or sequence number."""
    return bool(e.fields.get("op_type") or e.fields.get("seq"))


_ABORT = "terminate called"
"""libstdc++'s verbose terminate handler: a C++ abort starts here."""


def _refine(first: Event, causes: Sequence[Event], world: World, library: Library) -> Event:
    """The most telling line of the first failing rank's burst (e.g. `what():` over `terminate`)."""
    rank = world.rank_of(first.line)
    best = first
    for e in causes:
        if e.line.path != first.line.path or e.line.lineno - first.line.lineno > BURST_LINES:
            break
        same = (
            world.rank_of(e.line) == rank
            and e.line.local_rank == first.line.local_rank
            and e.line.task == first.line.task
        )
        if same and e.seq > first.seq and _ABORT in e.line.text and _ABORT not in first.line.text:
            # libstdc++'s abort after the process's own error (a destructor that threw while
            # the exception unwound): how the process died of it, not a better account of it
            break
        if same and e.seq > first.seq and e.category == "segfault" and _raised(best):
            # a crash signal after the process raised an exception: the interpreter dying in
            # its teardown (the destructors of CUDA, NCCL or a reader's queue), not a better
            # account of what failed
            break
        if same and _strength(e, library) > _strength(best, library):
            apart = e.line.lineno - best.line.lineno > _SAME_REPORT_LINES
            if apart and e.category != best.category and _own_report(best, library):
                # a failure a signature of its own knows, then another kind of failure some
                # lines on (a network error, then the CUDA fault of the torn-down communicator):
                # the process's first failure, not a better account of it
                break
            best = e
    return best


def _raised(e: Event) -> bool:
    """The exception line that ends a Python traceback (its `exception` field)."""
    return e.signature != TRACEBACK_START and bool(e.fields.get("exception")) and e.role == "cause"


_SAME_REPORT_LINES = 3
"""Lines within which a stronger line is the same report's (`terminate called`, then `what():`)."""


def _own_report(e: Event, library: Library) -> bool:
    """A cause a signature of its own knows, not the start of a traceback or a catch-all."""
    return e.role == "cause" and e.signature != TRACEBACK_START and not catch_all(e, library)


def _burst_category(root: Event, causes: Sequence[Event], library: Library) -> Category | None:
    """The category of the first cause a signature of its own knows in the lines printed with
    an unknown root (a `terminate called` whose `what():` another process's line cut off, while
    a process that failed with it printed its own): what failed, where the root does not say."""
    for e in causes:
        gap = e.line.lineno - root.line.lineno
        if e.line.path != root.line.path or gap < 0:
            continue
        if gap > BURST_LINES:
            break
        if e.category not in (None, "unknown") and not catch_all(e, library):
            return e.category
    return None
