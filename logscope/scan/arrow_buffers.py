"""Arrow arrays made from buffers and read back as buffers, not through Python lists and
scalars: pyarrow's conversions of those import pandas when it is installed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..model import to_float


def numbers(col: pa.Array) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """A column of number strings: where a number is present, and the floats (NaN where absent
    or not a number). RE2 gives a group that took no part as '', never a number."""
    out = np.full(len(col), np.nan)
    width = np.int64 if col.type == pa.large_string() else np.int32
    present = numpy_view(pc.binary_length(col), width) > 0
    if present.any():
        some = col.filter(mask(present))
        try:
            out[present] = numpy_view(pc.cast(some, pa.float64()), np.float64)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            out[present] = [to_float(v) for v in some.to_pylist()]
    return present, out


def strings(texts: list[str]) -> pa.Array:
    """ASCII texts as an Arrow string array."""
    offsets = np.zeros(len(texts) + 1, np.int64)
    np.cumsum([len(t) for t in texts], out=offsets[1:])
    data = "".join(texts).encode("ascii")
    return pa.Array.from_buffers(
        pa.large_string(), len(texts), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def mask(flags: np.ndarray[Any, Any]) -> pa.Array:
    bits = np.packbits(flags.astype(bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(flags), [None, pa.py_buffer(bits)])


def numpy_view(values: pa.Array, dtype: Any) -> np.ndarray[Any, Any]:
    """A null-free fixed-width Arrow array's values (a view)."""
    data = np.frombuffer(values.buffers()[1], dtype)
    return data[values.offset : values.offset + len(values)]
