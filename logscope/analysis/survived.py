"""What the run outlived: an error that training went on after, or that came after the run said
it had completed, is not what ended the job. Such incidents become notes, counted per template
and rank, and leave the verdict to what the job did not survive."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from ..match.events import UNRECOGNIZED
from ..match.failure_block import FAILURE_ENTRY
from ..match.signatures import Library
from ..match.unrecognized import mask
from ..model import (
    Attempt,
    Category,
    Event,
    Incident,
    Progress,
    Survived,
    SurvivedKind,
    World,
    field_int,
    input_of,
)
from .clock import timestamp
from .incident_text import fill_title
from .incidents import SPLIT_AFTER_PROGRESS, error_of
from .job_outcome import WOUND_DOWN_FIELDS, retries_only
from .ledger import attempt_of, owner
from .startup_wait import DONE_FIELD

_SERIOUS = ("fatal", "error")
_RETURNED = WOUND_DOWN_FIELDS - {"comm_teardown"}
"""Fields of a status line that says the training loop itself came to its end (returned, saved
its final checkpoint, ran its last epoch): an error before it in its attempt did not stop the
training. Not communicators torn down, which a failure's teardown does too."""
HOST_REPORT = "host_report"
"""A field of the reports each host of a job makes of its own part (SageMaker's training toolkit
runs on every host): a host's success after a host's failure is not the run's completion."""
JOB_REPORT = "job_report"
"""A field of a service's report of the whole job's status (SageMaker's SDK: `Failed - Training
job failed`)."""
LOOP_EXIT_FIELD = "loop_exit"
"""A completion marker's field where the line is printed however its loop ended (YOLOX's
`after_train` in a `finally`): a failure after it is how the loop ended, not teardown."""


def completes(e: Event) -> bool:
    """An exit marker that says the run itself completed: not one worker's or process's exit
    (`pid`, `agent`, `process_exit`), nor an exit on a signal it was sent."""
    return e.kind == "exit" and not e.fields.keys() & {
        "pid",
        "agent",
        "process_exit",
        "signal_name",
    }


@dataclass(frozen=True, slots=True)
class _Scope:
    """Where an incident's attempt ends, and its run's first completion marker."""

    last_seq: int | None
    completed: Event | None


def outlived(
    incidents: Sequence[Incident],
    failures: Sequence[Event],
    attempts: Sequence[Attempt],
    progress: Progress,
    markers: Sequence[Event],
    world: World,
    library: Library,
) -> tuple[list[Incident], tuple[Survived, ...]]:
    """The incidents the run did not outlive, and notes of those it did. An incident is
    outlived when, in its attempt, progress went on after its last line or the run's own
    completion marker followed it (a scheduler's end banner only by the latter), unless a
    signature calls it fatal and a failure the run did not outlive follows it. An incident
    after the completion marker is teardown, except the scheduler's end: the job had not exited."""

    completions = _completions(markers, attempts, failures)
    first_done: dict[int | None, Event] = {}
    for e in completions:  # in log order: the first of each attempt
        first_done.setdefault(_attempt(e, attempts), e)
    ends = {a.index: a.last_seq for a in attempts}
    returned = [m for m in markers if m.kind == "status" and m.fields.keys() & _RETURNED]
    passed = _barriers_passed(markers)
    connected = [m for m in markers if m.fields.keys() & _ANSWERS.keys()]
    joined = [m for m in markers if m.fields.keys() & _JOINED_FIELDS]
    kept: list[Incident] = []
    notes = caught(failures, library)
    harmed: set[int | None] = set()
    for inc in reversed(incidents):
        index = owner(inc, attempts) if attempts else None
        if index is None:
            scope = _Scope(None, completions[0] if completions else None)
        else:
            scope = _Scope(ends[index], first_done.get(index))
        verdict = (
            _answered(inc, passed)
            or _connected(inc, connected)
            or _went_on(inc, joined)
            or _outlived(inc, scope, progress, library)
            or _loop_returned(inc, scope, returned, library)
        )
        if verdict is not None and verdict[0] == "survived" and _harmful(inc, index, harmed):
            verdict = None
        if verdict is None:
            kept.append(inc)
            harmed.add(index)
        else:
            notes.append(_of_incident(verdict[0], inc, verdict[1]))
    kept.reverse()
    return kept, tuple(_notes(notes, world))


def exit_after_completion(
    failures: Sequence[Event], markers: Sequence[Event], attempts: Sequence[Attempt]
) -> int | None:
    """The exit code a launcher or the scheduler last reported after the run's first completion
    marker, when it is not 0: the job's own word on how it ended, whatever its teardown was."""

    done = _completions(markers, attempts, failures)
    if not done:
        return None
    first = done[0]
    codes = [
        (e.seq, code)
        for e in [*failures, *markers]
        if (code := field_int(e, "exit_code")) is not None and _after(e, first, attempts)
    ]
    last = max(codes, default=None)
    return last[1] if last is not None and last[1] != 0 else None


