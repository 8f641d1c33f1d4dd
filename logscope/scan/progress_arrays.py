"""A scan's bulk-parsed progress lines as numpy arrays, made once per scan: the engine feeds
them a run at a time (the lines between two other candidate lines), and a run of a log that
saves often is a few dozen lines, too few to pay a conversion each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import STATED
from .parsed_progress import ProgressColumns

Array = np.ndarray[Any, Any]


@dataclass(frozen=True, slots=True)
class ScanArrays:
    seqs: Array
    """int64: the lines' order keys."""
    iterations: Array
    """int64, -1 where a line has no iteration number."""
    per_iteration_s: Array
    """Seconds per iteration a line states (`iter_s`, else `iter_ms` / 1000), NaN if none."""
    times: Array
    """POSIX seconds a line states, NaN if none."""
    train_iters: Array
    health: dict[str, Array]
    nonfinite: Array

    @classmethod
    def of(cls, cols: ProgressColumns, offset: int) -> ScanArrays:
        """The arrays of `cols`, whose line numbers plus `offset` are the lines' order keys.
        Views of the columns where they need no conversion (the columns do not change)."""
        values = {k: np.frombuffer(v, np.float64) for k, v in cols.values.items()}
        its = values["iteration"]
        per = values["iter_s"]
        per = np.where(np.isnan(per), values["iter_ms"] / 1000, per)
        return cls(
            seqs=np.frombuffer(cols.lineno, np.int64) + offset,
            iterations=np.where(np.isnan(its), -1, its).astype(np.int64),
            per_iteration_s=per,
            times=np.frombuffer(cols.time, np.float64),
            train_iters=values["train_iters"],
            health={k: values[k] for k in STATED},
            nonfinite=np.frombuffer(cols.nonfinite, np.int8),
        )
