"""How a job ended: crashed, hung, cut by the scheduler, completed or truncated, from its last
incident, its end banners and the progress cadence; and the hang incident when it hung."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from types import MappingProxyType

from ..match.events import TRACEBACK_START
from ..model import (
    INPUT_SHIFT,
    Category,
    Culprit,
    Event,
    Incident,
    Job,
    Outcome,
    Progress,
    World,
    duration,
    field_int,
    input_of,
)
from .incidents import SPLIT_AFTER_PROGRESS
from .root_cause import last_reason
from .run_plan import (
    FINAL_EPOCH_FIELD,
    FINAL_ITERATION_FIELD,
    LAST_EPOCH_ENDED_FIELD,
    last_step_by_eta,
)
from .silence import hang_threshold

_END_OUTCOME = MappingProxyType(
    {
        "timelimit": Outcome.timelimit,
        "cancelled": Outcome.cancelled,
        "preemption": Outcome.preempted,
        "node_failure": Outcome.node_failure,
    }
)
_WOUND = MappingProxyType(
    {
        "comm_teardown": "its processes tore their communicators down",
        "training_done": "its training loop saved its final checkpoint",
        "loop_done": "its training loop returned",
        "last_epoch": "its last epoch ran to its last step",
        FINAL_EPOCH_FIELD: "it saved after the last epoch its configuration set",
        FINAL_ITERATION_FIELD: "it saved at the last iteration its steps count to",
        LAST_EPOCH_ENDED_FIELD: "the last epoch its plan states ended",
    }
)
"""Fields of a status line that says the run wound down without an exit line of its own, and
how the outcome says it: processes tearing their communicators down, the training loop's final
checkpoint, the training loop's return (Megatron's `[after training is done]`), Keras's last
epoch, the save at the end of its plan, the end of its last planned epoch (RunPlan)."""
WOUND_DOWN_FIELDS = frozenset(_WOUND)
JOB_STATE = "job_state"
"""The field of an exit line that states the whole job's end wherever it stands in the log."""


@dataclass(frozen=True, slots=True)
class Ending:
    outcome: Outcome
    reason: str
    hang_s: float | None = None


TOLD_TO_STOP = frozenset({"process_killed", "cancelled", "timelimit", "preemption"})
"""What the scheduler or a person does to a job: after a long silence, the end of a hang."""


def _all_say(incident: Incident, field: str) -> bool:
    """Every line of the incident that reports a failure says `field` (an `info` line, a note
    that a thread handled an error, says nothing of how anything ended)."""
    return all(
        e.fields.get(field)
        for e in (incident.root_cause, *incident.cascade)
        if e is incident.root_cause or e.severity != "info"
    )


def retries_only(incident: Incident) -> bool:
    """An incident made only of connect attempts being retried (`retrying`): a wait still under
    way, not a failure yet."""
    return _all_say(incident, "retrying")


def _ends_retrying(incident: Incident) -> bool:
    """The incident's last line says its emitter tries again (`retrying`): a connect attempt, the
    etcd rendezvous's next try after an error it handled. An incident made only of retries
    (retries_only) is one such. Its other info lines after it end nothing (one machine's report
    that its own links are up, while another still retries)."""
    last = max(
        (
            e
            for e in (incident.root_cause, *incident.cascade)
            if e.severity != "info" or e.fields.get("retrying")
        ),
        key=lambda e: e.seq,
        default=incident.root_cause,
    )
    return bool(last.fields.get("retrying"))


def goes_on_only(incident: Incident) -> bool:
    """An incident made only of lines whose emitter says it goes on after them (`goes_on`: JAX
    falling back to the CPU): the program had not ended when the log stopped."""
    return _all_say(incident, "goes_on")


def stops_the_job(incident: Incident) -> bool:
    """An end banner, or the word that the job's processes were killed or cancelled: what ends
    a job, which after a long silence ends a hang and after a failure is its consequence."""
    return incident.root_cause.role == "end" or incident.category in TOLD_TO_STOP