def _after(e: Event, done: Event, attempts: Sequence[Attempt]) -> bool:
    """Whether `e` came after the completion `done`: in the same input by position; in another
    (a job's `.out` beside the main log) by attempt, then by time where both lines have one."""
    if input_of(e.seq) == input_of(done.seq):
        return e.seq > done.seq
    mine, theirs = _attempt(e, attempts), _attempt(done, attempts)
    if mine is not None and theirs is not None and mine != theirs:
        return mine > theirs
    t, d = timestamp(e.time), timestamp(done.time)
    return t is None or d is None or t >= d


def _attempt(e: Event, attempts: Sequence[Attempt]) -> int | None:
    return attempt_of(e, attempts, e.time) if attempts else None


def _completions(
    markers: Sequence[Event], attempts: Sequence[Attempt], failures: Sequence[Event]
) -> list[Event]:
    """The lines that say the run completed, in log order: its own completion markers, and per
    attempt the last worker's success when every worker a launcher started succeeded. One host's
    report of its success (`host_report`) after a host reported its failure, or after the job's
    failed status (`job_report`), is that host's."""
    failed = min(
        (f.seq for f in failures if f.fields.keys() & {HOST_REPORT, JOB_REPORT}), default=None
    )
    done = [
        *(
            e
            for e in markers
            if completes(e)
            and not (HOST_REPORT in e.fields and failed is not None and failed < e.seq)
        ),
        *_workers_done(markers, attempts),
        *_agents_done(markers, attempts),
    ]
    return sorted(done, key=lambda e: e.seq)


def _agents_done(markers: Sequence[Event], attempts: Sequence[Attempt]) -> Iterator[Event]:
    """Per attempt, the last launcher agent's success (torchrun's `worker group successfully
    finished`, one per node) when as many agents said so as the rendezvous counted
    (`group_world_size`; one where it printed none)."""
    expected: dict[int | None, int] = {}
    done: dict[int | None, dict[tuple[str | None, int | None, int], Event]] = {}
    for e in markers:
        if e.kind == "status" and (count := field_int(e, "agents")) is not None:
            index = _attempt(e, attempts)
            expected[index] = max(expected.get(index, 0), count)
        elif e.kind == "exit" and "agent" in e.fields:
            # one agent a node: its host or srun task, or its input where the log names neither
            node = (e.line.host, e.line.task, input_of(e.seq))
            done.setdefault(_attempt(e, attempts), {}).setdefault(node, e)
    for index, finished in done.items():
        if len(finished) >= expected.get(index, 1):
            yield max(finished.values(), key=lambda e: e.seq)


def _workers_done(markers: Sequence[Event], attempts: Sequence[Attempt]) -> Iterator[Event]:
    """Per attempt, the last `exits successfully` of a launcher's workers when every worker it
    said it started (a launch line naming its `pid`) exited so: the job's own end."""
    spawned: dict[int | None, set[str]] = {}
    done: dict[int | None, dict[str, Event]] = {}
    for e in markers:
        pid = e.fields.get("pid")
        if pid is None:
            continue
        if e.kind == "launch":
            spawned.setdefault(_attempt(e, attempts), set()).add(pid)
        elif e.kind == "exit" and "signal_name" not in e.fields:
            done.setdefault(_attempt(e, attempts), {}).setdefault(pid, e)
    for index, pids in spawned.items():
        exited = done.get(index, {})
        if pids <= exited.keys():
            yield max((exited[p] for p in pids), key=lambda e: e.seq)


def _harmful(inc: Incident, index: int | None, harmed: set[int | None]) -> bool:
    """A signature calls it fatal, and a failure the run did not outlive followed it."""
    return inc.severity == "fatal" and index in harmed


