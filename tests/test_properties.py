"""Invariants over hostile input: any bytes, shuffled real logs, any block size."""

from __future__ import annotations

import bz2
import gzip
import json
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from random import Random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logscope.engine.analyze import analyze
from logscope.engine.feed import default_library
from logscope.errors import InputError
from logscope.model import Analysis
from logscope.render.document import document

from .helpers import FIXTURES

LAB = sorted((FIXTURES / "lab").glob("*.log"))
ALL_LOGS = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".log", ".out"))
LIBRARY = default_library()


def physical_lines(data: bytes) -> list[bytes]:
    """Lines as logscope numbers them: split at `\n` only (`bytes.splitlines` splits at `\r`)."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [line + b"\n" for line in lines[:-1]] + ([lines[-1]] if lines else [])


def _with_newlines(data: bytes) -> list[bytes]:
    return [line if line.endswith(b"\n") else line + b"\n" for line in physical_lines(data)]


LINES = {p.name: _with_newlines(p.read_bytes()) for p in LAB}


def fast(max_examples: int) -> settings:
    return settings(
        max_examples=max_examples, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )


def analyze_bytes(data: bytes, name: str = "job.log") -> Analysis:
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / name
        f.write_bytes(data)
        return analyze([str(f)], LIBRARY)


def check_evidence_points_at_real_lines(doc: dict[str, Any], lines: Sequence[bytes]) -> None:
    """Every line the report cites is the physical line it names, verbatim."""
    refs = []
    for inc in doc["incidents"]:
        refs.append(inc["root_cause"])
        refs.extend(inc["evidence"])
    refs.extend(t["example"] for t in doc["unrecognized"])
    for ref in refs:
        n = ref["line"]
        assert 1 <= n <= len(lines), (ref, len(lines))
        want = lines[n - 1].decode("utf-8", "replace").rstrip("\r\n")
        assert ref["text"] == want, (n, ref["text"], want)


# ---------------------------------------------------------------- (a) any bytes


LOGGY = st.lists(
    st.sampled_from(
        [line for lines in LINES.values() for line in lines[:: max(1, len(lines) // 25)]]
    ),
    max_size=12,
).map(b"".join)
ANY_BYTES = st.one_of(
    st.binary(max_size=2048),
    st.builds(bytes.__add__, LOGGY, st.binary(max_size=64)),
    st.binary(max_size=512).map(gzip.compress),
    LOGGY.map(gzip.compress).map(lambda z: z[: max(2, len(z) // 2)]),  # damaged .gz
    LOGGY.map(bz2.compress).map(lambda z: z[: max(3, len(z) - 7)]),  # damaged .bz2
    st.binary(max_size=64).map(lambda b: b"\x1f\x8b" + b),  # gzip magic, garbage after
    st.binary(max_size=64).map(lambda b: b"\xfd7zXZ\x00" + b),  # xz magic, garbage after
)


@pytest.mark.hypothesis
@fast(300)
@given(ANY_BYTES)
def test_any_bytes_give_an_analysis_or_input_error(data: bytes) -> None:
    try:
        result = analyze_bytes(data)
    except InputError as err:
        assert "job.log" in str(err), str(err)
        return
    assert isinstance(result, Analysis)
    json.dumps(document(result))  # renderable


# ---------------------------------------------------------------- (b) shuffled real logs


@pytest.mark.hypothesis
@fast(40)
@given(
    names=st.lists(st.sampled_from(sorted(LINES)), min_size=2, max_size=3, unique=True),
    rnd=st.randoms(use_true_random=False),
    glue=st.floats(0, 0.2),
)
def test_interleaved_fixture_lines_never_raise(names: list[str], rnd: Random, glue: float) -> None:
    lines = [line for name in names for line in LINES[name]]
    rnd.shuffle(lines)
    # concurrent writers sometimes lose the newline between two lines (FORMATS.md §9.1)
    data = b"".join(
        line.rstrip(b"\n") if line.endswith(b"\n") and rnd.random() < glue else line
        for line in lines
    )
    result = analyze_bytes(data)
    doc = document(result)
    json.dumps(doc)
    physical = physical_lines(data)
    assert doc["inputs"][0]["lines"] == len(physical), doc["inputs"]
    check_evidence_points_at_real_lines(doc, physical)


def test_evidence_check_can_fail() -> None:
    # the invariant above is not vacuous: the fixtures do produce cited lines
    doc = document(analyze([str(FIXTURES / "lab" / "raise_rank1.log")], LIBRARY))
    assert doc["incidents"], doc
    lines = physical_lines((FIXTURES / "lab" / "raise_rank1.log").read_bytes())
    check_evidence_points_at_real_lines(doc, lines)
    wrong = [lines[0], *lines]  # every line number off by one
    try:
        check_evidence_points_at_real_lines(doc, wrong)
    except AssertionError:
        return
    raise AssertionError("a shifted file passed the evidence check")


# ---------------------------------------------------------------- (c) block size independence


def analyze_with_block_size(paths: list[str], block_size: int) -> Analysis:
    return analyze(paths, LIBRARY, block_size=block_size)


@cache
def baseline(path: Path) -> dict[str, Any]:
    return document(analyze([str(path)], LIBRARY))


@pytest.mark.hypothesis
@fast(30)
@given(path=st.sampled_from(ALL_LOGS), block_size=st.integers(64, 4096))
def test_block_size_does_not_change_the_document(path: Path, block_size: int) -> None:
    got = document(analyze_with_block_size([str(path)], block_size))
    want = baseline(path)
    diff = {k: (got[k], want[k]) for k in want if got.get(k) != want[k]}
    assert not diff, f"{path.name} block_size={block_size}: {json.dumps(diff, default=str)[:3000]}"