def decide_outcome(
    incidents: Sequence[Incident],
    progress: Progress,
    exits: Sequence[Event],
    last_progress: datetime | None,
    end_time: datetime | None,
    cadence: float | None,
    allowed_s: float | None = None,
    wound_down: Event | None = None,
) -> Ending:
    """How the job ended, from the last incident, the end banners and the progress cadence
    (`Progress.logged_interval_s`, which the caller has). `allowed_s`: the silence the phase it
    ended in allows (silence.allowed_silence), when the caller knows the phase. `wound_down`: the
    last line that says the run wound down without an exit line of its own: processes tearing their
    communicators down (`comm_teardown`), the training loop's final checkpoint (`training_done`),
    its return (`loop_done`)."""
    final = incidents[-1] if incidents else None
    if final is not None and progress.steps_after(final.root_cause.seq) >= SPLIT_AFTER_PROGRESS:
        final = None  # training went on after the last incident
    threshold = hang_threshold(cadence) if allowed_s is None else allowed_s
    gap = (end_time - last_progress).total_seconds() if end_time and last_progress else None

    if final is not None:
        end = final.root_cause
        if (
            final.category == "hang"
            and end.severity != "fatal"
            and not any(
                e.role in ("summary", "end") or e.category != "hang" or e.severity == "fatal"
                for e in final.cascade
            )
        ):
            # the log ends while ranks say they wait (for a rank at init, a barrier), and no
            # line of theirs ended a process (the heartbeat monitor's LOG(FATAL) does)
            return Ending(Outcome.hung, f"the log ends while ranks wait: {final.title}")
        if _ends_retrying(final):
            # the log ends while a process still retries (to connect, its rendezvous after an
            # error it handled): the job had not ended when the log stopped
            return Ending(Outcome.truncated, f"the log ends while it retries: {final.title}")
        if goes_on_only(final):
            return Ending(
                Outcome.truncated,
                f"the log ends after a failure the program went on from: {final.title}",
            )
        if final.category in TOLD_TO_STOP:
            # told to stop after a long silence: it had hung
            end_at = end.time or end_time
            gap = (end_at - last_progress).total_seconds() if end_at and last_progress else gap
            if gap is not None and gap > threshold:
                how = {"timelimit": "killed at its time limit", "process_killed": "killed"}
                return Ending(
                    Outcome.hung,
                    f"no progress for {duration(gap)} before the job was "
                    f"{how.get(final.category or '', 'cancelled')}",
                    gap,
                )
        if end.role != "end":
            if _end_in(final, ("node_failure",)) is not None:
                # the scheduler's last word: the node went down after (or with) the fault
                return Ending(
                    Outcome.node_failure, f"{final.title}; then the scheduler said the node failed"
                )
            if final.category in ("node_failure", "preemption") and not _raised_after(final):
                # the node itself went away or was reclaimed (a cluster manager's word, not a
                # scheduler's end)
                outcome = _END_OUTCOME[final.category]
                return Ending(outcome, f"{final.title} ({end.signature})")
            after = _ended_after(final, end, end_time, threshold)
            if after is not None:
                return after
            if _library_records_only(final, wound_down):
                # NCCL returns the error to its caller, which raises or waits: no line says
                # any process ended
                return Ending(
                    Outcome.truncated,
                    f"the log ends after NCCL's own reports, no process seen ending: {final.title}",
                )
            return Ending(Outcome.crashed, f"{final.title} ({end.signature})")
        # the scheduler's last word says why: a step cancelled, then its job `DUE TO
        # PREEMPTION` (a plain cancel after it, torchrun's own SignalException, says no more)
        last = last_reason((end, *final.cascade, *final.evidence)) or end
        if last is not end and last.role == "end" and last.category != end.category:
            outcome = _END_OUTCOME[last.category or ""]
            return Ending(outcome, f"{final.title}; then the scheduler: {_quote(last)}")
        outcome = _END_OUTCOME.get(end.category or "", Outcome.cancelled)
        return Ending(outcome, final.title)
    _first, it = progress.iterations()
    if progress.is_last(it):
        return Ending(
            Outcome.completed, f"reached the last iteration ({it}/{progress.train_iters})"
        )
    last_epoch = _last_epoch_reported(progress)
    if last_epoch is not None:
        return Ending(
            Outcome.completed,
            f"no failure, and its last epoch reported its loss: {_quote(last_epoch)}",
        )
    if by_eta := last_step_by_eta(progress, cadence):
        return Ending(
            Outcome.completed,
            f"no failure, and its last step line left {duration(by_eta[1])} of the run, less "
            f"than one logging interval: {_quote(by_eta[0])}",
        )
    if exits and not _trained_after(exits[-1], progress):
        return Ending(Outcome.completed, f"the job says it exited: {_quote(exits[-1])}")
    stated = next((e for e in exits if JOB_STATE in e.fields), None)
    if stated is not None:
        # a scheduler's report of the whole job's state (LSF's `Done`), which its site may put
        # above the job's output: where it stands says nothing, the state says how it ended
        return Ending(Outcome.completed, f"the scheduler says the job is done: {_quote(stated)}")
    if wound_down is not None and _ended_there(wound_down, progress):
        wound = next(_WOUND[k] for k in _WOUND if k in wound_down.fields)
        return Ending(Outcome.completed, f"no failure, and {wound}: {_quote(wound_down)}")
    if gap is not None and gap > threshold:
        return Ending(Outcome.hung, f"no progress for the last {duration(gap)} of the log", gap)
    if len(progress):
        return Ending(Outcome.truncated, "the log ends while training was still progressing")
    # lines of the job and nothing says it ended: the log stops while it runs (a window of
    # a longer log, or a job still going)
    return Ending(Outcome.truncated, "the log ends with no sign that the job ended")