def _outlived(
    inc: Incident, scope: _Scope, progress: Progress, library: Library
) -> tuple[SurvivedKind, str] | None:
    root = inc.root_cause
    done = scope.completed
    if done is not None:
        sig = library.by_id(done.signature)
        what = fill_title(sig.title, done.fields) if sig is not None else done.signature
        where = f"{what} (line {done.line.lineno})"
        if done.seq < root.seq:
            if any(e.role == "end" for e in _lines(inc)):
                # the scheduler ended a job whose training had finished: it never exited (a hang
                # at exit, a stuck teardown), and that ending is the job's
                return None
            if LOOP_EXIT_FIELD in done.fields:
                return None
            return "teardown", f"after the run said it completed: {where}"
        return "survived", f"the run completed after it: {where}"
    if root.role == "end":
        return None  # the scheduler ended the job; only the run's own completion outlives it
    last = max(e.seq for e in _lines(inc))
    recurred = _recurring(inc, last, progress)
    if recurred is not None:
        return "survived", recurred
    until = scope.last_seq if scope.last_seq is not None else last + 2**62
    after = progress.steps_between(last, until + 1)
    if after >= SPLIT_AFTER_PROGRESS:
        return "survived", f"training went on: {after} steps after it"
    if after:
        # fewer lines, but steps numbered: each step is a collective of every rank, so a job
        # whose step count moved on by as many steps after the error lost no rank to it
        first, now = progress.iterations_between(last, until + 1)
        before = progress.last_iteration_before(last)
        base = before if before is not None else first
        if base is not None and now is not None and now - base >= SPLIT_AFTER_PROGRESS:
            return "survived", f"training went on: from iteration {base} to {now} after it"
        if progress.is_last(now):
            # a step line after it says the run ran its last iteration: its own completion
            return "survived", (
                f"the run reached its last iteration after it ({now}/{progress.train_iters})"
            )
    return None


def _loop_returned(
    inc: Incident, scope: _Scope, returned: Sequence[Event], library: Library
) -> tuple[SurvivedKind, str] | None:
    """The training loop said it came to its end after the incident's last line, in its attempt
    and input: the error did not stop training. Not when a launcher reported a process's end in
    it, nor the scheduler ended the job: those say a process did end."""
    lines = list(_lines(inc))
    if any(e.role in ("summary", "end") for e in lines):
        return None
    last = max(e.seq for e in lines)
    until = scope.last_seq if scope.last_seq is not None else last + 2**62
    for m in returned:
        if last < m.seq <= until and input_of(m.seq) == input_of(last):
            sig = library.by_id(m.signature)
            what = fill_title(sig.title, m.fields) if sig is not None else m.signature
            return (
                "survived",
                f"its training loop came to its end after it: {what} (line {m.line.lineno})",
            )
    return None


def _recurring(inc: Incident, last: int, progress: Progress) -> str | None:
    """An error that came again and again while training went on: every serious line of the
    incident is its root's signature and exception, nothing else (no launcher's report, no
    scheduler's end) came among them, and the run made steps between the first and the last.
    The run outlived the first, so each one after it is the same error, caught (a worker's
    logged exception, a skipped sample): the last one too, with nothing after it to say it
    ended the job. `last`: the order key of its last line."""
    root = inc.root_cause
    for e in _lines(inc):
        if e.role in ("end", "summary"):
            return None
        if e.severity in _SERIOUS and error_of(e) != error_of(root):
            return None
    steps = progress.steps_between(root.seq, last)
    if steps < SPLIT_AFTER_PROGRESS:
        return None
    return f"the same error came again while training went on: {steps} steps among its lines"


def _barriers_passed(markers: Sequence[Event]) -> dict[str, list[Event]]:
    """The lines where a rank said it passed a store-based barrier (`Rank 3: Completed
    store-based barrier for key:K`), by key, in log order. The barrier is one counter in the
    store that every rank adds to: whichever rank sees it reach world_size has seen every rank
    arrive, so its line answers the waits of all ranks at that key before it."""
    passed: dict[str, list[Event]] = {}
    for m in markers:
        if key := m.fields.get("barrier_done"):
            passed.setdefault(key, []).append(m)
    return passed


def _answered(
    inc: Incident, passed: Mapping[str, Sequence[Event]]
) -> tuple[SurvivedKind, str] | None:
    """A hang made of waits at a barrier (a `key`) that some rank later said it passed: every
    rank had arrived, the wait ended, the job went on."""
    if inc.category != "hang":
        return None
    waits = [e for e in _lines(inc) if e.category == "hang" and e.fields.get("key")]
    if not waits or len(waits) != sum(1 for _ in _lines(inc)):
        return None
    answers = [
        next((a for a in passed.get(e.fields["key"], ()) if a.seq > e.seq), None) for e in waits
    ]
    if any(a is None for a in answers):
        return None
    last = max((a for a in answers if a is not None), key=lambda a: a.seq)
    where = f"line {last.line.lineno}"
    return "survived", f"the barrier was passed later ({where}): every rank had joined"


_ANSWERS: Mapping[str, str] = MappingProxyType(
    {
        "nccl_connected": "NCCL connected",
        "server_up": "the server answered",
        "session_started": "every task answered",
    }
)
"""Fields of the markers that say a peer the job retried to reach, or waited for, is up: NCCL
connected its rings (`Connected all rings`), a server the trainer polled answered (TRL's `Server
is up!`), TensorFlow's master created its session once every task had answered."""
AWAITS_FIELD = "awaits"
"""The field of a line that says its process waits for a peer to answer, with no timeout of its
own (TensorFlow's master, for a task): a hang where the log ends, answered by a marker after it."""


