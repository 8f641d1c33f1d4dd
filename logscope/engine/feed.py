"""Engine: the incremental state of one analysis, blocks of lines → events → incidents → an
Analysis. `analyze` feeds it whole files; `tail` feeds it as they grow."""

from __future__ import annotations

import functools
import math
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ..analysis.clock import from_timestamp
from ..analysis.run_plan import EPOCH_ENDED_FIELD, RunPlan
from ..analysis.timeline import Timeline
from ..lines.decode import learn_layers
from ..lines.discovery import DISCOVERY_BYTES, prefix_lines
from ..lines.layers import Layers
from ..lines.wrap import WRAP_SAMPLE, wrap_width
from ..match.events import Extractor
from ..match.loader import builtin_dirs, load_library
from ..match.prefilter import Hit, matched
from ..match.signatures import Library
from ..model import (
    Attempt,
    Event,
    Line,
    Progress,
    World,
    field_int,
    input_of,
    line_seconds,
    lineno_of,
    order_key,
)
from ..read.sources import Block
from ..scan.parsed_progress import ProgressColumns
from ..scan.progress_arrays import ScanArrays
from ..scan.range_scan import InputPlan, RangeScan, scan_block
from .world_notes import BATCH_FIELDS, WorldNotes

MAX_CONFIG_LINES = 16
"""Configuration lines kept per signature: every rank prints the same options."""
MAX_EVENTS_PER_SIGNATURE = 5_000
"""Events kept per signature (all are counted): 384 ranks repeating one warning stay bounded."""


