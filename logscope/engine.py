"""The one pipeline: sources → lines → events → incidents → Analysis, fed incrementally."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

from .events import Extractor, who
from .incidents import (
    Who,
    build_incidents,
    build_world,
    decide_outcome,
    hang_incident,
    make_job,
)
from .lines import decode, parse_line
from .model import Analysis, Event, InputInfo, Line, Outcome, Progress
from .patterns import Library, builtin_dirs, load_library
from .sources import BLOCK_SIZE, Block, ReadStats, Source, expand, read_blocks

DISCOVERY_BYTES = 8 << 20
"""Bytes at the start of each input scanned for rank prefixes on every line."""
MAX_EVENTS_PER_SIGNATURE = 5_000
"""Events kept per signature (all are counted): 384 ranks repeating one warning stay bounded."""

# Routing prefixes at the start of a line, for finding every rank in a log's first block.
_PREFIX_SCAN = re.compile(
    rb"(?m)^(?:\[\d+,\d+\]<\w+>:"
    rb"|(?: *\d+: )?(?:[\w.-]*\d[\w.-]*: )?\[[A-Za-z_][\w.:-]*?\d+\]:(?:\[rank\d+\]:)?)"
    # the character after the prefix tells a c10 `[rank3]:[E` from a torchtitan `[rank3]:text`
    rb"[ \[]?"
)
_YEAR = re.compile(rb"\b(20\d\d)-[01]\d-[0-3]\d[T _]\d\d:\d\d")
_WORLD_SIZE = re.compile(r"(?:world[ _]size|WORLD_SIZE|dist_world_size)\s*[=:]?\s*\(?(\d+)\)?")


@dataclass(slots=True)
class Engine:
    """Incremental state of one analysis. `analyze` feeds whole files; `tail` feeds as they grow."""

    library: Library
    extractor: Extractor = field(init=False)
    failures: list[Event] = field(default_factory=list)
    progress: Progress = field(default_factory=Progress)
    markers: list[Event] = field(default_factory=list)
    streams: set[Who] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    declared_world: int | None = None
    first_time: datetime | None = None
    last_time: datetime | None = None
    last_progress: datetime | None = None
    _per_sig: dict[str, int] = field(default_factory=dict)
    _exact: datetime | None = None
    _since_exact_s: float = 0.0
    _last_iter: int | None = None
    _input_index: dict[str, int] = field(default_factory=dict)
    _offsets: dict[str, int] = field(default_factory=dict)
    _prefixes: set[bytes] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.extractor = Extractor(self.library)

    def discover(self, block: Block, path: str) -> None:
        """Note every rank prefix on the lines that start in an input's first DISCOVERY_BYTES.

        Every rank prints something at start-up, but a silent rank may print nothing after it:
        this finds ranks that no candidate line shows. A fixed byte window, not "the first
        block", keeps the result independent of the block size; scanning every line of a whole
        log would cost more than the rest of the analysis (80 MB/s, measured on bench/ logs).
        """
        start = self._offsets.get(path, 0)
        self._offsets[path] = start + len(block.data)
        if start >= DISCOVERY_BYTES:
            return
        data = block.data
        if start + len(data) > DISCOVERY_BYTES:
            cut = data.find(b"\n", DISCOVERY_BYTES - start)
            data = data if cut < 0 else data[: cut + 1]
        for prefix in set(_PREFIX_SCAN.findall(data)) - self._prefixes:
            self._prefixes.add(prefix)
            # the character after the prefix was kept: complete it into a line to decode
            text = decode(prefix) + ("x" if prefix.endswith(b" ") else "x]")
            for line in parse_line(text, path):
                self._note_stream(line)

    def feed_block(self, block: Block, path: str, year: int | None) -> list[Event]:
        out: list[Event] = []
        truncated = set(block.truncated)
        for line in self.extractor.lines(block.data, block.first_lineno, path, year):
            if truncated and line.lineno in truncated:
                line = _flag_truncated(line)
            out.extend(self.feed_line(line))
        return out

    def feed_line(self, line: Line) -> list[Event]:
        self._note_stream(line)
        if line.time is not None:
            self._tick(line.time)
        events = self.extractor.feed(line)
        for e in events:
            self._add(e)
        return events

    def _note_stream(self, line: Line) -> None:
        if line.local_rank is not None or line.rank is not None:
            self.streams.add(who(line))
        if line.host:
            self.hosts.add(line.host)

    def _tick(self, t: datetime) -> None:
        if self.first_time is None or t < self.first_time:
            self.first_time = t
        if self.last_time is None or t > self.last_time:
            self.last_time = t
        self._exact = t
        self._since_exact_s = 0.0

    def _add(self, e: Event) -> None:
        index = self._input_index.setdefault(e.line.path, len(self._input_index))
        e = replace(e, seq=(index << 40) | e.line.lineno)
        if e.time is not None and e.time_exact:
            self._tick(e.time)
        if e.line.host:
            self.hosts.add(e.line.host)
        if e.kind == "iteration":
            e = self._clock(e)
            self.progress.add(e)
            self.last_progress = e.time or self.last_progress
            return
        if e.kind in ("checkpoint_save", "checkpoint_saved", "checkpoint_load", "validation"):
            self.markers.append(e)
            return
        if e.kind in ("exit", "launch", "status"):
            if e.kind == "launch" and "world_size" in e.fields:
                self.declared_world = int(e.fields["world_size"])
            self.markers.append(e)
            return
        n = self._per_sig.get(e.signature, 0)
        self._per_sig[e.signature] = n + 1
        if n < MAX_EVENTS_PER_SIGNATURE or e.severity in ("fatal",) or e.role == "end":
            self.failures.append(e)
        if e.role == "summary" and "rank" in e.fields and "host" in e.fields:
            self.hosts.add(e.fields["host"])

    def _clock(self, e: Event) -> Event:
        """Give a stamp-less progress line a derived time: the last stamp plus logged durations."""
        it = e.fields.get("iteration")
        step = 1
        if it is not None and it.isdigit():
            if self._last_iter is not None and int(it) > self._last_iter:
                step = int(it) - self._last_iter
            self._last_iter = int(it)
        if "iter_s" in e.fields:
            self._since_exact_s += float(e.fields["iter_s"]) * step
        elif "iter_ms" in e.fields:
            self._since_exact_s += float(e.fields["iter_ms"]) / 1000 * step
        if e.time is not None or self._exact is None:
            return e
        t = self._exact + timedelta(seconds=self._since_exact_s)
        if self.last_time is None or t > self.last_time:
            self.last_time = t
        return replace(e, time=t, time_exact=False)

    def world_hint(self, line: Line) -> None:
        m = _WORLD_SIZE.search(line.text)
        if m:
            self.declared_world = int(m.group(1))

    def result(self, inputs: Sequence[InputInfo]) -> Analysis:
        for e in self.extractor.finish():
            self._add(e)
        world = build_world(sorted(self.streams, key=repr), self.declared_world)
        incidents = build_incidents(self.failures, self.progress, world, self.library)
        exits = [m for m in self.markers if m.kind == "exit"]
        ending = decide_outcome(incidents, self.progress, exits, self.last_progress, self.last_time)
        if ending.outcome is Outcome.hung:
            incidents = hang_incident(incidents, self.progress, ending)
        job = make_job(
            ending,
            world,
            sorted(self.hosts),
            self.first_time,
            self.last_time,
            self.progress,
            self.last_progress,
        )
        from .clusters import Clusters

        clusters: Clusters = self.extractor.unrecognized
        return Analysis(
            inputs=tuple(inputs),
            job=job,
            incidents=tuple(incidents),
            verdict=incidents[-1] if incidents else None,
            unrecognized=tuple(clusters.templates()),
            progress=self.progress,
            extra={"world": world, "markers": tuple(self.markers), "hang_s": ending.hang_s},
        )


def _flag_truncated(line: Line) -> Line:
    return replace(line, truncated=True)


def _year_hint(src: Source, first: bytes) -> int | None:
    m = _YEAR.search(first)
    if m:
        return int(m.group(1))
    if src.path != "-":
        try:
            return datetime.fromtimestamp(Path(src.path).stat().st_mtime).year
        except OSError:
            return None
    return None


def default_library(extra: Iterable[Path | str] = ()) -> Library:
    return load_library([*builtin_dirs(), *extra])


def analyze(
    paths: Sequence[str],
    library: Library | None = None,
    warn: list[str] | None = None,
    block_size: int = BLOCK_SIZE,
) -> Analysis:
    """Analyze logs that have ended. `warn` collects non-fatal input problems."""
    library = library or default_library()
    engine = Engine(library)
    inputs: list[InputInfo] = []
    for src in expand(list(paths)):
        stats = ReadStats()
        year: int | None = None
        try:
            for i, block in enumerate(read_blocks(src, stats, block_size=block_size)):
                if i == 0:
                    year = _year_hint(src, block.data[:65536])
                engine.discover(block, src.path)
                engine.feed_block(block, src.path, year)
        except Exception as err:
            from .errors import InputError

            if isinstance(err, InputError) and not src.explicit:
                stats.warnings.append(f"{src.path}: skipped: {err.message}")
            else:
                raise
        if warn is not None:
            warn.extend(stats.warnings)
        inputs.append(
            InputInfo(src.path, stats.bytes, stats.lines, stats.compression, tuple(stats.warnings))
        )
    return engine.result(inputs)
