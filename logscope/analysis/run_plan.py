"""A run that ran to the end of its plan: the last epoch its configuration sets (a config dump's
`max_epochs`), or the last iteration its step lines count to (`Iter [n/N]`), and the checkpoint
notice at that point. Such runners print no line when training ends (OpenMMLab's after_run hooks
log nothing of their own), their progress lines by epochs count steps within an epoch, and by
iterations the last step's line may not be logged before the final save: no step line says it
was the last. Where a step line states the time left to the end of the whole run (`eta:` of
trainers that count it over every epoch or iteration to come), the last one that leaves less than
a logging interval is the last step line the run prints."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..model import Event, Progress, clock_seconds, field_int

FINAL_EPOCH_FIELD = "final_epoch"
"""The field `RunPlan.saved` adds to the save after the last planned epoch."""
FINAL_ITERATION_FIELD = "final_iteration"
"""The field `RunPlan.saved` adds to the save at the last iteration."""
EPOCH_ENDED_FIELD = "epoch_ended"
"""The field of a line that says an epoch ended (SevenNet's `Epoch N elapsed: ...`)."""
LAST_EPOCH_ENDED_FIELD = "last_epoch_ended"
"""The field `RunPlan.ended` adds to the end of the last planned epoch."""


@dataclass(slots=True)
class RunPlan:
    """Fed the configuration lines that state `max_epochs`, the checkpoint saves that state the
    epoch or iteration they follow and the lines that say an epoch ended, in log order."""

    planned: int | None = None
    """The epochs the last configuration dump set."""

    def plan(self, e: Event) -> None:
        """A configuration line stating the epochs to train (a new dump: a restart re-reads it)."""
        planned = field_int(e, "max_epochs")
        if planned is not None and planned > 0:
            self.planned = planned

    def ended(self, e: Event) -> Event | None:
        """A line that says an epoch ended (`epoch_ended`); the end of the planned last epoch
        comes back with its `last_epoch_ended` field added: a line that says the run wound down
        (WOUND_DOWN_FIELDS)."""
        epoch = field_int(e, EPOCH_ENDED_FIELD)
        if self._past_plan(epoch):
            return replace(e, fields={**e.fields, LAST_EPOCH_ENDED_FIELD: str(epoch)})
        return None

    def _past_plan(self, epoch: int | None) -> bool:
        """`epoch` is the planned last one, or past it."""
        return epoch is not None and self.planned is not None and epoch >= self.planned

    def saved(self, e: Event, train_iters: int | None) -> Event | None:
        """A checkpoint notice; the one at (or past) the planned last epoch, or at (or past) the
        iterations the step lines count to (`train_iters`), comes back with its `final_epoch` or
        `final_iteration` field added: a line that says the run wound down (WOUND_DOWN_FIELDS)."""
        epoch = field_int(e, "epoch")
        if self._past_plan(epoch):
            return replace(e, fields={**e.fields, FINAL_EPOCH_FIELD: str(epoch)})
        iteration = field_int(e, "iteration")
        if iteration is not None and train_iters and iteration >= train_iters:
            return replace(e, fields={**e.fields, FINAL_ITERATION_FIELD: str(iteration)})
        return None


RUN_ETA_FIELD = "run_eta"
"""The field of a step line that states the time left to the end of the whole run (`H:MM:SS`,
after `N day(s), ` past a day), where its trainer counts it so: OpenMMLab's runners, detectron2's
and PaddleDetection's printers. A per-epoch ETA (the MetricLogger of torchvision's references) is
not one."""


def last_step_by_eta(progress: Progress, interval: float | None) -> tuple[Event, float] | None:
    """The last step line, where it states the time left to the end of the run and that time is
    less than the run's logging interval (`Progress.logged_interval_s`: no step line would come
    before the end), with the seconds it stated. The interval must be known: an ETA alone does
    not say how often a line comes."""
    last = progress.last
    left = clock_seconds(last.fields.get(RUN_ETA_FIELD)) if last is not None else None
    if last is None or left is None or interval is None or left >= interval:
        return None
    return last, left