@dataclass(slots=True)
class Engine:
    """Incremental state of one analysis. `analyze` feeds whole files; `tail` feeds as they grow."""

    library: Library
    extractor: Extractor = field(init=False)
    timeline: Timeline = field(init=False)
    failures: list[Event] = field(default_factory=list)
    progress: Progress = field(default_factory=Progress)
    markers: list[Event] = field(default_factory=list)
    """Exit, launch and status lines, and the save at the end of a run's plan (the other
    checkpoints and validations go to the timeline: a run saving every 100 steps has tens of
    thousands, ~800 bytes each as Events)."""
    configs: list[Event] = field(default_factory=list)
    """Configuration evidence (`config` signatures), at most MAX_CONFIG_LINES of each."""
    notes: WorldNotes = field(default_factory=WorldNotes)
    """What the lines say of the job's ranks, tasks and hosts (`world()`)."""
    plan: RunPlan = field(default_factory=RunPlan)
    """The end of a run's plan, its last epoch or iteration (the save there is a marker)."""
    first_time: datetime | None = None
    last_time: datetime | None = None
    derived_until: float = -math.inf
    """The latest time the timeline gave a progress line (a float: one per line)."""
    _per_sig: dict[str, int] = field(default_factory=dict)
    _last_iter: int | None = None
    _input_index: dict[str, int] = field(default_factory=dict)
    nodelist_changes: list[Event] = field(default_factory=list)
    """Lines naming a node list unlike the one named before: which nodes each attempt ran on."""
    _prefixes: set[bytes] = field(default_factory=set)
    discovery: int = DISCOVERY_BYTES
    """Bytes at each input's start scanned for rank prefixes (lines.discovery.window_per_input)."""
    _plans: dict[str, InputPlan] = field(default_factory=dict)
    """Per input, what its scans share (learn_input)."""

    def __post_init__(self) -> None:
        self.extractor = Extractor(self.library)
        self.timeline = Timeline(self.progress)

    def learn_input(self, path: str, head: bytes | bytearray, year: int | None) -> InputPlan:
        """What the scans of input `path` share, learned from its first bytes (whole lines):
        the width its lines were wrapped at, the prefilter, `year` for its stamps that lack
        one, the prefix layers its lines start with (lines.layers). Every reader of an input
        learns it here, once, before its first scan."""
        prefilter = self.extractor.prefilter
        plan = InputPlan(
            path,
            self.library,
            prefilter,
            year,
            wrap_width(head[:WRAP_SAMPLE]),
            discovery=self.discovery,
            layers=learn_layers(head),
        )
        self._plans[path] = plan
        return plan

    def layers_of(self, path: str) -> Layers | None:
        """The prefix layers learned from input `path` (None: none learned, or not seen)."""
        plan = self._plans.get(path)
        return None if plan is None else plan.layers

    def feed_block(
        self,
        block: Block,
        path: str,
        year: int | None,
        events: bool = True,
        offset: int | None = None,
    ) -> list[Event]:
        """Scan a block of whole lines as a worker scans a range (an input's first block
        teaches its plan, `year` with it) and `feed` the scan; returns its events. `offset`:
        where the block starts in the input, for the rank prefixes of its discovery window
        (None: none noted)."""
        plan = self._plans.get(path)
        if plan is None:
            plan = self.learn_input(path, block.data, year)
        return self.feed(scan_block(plan, block, offset), path, events=events)

    def feed(self, scan: RangeScan, path: str, base: int = 0, events: bool = True) -> list[Event]:
        """The engine's one input: the scan of a range, a chunk or a block of input `path`,
        its lines numbered from `base`, fed after those before it. Returns its events (see
        `_feed_sorted`)."""
        plan = self._plans.get(path)
        for prefix in set(scan.prefixes) - self._prefixes:
            self._prefixes.add(prefix)
            for line in prefix_lines(prefix, path, None if plan is None else plan.layers):
                self.notes.line(line)
        lines = scan.matched(path, base, self.library)
        return self._feed_sorted(lines, scan.progress, path, base, events)

    def mark(self) -> Mark:
        """Where the engine stands, to ask later what it took since (`since`)."""
        return Mark(
            len(self.failures),
            len(self.extractor.unrecognized_events),
            len(self.progress.seq),
            len(self.timeline.attempts),
        )

    def since(self, mark: Mark) -> Since:
        """What the engine took since `mark` that places a root cause (an info record, such as
        NCCL's rank of a process or a launcher's quote marker, never is one)."""
        new = [
            *(e for e in self.failures[mark.failures :] if e.severity != "info"),
            *self.extractor.unrecognized_events[mark.unrecognized :],
        ]
        seqs = self.progress.seq
        last = self.locate(seqs[-1])[1] if len(seqs) > mark.progress else None
        return Since(
            [e.line.lineno for e in new], last, len(self.timeline.attempts) > mark.attempts
        )

    def _feed_sorted(
        self,
        lines: Sequence[tuple[Line, Hit | None]],
        progress: ProgressColumns,
        path: str,
        base: int = 0,
        events: bool = True,
    ) -> list[Event]:
        """Feed decoded lines and bulk-parsed progress lines (numbered from `base`) in line
        order; returns their events (`events=False`: none, and a progress line's event is built
        only if the timeline asks for it: `analyze` needs none, `tail` streams them all)."""
        out: list[Event] = []
        n = len(progress)
        placed: _Placed | None = None
        if n:
            index = self._input_index.setdefault(path, len(self._input_index))
            arrays = ScanArrays.of(progress, order_key(index, base))
            if not any(hit is not None and hit[0].kind == "iteration" for _, hit in lines):
                # no iteration line among the others: the progress lines go into Progress all
                # at once, in line order, and each run is only clocked (see _feed_progress)
                placed = self._add_progress(arrays, 0, n)
        j = 0
        for line, hit in lines:
            if j < n and progress.lineno[j] + base < line.lineno:
                k = bisect_left(progress.lineno, line.lineno - base, j)
                self._feed_progress(progress, arrays, j, k, path, base, placed)
                if events:
                    out.extend(self._progress_event(progress, i, path, base) for i in range(j, k))
                j = k
            found = self._feed_line(line, hit)
            if events:
                out.extend(found)
        if j < n:
            self._feed_progress(progress, arrays, j, n, path, base, placed)
            if events:
                out.extend(self._progress_event(progress, i, path, base) for i in range(j, n))
        return out

    def _feed_progress(
        self,
        cols: ProgressColumns,
        arrays: ScanArrays,
        lo: int,
        hi: int,
        path: str,
        base: int,
        placed: _Placed | None = None,
    ) -> None:
        """A run of bulk-parsed progress lines, `cols[lo:hi]` (`arrays` theirs), as `feed_line`
        would take them one by one. `placed`: where the scan's lines already are in Progress
        (`_add_progress`), else they are added here."""
        self._progress_streams(cols, lo, hi, path)
        if placed is None:
            first, seconds = self._add_progress(arrays, lo, hi)
        else:
            first, seconds = placed[0] + lo, placed[1][lo:hi]
        seqs, times, iterations = arrays.seqs[lo:hi], arrays.times[lo:hi], arrays.iterations[lo:hi]
        progress = self.progress
        if first == 0:
            progress.keep(0, self._progress_event(cols, lo, path, base))
        ended = len(self.timeline.attempts)
        derived = self.timeline.add_progress_run(seqs, times, seconds, first, iterations)
        if len(self.timeline.attempts) > ended:
            self._last_events(ended, cols, lo - first, path, base)
        last = functools.partial(self._progress_event, cols, hi - 1, path, base)
        progress.keep(first + hi - lo - 1, last)
        self.derived_until = max(self.derived_until, derived)
        stated = times[~np.isnan(times)]
        if len(stated):
            self._tick(datetime.fromtimestamp(float(stated.min())))
            self._tick(datetime.fromtimestamp(float(stated.max())))

    def _last_events(
        self, ended: int, cols: ProgressColumns, shift: int, path: str, base: int
    ) -> None:
        """The attempts from `ended` on ended inside a run of bulk-parsed lines (`cols`, line
        `idx` of Progress its line `shift + idx`): Progress keeps no Event of the line one ends
        with, and the timeline gave it none. It is built from the scan's text (edge_lines), with
        the time the timeline gave the line."""
        attempts = self.timeline.attempts
        for k in range(ended, len(attempts)):
            a = attempts[k]
            idx = a.progress[1]
            if a.last_event is None and idx >= 0:
                e = self._progress_event(cols, shift + idx, path, base)
                t = self.progress.time[idx]
                e = e if math.isnan(t) else replace(e, time=from_timestamp(t))
                attempts[k] = replace(a, last_event=e)

    def _add_progress(self, arrays: ScanArrays, lo: int, hi: int) -> _Placed:
        """Add bulk-parsed lines `lo:hi` of a scan to Progress (their time NaN until the
        timeline gives one); returns where the first is, and the seconds each covers."""
        iterations = arrays.iterations[lo:hi]
        seconds = arrays.per_iteration_s[lo:hi] * self._log_intervals(iterations)
        columns = {name: v[lo:hi] for name, v in arrays.health.items()}
        columns["seq"] = arrays.seqs[lo:hi]
        columns["iteration"] = iterations
        columns["time"] = arrays.times[lo:hi]
        columns["iter_s"] = seconds
        columns["nonfinite"] = arrays.nonfinite[lo:hi]
        totals = arrays.train_iters[lo:hi]
        totals = totals[~np.isnan(totals)]
        first = self.progress.extend(columns, int(totals[-1]) if len(totals) else None)
        return first, seconds

    def _log_intervals(self, its: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Iterations each progress line covers (-1: no iteration number): above 1 when the
        log prints every Nth; a gap over 100,000 is no log interval."""
        steps = np.ones(len(its))
        rows = np.flatnonzero(its >= 0)
        if len(rows):
            values = its[rows]
            before = np.empty_like(values)
            before[0] = -1 if self._last_iter is None else self._last_iter
            before[1:] = values[:-1]
            gap = values - before
            ok = (gap > 1) & (gap <= 100_000)
            if self._last_iter is None:
                ok[0] = False
            steps[rows] = np.where(ok, gap, 1)
            self._last_iter = int(values[-1])
        return steps

    def _progress_streams(self, cols: ProgressColumns, lo: int, hi: int, path: str) -> None:
        """The streams and hosts of a run of progress lines; a torchrun failure block open in
        one of their streams ends, as a line of the stream would end it."""
        for h in set(cols.head[lo:hi]):
            stream = cols.heads[h]
            self.notes.stream(stream)
            for e in self.extractor.interrupt(path, stream.task, stream.host):
                self._add(e)

    def _progress_event(self, cols: ProgressColumns, i: int, path: str, base: int) -> Event:
        """The event of bulk-parsed line `i`, built as the per-line path builds it."""
        lineno = base + cols.lineno[i]
        sig = self.library.signatures[cols.signature[i]]
        records = list(
            matched(self.library, cols.raw_line(i), path, lineno, cols.year, False, None)
        )
        for line, hit in records:
            if hit is not None and hit[0] is sig:
                return self.extractor.event_of(line, hit, self._seq(line))
        # the regex found it in the whole line, not in the message left after its prefix: the
        # event carries what the bulk parse read
        fields = {k: repr(v[i]) for k, v in cols.values.items() if v[i] == v[i]}
        for k in ("iteration", "train_iters"):
            if k in fields:
                fields[k] = str(int(cols.values[k][i]))
        line = records[-1][0]
        return self.extractor.event_of(line, (sig, fields), self._seq(line))

    def _feed_line(self, line: Line, hit: Hit | None) -> list[Event]:
        self.notes.line(line)
        seq = self._seq(line)
        events = self.extractor.feed(line, hit, seq)
        for e in events:
            self._add(e)
        if line.time is not None and not any(e.time_exact for e in events):
            # a stamped line no signature knows is still a moment of its attempt
            self._tick(line.time)
            self.timeline.stamp(seq, line.time)
        return events

    def world(self) -> World:
        """The ranks and hosts seen so far."""
        return self.notes.world()

    def _tick(self, t: datetime) -> None:
        if self.first_time is None or t < self.first_time:
            self.first_time = t
        if self.last_time is None or t > self.last_time:
            self.last_time = t

    def _seq(self, line: Line) -> int:
        index = self._input_index.setdefault(line.path, len(self._input_index))
        return order_key(index, line.lineno)

    def _add(self, e: Event) -> None:
        if not e.seq:
            # a ChildFailedError entry, anchored at another line than the one that closed it
            e = replace(e, seq=self._seq(e.line))
        boundary = _boundary(e)
        if boundary:
            # before its stamp: the line's time belongs to the attempt it starts
            self.timeline.boundary(e, boundary)
        if e.time is not None and e.time_exact:
            self._tick(e.time)
            self.timeline.stamp(e.seq, e.time, _stamp_kind(e))
        if e.line.host:
            self.notes.hosts.add(e.line.host)
        if e.kind == "iteration":
            it = field_int(e, "iteration")
            step = self._log_intervals(np.array([-1 if it is None else it], np.int64))[0]
            idx = self.progress.add(e, it, line_seconds(e, int(step)))
            exact = e.time.timestamp() if e.time is not None and e.time_exact else math.nan
            t = self.timeline.add_progress(e.seq, exact, idx, it)
            if t is not None and t > self.derived_until:
                self.derived_until = t
            return
        self.notes.nodes(e)
        if nodelist := e.fields.get("nodelist"):
            changes = self.nodelist_changes
            if not changes or changes[-1].fields["nodelist"] != nodelist:
                changes.append(e)
        if e.kind in ("checkpoint_save", "checkpoint_saved", "checkpoint_load", "validation"):
            if e.kind == "checkpoint_save":
                final = self.plan.saved(e, self.progress.train_iters)
                if final is not None:
                    self.markers.append(final)  # the run wound down there (job_outcome)
                sig = self.library.by_id(e.signature)
                self.timeline.save_start(e, sig is not None and sig.saved_before_next_step)
            elif e.kind == "checkpoint_saved":
                self.timeline.save_done(e)
            elif e.kind == "validation":
                self.timeline.validated(e)
            return
        if "comm_rank" in e.fields and e.kind in ("config", "launch"):
            self.notes.nccl_rank(e)
            if e.kind == "launch":
                return  # one a communicator a process: the map keeps what they say
        if e.kind == "config":
            if "max_epochs" in e.fields:
                self.plan.plan(e)
            if e.fields.keys() & BATCH_FIELDS:
                self.notes.batch(e)
            # how the job was set up: a few lines of each kind are enough
            n = self._per_sig.get(e.signature, 0)
            self._per_sig[e.signature] = n + 1
            if n < MAX_CONFIG_LINES:
                self.configs.append(e)
            return
        if e.kind in ("exit", "launch", "status"):
            if EPOCH_ENDED_FIELD in e.fields:
                e = self.plan.ended(e) or e  # the last planned epoch's end: the run wound down
            if e.kind == "launch" and "world_size" in e.fields:
                self.notes.declared_world = int(e.fields["world_size"])
            sig = self.library.by_id(e.signature) if e.kind == "launch" else None
            if sig is not None and sig.own_log_file:
                self.notes.own_log(e, 0 if sig.primary_rank_only else field_int(e, "rank"), sig)
            self.markers.append(e)
            return
        if e.time is None:
            t = self.timeline.now(e.seq)
            if t is not None:
                e = replace(e, time=datetime.fromtimestamp(t), time_exact=False)
        n = self._per_sig.get(e.signature, 0)
        self._per_sig[e.signature] = n + 1
        if n < MAX_EVENTS_PER_SIGNATURE or e.severity in ("fatal",) or e.role == "end":
            self.failures.append(e)

    def finish(self) -> list[Attempt]:
        """The inputs have ended: feed the events of blocks still open, and close the attempts
        (returned)."""
        for e in self.extractor.finish():
            self._add(e)
        return self.timeline.finish()

    def input_paths(self) -> dict[int, str]:
        """The inputs fed, by their index in the order keys (`seq`)."""
        return {index: path for path, index in self._input_index.items()}

    def locate(self, seq: int) -> tuple[str | None, int | None]:
        """An order key's file and line number."""
        index, lineno = input_of(seq), lineno_of(seq)
        path = next((p for p, i in self._input_index.items() if i == index), None)
        return path, lineno


@dataclass(frozen=True, slots=True)
class Mark:
    """Where an engine stood (Engine.mark): how many failures, unrecognized error lines,
    progress lines and attempts it held."""

    failures: int
    unrecognized: int
    progress: int
    attempts: int


@dataclass(frozen=True, slots=True)
class Since:
    """What an engine took since a mark (Engine.since) that places a root cause."""

    lines: list[int]
    """The line numbers of the failures and unrecognized error lines."""
    last_progress_line: int | None
    """The line number of the last progress line, if it took one."""
    new_attempt: bool
    """A new attempt began."""


_Placed = tuple[int, npt.NDArray[np.float64]]
"""Where a scan's first progress line is in Progress, and the seconds each of its lines covers."""


def _boundary(e: Event) -> str:
    """The kind of attempt boundary a line is, or ''."""
    if e.kind in ("launch", "checkpoint_load"):
        return e.kind
    if e.kind == "status":
        if e.fields.get("which") == "START":
            return "start"
        if e.fields.get("what", "").startswith("before the start of training"):
            return "launch"  # Megatron prints it once per launch, right before training
    return ""


def _stamp_kind(e: Event) -> str:
    """What a stamped event says about its attempt's time span."""
    if e.kind == "status":
        which = e.fields.get("which")
        if which == "START":
            return "start"
        if which == "END":
            return "end"
        if e.fields.get("state", "").startswith("waiting"):
            return "waiting"
        if e.fields.get("what", "").startswith("before the start of training"):
            return "loop"
    if e.role == "end":
        return "end"
    return "anchor"


def default_library(extra: Iterable[Path | str] = ()) -> Library:
    return load_library([*builtin_dirs(), *extra])
