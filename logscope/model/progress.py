"""A run's iteration lines as compact columns, one row of numbers per line."""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np

from ..compact_column import NUMPY_TYPES, Packed
from .records import Event, field_int, to_float


def line_seconds(e: Event, iterations: int = 1) -> float:
    """Seconds a progress line covers: its time per iteration x the iterations since the last
    line (a log interval above 1); NaN if it reports none."""
    if "iter_s" in e.fields:
        return float(e.fields["iter_s"]) * iterations
    if "iter_ms" in e.fields:
        return float(e.fields["iter_ms"]) * iterations / 1000
    return math.nan


STATED = ("loss", "grad_norm", "loss_scale", "skipped", "nan_iters", "batch")
"""Numbers a progress line states that Progress keeps as stated, NaN where it does not say."""
PARSED = ("iteration", "train_iters", "iter_s", "iter_ms", *STATED)
"""The numeric fields a progress signature may read from a line (its regex's named groups)."""
COLUMNS = ("seq", "iteration", "time", "iter_s", "nonfinite", *STATED)
"""Progress's columns, one value per line: what a bulk parse hands over (Progress.extend)."""


# A row of numbers per iteration line, so memory stays flat on logs of millions of them: only
# the first and the last line are kept whole, as Events.


@dataclass(slots=True)
class Progress:
    """Iteration lines in log order (their `seq` ascending)."""

    seq: array[int] = field(default_factory=lambda: array("q"))
    iteration: Packed = field(default_factory=lambda: Packed("q"))
    """-1 where the line has no iteration number (an HF log dict)."""
    time: Packed = field(default_factory=lambda: Packed("d"))
    """POSIX seconds of the line's time (exact or derived); NaN if unknown."""
    iter_s: Packed = field(default_factory=lambda: Packed("d"))
    """Seconds the line covers (its time per iteration x the iterations since the last line);
    NaN if it reports none."""
    # training health, NaN where the line does not say
    loss: Packed = field(default_factory=lambda: Packed("d"))
    """The training loss; NaN if absent or not finite (see `nonfinite`)."""
    nonfinite: Packed = field(default_factory=lambda: Packed("b"))
    """1 where the line reports a NaN or infinite loss."""
    grad_norm: Packed = field(default_factory=lambda: Packed("d"))
    loss_scale: Packed = field(default_factory=lambda: Packed("d"))
    skipped: Packed = field(default_factory=lambda: Packed("d"))
    """Iterations skipped since the last line (fp16 overflow), as Megatron counts them."""
    nan_iters: Packed = field(default_factory=lambda: Packed("d"))
    """Iterations with a NaN loss since the last line, as Megatron counts them."""
    batch: Packed = field(default_factory=lambda: Packed("d"))
    """Global batch size (it ramps up in some runs: step time is compared per sample)."""
    train_iters: int | None = None
    first: Event | None = None
    _latest: tuple[int, Event | Callable[[], Event]] | None = None
    """The last line added, with its index: its Event, or how to build it (when asked)."""

    @property
    def last(self) -> Event | None:
        """The last iteration line, with the time the timeline gave it (built on demand: one
        Event per line would cost more than the rest of its bookkeeping)."""
        if not self.seq:
            return None
        e = self.event(len(self.seq) - 1)
        if e is None or math.isnan(self.time[-1]):
            return e
        return replace(e, time=datetime.fromtimestamp(self.time[-1]))

    def event(self, idx: int) -> Event | None:
        """The Event of line `idx`: the first and the last line are kept, no other."""
        if idx == 0 and self.first is not None:
            return self.first
        if self._latest is not None and self._latest[0] == idx:
            e = self._latest[1]
            if not isinstance(e, Event):
                e = e()
                self._latest = (idx, e)
            return e
        return None

    def keep(self, idx: int, e: Event | Callable[[], Event]) -> None:
        """Hold the Event of line `idx` (the latest so far), or how to build it."""
        if idx == 0:
            self.first = e if isinstance(e, Event) else e()
        self._latest = (idx, e)

    def add(self, e: Event, iteration: int | None, seconds: float) -> int:
        """Add an iteration line (its iteration number and the seconds it covers, as the
        engine parsed them); returns its index."""
        self.seq.append(e.seq)
        self.iteration.append(iteration if iteration is not None else -1)
        self.time.append(e.time.timestamp() if e.time is not None else math.nan)
        self.iter_s.append(seconds)
        f = e.fields
        loss = to_float(f.get("loss"))
        bad = "loss" in f and not math.isfinite(loss)
        self.loss.append(math.nan if bad else loss)
        self.nonfinite.append(1 if bad else 0)
        for name in STATED:
            if name != "loss":
                getattr(self, name).append(to_float(f.get(name)))
        total = field_int(e, "train_iters")
        if total is not None:
            self.train_iters = total
        self.keep(len(self.seq) - 1, e)
        return len(self.seq) - 1

    def extend(self, columns: Mapping[str, Any], train_iters: int | None) -> int:
        """Add lines parsed in bulk: equal-length numpy arrays named like this class's columns,
        of their types (`time` NaN until the timeline gives one); returns the first one's
        index."""
        first = len(self.seq)
        for name in COLUMNS:
            column = getattr(self, name)
            values = columns[name]
            if values.dtype != NUMPY_TYPES[column.typecode]:
                values = values.astype(NUMPY_TYPES[column.typecode])
            if isinstance(column, Packed):
                column.extend(values)
            else:
                column.frombytes(values.tobytes())  # no Python number made
        if train_iters is not None:
            self.train_iters = train_iters
        return first

    def __len__(self) -> int:
        return len(self.seq)

    def count_after(self, seq: int) -> int:
        return len(self.seq) - bisect_right(self.seq, seq)

    def losses_after(self, seq: int) -> bool:
        """Every line after order key `seq` states a loss, finite or not (an epoch's step lines
        do; an epoch's header, which counts as progress too, does not)."""
        lo = bisect_right(self.seq, seq)
        stated = ~np.isnan(self.loss.numpy()[lo:]) | (self.nonfinite.numpy()[lo:] == 1)
        return bool(stated.all())

    def steps_between(self, after: int, before: int) -> int:
        """Steps logged strictly between two order keys: the distinct iterations, where the
        lines number them (every rank of a run that does not filter its logs prints the step
        under way: one step, however many lines), else the progress lines."""
        lo, hi = bisect_right(self.seq, after), bisect_left(self.seq, before)
        if hi <= lo:
            return 0
        its = self.iteration.numpy()[lo:hi]
        numbered = its[its >= 0]
        return len(np.unique(numbered)) if len(numbered) else hi - lo

    def steps_after(self, seq: int) -> int:
        """steps_between `seq` and the end."""
        return self.steps_between(seq, (self.seq[-1] + 1) if len(self.seq) else seq + 1)

    def last_iteration_before(self, seq: int) -> int | None:
        its = self.iteration.numpy()[: bisect_left(self.seq, seq)]
        numbered = np.flatnonzero(its >= 0)  # numpy: a log of HF dicts numbers none
        return int(its[numbered[-1]]) if len(numbered) else None

    def iterations_between(self, after: int, before: int) -> tuple[int | None, int | None]:
        """The first and last iteration numbers logged strictly between two order keys."""
        its = self.iteration.numpy()[bisect_right(self.seq, after) : bisect_left(self.seq, before)]
        numbered = np.flatnonzero(its >= 0)
        if not len(numbered):
            return None, None
        return int(its[numbered[0]]), int(its[numbered[-1]])

    def iterations(self) -> tuple[int | None, int | None]:
        """The first and last iteration numbers logged."""
        its = self.iteration.numpy()
        numbered = np.flatnonzero(its >= 0)
        if not len(numbered):
            return None, None
        return int(its[numbered[0]]), int(its[numbered[-1]])

    def time_is_floor(self, first: int, last: int) -> bool:
        """Whether line `last`'s time is only a bound from below: it states no time and no
        duration, so the timeline gave it the time of a line before it (an HF log dict after an
        earlier one, in a log whose other lines are stamped). The line was written then or
        later, so a silence measured from it may not have been one. Lines `first`..`last` are
        one attempt's; every rank prints the same step at the same stamp, so the line compared
        is the last one of another step (of any other, where the lines number none)."""
        if last <= first or not math.isnan(self.iter_s[last]) or math.isnan(self.time[last]):
            return False
        it = int(self.iteration[last])
        before = last - 1
        if it >= 0:
            other = np.flatnonzero(self.iteration.numpy()[first:last] != it)
            if not len(other):
                return False
            before = first + int(other[-1])
        return bool(self.time[before] == self.time[last])

    def is_last(self, iteration: int | None) -> bool:
        """`iteration` is the run's last one (or past it), as the lines state the total."""
        total = self.train_iters
        return iteration is not None and total is not None and iteration >= total

    def median_interval_s(self) -> float | None:
        """Typical seconds per logged progress line: from the lines' own durations, else times."""
        values = self._stated_step_s()
        if not len(values):
            values = self._time_gaps()
        # the middle value, or the mean of the two middle ones (statistics.median's floats)
        return float(np.median(values)) if len(values) else None

    def logged_interval_s(self) -> float | None:
        """Typical seconds between logged progress lines: their own times where they have them (a
        line every N steps comes N step times apart), never less than the step time they state."""
        known = [float(np.median(v)) for v in (self._stated_step_s(), self._time_gaps()) if len(v)]
        return max(known) if known else None

    def _stated_step_s(self) -> np.ndarray:
        """The step times the progress lines state (`batch_cost`, `elapsed time per iteration`)."""
        values = self.iter_s.numpy()
        stated: np.ndarray = values[~np.isnan(values)]
        return stated

    def _time_gaps(self) -> np.ndarray:
        """The positive gaps between the progress lines' times."""
        t, its = self.time.numpy(), self.iteration.numpy()
        known = ~np.isnan(t)
        numbered = known & (its >= 0)
        if numbered.any():
            # where the lines number their steps, a step is logged when its first line comes:
            # every rank of a run that does not filter its logs prints the same step within
            # milliseconds, and those gaps are no interval of the run's
            _, first = np.unique(its[numbered], return_index=True)
            stamps = t[numbered][np.sort(first)]
        else:
            stamps = t[known]
        gaps: np.ndarray = np.diff(stamps)
        positive: np.ndarray = gaps[gaps > 0]
        return positive

    def last_time(self) -> datetime | None:
        known = np.flatnonzero(~np.isnan(self.time.numpy()))
        return datetime.fromtimestamp(float(self.time[int(known[-1])])) if len(known) else None
