"""Attempts and their clocks: where one attempt of a run ends and the next begins, and when each
progress line happened. A line without a stamp of its own is placed at the previous line's time
plus the elapsed time it reports, never before a wall-clock anchor logged earlier."""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np
import numpy.typing as npt

from ..model import Attempt, Event, Progress, Save, field_int, input_of
from .clock import from_timestamp
from .companions import place_companions


@dataclass(slots=True)
class _Open:
    index: int
    input: int
    first_seq: int
    boundary: str
    resumed_from: int | None = None
    last_seq: int = 0
    start: float = math.inf
    end: float = -math.inf
    first_idx: int = -1
    last_idx: int = -1
    first_it: int | None = None
    last_it: int | None = None
    t_prev: float | None = None
    anchor: float | None = None
    """The latest anchor since the previous progress line."""
    loop_anchor: float | None = None
    """The stamp of the line that says the training loop starts now (Megatron's `[before the
    start of training step]`), until the first progress line."""
    pending_save_s: float = 0.0
    stamped_after: float | None = None
    """The first stamp since the previous progress line: that line was written before it."""
    unknown: array[int] = field(default_factory=lambda: array("q"))
    """Progress indexes of the lines before the first known time, for the backward fill."""
    unknown_s: array[float] = field(default_factory=lambda: array("d"))
    """The seconds each of them covers (arrays: a log without times has millions)."""
    loop_start: float | None = None
    last_validated: float | None = None
    """The stamp of the attempt's last validation result."""
    open_save: tuple[int | None, float | None] | None = None
    open_save_sync: bool = False
    """The open save is written before the loop's next step (Signature.saved_before_next_step)."""
    saves: list[list[float | int | None]] = field(default_factory=list)
    """[iteration, start, duration or None]"""
    unfinished: list[int | None] = field(default_factory=list)


def _no_reset_until(its: npt.NDArray[np.int64], k: int, last_it: int | None) -> int:
    """The first line from k on whose iteration is below the one before it (a restart from a
    checkpoint: a new attempt), or len(its). The same iteration again is the same step logged
    by another rank (each rank of a run that does not filter its logs prints every step)."""
    rows = np.flatnonzero(its[k:] >= 0)
    if not len(rows):
        return len(its)
    values = its[k:][rows]
    before = np.empty_like(values)
    before[0] = -1 if last_it is None else last_it
    before[1:] = values[:-1]
    back = np.flatnonzero(values < before)
    return k + int(rows[back[0]]) if len(back) else len(its)


