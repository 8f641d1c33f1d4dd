"""Hard-wrapped logs: learn an input's wrap width, and rejoin a candidate line with its pieces.
A terminal, a runner or a copy from a web page cuts every long line at a fixed width, and the
pieces carry no prefix of their own. Only candidate lines and their neighbours pay the rejoin."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from ..read.newlines import newlines_of
from ..read.sources import Block, joined, split_block
from .decode import decode, parse_line

WRAP_SAMPLE = 1 << 20
"""Bytes at an input's start from which its wrap width is learned."""
MAX_PIECES = 8
"""Physical lines one logical line is rejoined from, at most."""
_MIN_WIDTH = 60  # terminals are 80 wide and up; shorter equal lengths are a coincidence
_MIN_CUT = 2
_MAX_LOOKS = 64
"""Lines of exactly the width whose next line is looked at, at most."""


def _shape(line: bytes | bytearray) -> bytes:
    """A line without its numbers and padding: the same for every line of one template."""
    return bytes(line).translate(None, b"0123456789 .+-")


# Lines that start a record although no prefix says so: a traceback's lines, a Python exception,
# a `Key: value` or `LOCAL_RANK: 0 - ...` report, and a program's own log line in the
# `argv0: level: ` form of SLURM's log.c (`slurmstepd: error: `, `srun: fatal: `), which many
# C tools share
_RECORD_START = re.compile(
    r"^(?:Traceback \(most recent call last\)|\s+File \"|During handling of|The above exception"
    r"|[A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt|Exit)\b|[A-Z]\w*(?: \w+)?: "
    r"|[\w.-]+: (?:error|fatal|warning|info|debug\d?): )"
)


def starts_record(raw: bytes | bytearray) -> bool:
    """A physical line that begins a record of its own: a routing prefix, a logger header or a
    timestamp is stripped from it, or it has the shape of a traceback line."""
    text = decode(bytes(raw)).rstrip("\r")
    if not text.strip():
        return True
    line = parse_line(text)[0]
    return line.text != text or bool(_RECORD_START.match(text))


def wrap_width(data: bytes | bytearray) -> int | None:
    """The width an input's lines were cut at, or None: from its first bytes (whole lines)."""
    newlines = newlines_of(data)
    if len(newlines) < _MIN_CUT + 1:
        return None
    starts = np.concatenate(([0], newlines[:-1] + 1))
    raw = np.frombuffer(data, np.uint8)
    cr = raw[np.maximum(newlines - 1, 0)] == 13
    # a terminal cuts at a number of characters: UTF-8's continuation bytes take no column
    # (a tqdm bar's blocks are three bytes each)
    continuation = np.flatnonzero((raw & 0xC0) == 0x80)  # few or none: only their places kept
    wide = np.searchsorted(continuation, newlines) - np.searchsorted(continuation, starts)
    lengths = newlines - starts - (cr & (newlines > starts)) - wide
    width = int(lengths.max())
    at_width = np.flatnonzero(lengths == width)
    if width >= _MIN_WIDTH and len(at_width) < _MIN_CUT:
        width, at_width = _width_under_a_stray(lengths)
    # the common case ends here, in numpy: the longest line is short or alone
    if width < _MIN_WIDTH or len(at_width) < _MIN_CUT:
        return None
    if 2 * len(at_width) < int(np.count_nonzero(lengths * 10 > width * 9)):
        return None  # long lines of many lengths: not a wrap
    # a cut line goes on in a line of another shape; a fixed-format line (Megatron's iteration
    # lines, alike but for their digits) is followed by another of its kind. The same line
    # printed twice (torchrun's `host :` of one long node name in each failure entry) is one
    # line of that length, not two cut at it. Lines of one template cut alike go on alike (the
    # rest of the template); lines of one template at the width followed by lines of other
    # shapes are a fixed format (a checkpoint path's step number), not a wrap.
    seen: set[bytes] = set()
    followers: dict[bytes, list[bytes]] = {}
    for i in at_width[:_MAX_LOOKS].tolist():
        line = bytes(data[starts[i] : newlines[i]])
        if i + 1 < len(newlines) and line not in seen:
            seen.add(line)
            after = data[starts[i + 1] : newlines[i + 1]]
            if _continues(line, after):
                followers.setdefault(_shape(line), []).append(_shape(after))
    cut = sum(len(shapes) for shapes in followers.values() if len(set(shapes)) == 1)
    return width if cut >= _MIN_CUT else None


def _width_under_a_stray(lengths: np.ndarray) -> tuple[int, np.ndarray]:
    """The wrap width where the longest line is alone: the next length down, and its lines (a
    paste's one line longer than the wrap: the poster's backtick glued to a cut line). The caller
    still asks that several lines have that width and are cut."""
    below = lengths[lengths < lengths.max()]
    if not below.size:
        return 0, np.empty(0, np.intp)
    width = int(below.max())
    return width, np.flatnonzero(lengths == width)


_SAME_START = 12
"""Leading bytes two lines share, letters among them, when they are two records of one kind
(`kernel: NVRM: Xid (PCI:`): a piece cut off a line does not begin as the line began."""


