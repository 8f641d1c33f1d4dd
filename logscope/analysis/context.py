"""What the analysis reads again once it is done: the lines around each root cause, and the last
line each rank printed (from the end of each input)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeAlias

from ..lines.decode import decode, parse_line
from ..lines.discovery import prefix_lines, routing_matches
from ..lines.layers import Layers
from ..model import Analysis, Attempt, Incident, input_of, lineno_of, order_key
from ..read.sources import read_lines, rereadable
from ..read.spool import Kept, read_kept
from .ledger import owner

TAIL_BYTES = 8 << 20
"""The end of an input scanned for the last line of every rank (the hang heat strip); less
of each when there are many inputs (lines.discovery.window_per_input)."""
TAIL_BUDGET = 32 << 20


def last_seen(
    analysis: Analysis,
    tail_bytes: int = TAIL_BYTES,
    seen: dict[str, dict[bytes, int]] | None = None,
    layers: dict[str, Layers | None] | None = None,
) -> list[tuple[int, str, int]]:
    """(rank, file, line) of the last line each rank printed, from the end of each input.

    A hung job's ranks fall silent one after another; the first to stop is the suspect. Only
    the last `tail_bytes` of each input are read: the ending is what matters, and reading every
    line of a large log for it would cost more than the analysis. An uncompressed file is read
    again here; for the others (compressed, stdin, a pipe) `seen` holds what `last_lines` found
    in their tail as it went by. `layers`: each input's prefix layers (lines.layers).
    """
    world = analysis.world
    seen, layers = seen or {}, layers or {}
    best: dict[int, tuple[int, str, int]] = {}
    for index, info in enumerate(analysis.inputs):
        last = seen.get(info.path)
        mine = layers.get(info.path)
        if last is None:
            if info.compression is not None or not rereadable(info.path):
                continue
            try:
                end = Path(info.path).stat().st_size
                back = tail_lines(info.path, end, tail_bytes, mine)
            except OSError:
                continue
            last = {prefix: n + info.lines for prefix, n in back.items()}
        for prefix, lineno in last.items():
            key = order_key(index, lineno)
            for line in prefix_lines(prefix, info.path, mine):
                rank = world.rank_of(line)
                if rank is not None and (rank not in best or best[rank][0] <= key):
                    best[rank] = (key, info.path, lineno)
    return sorted((rank, path, line) for rank, (_key, path, line) in best.items())


def last_lines(
    tail: bytes, cut: bool, lines: int, layers: Layers | None = None
) -> dict[bytes, int]:
    """The line number of the last line of each routing prefix in the tail of an input of
    `lines` lines; `cut`: bytes came before the tail (its first line may be a part).
    `layers`: the input's prefix layers, which a routing prefix may stand behind."""
    if cut:
        tail = tail[tail.find(b"\n") + 1 :]
    first = lines - tail.count(b"\n") + (1 if tail.endswith(b"\n") else 0)
    last = dict(routing_matches(tail, len(tail), layers))
    # one pass over the tail: thousands of distinct prefixes (NCCL's host:pid:tid) each
    # counting newlines from the start would be quadratic
    out: dict[bytes, int] = {}
    lineno, counted = first, 0
    for prefix, pos in sorted(last.items(), key=lambda item: item[1]):
        lineno += tail.count(b"\n", counted, pos)
        counted = pos
        out[prefix] = lineno
    return out


def tail_lines(
    path: str, end: int, tail_bytes: int, layers: Layers | None = None
) -> dict[bytes, int]:
    """last_lines of the `tail_bytes` of a file before byte `end`, numbered from its last line
    back (0, -1, ...: add the file's line count)."""
    start = max(0, end - tail_bytes)
    with Path(path).open("rb") as f:
        f.seek(start)
        tail = f.read(end - start)
    return last_lines(tail, start > 0, 0, layers)


CONTEXT_LINES = 5
"""Lines of the same rank shown before and after a root cause."""
CONTEXT_WINDOW = 400
"""Physical lines searched each side of a root cause: other ranks' lines interleave with the
culprit's."""

Span: TypeAlias = tuple[int, int, tuple[tuple[int, str], ...]]
"""An incident's attempt in its input: first line, last line, marks (line, text) at its edges."""
NO_END = 1 << 62
"""The last line of an attempt that runs to its input's end."""


