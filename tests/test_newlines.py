"""Newlines as bits: the lines around any byte, and the line-length check, as the positions of
every newline would tell them."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from logscope.read.newlines import Newlines

# lines of every length around a 64-byte word: none, short, one word, several words; runs of
# empty lines (a word of newlines sets every bit: the highest bit must not round up)
LINES = st.lists(
    st.one_of(st.integers(0, 3), st.integers(60, 70), st.integers(120, 300)), max_size=40
)


def _buffer(lengths: list[int], terminated: bool, pad: int) -> bytearray:
    text = b"\n".join(b"x" * n for n in lengths) + (b"\n" if terminated else b"")
    return bytearray(text + b"\n" * pad)  # bytes beyond `size` must not count


def _naive(data: bytes, size: int, pos: int) -> tuple[int, int, int]:
    start = data.rfind(b"\n", 0, pos) + 1
    end = data.find(b"\n", pos, size)
    return data.count(b"\n", 0, pos), start, size if end < 0 else end


@given(lengths=LINES, terminated=st.booleans(), pad=st.integers(0, 9), data=st.data())
def test_the_lines_around_bytes_are_the_naive_ones(
    lengths: list[int], terminated: bool, pad: int, data: st.DataObject
) -> None:
    buf = _buffer(lengths, terminated, pad)
    size = len(buf) - pad
    newlines = Newlines.of(buf, size)
    plain = bytes(buf)
    assert newlines.count == plain.count(b"\n", 0, size)
    assert newlines.lines == len(plain[:size].splitlines())
    assert newlines.positions().tolist() == [i for i in range(size) if plain[i] == 10]
    if not size:
        return
    picked = sorted(data.draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=30)))
    index, starts, ends = newlines.lines_of(np.asarray(picked))
    got = list(zip(index.tolist(), starts.tolist(), ends.tolist(), strict=True))
    assert got == sorted({_naive(plain, size, p) for p in picked})


@given(lengths=LINES, terminated=st.booleans(), max_line=st.integers(1, 400))
def test_no_line_over_is_never_wrong(lengths: list[int], terminated: bool, max_line: int) -> None:
    # True only when no line ended by a newline is over max_line; False when one is
    buf = _buffer(lengths, terminated, 0)
    ended = lengths if terminated else lengths[:-1]
    over = any(n > max_line for n in ended)
    answer = Newlines.of(buf).no_line_over(max_line)
    assert not (answer and over)
    if over:
        assert not answer


def test_a_long_run_of_empty_lines_and_a_word_of_newlines() -> None:
    buf = bytearray(b"a" * 70 + b"\n" * 130 + b"b" * 3)
    index, starts, ends = Newlines.of(buf).lines_of(np.asarray([0, 69, 127, 200, 202]))
    assert index.tolist() == [0, 57, 130]
    assert starts.tolist() == [0, 127, 200]
    assert ends.tolist() == [70, 127, 203]
