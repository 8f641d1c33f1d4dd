"""Inputs: globs, directories, stdin, compression by magic bytes, damaged and hostile files."""

from __future__ import annotations

import gc
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import tracemalloc
import warnings
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from logscope.errors import InputError
from logscope.read.compression import compression_in
from logscope.read.sources import (
    BLOCK_SIZE,
    MAX_LINE,
    Block,
    ReadStats,
    Source,
    coalesce,
    expand,
    pick_lines,
    read_blocks,
)
from logscope.read.windows import read_windows

from .helpers import COMPRESSORS, analyze_doc, cli

FAILURE = b"[default1]:[rank1]: ValueError: injected fault at iteration 17\n"
PLAIN = b"[default0]:rank 0: data loader ready (world size 4)\n"


def root_line(doc: dict[str, Any]) -> tuple[str, int, str]:
    assert doc["incidents"], json.dumps(doc, indent=1)
    root = doc["incidents"][-1]["root_cause"]
    return root["file"], root["line"], root["text"]


def read_all(src: Source, **kw: int) -> tuple[list[tuple[int, bytes]], list[int], ReadStats]:
    """Every physical line read, as (lineno, bytes without newline), and the truncated linenos."""
    stats = ReadStats()
    out: list[tuple[int, bytes]] = []
    truncated: list[int] = []
    expected_next = 1
    for block in read_blocks(src, stats, **kw):
        assert block.first_lineno == expected_next, (block.first_lineno, expected_next)
        body = block.data[:-1] if block.data.endswith(b"\n") else block.data
        pieces = body.split(b"\n")
        assert len(pieces) == block.nlines, (block.data, block.nlines)
        out.extend((block.first_lineno + i, p) for i, p in enumerate(pieces))
        truncated.extend(block.truncated)
        expected_next = block.first_lineno + block.nlines
    return out, truncated, stats


# ---------------------------------------------------------------- expand: globs and directories


def names(sources: list[Source], root: Path) -> list[str]:
    return [Path(s.path).relative_to(root).as_posix() for s in sources]


def test_glob_is_sorted_and_explicit(tmp_path: Path) -> None:
    for name in ("b.log", "a.log", "c.txt", "a2.log"):
        (tmp_path / name).write_bytes(PLAIN)
    got = expand([str(tmp_path / "*.log")])
    assert names(got, tmp_path) == ["a.log", "a2.log", "b.log"], got
    assert all(s.explicit for s in got), got


def test_recursive_glob(tmp_path: Path) -> None:
    (tmp_path / "x" / "y").mkdir(parents=True)
    (tmp_path / "x" / "y" / "deep.log").write_bytes(PLAIN)
    (tmp_path / "top.log").write_bytes(PLAIN)
    got = expand([str(tmp_path / "**" / "*.log")])
    assert names(got, tmp_path) == ["top.log", "x/y/deep.log"], got


