"""`--jobs N`: large files split at line starts and scanned by worker processes give the same
document as one process, wherever the chunks fall."""

from __future__ import annotations

import gzip
import itertools
import os
import pickle
from dataclasses import replace
from pathlib import Path

import pytest

from logscope.engine import analyze as pipeline_module
from logscope.engine.analyze import analyze
from logscope.engine.feed import Engine, Since, default_library
from logscope.errors import InputError, WorkerError
from logscope.match.prefilter import Prefilter
from logscope.read.sources import MAX_LINE, Block
from logscope.read.windows import LongLine, split_ranges
from logscope.render.document import document
from logscope.scan.bulk_progress import Collector
from logscope.scan.range_scan import (
    RangeTask,
    Tally,
    lines_by_blocks,
    lines_by_windows,
    scan_block,
    scan_range,
    scan_with,
)

from .generators.bloom_run import Truth
from .helpers import FIXTURES


@pytest.fixture
def bloom(bloom_run: tuple[Path, Truth]) -> Path:
    return bloom_run[0]


def _same(paths: list[str], chunk: int) -> None:
    one = document(analyze(paths, range_min_bytes=1 << 62))  # block by block, the reference
    many = document(
        analyze(paths, jobs=2, chunk_bytes=chunk, parallel_min_bytes=0, range_min_bytes=0)
    )
    assert many == one


@pytest.mark.parametrize(
    "chunk",
    [pytest.param(257, marks=pytest.mark.slow), pytest.param(4096, marks=pytest.mark.slow), 65536],
)
def test_bloom_run_is_the_same_with_workers(bloom: Path, chunk: int) -> None:
    _same([str(bloom)], chunk)


@pytest.mark.parametrize(
    "name", ["lab/hang_rank1.log", "lab/raise_rank1.log", "slurm/timelimit_hang.out"]
)
def test_fixtures_are_the_same_with_workers(name: str) -> None:
    _same([str(FIXTURES / name)], 333)


def test_long_lines_and_no_final_newline(tmp_path: Path) -> None:
    log = tmp_path / "long.log"
    text = (FIXTURES / "lab" / "raise_rank1.log").read_text()
    log.write_text("x" * (MAX_LINE + 5000) + "\n" + text + "[default2]:[rank2]: KeyError: 'tail'")
    _same([str(log)], 100_000)