def attempt_spans(incidents: Sequence[Incident], attempts: Sequence[Attempt]) -> dict[str, Span]:
    """Per incident whose root cause is in an input that holds several attempts: the line range
    [first, last] of its own attempt there, and marks (line, text) saying where it begins or ends.

    Attempts appended to one log follow each other: an attempt's lines run from its first line
    (its launch, its checkpoint load) to the line before the next attempt's first, and a line
    of the next one is no context of this one's failure (a hang's last progress line is
    followed, hours later, by the restart's). A job's own `.out` holds one attempt's lines only.
    """
    out: dict[str, Span] = {}
    for inc in incidents:
        index = owner(inc, attempts)
        if index is None:
            continue
        mine = next((a for a in attempts if a.index == index), None)
        if mine is None:
            continue
        root_input = input_of(inc.root_cause.seq)
        same = sorted((a for a in attempts if a.input == root_input), key=lambda a: a.first_seq)
        if mine not in same:
            continue  # the root cause is in another input (the attempt's `.out`)
        at = same.index(mine)
        lo = 1 if at == 0 else lineno_of(mine.first_seq)
        hi = lineno_of(same[at + 1].first_seq) - 1 if at + 1 < len(same) else NO_END
        name = f"attempt {mine.index + 1}" + (f" (job {mine.job_id})" if mine.job_id else "")
        marks: list[tuple[int, str]] = []
        if at > 0:
            marks.append((lo - 1, f"— {name} begins here (line {lo}) —"))
        if at + 1 < len(same):
            marks.append(
                (hi, f"— {name} ends here (line {hi}); the lines after are the next attempt's —")
            )
        out[inc.id] = (lo, hi, tuple(marks))
    return out


def root_context(
    incidents: Sequence[Incident],
    marks: dict[str, list[tuple[int, int]]] | None = None,
    kept: dict[str, list[Kept]] | None = None,
    radius: int = CONTEXT_LINES,
    spans: Mapping[str, Span] | None = None,
    layers: dict[str, Layers | None] | None = None,
) -> dict[str, list[tuple[int, str]]]:
    """For each incident, its root-cause line with the lines of the same rank around it.
    `marks`: per input read in ranges, (line number, byte offset) of each range's start, to
    read the lines without reading the file from its start; `kept`: chunks of compressed
    inputs kept after their scan (spool.Spool), read instead of the input when they hold the
    lines; `spans`: per incident, the line range of its own attempt (attempt_spans), outside
    which no line is its context; `layers`: each input's prefix layers, to decode the lines as
    the scan did."""
    spans = spans or {}
    wanted: dict[str, set[int]] = {}
    for inc in incidents:
        n = inc.root_cause.line.lineno
        lo = max(1, n - CONTEXT_WINDOW)
        wanted.setdefault(inc.root_cause.line.path, set()).update(range(lo, n + CONTEXT_WINDOW))
    marks, kept = marks or {}, kept or {}
    lines: dict[str, dict[int, bytes]] = {}
    for path, nums in wanted.items():
        got = read_kept(kept.get(path, ()), nums)
        lines[path] = read_lines(path, nums, marks.get(path, ())) if got is None else got
    out: dict[str, list[tuple[int, str]]] = {}
    for inc in incidents:
        root = inc.root_cause.line
        mine = root.stream
        first, last, _ = spans.get(inc.id, (1, NO_END, ()))
        got = lines.get(root.path, {})
        before: list[tuple[int, str]] = []
        after: list[tuple[int, str]] = []
        for n in sorted(got):
            if n == root.lineno or not first <= n <= last:
                continue
            text = decode(got[n]).rstrip("\r")
            decoded = parse_line(text, root.path, n, layers=(layers or {}).get(root.path))
            if not any(x.stream == mine for x in decoded):
                continue
            (before if n < root.lineno else after).append((n, text))
        out[inc.id] = [*before[-radius:], (root.lineno, root.raw), *after[:radius]]
    return out


def context_marks(
    context: Mapping[str, Sequence[tuple[int, str]]],
    spans: Mapping[str, Span],
) -> dict[str, tuple[tuple[int, str], ...]]:
    """The attempt marks worth showing with each incident's context: those within the lines
    the context window searched (CONTEXT_WINDOW each side of the root cause)."""
    out: dict[str, tuple[tuple[int, str], ...]] = {}
    for inc_id, (_lo, _hi, marks) in spans.items():
        shown = context.get(inc_id) or ()
        if not shown:
            continue
        top, bottom = shown[0][0], shown[-1][0]
        near = tuple(
            (at, text)
            for at, text in marks
            if top - CONTEXT_WINDOW <= at <= bottom + CONTEXT_WINDOW
        )
        if near:
            out[inc_id] = near
    return out
