"""Newlines: where the newlines of a buffer are, as one bit a byte and a running count, so that
the lines around any bytes are found without listing every newline's position (newlines_of)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]
_ONE = np.uint64(1)


@dataclass(frozen=True, slots=True)
class Newlines:
    """The newlines of `data[:size]`; `data` must not change while this is in use."""

    data: bytes | bytearray
    size: int
    words: Array
    """uint64: bit i of word w is set when byte 64 w + i is a newline."""
    before: Array
    """int64: the newlines in words [0, w), for w = 0 .. len(words)."""

    @classmethod
    def of(cls, data: bytes | bytearray, size: int = -1) -> Newlines:
        size = len(data) if size < 0 else size
        bits = np.packbits(np.frombuffer(data, np.uint8, count=size) == 10, bitorder="little")
        pad = -len(bits) % 8
        if pad:
            bits = np.concatenate((bits, np.zeros(pad, np.uint8)))
        words = bits.view("<u8")
        before = np.zeros(len(words) + 1, np.int64)
        np.cumsum(np.bitwise_count(words), out=before[1:])
        return cls(data, size, words, before)

    @property
    def count(self) -> int:
        return int(self.before[-1])

    @property
    def lines(self) -> int:
        """Lines of `data[:size]`, the last one counted with or without its newline."""
        unterminated = self.size > 0 and self.data[self.size - 1] != 10
        return self.count + unterminated

    def positions(self) -> Array:
        """Position of every newline, ascending (what the bits spare the fast path)."""
        return newlines_of(self.data, self.size)

    def lines_of(self, positions: Array) -> tuple[Array, Array, Array]:
        """The lines holding byte positions (ascending, below `size`), each line once: its
        index (the newlines before it), its start, and its end (its newline, or `size`)."""
        pos = np.asarray(positions, np.int64)
        w = pos >> 6
        word = self.words[w]
        low = (_ONE << (pos & 63).astype(np.uint64)) - _ONE  # bits before the position
        index = self.before[w] + np.bitwise_count(word & low)
        first = np.flatnonzero(np.diff(index, prepend=-1) != 0)  # a line's first position
        if len(first) < len(index):
            pos, w, word, low, index = pos[first], w[first], word[first], low[first], index[first]
        # start: after the last newline before the position, in its word or an earlier one
        prior = word & low
        inside = prior != 0
        j = np.searchsorted(self.before, self.before[w], "left") - 1  # last word with one
        j = np.where(inside | (self.before[w] == 0), w, j)
        preceding = np.where(inside, prior, self.words[j])
        starts = np.where(
            inside | (self.before[w] > 0), (j << 6) + _highest_bit(preceding) + 1, 0
        ).astype(np.int64)
        # end: the first newline at or after the position, in its word or a later one
        rest = word & ~low
        inside = rest != 0
        after = self.before[w + 1]
        j = np.searchsorted(self.before, after, "right") - 1  # first word after w with one
        none = ~inside & (after == self.count)
        j = np.where(inside | none, w, j)
        following = np.where(inside, rest, self.words[j])
        ends = np.where(none, self.size, (j << 6) + _lowest_bit(following)).astype(np.int64)
        return index, starts, ends

    def no_line_over(self, max_line: int) -> bool:
        """True when no line ended by a newline is over `max_line` bytes: every aligned run of
        (max_line + 1) // 2 bytes inside the buffer holds a newline (a longer line would hold
        such a run whole). False says only that one may be: `positions` tells."""
        step = max(1, (max_line + 1) // 2)
        find = self.data.find
        return all(find(b"\n", a, a + step) >= 0 for a in range(0, self.size - step + 1, step))


def newlines_of(data: bytes | bytearray, size: int = -1) -> Array:
    """Positions of every newline in `data[:size]`, ascending (numpy: ~1 GB/s)."""
    size = len(data) if size < 0 else size
    found: Array = np.flatnonzero(np.frombuffer(data, np.uint8, count=size) == 10)
    return found


def _lowest_bit(x: Array) -> Array:
    """Index of the lowest set bit of each nonzero uint64 (garbage for 0)."""
    index: Array = np.bitwise_count((x & (~x + _ONE)) - _ONE).astype(np.int64)
    return index


def _highest_bit(x: Array) -> Array:
    """Index of the highest set bit of each nonzero uint64 (garbage for 0): every bit below it
    set, then counted (a float's log2 rounds 2**64 - 1 up)."""
    x = x.copy()
    for shift in (1, 2, 4, 8, 16, 32):
        x |= x >> np.uint64(shift)
    return np.bitwise_count(x).astype(np.int64) - 1