def test_directory_sorted_recursive_hidden_files_skipped(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    for name in ("z.log", "a.log", "sub/c.log", "sub/a.log", ".hidden.log", "sub/.swp"):
        (tmp_path / name).write_bytes(PLAIN)
    got = expand([str(tmp_path)])
    assert names(got, tmp_path) == ["a.log", "sub/a.log", "sub/c.log", "z.log"], got
    # found in a directory, not named: an unreadable one is skipped, not fatal
    assert not any(s.explicit for s in got), got


def test_directory_skips_hidden_directories(tmp_path: Path) -> None:
    # `logscope analyze run_dir/` on a checkout or a dir with .ipynb_checkpoints/.git inside
    (tmp_path / ".git" / "objects").mkdir(parents=True)
    (tmp_path / ".git" / "objects" / "pack.log").write_bytes(PLAIN)
    (tmp_path / "rank0.log").write_bytes(PLAIN)
    got = expand([str(tmp_path)])
    assert names(got, tmp_path) == ["rank0.log"], got


def test_same_file_twice_is_read_once(tmp_path: Path) -> None:
    f = tmp_path / "a.log"
    f.write_bytes(PLAIN)
    got = expand([str(f), str(tmp_path / "*.log"), str(f)])
    assert [s.path for s in got] == [str(f)], got


def test_directory_through_cli_lists_inputs_in_order(tmp_path: Path) -> None:
    (tmp_path / "node2").mkdir()
    (tmp_path / "node1").mkdir()
    (tmp_path / "node2" / "out.log").write_bytes(FAILURE)
    (tmp_path / "node1" / "out.log").write_bytes(PLAIN)
    (tmp_path / ".out.log.swp").write_bytes(FAILURE)
    code, doc, err = analyze_doc(str(tmp_path))
    paths = [Path(i["path"]).relative_to(tmp_path).as_posix() for i in doc["inputs"]]
    assert paths == ["node1/out.log", "node2/out.log"], doc["inputs"]
    assert code == 1, err
    assert root_line(doc)[:2] == (str(tmp_path / "node2" / "out.log"), 1), doc["incidents"]


def test_missing_file_is_exit_2(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.log")
    code, out, err = cli("analyze", missing)
    assert code == 2, out + err
    assert "no such file" in err and missing in err, err
    assert "Traceback" not in err + out, err


def test_glob_matching_nothing_is_exit_2(tmp_path: Path) -> None:
    pattern = str(tmp_path / "*.log")
    code, out, err = cli("analyze", pattern)
    assert code == 2, out + err
    assert pattern in err and "logscope: error:" in err, err


def test_empty_directory_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    code, out, err = cli("analyze", str(tmp_path / "d"))
    assert code == 2, out + err
    assert str(tmp_path / "d") in err, err


# ---------------------------------------------------------------- stdin


def test_stdin_dash() -> None:
    code, doc, err = analyze_doc("-", input=PLAIN * 3 + FAILURE + PLAIN)
    assert code == 1, err
    assert [i["path"] for i in doc["inputs"]] == ["-"], doc["inputs"]
    assert doc["inputs"][0]["lines"] == 5, doc["inputs"]
    assert root_line(doc) == ("-", 4, FAILURE.decode().rstrip("\n")), doc["incidents"]


def test_stdin_together_with_a_file(tmp_path: Path) -> None:
    f = tmp_path / "a.log"
    f.write_bytes(PLAIN)
    code, doc, err = analyze_doc(str(f), "-", input=FAILURE)
    assert code == 1, err
    assert [i["path"] for i in doc["inputs"]] == [str(f), "-"], doc["inputs"]
    assert root_line(doc)[:2] == ("-", 1), doc["incidents"]


def test_stdin_gzip_is_sniffed() -> None:
    # `zcat`-less use: `cat job.log.gz | logscope analyze -`. Fails when stdin has no peek()
    # (CliRunner, or a library caller that swapped sys.stdin): the magic is never seen.
    code, doc, err = analyze_doc("-", input=gzip.compress(PLAIN + FAILURE))
    assert code == 1, err
    assert doc["inputs"][0]["compression"] == "gzip", doc["inputs"]
    assert root_line(doc)[1] == 2, doc["incidents"]


# ---------------------------------------------------------------- compression by magic bytes


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("gzip", "job.log.gz"),
        ("gzip", "job.txt"),  # misleading: no extension hint
        ("bz2", "job.log"),
        ("xz", "job.log.gz"),  # misleading: says gzip, is xz
        ("bz2", "job.xz"),
        ("zstd", "job.out.zst"),
        ("zstd", "job.out"),  # no extension hint
        ("lz4", "job.out.lz4"),
        ("lz4", "job.out.gz"),  # misleading: says gzip, is lz4
    ],
)
def test_compression_sniffed_by_magic(tmp_path: Path, kind: str, name: str) -> None:
    f = tmp_path / name
    f.write_bytes(COMPRESSORS[kind](PLAIN * 10 + FAILURE + PLAIN))
    code, doc, err = analyze_doc(str(f))
    assert code == 1, err
    assert doc["inputs"][0]["compression"] == kind, doc["inputs"]
    assert doc["inputs"][0]["lines"] == 12, doc["inputs"]
    assert doc["inputs"][0]["bytes"] == len(PLAIN) * 11 + len(FAILURE), doc["inputs"]
    assert root_line(doc) == (str(f), 11, FAILURE.decode().rstrip("\n")), doc["incidents"]


