"""A run by epochs that ran its last planned epoch: the number of epochs its configuration sets
(a config dump's `max_epochs`), and the checkpoint notice at that epoch. Such runners print no
line when training ends (OpenMMLab's after_run hooks log nothing of their own), and their
progress lines count steps within an epoch, so no step line says it was the last."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..model import Event, field_int

FINAL_EPOCH_FIELD = "final_epoch"
"""The field `EpochPlan.saved` adds to the save after the last planned epoch."""


@dataclass(slots=True)
class EpochPlan:
    """Fed the configuration lines that state `max_epochs` and the checkpoint saves that state
    the epoch they follow, in log order."""

    planned: int | None = None
    """The epochs the last configuration dump set."""

    def plan(self, e: Event) -> None:
        """A configuration line stating the epochs to train (a new dump: a restart re-reads it)."""
        planned = field_int(e, "max_epochs")
        if planned is not None and planned > 0:
            self.planned = planned

    def saved(self, e: Event) -> Event | None:
        """A checkpoint notice; the one at (or past) the planned last epoch comes back with its
        `final_epoch` field added: a line that says the run wound down (WOUND_DOWN_FIELDS)."""
        epoch = field_int(e, "epoch")
        if epoch is None or self.planned is None or epoch < self.planned:
            return None
        return replace(e, fields={**e.fields, FINAL_EPOCH_FIELD: str(epoch)})
