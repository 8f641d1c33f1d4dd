"""The prefilter (Hyperscan, else RE2) finds exactly the lines of a block that contain a trigger,
as byte spans and as line indexes."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from logscope import analyze
from logscope.engine.feed import default_library
from logscope.match.prefilter import BLOCK_TRIGGERS, Prefilter
from logscope.match.signatures import TriggerIndex
from logscope.read.newlines import Newlines

LIBRARY = default_library()
REAL = Prefilter.for_library(LIBRARY)
REAL_TRIGGERS = sorted({*LIBRARY.triggers, *BLOCK_TRIGGERS})

# Triggers full of regex metacharacters: the prefilter escapes them for RE2.
ODD_TRIGGERS = ["a.b", "(x)", "[E", "$HOME", "^^", "x|y", "1+1", "{n}", "back\\slash", "*", "?"]


ODD = Prefilter.for_literals(ODD_TRIGGERS)


def naive(block: bytes, triggers: Sequence[str]) -> list[tuple[int, int]]:
    """(start, end) of every line holding a trigger; end excludes the newline."""
    needles = [t.encode() for t in triggers]
    out = []
    start = 0
    while start <= len(block):
        nl = block.find(b"\n", start)
        end = len(block) if nl < 0 else nl
        line = block[start:end]
        if any(n in line for n in needles):
            out.append((start, end))
        if nl < 0:
            break
        start = nl + 1
    return out


def check(prefilter: Prefilter, triggers: Sequence[str], block: bytes) -> None:
    """Both scans (Hyperscan when installed, and RE2) find exactly the naive lines."""
    want = naive(block, triggers)
    for scan in (prefilter, Prefilter(prefilter.pattern)):
        got = list(scan.candidates(block))
        assert got == want, (
            f"{scan.engine}: block={block!r}\n"
            f"got  ={[block[s:e] for s, e in got]}\n"
            f"want ={[block[s:e] for s, e in want]}"
        )
        # the same lines as indexes, placed with the block's newlines (range_scan.lines_by_windows)
        index, starts, ends = scan.spans(block, len(block), Newlines.of(block))
        assert index.tolist() == [block.count(b"\n", 0, s) for s, _ in want], scan.engine
        assert list(zip(starts.tolist(), ends.tolist(), strict=True)) == want, scan.engine


def test_hyperscan_scans_when_installed() -> None:
    pytest.importorskip("hyperscan")
    assert REAL.engine == "hyperscan" and Prefilter(REAL.pattern).engine == "re2"


@pytest.mark.parametrize(
    "block",
    [
        b"",
        b"\n",
        b"\n\n\n",
        b"Traceback (most recent call last):",  # trigger is the whole block, no newline
        b"Traceback (most recent call last):\n",
        b"plain\nends with a trigger: Traceback",  # last line without newline
        b"Segmentation fault\nplain\n\nplain\nSegmentation fault",
        b"x Error y Error z\nError\n",  # two triggers on one line: one candidate
        b"\nError\n\n",
        b"no trigger at all\nnone here\n",
        b"Err\nor\n",  # a trigger split by a newline is no trigger
        b"\xff\xfeError \xc3\x28 Exception\n\xff\n",  # invalid UTF-8 around triggers
        b"caf\xc3\xa9 Killed\r\nplain\r\n",
        # ChildFailedError block lines (FORMATS.md §3.1), next to blank lines: a fragment
        # must not run across a newline into the next line
        b"[3]:\n\nplain\nError here\n",
        b"x\n\n  rank: 3\nplain\nError\n",
        b"  [1]:\n    time      : 2024-03-12_02:29:19\n    rank      : 1\n",
        b"=" * 40 + b"\n\n" + b"=" * 40 + b"\nRoot Cause (first observed failure):\n",
    ],
)
def test_real_library_examples(block: bytes) -> None:
    check(REAL, REAL_TRIGGERS, block)


@pytest.mark.parametrize(
    "block",
    [
        b"a.b\naxb\n",  # `.` is literal
        b"(x)\nx\n",
        b"[E\n[\nE\n",
        b"$HOME\nHOME\n",
        b"x|y\nx\ny\n",
        b"1+1\n11\n",
        b"{n}\nn\n",
        b"back\\slash\nbackslash\n",
        b"*\n?\nplain",
    ],
)
def test_metacharacters_are_literal(block: bytes) -> None:
    check(ODD, ODD_TRIGGERS, block)


# Plain text that may contain anything but a newline: accidental triggers are fine, the
# naive check sees them too.
PLAIN = st.binary(max_size=30).map(lambda b: b.replace(b"\n", b""))
WORDS = st.sampled_from(
    [
        *(
            b"",
            b" ",
            b"  ",
            b"\t",
            b"\r",
            b"ok",
            b"\xff",
            b"\xc3\xa9",
            b"[default3]:",
            b"Err",
            b"or",
        ),
        *(b"[2]:", b"  rank: 1", b"  exitcode  : -9", b"=" * 24, b"host      : n1"),
    ]
)


def line_with(triggers: Sequence[str]) -> st.SearchStrategy[bytes]:
    return st.builds(
        lambda a, t, b: a + t.encode() + b,
        st.one_of(PLAIN, WORDS),
        st.sampled_from(list(triggers)),
        st.one_of(PLAIN, WORDS),
    )


def blocks(triggers: Sequence[str]) -> st.SearchStrategy[bytes]:
    line = st.one_of(line_with(triggers), PLAIN, WORDS)
    return st.builds(
        lambda lines, final_nl: b"\n".join(lines) + (b"\n" if final_nl else b""),
        st.lists(line, max_size=25),
        st.booleans(),
    )


@pytest.mark.hypothesis
@settings(max_examples=400, deadline=None)
@given(blocks(REAL_TRIGGERS))
@example(b"Error")
@example(b"Error\n")
@example(b"plain\nError")
@example(b"Error\nplain")
@example(b"\n\nError\n\n")
def test_candidates_match_naive_real_library(block: bytes) -> None:
    check(REAL, REAL_TRIGGERS, block)


@pytest.mark.hypothesis
@settings(max_examples=300, deadline=None)
@given(blocks(ODD_TRIGGERS))
def test_candidates_match_naive_metacharacter_triggers(block: bytes) -> None:
    check(ODD, ODD_TRIGGERS, block)


def test_candidates_are_ordered_and_disjoint() -> None:
    block = b"\n".join([b"Error", b"x", b"Killed by Error", b"", b"Traceback"] * 50)
    got = list(REAL.candidates(block))
    assert len(got) == 150, len(got)
    assert all(e1 < s2 for (_, e1), (s2, _) in itertools.pairwise(got)), got


@pytest.mark.hypothesis
@settings(max_examples=200, deadline=None)
@given(blocks(REAL_TRIGGERS), PLAIN)
def test_candidates_stop_at_size_in_a_reused_buffer(block: bytes, stale: bytes) -> None:
    # read_windows hands over a bytearray whose bytes past `size` are the previous window's
    buffer = bytearray(block + stale + b" Error Traceback\n")
    got = list(REAL.candidates(buffer, len(block)))
    assert got == naive(block, REAL_TRIGGERS)


SIGNATURES = LIBRARY.signatures
DIGITS = st.text("0123456789", min_size=1, max_size=4)


def naive_signatures(raw: str) -> tuple[int, ...]:
    return tuple(i for i, s in enumerate(SIGNATURES) if any(t in raw for t in s.trigger))


def text_line(triggers: Sequence[str]) -> st.SearchStrategy[str]:
    """Triggers (the numeric ones too) with their digits changed, between other text."""
    trigger = st.builds(lambda t, d: re.sub(r"\d+", d, t), st.sampled_from(list(triggers)), DIGITS)
    filler = st.one_of(DIGITS, st.text(max_size=12), st.sampled_from(["-", " : -", "é", "\0"]))
    return st.lists(st.one_of(trigger, filler), max_size=8).map("".join)


@pytest.mark.hypothesis
@settings(max_examples=150, deadline=None)
@given(st.lists(text_line([t for s in SIGNATURES for t in s.trigger]), min_size=1, max_size=6))
@example(["exitcode  : -11", "exitcode  : -7", "exitcode  : -99"])
@example(["[Errno 5] x", "[Errno 6] x", "[Errno 116] x"])
def test_trigger_index_cache_matches_a_scan_of_every_trigger(lines: list[str]) -> None:
    # one index for all lines: an answer cached for one line's shape is reused for the next
    index = default_library()._index
    assert index is not None
    for raw in lines:
        assert index.candidates(raw) == naive_signatures(raw), raw


@pytest.mark.hypothesis
@settings(max_examples=30, deadline=None)
@given(st.lists(text_line([t for s in SIGNATURES for t in s.trigger]), min_size=1, max_size=6))
@example(["exitcode  : -11", "x" * 3000, "[Errno 116] x"])
def test_a_long_line_of_redrawn_states_has_the_triggers_of_a_scan_of_it_whole(
    states: list[str],
) -> None:
    # a progress bar redrawn with `\r`: its states are looked up shape by shape (_states)
    raw = "\r".join(states * 200)
    index = default_library()._index
    assert index is not None
    assert index.candidates(raw) == naive_signatures(raw)


def test_a_line_of_many_progress_states_is_scanned_for_triggers_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a progress bar redrawn with `\r` thousands of times is one physical line of many records;
    # each record's triggers are its line's, found by one scan, not one scan per record
    states = [
        f"Epoch 3:  {i // 3}%|#    | {i}/300 [00:{i % 60:02d}<01:10, 22.8it/s]" for i in range(300)
    ]
    log = tmp_path / "bar.log"
    log.write_text(
        "\r".join(states)
        + "Traceback (most recent call last):\nRuntimeError: CUDA error: out of memory\n"
    )
    scans: list[int] = []
    scan = TriggerIndex.candidates_in
    monkeypatch.setattr(
        TriggerIndex,
        "candidates_in",
        lambda self, data, shape=None: scans.append(len(data)) or scan(self, data, shape),
    )
    result = analyze([str(log)])
    assert result.verdict is not None and result.verdict.category == "oom_gpu"
    assert sum(1 for n in scans if n > 10_000) <= 2, len(scans)


_MARK = b"*** Check failure stack trace: ***"
_RECORD = b"F0801 07:29:34.701110  2256 fs.cc:42] no trigger here"


@pytest.mark.parametrize(
    ("block", "want"),
    [
        # glog's FATAL record, then the marker its destructor writes: the record is a candidate
        (
            b"plain\n" + _RECORD + b"\n" + _MARK + b"\n    @  0x7f google::LogMessage::Fail()\n",
            [_RECORD],
        ),
        # two records in one block, the second with a prefix on the marker's line
        (
            b"F1 first\n" + _MARK + b"\nx\nF2 second\n[1,0]<stderr>:" + _MARK + b"\n",
            [b"F1 first", b"F2 second"],
        ),
        # a blank line before it, or none at all: nothing
        (b"\n" + _MARK + b"\n", []),
        (_MARK + b"\n", []),
    ],
)
def test_the_line_before_a_record_marker_is_a_candidate_in_both_scans(
    block: bytes, want: list[bytes]
) -> None:
    for scan in (REAL, Prefilter(REAL.pattern)):
        lines = [block[s:e] for s, e in scan.candidates(block)]
        naive_lines = [block[s:e] for s, e in naive(block, REAL_TRIGGERS)]
        assert sorted({*lines} - {*naive_lines}) == sorted(want), (scan.engine, lines)