def test_plain_file_named_gz_is_read_as_text(tmp_path: Path) -> None:
    f = tmp_path / "job.log.gz"
    f.write_bytes(PLAIN + FAILURE)
    code, doc, err = analyze_doc(str(f))
    assert code == 1, err
    assert doc["inputs"][0]["compression"] is None, doc["inputs"]
    assert root_line(doc)[1] == 2, doc["incidents"]


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_compressed_input_file_is_closed(tmp_path: Path, kind: str) -> None:
    # GzipFile/BZ2File/LZMAFile given a file object do not close it: read_blocks must.
    # Otherwise every compressed input leaks a descriptor until the GC finds it.
    f = tmp_path / "job.log"
    f.write_bytes(COMPRESSORS[kind](PLAIN * 3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lines, _, _ = read_all(Source(str(f)))
        gc.collect()
    assert len(lines) == 3
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert not leaks, leaks


# ---------------------------------------------------------------- a damaged .gz


def _noisy_log(n: int, seed: int = 7, what: str = "iteration") -> bytes:
    rnd = random.Random(seed)
    out = []
    for i in range(1, n + 1):
        noise = "".join(rnd.choice("0123456789abcdef") for _ in range(24))
        out.append(
            f"[default{i % 4}]: {what} {i:8d}/ {n} | consumed samples: {rnd.randrange(10**9)}"
            f" | lm loss: {rnd.random():.6E} | id {noise} |\n"
        )
    return "".join(out).encode()


@pytest.fixture
def truncated_gz(tmp_path: Path) -> tuple[Path, bytes]:
    """A gzip file cut in half, and the text a streaming decoder gets out of that half."""
    text = _noisy_log(4_000) + FAILURE  # the failure is in the lost half
    whole = gzip.compress(text)
    half = whole[: len(whole) // 2]
    f = tmp_path / "job.log.gz"
    f.write_bytes(half)
    good = zlib.decompressobj(wbits=31).decompress(half)
    assert 0 < len(good) < len(text)
    return f, good


def test_truncated_gzip_reads_the_lines_before_the_damage(truncated_gz: tuple[Path, bytes]) -> None:
    f, good = truncated_gz
    lines, _, stats = read_all(Source(str(f)), block_size=4096)
    complete = good[: good.rfind(b"\n") + 1].split(b"\n")[:-1]
    assert len(complete) > 1000
    # every complete line before the damage, at its line number (a cut last line may follow)
    assert lines[: len(complete)] == list(enumerate(complete, 1)), "lines differ"
    assert len(lines) - len(complete) in (0, 1), (len(lines), len(complete))
    assert stats.compression == "gzip"
    assert len(stats.warnings) == 1, stats.warnings
    warning = stats.warnings[0]
    assert warning.startswith(f"{f}:{len(complete) + 1}:"), warning
    assert "damaged or truncated" in warning, warning


@pytest.mark.slow
def test_truncated_gzip_through_cli_warns_and_does_not_crash(
    truncated_gz: tuple[Path, bytes],
) -> None:
    f, good = truncated_gz
    complete = good.count(b"\n")
    code, doc, err = analyze_doc(str(f))
    assert code == 0, err  # the failure line was in the lost half
    assert f"logscope: warning: {f}:{complete + 1}: gzip stream is damaged" in err, err
    assert "Traceback" not in err, err
    info = doc["inputs"][0]
    assert info["warnings"] and str(f) in info["warnings"][0], info
    assert info["lines"] >= complete, info


@pytest.mark.slow
def test_truncated_gzip_failure_before_damage_is_found(tmp_path: Path) -> None:
    # what follows the failure is no progress: training that went on would outlive it
    text = PLAIN * 5 + FAILURE + _noisy_log(4_000, what="prefetch")
    whole = gzip.compress(text)
    f = tmp_path / "job.gz"
    f.write_bytes(whole[: len(whole) // 2])
    code, doc, err = analyze_doc(str(f))
    assert code == 1, err
    assert root_line(doc)[1] == 6, doc["incidents"]
    assert "logscope: warning:" in err, err


# ---------------------------------------------------------------- binary and empty files

BINARY = bytes(range(256)) * 64


def test_binary_file_named_explicitly_is_exit_2(tmp_path: Path) -> None:
    f = tmp_path / "model.bin"
    f.write_bytes(BINARY)
    code, out, err = cli("analyze", str(f))
    assert code == 2, out + err
    assert str(f) in err and "binary" in err, err
    assert "Traceback" not in err, err


def test_gzipped_binary_is_binary(tmp_path: Path) -> None:
    f = tmp_path / "ckpt.pt.gz"
    f.write_bytes(gzip.compress(BINARY))
    code, out, err = cli("analyze", str(f))
    assert code == 2, out + err
    assert str(f) in err and "binary" in err, err


def test_binary_file_in_directory_is_skipped_with_warning(tmp_path: Path) -> None:
    (tmp_path / "core.1234").write_bytes(BINARY)
    (tmp_path / "job.log").write_bytes(PLAIN + FAILURE)
    code, doc, err = analyze_doc(str(tmp_path))
    assert code == 1, err
    assert root_line(doc)[:2] == (str(tmp_path / "job.log"), 2), doc["incidents"]
    warning = [w for w in err.splitlines() if w.startswith("logscope: warning:")]
    assert len(warning) == 1 and str(tmp_path / "core.1234") in warning[0], err
    assert "binary" in warning[0], err


def test_a_log_full_of_terminal_colours_is_text(tmp_path: Path) -> None:
    """An IPython traceback as a notebook stores it: ECMA-48 colour sequences around every
    token, more than a tenth of the bytes ESC."""
    red, green, blue, off = b"\x1b[0;31m", b"\x1b[0;32m", b"\x1b[0;34m", b"\x1b[0m"
    # a source line of the frame, each token coloured (IPython's syntax highlighting)
    code = b" ".join(
        [green + b"----> 3" + red, off + b"dtrain" + off, blue + b"=" + off, off + b"xgb" + off]
        + [blue + b"." + off + off + b"dask" + off] * 4
    )
    lines = [
        red + b"-" * 75 + off,
        red
        + b"AssertionError"
        + off
        + b"                            Traceback (most recent call last)",
        *[code] * 20,
        red + b"AssertionError" + off + b": partitions are not aligned",
    ]
    f = tmp_path / "cell.log"
    f.write_bytes(b"\n".join(lines) + b"\n")
    assert f.read_bytes().count(b"\x1b") * 10 > len(f.read_bytes())
    code, doc, err = analyze_doc(str(f))
    assert code == 1 and "binary" not in err, err
    assert doc["verdict"]["category"] == "python_exception", doc["verdict"]


def _empty_doc(*args: str, input: bytes | None = None) -> tuple[dict[str, Any], str]:
    """An analysis of empty inputs: never exit 0 (healthy), a warning naming each input."""
    code, out, err = cli("analyze", *args, "--format", "json", input=input)
    assert code == 3, f"exit {code}\n{out}\n{err}"
    doc = json.loads(out)
    assert doc["job"]["outcome"] == "unknown", doc["job"]
    assert "no input held a line" in doc["job"]["outcome_reason"], doc["job"]
    assert doc["incidents"] == [], doc["incidents"]
    return doc, err


def test_empty_file(tmp_path: Path) -> None:
    f = tmp_path / "empty.log"
    f.write_bytes(b"")
    doc, err = _empty_doc(str(f))
    assert doc["inputs"][0]["lines"] == 0 and doc["inputs"][0]["bytes"] == 0, doc["inputs"]
    assert f"logscope: warning: {f}: empty input" in err, err


@pytest.mark.parametrize("kind", ["gzip", "zstd", "lz4"])
def test_empty_compressed_file(tmp_path: Path, kind: str) -> None:
    f = tmp_path / "empty.log.x"
    f.write_bytes(COMPRESSORS[kind](b""))
    _doc, err = _empty_doc(str(f))
    assert f"{f}: empty input" in err, err


def test_empty_stdin_and_dev_null() -> None:
    _doc, err = _empty_doc("-", input=b"")
    assert "-: empty input" in err, err
    _doc, err = _empty_doc("/dev/null")
    assert "/dev/null: empty input" in err, err


def test_one_empty_input_among_others_is_only_a_warning(tmp_path: Path) -> None:
    empty, log = tmp_path / "rank1.log", tmp_path / "rank0.log"
    empty.write_bytes(b"")
    log.write_bytes(PLAIN + FAILURE)
    code, _doc, err = analyze_doc(str(log), str(empty))
    assert code == 1, err
    assert f"{empty}: empty input" in err, err


def test_log_with_a_few_nul_bytes_is_still_text(tmp_path: Path) -> None:
    # a crashed writer can leave a run of NULs (preallocated file); it is still a log
    f = tmp_path / "job.log"
    f.write_bytes(PLAIN * 200 + b"\x00" * 8 + FAILURE)
    code, doc, err = analyze_doc(str(f))
    assert code == 1, err
    assert root_line(doc)[1] == 201, doc["incidents"]


# ---------------------------------------------------------------- a 50 MB line

HUGE = 50 * 1024 * 1024


@pytest.fixture(scope="module")
def huge_line_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Line 1 plain, line 2 a 50 MB line without a newline for 50 MB, line 3 the failure."""
    f = tmp_path_factory.mktemp("huge") / "job.log"
    with f.open("wb") as out:
        out.write(PLAIN)
        out.write(b"[default0]: ")
        chunk = b"x" * (1 << 20)
        for _ in range(HUGE // len(chunk)):
            out.write(chunk)
        out.write(b"\n")
        out.write(FAILURE)
    return f


def test_huge_line_is_cut_and_numbering_stays_right(huge_line_log: Path) -> None:
    tracemalloc.start()
    try:
        stats = ReadStats()
        seen: list[tuple[int, int]] = []
        truncated: list[int] = []
        biggest = 0
        for block in read_blocks(Source(str(huge_line_log)), stats):
            biggest = max(biggest, len(block.data))
            truncated.extend(block.truncated)
            body = block.data[:-1] if block.data.endswith(b"\n") else block.data
            seen.extend((block.first_lineno + i, len(p)) for i, p in enumerate(body.split(b"\n")))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [n for n, _ in seen] == [1, 2, 3], seen
    assert seen[1][1] == MAX_LINE, seen
    assert truncated == [2], truncated
    assert biggest <= BLOCK_SIZE + MAX_LINE + 1, biggest
    assert peak < 16 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB while reading a 50 MiB line"
    assert stats.lines == 3, stats


def test_huge_line_through_cli(huge_line_log: Path) -> None:
    code, doc, err = analyze_doc(str(huge_line_log))
    assert code == 1, err
    assert doc["inputs"][0]["lines"] == 3, doc["inputs"]
    assert doc["inputs"][0]["bytes"] == huge_line_log.stat().st_size, doc["inputs"]
    file, line, text = root_line(doc)
    assert (file, line) == (str(huge_line_log), 3), doc["incidents"]
    assert text == FAILURE.decode().rstrip("\n")
    # the cut line is not reported whole anywhere
    assert len(json.dumps(doc)) < 4 * MAX_LINE


def test_huge_last_line_without_newline(tmp_path: Path) -> None:
    f = tmp_path / "job.log"
    with f.open("wb") as out:
        out.write(FAILURE)
        out.write(b"y" * (3 * MAX_LINE + 17))
    lines, truncated, stats = read_all(Source(str(f)))
    assert [(n, len(b)) for n, b in lines] == [(1, len(FAILURE) - 1), (2, MAX_LINE)]
    assert truncated == [2], truncated
    assert stats.lines == 2
    code, doc, err = analyze_doc(str(f))
    assert code == 1, err
    assert root_line(doc)[1] == 1, doc["incidents"]


# ---------------------------------------------------------------- line numbers across blocks


def naive(data: bytes, max_line: int) -> list[tuple[int, bytes]]:
    parts = data.split(b"\n")
    if data.endswith(b"\n") or not data:
        parts = parts[:-1]
    return [(i, p[:max_line]) for i, p in enumerate(parts, 1)]


@pytest.mark.parametrize("block_size", [1, 2, 3, 5, 8, 13, 64])
def test_line_numbers_across_tiny_blocks(tmp_path: Path, block_size: int) -> None:
    data = b"a\n\nbb\nccc\r\n" + b"d" * 40 + b"\n\n\neeee\nf" * 3 + b"g" * 9
    f = tmp_path / "x.log"
    f.write_bytes(data)
    lines, truncated, _ = read_all(Source(str(f)), block_size=block_size, max_line=16)
    assert lines == naive(data, 16)
    long_ones = [n for n, p in enumerate(naive(data, 10**9), 1) if len(p[1]) > 16]
    assert truncated == long_ones


LINE = st.one_of(
    st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")),
    st.integers(0, 40).map(lambda n: b"L" * n),
    st.sampled_from([b"", b"\r", b"x\ry"]),
)


@pytest.mark.hypothesis
@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(LINE, max_size=30),
    final_newline=st.booleans(),
    block_size=st.integers(1, 40),
    max_line=st.integers(1, 24),
)
def test_read_blocks_matches_naive_split(
    lines: list[bytes], final_newline: bool, block_size: int, max_line: int
) -> None:
    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    assume(not compression_in(data[:8]))  # compressed, not text
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "x.log"
        f.write_bytes(data)
        try:
            got, truncated, stats = read_all(
                Source(str(f)), block_size=block_size, max_line=max_line
            )
        except InputError as err:
            assert "binary data" in err.message, err  # random control bytes may look binary
            return
    want = naive(data, max_line)
    assert got == want
    assert stats.lines == len(want)
    full = naive(data, 10**9)
    longer = {n for n, p in full if len(p) > max_line}
    at_least = {n for n, p in full if len(p) >= max_line}
    # a line of exactly max_line bytes may be flagged, see test_line_of_exactly_max_line
    assert longer <= set(truncated) <= at_least, (truncated, longer)


def test_line_of_exactly_max_line_is_not_flagged_truncated(tmp_path: Path) -> None:
    # flagged or not depending on where a block boundary falls: with block_size=4 the
    # 8-byte first line is flagged, with block_size=3 it is not
    f = tmp_path / "x.log"
    f.write_bytes(b"abcdefgh\n12345678\nxy\n")
    for block_size in (3, 4, 8):
        lines, truncated, _ = read_all(Source(str(f)), block_size=block_size, max_line=8)
        assert lines == [(1, b"abcdefgh"), (2, b"12345678"), (3, b"xy")]
        assert truncated == [], f"block_size={block_size}: {truncated}"


# ---------------------------------------------------------------- CRLF


def test_crlf_line_endings(tmp_path: Path) -> None:
    f = tmp_path / "win.log"
    f.write_bytes((PLAIN * 3 + FAILURE + PLAIN).replace(b"\n", b"\r\n"))
    lines, _, _ = read_all(Source(str(f)), block_size=7)
    assert [n for n, _ in lines] == [1, 2, 3, 4, 5]
    code, doc, err = analyze_doc(str(f))
    assert code == 1, err
    _, line, text = root_line(doc)
    assert line == 4, doc["incidents"]
    assert text == FAILURE.decode().rstrip("\n"), repr(text)
    assert "\r" not in json.dumps(doc["incidents"]), doc["incidents"]


@pytest.mark.hypothesis
@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=60),
    final_newline=st.booleans(),
    size=st.integers(1, 300),
)
def test_coalesced_blocks_keep_lines_and_numbers(
    lines: list[bytes], final_newline: bool, size: int
) -> None:
    data = b"\n".join([b"ok", *lines]) + (b"\n" if final_newline else b"")
    blocks: list[Block] = []
    lineno, start = 1, 0
    for n in range(0, len(data), 37):  # blocks of whole lines, as read_blocks makes them
        end = data.find(b"\n", n + 37)
        end = len(data) if end < 0 else end + 1
        if end <= start:
            continue
        blocks.append(Block(data[start:end], lineno, [lineno]))  # as if each began cut
        lineno += data.count(b"\n", start, end)
        start = end
    merged = list(coalesce(blocks, size))
    assert b"".join(b.data for b in merged) == b"".join(b.data for b in blocks)
    assert [n for b in merged for n in b.truncated] == [b.first_lineno for b in blocks]
    before = 0
    for b in merged:
        assert b.first_lineno == 1 + data.count(b"\n", 0, before)
        before += len(b.data)
    assert all(len(b.data) >= size for b in merged[:-1])


def test_read_windows_of_a_file_that_shrank(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"one\ntwo\nthree")
    # a range computed before the file was truncated: it ends past the end of the file
    windows = [
        (bytes(w.data[: w.size]), w.first_lineno, w.nlines)
        for w in read_windows(str(log), 0, 1 << 20, window=64, max_line=16)
    ]
    assert windows == [(b"one\ntwo\n", 1, 2), (b"three", 3, 1)]


# ---------------------------------------------------------------- damaged zstd and lz4, pipes


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["zstd", "lz4"])
def test_truncated_frame_reads_the_lines_before_the_damage(tmp_path: Path, kind: str) -> None:
    # what follows the failure is no progress: training that went on would outlive it
    text = PLAIN * 5 + FAILURE + _noisy_log(10_000, what="prefetch")
    whole = COMPRESSORS[kind](text)
    f = tmp_path / f"job.{kind}"
    f.write_bytes(whole[: len(whole) // 2])
    code, doc, err = analyze_doc(str(f))
    assert code == 1, err
    assert root_line(doc)[1] == 6, doc["incidents"]
    assert f"logscope: warning: {f}:" in err and "damaged or truncated" in err, err
    assert "Traceback" not in err, err
    assert 1000 < doc["inputs"][0]["lines"] < text.count(b"\n"), doc["inputs"]


def _through_fifo(tmp_path: Path, data: bytes, *args: str) -> tuple[int, str, str]:
    """`logscope analyze FIFO ARGS` while another thread writes `data` into the FIFO."""
    fifo = tmp_path / "job.fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with fifo.open("wb") as w:
            w.write(data)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        return cli("analyze", str(fifo), *args)
    finally:
        writer.join(timeout=10)


@pytest.mark.parametrize("kind", [None, "zstd"])
def test_named_pipe_is_read_as_it_comes(tmp_path: Path, kind: str | None) -> None:
    text = PLAIN * 10 + FAILURE + PLAIN
    data = text if kind is None else COMPRESSORS[kind](text)
    code, out, err = _through_fifo(tmp_path, data, "--format", "json")
    assert code == 1, err
    doc = json.loads(out)
    assert root_line(doc)[1:] == (11, FAILURE.decode().rstrip("\n")), doc["incidents"]
    assert doc["inputs"][0]["compression"] == kind, doc["inputs"]


def test_process_substitution_through_a_shell(tmp_path: Path) -> None:
    # `logscope analyze <(cat job.log)`: a real /dev/fd pipe, made by bash
    log = tmp_path / "job.log"
    log.write_bytes(PLAIN * 3 + FAILURE)
    exe = Path(sys.executable).parent / "logscope"
    run = subprocess.run(
        ["bash", "-c", f'"{exe}" analyze <(cat "{log}") --format json'],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 1, run.stderr
    assert root_line(json.loads(run.stdout))[1] == 4


def test_lines_are_picked_by_number_and_none_past_the_end() -> None:
    assert pick_lines(b"a\nbb\nc", 10, {9, 10, 12, 13}) == {10: b"a", 12: b"c"}
    assert pick_lines(b"a\nbb\n", 10, {11, 12}) == {11: b"bb"}  # no empty line after the last
    assert pick_lines(b"", 1, {1}) == {}
