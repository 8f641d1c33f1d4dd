"""A window's candidate lines taken a shape at a time (Collector.take_lines, line_grids.py) come out
as when each is offered alone (Collector.take): the same lines taken, the same columns, the
same lines handed back."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logscope.engine.feed import default_library
from logscope.match.prefilter import Prefilter
from logscope.model import to_float
from logscope.read.newlines import Newlines
from logscope.scan import line_grids as grids
from logscope.scan.bulk_progress import MAX_GRID_WIDTH, Collector
from logscope.scan.parsed_progress import ProgressColumns

LIBRARY = default_library()
PREFILTER = Prefilter.for_library(LIBRARY)

# constructed lines, not from any log: what progress lines look like in each format, and the
# lines around them that the bulk path must leave to the per-line path
PREFIXES = ["", "[default3]:", "[rank1]:2024-01-02 03:04:05,123 - root - INFO - ", "n07: "]
_num = st.integers(0, 10**7).map(str)
_float = st.sampled_from(["1.5", "0.25", "nan", "inf", "3.0E-04", "12.125"])


@st.composite
def _body(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 6))
    if kind == 0:
        return (
            f" iteration {draw(_num):>8}/ {draw(_num):>8} | consumed samples: {draw(_num)} | "
            f"elapsed time per iteration (ms): {draw(_float)} | lm loss: {draw(_float)} |"
        )
    if kind == 1:
        return f"{{'loss': {draw(_float)}, 'learning_rate': 4.9e-05, 'epoch': {draw(_float)}}}"
    if kind == 2:
        return f"step: {draw(_num)}  loss: {draw(_float)}  memory: 36.20GiB(81.50%)  wps: 1,710"
    if kind == 3:
        return "RuntimeError: CUDA error: an illegal memory access was encountered"
    if kind == 4:
        return f"terminate called after throwing an instance of 'c10::Error' {draw(_num)}"
    if kind == 5:
        return f"Saving model checkpoint to /ckpt/checkpoint-{draw(_num)}"
    return f"plain output {draw(_num)}"


@st.composite
def _line(draw: st.DrawFn) -> bytes:
    text = draw(st.sampled_from(PREFIXES)) + draw(_body())
    before = draw(
        st.sampled_from(
            [
                "",
                "\r",
                f"\r {draw(_num)[:2]}%|\u2588\u2588   | {draw(_num)}/100 [00:01<00:02]\r",
                f"[default1]:2024-01-02 03:04:05 step {draw(_num)}\r",
            ]
        )
    )
    after = draw(st.sampled_from(["", "", "\r", "\r\r", " \x1b[0m", " \u00e9t\u00e9"]))
    pad = draw(st.sampled_from([0, 0, 0, MAX_GRID_WIDTH]))
    return (before + text + " " * pad + after).encode()


Offered = tuple[list[int], ProgressColumns, list[tuple[int, bytes]]]
"""The lines refused, the columns, the lines taken that no regex matched."""


def _offered_alone(data: bytes, starts: list[int], ends: list[int], linenos: list[int]) -> Offered:
    collector = Collector(LIBRARY, "x.log", 2024)
    refused = [
        n for a, b, n in zip(starts, ends, linenos, strict=True) if not collector.take(n, data[a:b])
    ]
    return refused, *collector.finish()


def _offered_together(
    data: bytes, starts: list[int], ends: list[int], linenos: list[int], parts: int
) -> Offered:
    collector = Collector(LIBRARY, "x.log", 2024)
    refused: list[int] = []
    for part in np.array_split(np.arange(len(starts)), parts):
        s, e, n = (np.asarray(v, np.int64)[part] for v in (starts, ends, linenos))
        refused += n[collector.take_lines(bytearray(data), s, e, n)].tolist()
    return refused, *collector.finish()


@pytest.mark.hypothesis
@settings(max_examples=150, deadline=None)
@given(st.lists(_line(), min_size=1, max_size=60), st.integers(1, 3))
def test_a_shape_at_a_time_is_each_line_alone(lines: list[bytes], parts: int) -> None:
    # many lines of one shape, so that shapes reach bulk_progress.MIN_SHAPE_LINES
    data = b"\n".join(lines * 5) + b"\n"
    index, starts, ends = PREFILTER.spans(data, len(data), Newlines.of(data))
    linenos = (index + 1).tolist()
    alone = _offered_alone(data, starts.tolist(), ends.tolist(), linenos)
    together = _offered_together(data, starts.tolist(), ends.tolist(), linenos, parts)
    assert together[0] == alone[0]  # the lines refused
    assert together[1] == alone[1]  # the columns
    assert together[2] == alone[2]  # the lines taken that no regex matched


def test_most_progress_lines_are_taken_a_shape_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # the point of it: lines of a few shapes are decided without a line-by-line `take`
    lines = [
        f"[default{i % 8}]: iteration {i:>8}/ 100000 | consumed samples: {64 * i} | "
        f"elapsed time per iteration (ms): 812.{i % 10} | lm loss: 2.{i % 97:02d} |"
        for i in range(1, 2001)
    ]
    data = ("\n".join(lines) + "\n").encode()
    index, starts, ends = PREFILTER.spans(data, len(data), Newlines.of(data))
    collector = Collector(LIBRARY, "x.log", 2024)
    calls = 0
    take = Collector.take

    def counted(self: Collector, lineno: int, raw: bytes) -> bool:
        nonlocal calls
        calls += 1
        return take(self, lineno, raw)

    monkeypatch.setattr(Collector, "take", counted)
    assert not len(collector.take_lines(data, starts, ends, index + 1))
    cols, rejected = collector.finish()
    assert len(cols) == 2000 and not rejected and calls == 0
    assert list(cols.values["iteration"])[:3] == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    "cells",
    [
        [b"1.50", b"2.25", b"-inf", b"1e-5", b"nan "],  # Arrow refuses the last (a space)
        [b"1.50", b"2.25", b"-inf", b"1e-5", b"+inf"],  # Arrow reads them all
        [b" 1.5", b"2.25", b"1_00"],  # spaces and `_`: Arrow refuses, Python reads
        [b"1.5", b"abc", b"+in"],  # not numbers: NaN
    ],
)
def test_cells_read_as_python_reads_them(cells: list[bytes]) -> None:
    width = len(cells[0])
    grid = np.frombuffer(b"".join(cells), np.uint8).reshape(len(cells), width)
    got = grids.cell_floats(grid, 0, width)
    want = [to_float(c.decode().strip()) for c in cells]
    assert [str(x) for x in got] == [str(x) for x in want]
