"""Packed: a column of numbers that holds one value, not one per row, for as long as every row is
the same. Most of Progress's columns say nothing in a given log (an HF Trainer dict has no
iteration number, no loss scale), so they cost nothing however long the run."""

from __future__ import annotations

import struct
from array import array
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import NDArray

NUMPY_TYPES = MappingProxyType({"q": np.int64, "i": np.int32, "d": np.float64, "b": np.int8})
"""The numpy type of each `array` typecode the project stores."""
_BITS = MappingProxyType({code: struct.Struct(code).pack for code in NUMPY_TYPES})


class Packed:
    """An `array` of one typecode (of NUMPY_TYPES), appended to and written in place, that
    keeps (value, length) while all its values are bitwise equal (NaN with NaN, not 0.0 with
    -0.0), and becomes an `array` at the first value that differs."""

    __slots__ = ("_len", "_rows", "_value", "typecode")

    def __init__(self, typecode: str) -> None:
        self.typecode = typecode
        self._rows: array[Any] | None = None
        self._value: Any = None
        self._len = 0

    @property
    def packed(self) -> bool:
        """One value stands for every row."""
        return self._rows is None

    def __len__(self) -> int:
        return self._len if self._rows is None else len(self._rows)

    def _same(self, v: Any) -> bool:
        bits = _BITS[self.typecode]
        return self._len == 0 or bits(v) == bits(self._value)

    def _unpack(self) -> array[Any]:
        if self._rows is None:
            self._rows = array(self.typecode, [self._value] if self._len else []) * self._len
        return self._rows

    def append(self, v: Any) -> None:
        if self._rows is None and self._same(v):
            self._value, self._len = v, self._len + 1
        else:
            self._unpack().append(v)

    def extend(self, values: NDArray[Any]) -> None:
        """Append numpy values of this column's type."""
        if not len(values):
            return
        if self._rows is None:
            first = values[0].item()
            if self._same(first) and uniform(values):
                self._value, self._len = first, self._len + len(values)
                return
        self._unpack().frombytes(values.tobytes())

    def numpy(self) -> NDArray[Any]:
        """The column as numpy: a view of the rows, or of the one value repeated (read-only)."""
        dtype = NUMPY_TYPES[self.typecode]
        if self._rows is None:
            if not self._len:
                return np.empty(0, dtype)
            return np.broadcast_to(np.array(self._value, dtype=dtype), (self._len,))
        return np.frombuffer(self._rows, dtype=dtype) if self._rows else np.empty(0, dtype)

    def __getitem__(self, i: int) -> Any:
        if self._rows is not None:
            return self._rows[i]
        if not -self._len <= i < self._len:
            raise IndexError("Packed index out of range")
        return self._value

    def __setitem__(self, where: int | slice, v: Any) -> None:
        if self._rows is None:
            if isinstance(where, int):
                if not -self._len <= where < self._len:
                    raise IndexError("Packed assignment index out of range")
                if self._same(v):
                    return
            else:
                start, stop, step = where.indices(self._len)
                values = np.frombuffer(v, dtype=NUMPY_TYPES[self.typecode])
                if step != 1 or len(values) != stop - start:
                    raise ValueError("a Packed stretch is replaced by as many values")
                if not len(values):
                    return
                if self._same(values[0].item()) and uniform(values):
                    return
        self._unpack()[where] = v

    def tobytes(self) -> bytes:
        """The values' bytes, as `array.tobytes` gives them."""
        return bytes(self.numpy().tobytes())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Packed):
            return NotImplemented
        return self.typecode == other.typecode and (self.tobytes() == other.tobytes())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if self._rows is None:
            return f"Packed({self.typecode!r}, {self._value!r} x {self._len})"
        return f"Packed({self._rows!r})"


def uniform(values: NDArray[Any]) -> bool:
    """Every value is bitwise the first (NaN equal to the same NaN, 0.0 unequal to -0.0)."""
    bits = values.view(np.int64) if values.dtype == np.float64 else values
    return bool((bits == bits[:1]).all())