def _ended_there(wound_down: Event, progress: Progress) -> bool:
    """No failure, and no step after the line that says the run wound down (the processes took
    their communicators down, the loop returned); detectron2's writer hook reports the last step
    after its checkpointer saved (`training_done`: one line); after Keras's last epoch header,
    that epoch's steps to its last."""
    if "last_epoch" in wound_down.fields:
        return _last_epoch_done(wound_down, progress)
    same_step = 1 if "training_done" in wound_down.fields else 0
    return progress.count_after(wound_down.seq) <= same_step


def _last_epoch_reported(progress: Progress) -> Event | None:
    """The last progress line, where it reports epoch N of N with the loss it reached (and,
    where it states the epoch's step, its step N of N): the plan's last report."""
    last = progress.last
    if last is None or "loss" not in last.fields:
        return None
    epoch, epochs = field_int(last, "epoch"), field_int(last, "epochs")
    if epoch is None or not epochs or epoch != epochs:
        return None
    if last.fields.get("step") != last.fields.get("steps"):
        return None  # a step within the last epoch, not its end
    return last


def _last_epoch_done(begun: Event, progress: Progress) -> bool:
    """The last epoch began (`begun`, its `Epoch N/N`) and the last progress line after it is
    an epoch's last step (`steps/steps`): the fit loop ran through it (a log cut inside the
    epoch ends on a step before the last). Every progress line after it must be a step that
    states its loss: another epoch's header (a second `fit` of the same script) states none,
    and says training went on."""
    last = progress.last
    if last is None or last.seq < begun.seq or not progress.losses_after(begun.seq):
        return False
    step, steps = last.fields.get("step"), last.fields.get("steps")
    return step is not None and step == steps


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
    """A hang rooted at the last progress line (the silence began there): `incident` (an end
    banner after a long silence: scancel, the time limit) recategorised, its banner the
    evidence, or, with no incident, a new one."""
    it = field_int(last, "iteration") if last is not None else None
    stopped = f" after iteration {it}" if it is not None else ""
    title = f"Training hung{stopped}: {reason}"
    if incident is not None:
        hung = replace(
            incident,
            category="hang",
            severity="error",
            title=title,
            explanation=_HANG_EXPLANATION + " " + incident.explanation,
            remedies=_HANG_REMEDIES + incident.remedies,
            start=last.time if last is not None else incident.start,
        )
        if last is None:
            return hung
        return replace(
            hung,
            root_cause=last,
            evidence=(incident.root_cause, *incident.evidence),
            iteration=field_int(last, "iteration"),
        )
    if last is None:
        return None
    return hang_at(last, title, _HANG_EXPLANATION, _HANG_REMEDIES)


def incident_at(
    root: Event,
    category: Category,
    title: str,
    explanation: str,
    remedies: tuple[str, ...],
    culprit: Culprit | None = None,
    cascade: tuple[Event, ...] = (),
) -> Incident:
    """An incident an analysis of the whole log makes of its own (no signature's), rooted at
    `root`."""
    return Incident(
        id="",
        category=category,
        severity="error",
        title=title,
        explanation=explanation,
        remedies=remedies,
        references=(),
        root_cause=root,
        culprit=culprit,
        cascade=cascade,
        evidence=(),
        iteration=field_int(root, "iteration"),
        start=root.time,
        end=cascade[-1].time if cascade else None,
    )


def hang_at(
    root: Event,
    title: str,
    explanation: str,
    remedies: tuple[str, ...],
    culprit: Culprit | None = None,
) -> Incident:
    """A hang incident of its own, rooted at the line where the silence began."""
    return incident_at(root, "hang", title, explanation, remedies, culprit)


