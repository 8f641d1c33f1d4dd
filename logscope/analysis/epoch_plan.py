"""A run by epochs that ran its last planned epoch: the number of epochs its configuration sets
(a config dump's `max_epochs`), and the checkpoint notice at that epoch. Such runners print no
line when training ends (OpenMMLab's after_run hooks log nothing of their own), and their
progress lines count steps within an epoch, so no step line says it was the last."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..model import Event, field_int

FINAL_EPOCH_FIELD = "final_epoch"
"""The field of the event `EpochPlan.final` returns: the last planned epoch, which it saved."""


@dataclass(slots=True)
class EpochPlan:
    """Fed the configuration lines that state `max_epochs` and the checkpoint saves that state
    the epoch they follow, in log order."""

    planned: int | None = None
    """The epochs the last configuration dump set."""
    final: Event | None = None
    """The save after the last planned epoch, its `final_epoch` field added."""

    def plan(self, e: Event) -> None:
        """A configuration line stating the epochs to train (a new dump: a restart re-reads it)."""
        planned = field_int(e, "max_epochs")
        if planned is not None and planned > 0:
            self.planned = planned

    def saved(self, e: Event) -> None:
        """A checkpoint notice; the one at (or past) the planned last epoch is kept."""
        epoch = field_int(e, "epoch")
        if epoch is None or self.planned is None or epoch < self.planned:
            return
        self.final = replace(e, fields={**e.fields, FINAL_EPOCH_FIELD: str(epoch)})
