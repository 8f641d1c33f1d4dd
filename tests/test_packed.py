"""Packed (a Progress column) reads and writes as the `array` it stands for, whatever is
appended, extended or written in place; it holds one value while all are the same."""

from __future__ import annotations

import math
from array import array
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from logscope.compact_column import NUMPY_TYPES, Packed

# NaN, the other NaN, 0.0 and -0.0: equal or not, bit for bit
FLOATS = [math.nan, -math.nan, 0.0, -0.0, 1.5, math.inf]
VALUES = {
    "d": st.sampled_from(FLOATS),
    "q": st.sampled_from([-1, 0, 7]),
    "b": st.just(0) | st.just(1),
}


def _ops(code: str) -> st.SearchStrategy[list[tuple[str, Any]]]:
    v = VALUES[code]
    op = st.one_of(
        st.tuples(st.just("append"), v),
        st.tuples(st.just("extend"), st.lists(v, max_size=70)),
        st.tuples(st.just("set"), st.tuples(st.integers(-80, 80), v)),
        st.tuples(st.just("stretch"), st.tuples(st.integers(0, 80), st.lists(v, max_size=5))),
    )
    return st.lists(op, max_size=25)


@pytest.mark.parametrize("code", ["d", "q", "b"])
@given(data=st.data())
def test_packed_reads_as_the_array(code: str, data: st.DataObject) -> None:
    want, got = array(code), Packed(code)
    ever: set[bytes] = set()  # the values put in
    for op, arg in data.draw(_ops(code)):
        if op == "append":
            want.append(arg)
            got.append(arg)
            ever.add(struct_bits(arg, code))
        elif op == "extend":
            values = np.array(arg, dtype=NUMPY_TYPES[code])
            want.frombytes(values.tobytes())
            got.extend(values)
            ever |= {struct_bits(v, code) for v in arg}
        elif op == "set":
            i, v = arg
            if -len(want) <= i < len(want):
                want[i] = v
                got[i] = v
                ever.add(struct_bits(v, code))
            else:
                with pytest.raises(IndexError):
                    got[i] = v
        else:
            start, vs = arg
            start = min(start, len(want))
            stop = min(start + len(vs), len(want))
            part = array(code, vs[: stop - start])
            want[start:stop] = part
            got[start:stop] = part
            ever |= {struct_bits(v, code) for v in part}
        assert len(got) == len(want)
        assert got.tobytes() == want.tobytes()
        assert got.numpy().tobytes() == want.tobytes()
        if len(want):
            assert struct_bits(got[-1], code) == struct_bits(want[-1], code)
    if got.packed:
        assert len({struct_bits(v, code) for v in want}) <= 1
    assert got.packed or len(ever) > 1, "one value held while all put in are the same"


def struct_bits(v: Any, code: str) -> bytes:
    return array(code, [v]).tobytes()


def test_packed_keeps_one_value_for_millions_of_rows() -> None:
    col = Packed("d")
    col.extend(np.full(3_000_000, math.nan))
    col.append(math.nan)
    col[5] = math.nan
    assert col.packed and len(col) == 3_000_001
    view = col.numpy()
    assert view.strides == (0,) and not view.flags.writeable
    col.append(2.0)
    assert not col.packed and col[3_000_001] == 2.0 and math.isnan(col[0])


def test_packed_slice_of_another_length_is_refused() -> None:
    col = Packed("q")
    col.extend(np.zeros(4, dtype=np.int64))
    with pytest.raises(ValueError, match="as many values"):
        col[0:2] = array("q", [0])
