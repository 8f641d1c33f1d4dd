"""Lines of one shape read from one match (logscope.scan.line_shapes): only regexes blind to which
digit is which may do it, and what they read equals the per-line path's reading."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from logscope.engine.feed import default_library
from logscope.lines.decode import parse_line
from logscope.scan.bulk_progress import MIN_SHAPE_LINES, Collector
from logscope.scan.line_shapes import digit_blind

LIBRARY = default_library()


@pytest.mark.parametrize(
    ("pattern", "blind"),
    [
        (r"iteration\s+(?P<it>\d+)/\s*(?P<n>\d+) \|", True),
        (r"loss: (?P<loss>[^\s|]+)", True),
        (r"(?P<v>[-+\d.eE]+|nan|inf)", True),
        (r"\b\w+[^0-9]", True),  # \w holds every digit; [^0-9] none
        (r"(?P<month>[01]\d)", False),  # [01] holds two digits of ten
        (r"rank 7", False),  # a literal digit
        (r"[^7]", False),
        (r"(\d)\1", False),  # a back-reference compares digits
        (r"(?P<x>[", False),  # not a regex at all
    ],
)
def test_which_regexes_read_every_digit_alike(pattern: str, blind: bool) -> None:
    assert digit_blind(pattern) is blind


def test_spans_take_the_regex_fields_before_the_columns() -> None:
    sig = next(s for s in LIBRARY.signatures if s.id == "progress.hf_log")
    text = "[rank0]: {'loss': 2.5, 'grad_norm': 0.75, 'epoch': 0.5}"
    found = sig.spans(text)
    assert found is not None and sig.match(text) == {k: text[a:b] for k, (a, b) in found[1].items()}
    assert found is not None
    start, where = found
    assert text[:start] == "[rank0]: "
    assert {k: text[a:b] for k, (a, b) in where.items()} == {
        "loss": "2.5",
        "epoch": "0.5",
        "grad_norm": "0.75",
    }


def test_many_lines_of_few_shapes_read_as_line_by_line() -> None:
    # a constructed Megatron run: widths vary (1 to 4 digit grad norms, ms and s, NaN losses),
    # so some shapes hold many lines (read from one match) and some few (read by RE2)
    rng = random.Random(7)
    lines = []
    for it in range(1, 400):
        norm = f"{rng.uniform(0, 10 ** rng.randrange(1, 4)):.3f}"
        loss = "nan" if it % 97 == 0 else f"{rng.uniform(1, 3):.6E}"
        unit = "ms" if it % 50 else "s"
        lines.append(
            f"[default7]: iteration {it:8d}/    5000 | consumed samples: {it * 64:10d} | "
            f"elapsed time per iteration ({unit}): {rng.uniform(900, 1100):.1f} | global batch "
            f"size:    64 | lm loss: {loss} | loss scale: 1.0 | grad norm: {norm} | number of "
            f"skipped iterations:   0 | number of nan iterations: {int(loss == 'nan'):3d} |"
        )
    collector = Collector(LIBRARY, "x.log", 2024)
    assert all(collector.take(i + 1, t.encode()) for i, t in enumerate(lines))
    shapes = Counter(t.translate(str.maketrans("0123456789", "0" * 10)) for t in lines)
    assert len(shapes) < len(lines) // MIN_SHAPE_LINES  # most lines share a shape
    sizes = shapes.values()
    assert max(sizes) >= MIN_SHAPE_LINES > min(sizes)  # both ways of reading are taken
    cols, rejected = collector.finish()
    assert not rejected and len(cols) == len(lines)
    for i, t in enumerate(lines):
        hit = LIBRARY.match(t, t)
        assert hit is not None
        for name, column in cols.values.items():
            v = hit[1].get(name)
            want = math.nan if v is None else float(v)
            if name == "loss" and not math.isfinite(want):
                want = math.nan
                assert cols.nonfinite[i] == 1
            got = column[i]
            assert (math.isnan(got) and math.isnan(want)) or got == want, (i, name)


def test_prefixes_of_one_shape_are_decoded_line_by_line_alike() -> None:
    # one shape, many prefixes: hosts, local ranks and stamps differ only in their digits, so
    # each line's prefix fields and time must be its own, as the per-line decoder reads them
    lines = [
        f"node{i % 3:02d}: [2024-05-01 12:{i // 60 % 60:02d}:{i % 60:02d},{i % 1000:03d}] "
        f"[default{i % 8}]: iteration {i:8d}/    5000 | consumed samples: {i * 64:10d} | "
        f"elapsed time per iteration (ms): 1000.{i % 10} | lm loss: 2.{i:06d}E+00 |"
        for i in range(1, 300)
    ]
    collector = Collector(LIBRARY, "x.log", 2024)
    assert all(collector.take(i + 1, t.encode()) for i, t in enumerate(lines))
    cols, rejected = collector.finish()
    assert not rejected and len(cols) == len(lines)
    for i, text in enumerate(lines):
        line = parse_line(text, "x.log", i + 1, 2024)[0]
        assert cols.heads[cols.head[i]] == line.stream
        assert line.time is not None and cols.time[i] == line.time.timestamp(), i
        assert cols.values["loss"][i] == float(f"2.{i + 1:06d}E+00"), i
