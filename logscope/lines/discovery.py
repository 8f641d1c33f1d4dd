"""Rank discovery: the routing prefixes of the lines at an input's start, for finding every
rank, a silent one too, in a log's first bytes (lines.decode decodes them)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from ..model import Line
from .decode import decode, parse_line
from .headers import GLOG_HEADER
from .layers import PATTERNS, TIME_LAYERS, Layers

DISCOVERY_BYTES = 8 << 20
"""Bytes at the start of an input scanned for the routing prefix of every line (at most; less
each when there are many inputs, see window_per_input)."""
DISCOVERY_BUDGET = 64 << 20


def _unnamed(pattern: str) -> bytes:
    """A str pattern as bytes, its named groups made plain (to stand inside another)."""
    return re.sub(r"\(\?P<\w+>", "(?:", pattern).encode()


# The level letter of a glog header, kept where the whole header (decode's GLOG_HEADER) follows
# it: its time and pid differ on every line (kept, each line would be a prefix of its own).
_GLOG_LEVEL = b"(?=" + _unnamed(GLOG_HEADER.pattern) + b")[VIWEFC]"
_GLOG_COMPLETION = "0101 00:00:00.000000 1 x.py:1] x"

# Routing prefixes at the start of a line, for finding every rank in a log's first bytes.
ROUTING_PREFIX = re.compile(
    rb"(?m)^(?:\[\d+,(?:mpirank:)?\d+(?:,[\w.-]+)?\]<\w+>:"
    rb"|(?: *\d+: )?(?:[\w.-]*\d[\w.-]*: )?\[[A-Za-z_][\w.:-]*?\d+\]:(?:\[rank\d+\]:)?)"
    # the character after the prefix tells a c10 `[rank3]:[E` from a torchtitan `[rank3]:text`,
    # and torch._logging's `[rank3]:I0124 15:34:58.736000 <pid> <file>:<line>] ` (a glog header)
    # from both
    rb"(?:[ \[]|" + _GLOG_LEVEL + rb")?"
)


_RANK_TAGS = frozenset({"ompi", "hydra"})
_MULTILINE_START = rb"(?m)^"


@functools.lru_cache(maxsize=64)
def layered_routing(layers: Layers) -> re.Pattern[bytes]:
    """ROUTING_PREFIX behind an input's learned layers: each layer optional, a tag layer kept
    (a group), a time skipped (each line's differs: kept, every line would be a prefix of its
    own). A line names a rank when a rank tag (OpenMPI's, Hydra's) or a routing prefix follows."""
    parts: list[bytes] = [_MULTILINE_START, *(_decor_pattern(d) for d in layers.decor)]
    for name in layers.order:
        body = _unnamed(PATTERNS[name].pattern)
        kind = b"?:" if name in TIME_LAYERS else b"?P<" + name.encode() + b">"
        parts.append(b"(" + kind + body + b")?")
    if layers.pad:
        parts.append(b"(?: {%d})?" % layers.pad)
    parts.append(b"(?P<route>" + ROUTING_PREFIX.pattern[len(_MULTILINE_START) :] + b")?")
    return re.compile(b"".join(parts))


def _decor_pattern(decor: str) -> bytes:
    if decor.isdigit():
        return b"(?: {%d}|\t)?" % int(decor)
    return b"(?:%s)?" % re.escape(decor.encode())


def _behind(layers: Layers | None) -> Layers | None:
    """`layers` when a routing prefix may stand behind them (a tag, time, gutter or indent;
    a pane border alone cuts lines, it prefixes none), else None."""
    return layers if layers is not None and (layers.order or layers.decor) else None


def routing_matches(
    data: bytes | bytearray, end: int, layers: Layers | None = None
) -> Iterator[tuple[bytes, int]]:
    """(routing prefix, where its line starts) of each line of `data[:end]` that has one,
    behind the input's `layers` if it has any (layered_routing)."""
    layers = _behind(layers)
    if layers is None:
        for m in ROUTING_PREFIX.finditer(data, 0, end):
            yield m.group(0), m.start()
        return
    rank_tags = [n for n in layers.order if n in _RANK_TAGS]
    for m in layered_routing(layers).finditer(data, 0, end):
        if m.end() == m.start() or not (m["route"] or any(m[n] for n in rank_tags)):
            continue
        yield b"".join(g for g in m.groupdict().values() if g), m.start()


def routing_prefixes(
    data: bytes | bytearray,
    offset: int,
    size: int = -1,
    window: int = DISCOVERY_BYTES,
    layers: Layers | None = None,
) -> set[bytes]:
    """The distinct routing prefixes of the lines of `data[:size]` (at byte `offset` of its
    input) that start in the input's first `window` bytes.

    Every rank prints something at start-up, but a silent rank may print nothing after it:
    this finds ranks that no candidate line shows. A fixed byte window, not "the first block",
    keeps the result independent of how the input is cut; scanning every line of a whole log
    would cost more than the rest of the analysis (80 MB/s, measured on bench/ logs).
    `layers`: the input's learned prefix layers, which the routing prefix may stand behind
    (layered_routing); the prefixes found then hold the layers' tags, not their times.
    """
    if offset >= window:
        return set()
    end = len(data) if size < 0 else size
    if offset + end > window:
        cut = data.find(b"\n", window - offset)
        end = end if cut < 0 else cut + 1
    if _behind(layers) is None:
        return set(ROUTING_PREFIX.findall(data, 0, end))
    return {prefix for prefix, _ in routing_matches(data, end, layers)}


def window_per_input(inputs: int, budget: int, floor: int, ceiling: int) -> int:
    """Bytes of each input scanned line by line (rank discovery, last lines), out of a budget
    for all: 8 MiB of one merged log, but not 8 MiB of each of 384 per-rank files."""
    return max(floor, min(ceiling, budget // max(1, inputs)))


def prefix_lines(prefix: bytes, path: str, layers: Layers | None = None) -> list[Line]:
    """Decode a routing prefix found by routing_prefixes (`layers`: the input's, when the
    prefix was found behind them). The scan kept the character after it (c10 `[rank3]:[` vs
    torchtitan `[rank3]:x`, or a glog header's level letter): complete it into a line."""
    text = decode(prefix)
    if prefix.endswith(b" "):
        text += "x"
    elif prefix[-2:-1] == b":" and prefix[-1:] in b"VIWEFC":
        text += _GLOG_COMPLETION
    else:
        text += "x]"
    return parse_line(text, path, layers=_behind(layers))