def _same_start(line: bytes | bytearray, after: bytes | bytearray) -> bool:
    head = bytes(line[:_SAME_START])
    return (
        len(head) == _SAME_START
        and bytes(after[:_SAME_START]) == head
        and any(chr(c).isalpha() for c in head)
    )


def _indent(line: bytes | bytearray) -> int:
    return len(line) - len(line.lstrip(b" \t"))


def _sibling(line: bytes | bytearray, after: bytes | bytearray) -> bool:
    """`after` is indented as `line` is, by two or more: the next item of one indented block (a
    stack dump's frames, a config's keys), not a piece a terminal cut off it, which begins
    wherever the cut fell."""
    indent = _indent(line)
    return indent >= 2 and _indent(after) == indent


# A traceback's frame line, whole: CPython writes `  File "<file>", line <n>, in <name>` with its
# newline (Lib/traceback.py StackSummary.format), and the frame's source line under it
_FRAME = re.compile(rb'\s*File "[^"]+", line \d+, in [^\s"]+\s*')


def _continues(line: bytes | bytearray, after: bytes | bytearray) -> bool:
    """`after` goes on with `line` cut at the wrap: not the next line of its template (alike
    but for its numbers, or beginning as it begins, or indented as it is), not the start of a
    record of its own. A rule (one character repeated: torchrun's `====` of 60) and a whole
    traceback frame line are whole lines, whatever their length."""
    return (
        len(set(bytes(line).strip())) > 1
        and not _FRAME.fullmatch(line)
        and _shape(after) != _shape(line)
        and not _same_start(line, after)
        and not _sibling(line, after)
        and not starts_record(after)
    )


def _length(data: bytes | bytearray, start: int, end: int) -> int:
    """The length in characters of the line [start, end), as a terminal cuts it: a carriage
    return before its newline not counted."""
    end -= 1 if end > start and data[end - 1] == 13 else 0
    piece = data[start:end]
    return len(piece) if piece.isascii() else len(bytes(piece).decode("utf-8", "replace"))


def rejoin(
    data: bytes | bytearray, spans: Sequence[tuple[int, int]], width: int | None, size: int = -1
) -> list[tuple[int, int]]:
    """The candidate spans of a block grown to whole wrapped records: back to the record's
    first piece and on to its last, each span once (a candidate inside another's record is
    dropped). Without a width the spans are returned as they are."""
    if width is None or not spans:
        return list(spans)
    size = len(data) if size < 0 else size
    out: list[tuple[int, int]] = []
    for start, end in spans:
        if out and start <= out[-1][1]:
            continue  # a piece of the record before
        pieces = 1
        while pieces < MAX_PIECES and start > 0:
            prev = data.rfind(b"\n", 0, start - 1) + 1
            here = data[start : end_of(data, start, size)]
            if _length(data, prev, start - 1) < width or not _continues(
                data[prev : start - 1], here
            ):
                break
            start, pieces = prev, pieces + 1
        last = data.rfind(b"\n", 0, end) + 1  # the start of the span's last physical line
        while pieces < MAX_PIECES and _length(data, last, end) >= width and end + 1 < size:
            nxt, nxt_end = end + 1, end_of(data, end + 1, size)
            if not _continues(data[last:end], data[nxt:nxt_end]):
                break
            last, end, pieces = nxt, nxt_end, pieces + 1
        out.append((start, end))
    return out


def end_of(data: bytes | bytearray, start: int, size: int) -> int:
    """The end (newline excluded) of the line that starts at `start`."""
    end = data.find(b"\n", start, size)
    return size if end < 0 else end


def unfinished_tail(data: bytes | bytearray, width: int | None) -> int:
    """Where a block of whole lines may be cut without splitting a wrapped record: the start of
    its trailing run of lines exactly `width` long (a record that goes on in the next block),
    at most MAX_PIECES of them; len(data) when its last line is shorter, or with no width."""
    size = len(data)
    if width is None or not size or data[size - 1] != 10:
        return size
    cut, end, pieces = size, size - 1, 0
    while pieces < MAX_PIECES and end >= 0:
        start = data.rfind(b"\n", 0, end) + 1
        if _length(data, start, end) != width:
            break
        cut, end, pieces = start, start - 1, pieces + 1
    return cut


def whole_records(blocks: Iterable[Block], width: int | None) -> Iterator[Block]:
    """The blocks, each cut before a hard-wrapped record that goes on into the next (its lines
    carried there): a scan of one block sees every record whole, whatever the block size. The
    input's last block is never cut: nothing follows it (a screen copy pads every line to the
    width, and its last lines would otherwise be scanned apart from the record they end)."""
    carried: Block | None = None
    ahead = iter(blocks)
    block = next(ahead, None)
    while block is not None:
        following = next(ahead, None)
        if carried is not None:
            block, carried = joined([carried, block]), None
        cut = unfinished_tail(block.data, width) if following is not None else len(block.data)
        if cut == 0:
            carried = block  # all of it one record going on (MAX_PIECES lines at most)
        else:
            if cut < len(block.data):
                block, carried = split_block(block, cut)
            yield block
        block = following
    if carried is not None:
        yield carried