def test_split_ranges_start_at_line_starts(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    data = b"".join(b"line %d\n" % i for i in range(1000))
    log.write_bytes(data)
    ranges = split_ranges(str(log), len(data), 100)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(data)
    for (_, end), (start, _) in itertools.pairwise(ranges):
        assert end == start and data[start - 1 : start] == b"\n"


def _task(path: Path, window: int, max_line: int) -> RangeTask:
    library = default_library()
    pattern = Prefilter.for_library(library).pattern
    return RangeTask(str(path), 0, path.stat().st_size, pattern, library, 2024, window, max_line)


@pytest.mark.parametrize("extra", [1, 2, 17, 1000, 1 << 20])
@pytest.mark.parametrize("name", ["lab/raise_rank1.log", "slurm/timelimit_hang.out"])
def test_windows_read_like_blocks(name: str, extra: int) -> None:
    # read_windows (the fast path) against read_blocks (the reference), with window boundaries
    # falling inside lines; max_line is the longest line, so the fast path never falls back
    path = FIXTURES / name
    longest = max(len(x) for x in path.read_bytes().split(b"\n"))
    task = _task(path, longest + extra, longest)
    fast = scan_with(task, lines_by_windows)
    assert fast == scan_with(task, lines_by_blocks)
    assert fast.lines == path.read_bytes().count(b"\n") and fast.matches


@pytest.mark.parametrize("name", ["lab/raise_rank1.log", "slurm/timelimit_hang.out"])
def test_a_block_scanned_here_is_the_range_a_worker_scans(name: str) -> None:
    # one scanner: a block fed in this process (a stream, tail) and a worker's range of the
    # same bytes give the engine the same lines, progress and rank prefixes
    path = FIXTURES / name
    data = path.read_bytes()
    engine = Engine(default_library())
    plan = engine.learn_input(str(path), data, 2024)
    here = scan_block(plan, Block(data, 1), offset=0, edges_only=True)
    there = scan_range(plan.task(0, len(data)))
    assert here.decoded and not here.matches and there.matches and there.decoded is None
    lib = plan.library
    assert here.matched(str(path), 0, lib) == there.matched(str(path), 0, lib)
    assert here.progress == there.progress and len(here.progress)
    assert here.prefixes == there.prefixes and here.lines == there.lines


def test_since_a_mark() -> None:
    # what a chunk fed places a root cause with (spool.Spool keeps the chunks that hold one):
    # its failures' lines, its last progress line, whether an attempt ended in it
    engine = Engine(default_library())
    blocks = [
        Block(("\n".join(_megatron(range(1, 4))) + "\n").encode(), 1),
        Block(b"[default2]:RuntimeError: CUDA error: an illegal memory access\n", 4),
        Block(("\n".join(_megatron(range(1, 3))) + "\n").encode(), 5),  # a restart
    ]
    got = []
    for block in blocks:
        mark = engine.mark()
        engine.feed_block(block, "a.log", 2024, events=False)
        got.append(engine.since(mark))
    assert got == [Since([], 3, False), Since([4], None, False), Since([], 6, True)]


@pytest.mark.slow
@pytest.mark.parametrize("tail", [b"", b"\n", b"x" * 50, b"x" * 51, b"Error " + b"y" * 60])
def test_long_lines_fall_back_to_blocks(tmp_path: Path, tail: bytes) -> None:
    path = tmp_path / "a.log"
    text = (FIXTURES / "lab" / "raise_rank1.log").read_bytes()
    path.write_bytes(text[:2000] + b"Error " + b"z" * 200 + b"\n" + text[2000:] + tail)
    task = _task(path, 256, 50)
    with pytest.raises(LongLine):
        list(lines_by_windows(task, Tally(), Collector(task.library, task.path, task.year)))
    got = scan_range(task)
    assert got == scan_with(task, lines_by_blocks) and got.cut


def test_mixed_inputs_keep_their_order_with_workers(tmp_path: Path) -> None:
    # plain files go to the workers, the .gz is read here in between: lines still arrive in
    # input order
    names = ["lab/hang_rank1.log", "lab/raise_rank1.log", "slurm/timelimit_hang.out"]
    paths = [tmp_path / f"{i}-{Path(n).name}" for i, n in enumerate(names)]
    for name, path in zip(names, paths, strict=True):
        path.write_bytes((FIXTURES / name).read_bytes())
    packed = paths[1].with_suffix(".log.gz")
    packed.write_bytes(gzip.compress(paths[1].read_bytes()))
    paths[1].unlink()
    _same([str(paths[0]), str(packed), str(paths[2])], 1000)


def test_a_bad_file_in_a_directory_is_skipped_with_workers(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_bytes((FIXTURES / "lab" / "raise_rank1.log").read_bytes())
    (tmp_path / "b.bin").write_bytes(bytes(range(256)) * 64)
    warnings: list[str] = []
    doc = document(
        analyze([str(tmp_path)], warn=warnings, jobs=2, parallel_min_bytes=0, range_min_bytes=0)
    )
    assert any("b.bin: skipped: binary data" in w for w in warnings), warnings
    assert doc == document(analyze([str(tmp_path)], range_min_bytes=1 << 62))


def test_a_range_that_cannot_be_read_says_why(tmp_path: Path) -> None:
    scan = scan_range(_task_for(tmp_path / "gone.log", 0, 100))
    assert scan.error is not None and "cannot" in scan.error and not scan.matches


def _task_for(path: Path, start: int, end: int) -> RangeTask:
    library = default_library()
    return RangeTask(str(path), start, end, Prefilter.for_library(library).pattern, library, None)


def _die(task: RangeTask) -> None:
    os._exit(9)  # as the OOM killer would end a worker


def test_a_dead_worker_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "big.log"
    log.write_bytes((FIXTURES / "lab" / "raise_rank1.log").read_bytes() * 20)
    # the pool pickles the function by name: the forked workers find this module's _die
    monkeypatch.setattr(pipeline_module, "scan_range", _die)
    with pytest.raises(WorkerError, match=r"big\.log: a worker process died"):
        analyze([str(log)], jobs=2, parallel_min_bytes=0, range_min_bytes=0, chunk_bytes=4096)


@pytest.mark.parametrize("damage", ["none", "truncated", "binary"])
def test_compressed_inputs_read_by_a_child_process(tmp_path: Path, damage: str) -> None:
    text = (FIXTURES / "lab" / "raise_rank1.log").read_bytes()
    packed = gzip.compress(bytes(range(256)) * 64 if damage == "binary" else text)
    if damage == "truncated":
        packed = packed[: len(packed) * 2 // 3]
    log = tmp_path / "run.log.gz"
    log.write_bytes(packed)

    def run(jobs: int) -> tuple[dict[str, object] | str, list[str]]:
        warnings: list[str] = []
        try:
            doc = document(analyze([str(log)], warn=warnings, jobs=jobs, range_min_bytes=0))
        except InputError as err:
            return str(err), warnings
        return doc, warnings

    here, child = run(1), run(2)
    assert child == here
    if damage == "truncated":
        assert any("damaged or truncated" in w for w in child[1]), child[1]
    if damage == "binary":
        assert "binary data" in str(child[0])


def test_a_range_of_one_unterminated_candidate_line(tmp_path: Path) -> None:
    # the last range holds only the file's last line, a failure without its newline: a window
    # with a candidate and no newline at all
    text = (FIXTURES / "lab" / "raise_rank1.log").read_bytes()
    path = tmp_path / "a.log"
    path.write_bytes(text + b"[default2]:RuntimeError: last words")
    assert split_ranges(str(path), path.stat().st_size, len(text) - 1)[-1] == (
        len(text),
        path.stat().st_size,
    )
    _same([str(path)], len(text) - 1)
    doc = document(analyze([str(path)], range_min_bytes=0, chunk_bytes=len(text) - 1))
    last = text.count(b"\n") + 1
    found = [e for i in doc["incidents"] for e in i["evidence"] if e["line"] == last]
    assert [e["text"] for e in found] == ["[default2]:RuntimeError: last words"]


def test_a_task_pickles_its_library_once() -> None:
    # tasks cross to the workers with their library as bytes pickled once per library, and
    # come back whole, the tasks of one library sharing one unpickled library
    task = _task(FIXTURES / "lab" / "raise_rank1.log", 4096, 1024)
    tasks = [replace(task, start=0, end=10, origin=7), replace(task, start=10, end=20)]
    back = [pickle.loads(pickle.dumps(t)) for t in tasks]  # noqa: S301 - pickled here
    assert back[0].library is back[1].library is not task.library
    assert [s.id for s in back[0].library.signatures] == [s.id for s in task.library.signatures]
    for a, b in zip(tasks, back, strict=True):
        assert replace(b, library=a.library) == a
    assert scan_range(back[0]) == scan_range(tasks[0])


def _megatron(its: range) -> list[str]:
    return [
        f" iteration {it:8d}/    1000 | consumed samples: {it * 8:10d} | elapsed time per "
        f"iteration (ms): {1000 + it % 7:.1f} | lm loss: {2 + 1 / it:.6E} |"
        for it in its
    ]


def test_workers_keep_the_text_of_each_line_an_attempt_ends_with(tmp_path: Path) -> None:
    # the workers ship the text of few progress lines (parsed_progress.edge_lines): an
    # attempt that ends inside a range is still described by its last line, whether the next
    # attempt starts at a line that is no progress line (a checkpoint load: the last line ends
    # a run) or in the middle of a run (a line goes back to an earlier iteration)
    lines = [
        *_megatron(range(1, 41)),
        " loading checkpoint from /ckpt at iteration 40",
        *_megatron(range(41, 61)),
        *_megatron(range(51, 91)),
        "[2026-11-30 10:00:00] some line no signature knows",
    ]
    path = tmp_path / "restarts.log"
    path.write_text("\n".join(lines) + "\n")
    one = document(analyze([str(path)], range_min_bytes=1 << 62))
    assert len(one["attempts"]) == 3
    assert document(analyze([str(path)], range_min_bytes=0)) == one


def test_an_attempt_that_ends_on_a_line_without_an_iteration(tmp_path: Path) -> None:
    # a range starts with progress lines that state no iteration (HF Trainer dicts) and then
    # goes back to an earlier iteration than the range before ended with: the attempt ends on
    # the last of those dicts, whose text the range's worker kept
    first = "\n".join(_megatron(range(1, 41))) + "\n"
    dicts = [f"{{'loss': {2 + i / 10}, 'learning_rate': 1e-05, 'epoch': 0.{i}}}" for i in (1, 2)]
    second = "\n".join([*dicts, *_megatron(range(21, 41))]) + "\n"
    path = tmp_path / "restart.log"
    path.write_text(first + second)
    one = document(analyze([str(path)], range_min_bytes=1 << 62))
    assert len(one["attempts"]) == 2
    ranges = document(analyze([str(path)], range_min_bytes=0, chunk_bytes=len(first) - 1))
    assert ranges == one