def zeroed(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """np.nan_to_num(x) (NaN 0, infinities the largest floats), without its cost (~13 us, more
    than the rest of a short run's bookkeeping: a log of HF dicts states no step time, and
    every run is NaN)."""
    finite = np.isfinite(x)
    if finite.all():
        return x
    if not np.isinf(x).any():
        out: npt.NDArray[np.float64] = np.where(finite, x, 0.0)
        return out
    return np.nan_to_num(x)


def _first_stated(exact: npt.NDArray[np.float64], k: int) -> int:
    """The first line from k on that states its time, or len(exact)."""
    stated = np.flatnonzero(~np.isnan(exact[k:]))
    return k + int(stated[0]) if len(stated) else len(exact)


@dataclass(slots=True)
class Timeline:
    """Builds attempts while events arrive in log order; `finish` closes them."""

    progress: Progress
    attempts: list[Attempt] = field(default_factory=list)
    companions: list[tuple[str, float, int]] = field(default_factory=list)
    """(kind, time, seq) of stamped lines in inputs without progress so far."""
    _cur: _Open | None = None
    _pending: dict[int, tuple[int, str, int | None]] = field(default_factory=dict)
    """Per input: a boundary seen (seq, kind, resumed iteration) that waits for progress."""
    _pre: dict[int, list[tuple[str, float, int]]] = field(default_factory=dict)
    """Per input: stamped lines after a pending boundary, before its first progress line."""
    _has_progress: set[int] = field(default_factory=set)

    # -- feeding -----------------------------------------------------------------------------

    def boundary(self, e: Event, kind: str) -> None:
        """A line that starts a new attempt if training had already progressed."""
        inp = input_of(e.seq)
        resumed = field_int(e, "iteration") if kind == "checkpoint_load" else None
        old = self._pending.get(inp)
        if old is not None and resumed is None:
            resumed = old[2]
        if old is None:
            self._pending[inp] = (e.seq, kind, resumed)
        else:
            self._pending[inp] = (old[0], old[1], resumed)

    def stamp(self, seq: int, t: datetime, kind: str = "anchor") -> None:
        """A wall-clock time seen in the log. `kind`: anchor, loop (the training loop starts
        now), start, end, waiting."""
        self.stamp_at(seq, t.timestamp(), kind)

    def stamp_at(self, seq: int, v: float, kind: str = "anchor") -> None:
        """`stamp` with POSIX seconds."""
        inp = input_of(seq)
        cur = self._cur
        if inp in self._pending or (
            (cur is None or cur.input != inp) and inp not in self._has_progress
        ):
            # before this input's next attempt starts: it belongs to that attempt, or, if the
            # input never logs progress, it is a companion's (see finish)
            self._pre.setdefault(inp, []).append((kind, v, seq))
        elif cur is not None and cur.input == inp:
            self._stamp_open(cur, kind, v, seq)

    def _stamp_open(self, cur: _Open, kind: str, v: float, seq: int) -> None:
        if kind == "waiting":
            return  # the queue, between attempts: not a moment of this attempt
        cur.end = max(cur.end, v)
        cur.start = min(cur.start, v)
        cur.last_seq = max(cur.last_seq, seq)
        if cur.stamped_after is None:
            cur.stamped_after = v
        if kind == "loop":
            cur.loop_anchor = v
        if kind in ("anchor", "start", "loop"):
            cur.anchor = v if cur.anchor is None else max(cur.anchor, v)

    def add_progress(self, seq: int, exact: float, idx: int, it: int | None) -> float | None:
        """An iteration line (order key `seq`, index `idx` in Progress, iteration `it`, the
        time it states or NaN); returns the time given to it."""
        inp = input_of(seq)
        cur = self._cur
        pending = self._pending.pop(inp, None)
        # an iteration below the last one: a restart (the same one again: another rank's line)
        reset = cur is not None and it is not None and cur.last_it is not None and it < cur.last_it
        if cur is None or cur.input != inp or pending is not None or reset:
            if cur is not None:
                self._close(cur)
            if pending is not None:
                first_seq, kind, resumed = pending
            else:
                first_seq, kind, resumed = seq, "iteration_reset" if reset else "input", None
            if cur is None and pending is None:
                kind = "start"
            cur = self._cur = _Open(len(self.attempts), inp, first_seq, kind, resumed)
            for k, v, s in self._pre.pop(inp, []):
                self._stamp_open(cur, k, v, s)
        self._has_progress.add(inp)
        if cur.open_save is not None and cur.open_save_sync:
            # the loop stepped again: the synchronous save before this line returned
            cur.saves.append([cur.open_save[0], cur.open_save[1], None])
            cur.open_save = None
        d = self.progress.iter_s[idx]
        d = 0.0 if math.isnan(d) else d
        if exact == exact:  # not NaN
            t: float | None = exact
        elif cur.t_prev is not None:
            t = cur.t_prev + d + cur.pending_save_s
            if cur.anchor is not None:
                t = max(t, cur.anchor)
        elif cur.loop_anchor is not None and cur.anchor is not None:
            # the first iteration began when the loop did; a later stamp (a monitor's) may fall
            # inside it, and bounds it from below only
            t = max(cur.loop_anchor + d, cur.anchor)
        elif cur.anchor is not None:
            t = cur.anchor + d
        else:
            t = None
            cur.unknown.append(idx)
            cur.unknown_s.append(d)
        if t is not None and cur.unknown:
            self._backfill(cur, t, d)
        if t is not None:
            self.progress.time[idx] = t
            if cur.loop_start is None:
                cur.loop_start = t - d
            cur.end = max(cur.end, t)
            cur.start = min(cur.start, cur.loop_start)
        cur.t_prev = t if t is not None else cur.t_prev
        cur.anchor = cur.loop_anchor = cur.stamped_after = None
        cur.pending_save_s = 0.0
        if cur.first_idx < 0:
            cur.first_idx = idx
            cur.first_it = it
        cur.last_idx = idx
        cur.last_it = it if it is not None else cur.last_it
        cur.last_seq = max(cur.last_seq, seq)
        return t

    def add_progress_run(
        self,
        seqs: npt.NDArray[np.int64],
        exact: npt.NDArray[np.float64],
        seconds: npt.NDArray[np.float64],
        first_idx: int,
        its: npt.NDArray[np.int64],
    ) -> float:
        """Consecutive iteration lines of one input, as `stamp_at` (when the line states a
        time) and `add_progress` would take them one by one; returns the latest time given to
        them (-inf if none). A stretch that extends an attempt whose clock runs is done with
        arrays; a line that starts an attempt, or follows a stamp or a save, goes alone."""
        n, k, latest = len(seqs), 0, -math.inf
        while k < n:
            cur = self._cur
            plain = (
                cur is not None
                and cur.input == input_of(int(seqs[k]))
                and cur.input not in self._pending
                and cur.anchor is None
                and cur.loop_anchor is None
                and not (cur.open_save is not None and cur.open_save_sync)
            )
            if plain and cur is not None and cur.t_prev is None and cur.first_idx >= 0:
                # no clock yet (a log without times): the lines wait for the backward fill
                m = min(_no_reset_until(its, k, cur.last_it), _first_stated(exact, k))
                if m > k:
                    self._unclocked(cur, seconds, first_idx, k, m)
                    self._extended(cur, seqs, first_idx, its, k, m)
                    k = m
                    continue
            elif (
                plain
                and cur is not None
                and cur.t_prev is not None
                and not cur.unknown
                and not cur.pending_save_s
            ):
                m = _no_reset_until(its, k, cur.last_it)
                if m > k:
                    latest = max(latest, self._stretch(cur, exact, seconds, first_idx, k, m))
                    self._extended(cur, seqs, first_idx, its, k, m)
                    k = m
                    continue
            # a line that starts an attempt, or follows a stamp or a save, goes alone
            t = self._progress_one(int(seqs[k]), float(exact[k]), first_idx + k, int(its[k]))
            latest = max(latest, -math.inf if t is None else t)
            k += 1
        return latest

    def _progress_one(self, seq: int, exact: float, idx: int, it: int) -> float | None:
        if exact == exact:
            self.stamp_at(seq, exact)
        return self.add_progress(seq, exact, idx, None if it < 0 else it)

    def _unclocked(
        self,
        cur: _Open,
        seconds: npt.NDArray[np.float64],
        first_idx: int,
        k: int,
        m: int,
    ) -> None:
        """Lines k..m-1 extend an attempt that has no time yet, as add_progress takes them."""
        cur.unknown.extend(array("q", range(first_idx + k, first_idx + m)))
        cur.unknown_s.frombytes(zeroed(seconds[k:m]).tobytes())
        cur.pending_save_s = 0.0

    def _extended(
        self,
        cur: _Open,
        seqs: npt.NDArray[np.int64],
        first_idx: int,
        its: npt.NDArray[np.int64],
        k: int,
        m: int,
    ) -> None:
        """Lines k..m-1 are the open attempt's latest."""
        cur.stamped_after = None  # as add_progress: a stamp before them is no bound of theirs
        cur.last_idx = first_idx + m - 1
        valid = its[k:m][its[k:m] >= 0]
        if len(valid):
            cur.last_it = int(valid[-1])
        cur.last_seq = max(cur.last_seq, int(seqs[m - 1]))
        self._has_progress.add(cur.input)

    def _stretch(
        self,
        cur: _Open,
        exact: npt.NDArray[np.float64],
        seconds: npt.NDArray[np.float64],
        first_idx: int,
        k: int,
        m: int,
    ) -> float:
        """Lines k..m-1 extend the open attempt: each time is the line's own, else the one
        before plus the seconds it covers."""
        d = zeroed(seconds[k:m])
        e = exact[k:m]
        stated = ~np.isnan(e)
        start = cur.t_prev or 0.0  # not None: see the caller
        # added one by one, in order (np.add.accumulate), as add_progress adds: the same floats
        if not stated.any():  # no line states its time (most logs): one stretch from the last
            t = np.add.accumulate(np.concatenate(([start], d)))[1:]
        else:
            t = e.copy()
            gaps = np.flatnonzero(~stated)
            breaks = np.flatnonzero(np.diff(gaps) != 1)
            starts = np.concatenate((gaps[:1], gaps[breaks + 1]))
            ends = np.concatenate((gaps[breaks] + 1, gaps[-1:] + 1))
            for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
                before = float(t[a - 1]) if a else start
                t[a:b] = np.add.accumulate(np.concatenate(([before], d[a:b])))[1:]
            cur.start = min(cur.start, float(e[stated].min()))
        self.progress.time[first_idx + k : first_idx + m] = array("d", t.tobytes())
        cur.end = max(cur.end, float(t.max()))
        cur.t_prev = float(t[-1])
        return float(t.max())

    def now(self, seq: int) -> float | None:
        """The clock of the attempt a line without a stamp belongs to: its last known moment."""
        cur = self._cur
        if cur is None or cur.input != input_of(seq) or cur.t_prev is None:
            return None
        t = cur.t_prev + cur.pending_save_s
        return max(t, cur.anchor) if cur.anchor is not None else t

    def _backfill(self, cur: _Open, t_known: float, d_known: float) -> None:
        t = t_known - d_known
        for idx, d in zip(reversed(cur.unknown), reversed(cur.unknown_s), strict=True):
            self.progress.time[idx] = t
            t -= d
        cur.loop_start = t
        cur.start = min(cur.start, t)
        cur.unknown, cur.unknown_s = array("q"), array("d")

    def save_start(self, e: Event, sync: bool = False) -> None:
        """A checkpoint save begins; `sync`: it is written before the training loop's next step,
        so that step's line closes it (its emitter logs nothing when it is done)."""
        cur = self._cur
        if cur is None or cur.input != input_of(e.seq) or input_of(e.seq) in self._pending:
            return
        it = field_int(e, "iteration")
        if cur.open_save is not None:
            if it is None or cur.open_save[0] in (None, it):
                return  # another line about the same save (Megatron's and DeepSpeed's)
            cur.unfinished.append(cur.open_save[0])
        start = e.time.timestamp() if e.time is not None and e.time_exact else cur.t_prev
        cur.open_save = (it, start)
        cur.open_save_sync = sync

    def save_done(self, e: Event) -> None:
        cur = self._cur
        if cur is None or cur.input != input_of(e.seq):
            return
        ms = e.fields.get("save_ms") or e.fields.get("save_max_ms")
        duration = float(ms) / 1000 if ms else None
        if cur.open_save is not None:
            it, start = cur.open_save
            if duration is None and e.time is not None and e.time_exact and start is not None:
                duration = max(0.0, e.time.timestamp() - start)
            cur.saves.append([it, start, duration])
            cur.open_save = None
            cur.pending_save_s += duration or 0.0
        elif duration is not None and cur.saves and cur.saves[-1][2] is None:
            cur.saves[-1][2] = duration  # the timer line that follows "successfully saved"
            cur.pending_save_s += duration

    def validated(self, e: Event) -> None:
        """A validation result of the open attempt, at its own stamp: the run was alive then."""
        cur = self._cur
        if cur is None or cur.input != input_of(e.seq) or e.time is None or not e.time_exact:
            return
        cur.last_validated = e.time.timestamp()

    def finish(self) -> list[Attempt]:
        if self._cur is not None:
            self._close(self._cur)
            self._cur = None
        for inp, stamps in self._pre.items():
            if inp not in self._has_progress:
                self.companions.extend(stamps)  # an input that never logged progress
        self._pre.clear()
        self._pending.clear()
        self.attempts = place_companions(self.attempts, self.companions)
        return self.attempts

    def so_far(self) -> list[Attempt]:
        """The attempts closed so far and the one still open, as far as its progress lines go
        (for a watcher: the open one's saves and end are not known yet)."""
        cur = self._cur
        if cur is None or cur.first_idx < 0:
            return list(self.attempts)
        return [*self.attempts, self._attempt(cur, [], None, False)]

    # -- closing ------------------------------------------------------------------------------

    def _close(self, cur: _Open) -> None:
        if cur.unknown and cur.stamped_after is not None and cur.unknown[-1] == cur.last_idx:
            # progress lines with no time, then stamped lines: the last was written before the
            # first of these (its time a bound, so the silence after it is one too)
            self._backfill(cur, cur.stamped_after, 0.0)
        ended_saving = cur.open_save is not None
        if cur.open_save is not None:
            cur.unfinished.append(cur.open_save[0])
            cur.open_save = None
        saves = []
        for it, start, dur in cur.saves:
            s = float(start) if start is not None else None
            d = float(dur) if dur is not None else 0.0
            saves.append(
                Save(
                    iteration=int(it) if it is not None else None,
                    start=from_timestamp(s),
                    end=from_timestamp(s + d) if s is not None else None,
                    duration_s=d,
                )
            )
        end = from_timestamp(max([cur.end, *(s.end.timestamp() for s in saves if s.end)]))
        self.attempts.append(self._attempt(cur, saves, end, ended_saving))

    def _attempt(
        self, cur: _Open, saves: list[Save], end: datetime | None, ended_saving: bool
    ) -> Attempt:
        last_t = self.progress.time[cur.last_idx] if cur.last_idx >= 0 else math.nan
        # the last progress line, given its time (progress.time) when the attempt closes; None
        # when Progress keeps no Event of it (a line inside a bulk of lines: the engine, which
        # holds their text, gives it)
        last_event = self.progress.event(cur.last_idx) if cur.last_idx >= 0 else None
        return Attempt(
            index=cur.index,
            input=cur.input,
            first_seq=cur.first_seq,
            last_seq=cur.last_seq,
            boundary=cur.boundary,
            start=from_timestamp(cur.start),
            loop_start=from_timestamp(cur.loop_start),
            end=end,
            last_progress=from_timestamp(last_t),
            first_iteration=cur.first_it,
            last_iteration=cur.last_it,
            resumed_from=cur.resumed_from,
            saves=tuple(saves),
            unfinished_saves=tuple(cur.unfinished),
            progress=(cur.first_idx, cur.last_idx),
            last_event=last_event
            if last_event is None or math.isnan(last_t)
            else replace(last_event, time=from_timestamp(last_t)),
            ended_saving=ended_saving,
            last_validated=from_timestamp(cur.last_validated),
        )