def _waits_only(inc: Incident) -> bool:
    return all(e.fields.get(AWAITS_FIELD) for e in _lines(inc))


def _connected(inc: Incident, connected: Sequence[Event]) -> tuple[SurvivedKind, str] | None:
    """Connect retries, or waits for a peer (AWAITS_FIELD), that a later marker answered
    (_ANSWERS): the peer came up."""
    retries = retries_only(inc)
    if not (retries or _waits_only(inc)):
        return None
    done = _first_after(inc, connected)
    if done is None:
        return None
    what = next(v for k, v in _ANSWERS.items() if k in done.fields)
    waited = "the retries" if retries else "the waits"
    return "survived", f"{what} after {waited} (line {done.line.lineno})"


_JOINED_FIELDS = frozenset({DONE_FIELD, "nccl_connected", "barrier_done"})
"""Fields of the start-up milestones every process of the job must reach: init_process_group
returned on every rank (Lightning's `All distributed processes registered`), NCCL connected its
rings, a store-based barrier completed."""


def _went_on(inc: Incident, joined: Sequence[Event]) -> tuple[SurvivedKind, str] | None:
    """Error lines no signature knows, after which the job reached a start-up milestone that
    every process must reach: whoever printed them went on."""
    if any(e.signature != UNRECOGNIZED for e in _lines(inc)):
        return None
    after = _first_after(inc, joined)
    if after is None:
        return None
    return "survived", f"every process went on to start (line {after.line.lineno})"


def _first_after(inc: Incident, markers: Sequence[Event]) -> Event | None:
    """The first of `markers` after the incident's last line, in the same input."""
    last = max(e.seq for e in _lines(inc))
    return next((m for m in markers if m.seq > last and input_of(m.seq) == input_of(last)), None)


def _lines(inc: Incident) -> Iterator[Event]:
    yield inc.root_cause
    yield from inc.cascade
    yield from inc.evidence


@dataclass(frozen=True, slots=True)
class _Outlived:
    kind: SurvivedKind
    root: Event
    title: str
    category: Category
    lines: tuple[Event, ...]
    """The root and the lines of the same template it brought (the same error on every rank)."""
    reason: str


def _of_incident(kind: SurvivedKind, inc: Incident, reason: str) -> _Outlived:
    template = mask(inc.root_cause.line.text)
    same = tuple(
        e
        for e in _lines(inc)
        if e is inc.root_cause or (e.severity in _SERIOUS and mask(e.line.text) == template)
    )
    return _Outlived(kind, inc.root_cause, inc.title, inc.category, same, reason)


def caught(failures: Sequence[Event], library: Library) -> list[_Outlived]:
    """Exceptions that ended a traceback the program logged below error level and went on
    (match.events marks them `caught`): survived by nature."""
    out = []
    for e in failures:
        if e.fields.get("caught") != "true":
            continue
        sig = library.by_id(e.signature)
        title = fill_title(sig.title, e.fields) if sig is not None else e.signature
        reason = "the program logged this traceback below error level and went on"
        out.append(_Outlived("survived", e, title, e.category or "python_exception", (e,), reason))
    return out


def _notes(outlived: Sequence[_Outlived], world: World) -> Iterator[Survived]:
    """One note per kind and template of a root cause, counted per rank (and srun task)."""
    groups: dict[tuple[SurvivedKind, str], list[_Outlived]] = {}
    for o in sorted(outlived, key=lambda o: o.root.seq):
        groups.setdefault((o.kind, mask(o.root.line.text)), []).append(o)
    for (kind, template), members in groups.items():
        first = members[0]
        per_rank: dict[int, int] = {}
        per_task: dict[int, int] = {}
        count = 0
        for o in members:
            count += len(o.lines)
            for e in o.lines:
                rank = _rank(e, world)
                if rank is not None:
                    per_rank[rank] = per_rank.get(rank, 0) + 1
                elif e.line.task is not None:
                    per_task[e.line.task] = per_task.get(e.line.task, 0) + 1
        yield Survived(
            kind=kind,
            title=first.title,
            category=first.category,
            signature=first.root.signature,
            template=template,
            count=count,
            ranks=tuple(sorted(per_rank.items())),
            tasks=tuple(sorted(per_task.items())),
            first=first.root,
            reason=first.reason,
        )


def _rank(e: Event, world: World) -> int | None:
    if e.signature == FAILURE_ENTRY:
        return field_int(e, "rank")
    return world.rank_of(e.line)