def hang_incident(
    incidents: Sequence[Incident], last: Event | None, ending: Ending
) -> list[Incident]:
    """Name the final hang of an attempt whose last progress line is `last`: its last incident
    (an end banner) becomes `hang`, or, with no incident at all, a hang incident rooted there."""
    out = list(incidents)
    if out and stops_the_job(out[-1]):
        out[-1] = as_hang(out[-1], last, ending.reason) or out[-1]
    elif not out:
        hung = as_hang(None, last, ending.reason)
        if hung is not None:
            out.append(hung)
    return out


_QUOTE_CHARS = 120


def _quote(e: Event) -> str:
    """A line quoted in a reason: whole when short, else its start (an `mllog` record is a whole
    JSON object) and what its signature read from it, with where it is."""
    text = e.line.text.strip()
    said = ""
    if len(text) > _QUOTE_CHARS:
        text = text[: _QUOTE_CHARS - 1].rstrip() + "…"
        said = "".join(f"; {k} {v}" for k, v in e.fields.items())
    return f"{text} (line {e.line.lineno}{said})"


def _raised_after(final: Incident) -> bool:
    """A traceback opens after the incident's root: a process that outlived the lost node (the
    driver whose actors died with it) raised next, and its crash, not the node, ended the job."""
    root = final.root_cause
    return any(e.signature == TRACEBACK_START and e.seq > root.seq for e in final.cascade)


def _ended_after(
    final: Incident, fault: Event, end_time: datetime | None, threshold: float
) -> Ending | None:
    """A failure the job sat through until the scheduler ended it: hung, when the end came
    longer than the hang threshold after the fault (a dead rank leaves its peers waiting); the
    time limit or preemption itself when it came sooner or the log has no times. A plain cancel
    soon after a failure is srun's own reaction to it (--kill-on-bad-exit): still a crash."""
    ended = _end_in(final, ("timelimit", "preemption", "cancelled"))
    if ended is None:
        return None
    end_at = ended.time or end_time
    # only a fault whose own line is stamped: a time placed from the lines around it says
    # nothing of how long the job sat after it
    known = fault.time if fault.time_exact else None
    gap = (end_at - known).total_seconds() if end_at and known else None
    if gap is not None and gap > threshold:
        return Ending(
            Outcome.hung,
            f"{final.title}; then nothing for {duration(gap)} until the scheduler ended the job",
            gap,
        )
    if ended.category == "cancelled":
        if _terminated(fault):
            # the SIGTERM the fault reports is the one a cancel sends first
            return Ending(Outcome.cancelled, f"{final.title}; the scheduler cancelled the job")
        return None
    return Ending(_END_OUTCOME[ended.category or ""], f"{final.title}; then {ended.category}")


def _library_records_only(incident: Incident, wound_down: Event | None) -> bool:
    """An incident made only of NCCL's own log records (`NCCL WARN`, `NCCL INFO ... -> N`): the
    library's account of an error it returns to the program, with no sign of the program's
    reaction (an exception, an exit, a communicator it tore down after: `wound_down`)."""
    if wound_down is not None and wound_down.seq > incident.root_cause.seq:
        return False
    lines = (incident.root_cause, *incident.cascade, *incident.evidence)
    return all(
        " NCCL WARN " in f" {e.line.text}" or " NCCL INFO " in f" {e.line.text}" for e in lines
    )


def _trained_after(e: Event, progress: Progress) -> bool:
    """Training went on after `e` in its own input: a stage of a pipeline ended (its loop's
    last word), the next one ran, so `e` is not the job's end."""
    end_of_input = (input_of(e.seq) + 1) << INPUT_SHIFT
    return progress.steps_between(e.seq, end_of_input) >= SPLIT_AFTER_PROGRESS


def _terminated(e: Event) -> bool:
    """A process ended by SIGTERM (its strsignal name `Terminated`, exit code -15 or 143): the
    signal a scheduler's cancel sends first, before SIGKILL."""
    code = field_int(e, "exit_code")
    return e.fields.get("signal_name") in ("SIGTERM", "Terminated") or code in (-15, 143)


def _end_in(final: Incident, categories: tuple[str, ...]) -> Event | None:
    """The first scheduler's end of one of `categories` among the incident's lines."""
    return next(
        (
            e
            for e in (*final.cascade, *final.evidence)
            if e.role == "end" and e.category in categories
        ),
        None,
    )
