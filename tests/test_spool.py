"""Compressed inputs scanned by the workers: a child process decompresses them into chunk files
(logscope/spool.py). The document is the one a single process reads, wherever the chunks end;
the folder holds a bounded number of chunks and is gone afterwards; the root cause's context
comes from the chunks kept, not from a second decompression."""

from __future__ import annotations

import gzip
import multiprocessing
import threading
import time
from pathlib import Path
from typing import Any

import lz4.frame
import pytest
import zstandard

from logscope.analysis import context as context_module
from logscope.engine.analyze import analyze
from logscope.errors import InputError
from logscope.read import spool as spool_module
from logscope.read.sources import MAX_LINE, Source
from logscope.read.spool import (
    Chunk,
    KeepBudget,
    Keeper,
    Kept,
    Spool,
    _ChunkWriter,
    _Fed,
    read_kept,
)
from logscope.render.document import document

from .generators.bloom_run import Truth
from .helpers import FIXTURES

_PACK = {
    "gz": gzip.compress,
    "zst": lambda b: zstandard.ZstdCompressor().compress(b),
    "lz4": lz4.frame.compress,
}


@pytest.fixture(autouse=True)
def own_spool_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Chunks go to a folder of this test's: what is left in it afterwards is seen."""
    folder = tmp_path / "shm"
    folder.mkdir()
    monkeypatch.setattr(spool_module, "_IN_MEMORY", folder)
    return folder


def _docs(path: Path, chunk: int) -> tuple[Any, Any, list[str], list[str]]:
    """The document and warnings of one process (block by block) and of the workers."""
    one_warn: list[str] = []
    many_warn: list[str] = []
    one = document(analyze([str(path)], warn=one_warn, range_min_bytes=1 << 62))
    many = document(
        analyze([str(path)], warn=many_warn, jobs=2, chunk_bytes=chunk, range_min_bytes=0)
    )
    return one, many, one_warn, many_warn


def _packed(tmp_path: Path, text: bytes, kind: str) -> Path:
    path = tmp_path / f"job.log.{kind}"
    path.write_bytes(_PACK[kind](text))
    return path


@pytest.mark.parametrize("kind", ["gz", "zst", "lz4"])
@pytest.mark.parametrize("chunk", [pytest.param(4096, marks=pytest.mark.slow), 65536, 1 << 20])
def test_bloom_run_is_the_same_from_chunks(
    bloom_run: tuple[Path, Truth], tmp_path: Path, own_spool_folder: Path, kind: str, chunk: int
) -> None:
    path = _packed(tmp_path, (bloom_run[0] / "main_log.txt").read_bytes(), kind)
    one, many, one_warn, many_warn = _docs(path, chunk)
    assert many == one and many_warn == one_warn
    assert many["inputs"][0]["compression"] == {"gz": "gzip", "zst": "zstd", "lz4": "lz4"}[kind]
    assert not list(own_spool_folder.iterdir())  # the chunks and their folder are gone


@pytest.mark.parametrize("name", ["lab/raise_rank1.log", "slurm/timelimit_hang.out"])
def test_fixtures_are_the_same_from_chunks(tmp_path: Path, name: str) -> None:
    path = _packed(tmp_path, (FIXTURES / name).read_bytes(), "gz")
    one, many, _, _ = _docs(path, 333)
    assert many == one


def test_long_lines_and_no_final_newline(tmp_path: Path) -> None:
    # a line over MAX_LINE inside a chunk (the worker cuts it, as the reader here does) and a
    # last line without its newline
    text = (FIXTURES / "lab" / "raise_rank1.log").read_bytes()
    log = b"x" * (MAX_LINE + 5000) + b"\n" + text + b"[default2]:[rank2]: KeyError: 'tail'"
    one, many, one_warn, many_warn = _docs(_packed(tmp_path, log, "zst"), 100_000)
    assert many == one and many_warn == one_warn
    assert any("longer than" in w for w in many_warn), many_warn


@pytest.mark.parametrize("kind", ["gz", "zst"])
def test_a_stream_cut_short_warns_at_the_same_line(tmp_path: Path, kind: str) -> None:
    text = (FIXTURES / "lab" / "raise_rank1.log").read_bytes() * 30
    packed = _PACK[kind](text)
    path = tmp_path / f"cut.log.{kind}"
    path.write_bytes(packed[: len(packed) * 2 // 3])
    one, many, one_warn, many_warn = _docs(path, 4096)
    assert many == one and many_warn == one_warn
    assert any("damaged or truncated" in w for w in many_warn), many_warn


def test_binary_data_is_refused_from_the_child(tmp_path: Path) -> None:
    path = tmp_path / "core.gz"
    path.write_bytes(gzip.compress(bytes(range(256)) * 64))
    with pytest.raises(InputError, match="binary data"):
        analyze([str(path)], jobs=2, range_min_bytes=0)


def test_an_empty_compressed_input_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "none.log.zst"
    path.write_bytes(_PACK["zst"](b""))
    warnings: list[str] = []
    analysis = analyze([str(path)], warn=warnings, jobs=2, range_min_bytes=0)
    assert analysis.inputs[0].bytes == 0 and any("empty input" in w for w in warnings)


def test_root_context_comes_from_kept_chunks(
    bloom_run: tuple[Path, Truth], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _packed(tmp_path, (bloom_run[0] / "main_log.txt").read_bytes(), "gz")
    reread: list[str] = []
    real = context_module.read_lines

    def spy(p: str, *args: Any, **kwargs: Any) -> dict[int, bytes]:
        reread.append(p)
        return real(p, *args, **kwargs)

    monkeypatch.setattr(context_module, "read_lines", spy)
    many = document(analyze([str(path)], jobs=2, chunk_bytes=65536, range_min_bytes=0))
    assert not reread
    one = document(analyze([str(path)], range_min_bytes=1 << 62))
    assert reread == [str(path)]  # block by block, the input is read again
    assert many["incidents"] and many == one


def test_read_kept_needs_every_line_the_input_has(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"1\n2\n3\n")
    b.write_bytes(b"4\n5")
    kept = [Kept(str(a), 1, 3, False), Kept(str(b), 4, 2, True)]
    assert read_kept(kept, {2, 3, 4, 9}) == {2: b"2", 3: b"3", 4: b"4"}  # 9: past the end
    assert read_kept(kept[:1], {3, 4}) is None  # 4 exists and is not kept
    assert read_kept(kept[1:], {1, 5}) is None


def _written(tmp_path: Path, pieces: list[bytes], chunk_bytes: int) -> list[bytes]:
    receiver, sender = multiprocessing.Pipe(duplex=False)
    writer = _ChunkWriter(str(tmp_path), chunk_bytes, multiprocessing.Semaphore(100), sender)
    for piece in pieces:
        writer.write(piece)
    writer.close()
    sender.close()
    chunks = []
    while True:
        try:
            _, chunk, _ = receiver.recv()
        except EOFError:
            return chunks
        chunks.append(Path(chunk.path).read_bytes())


def test_chunks_end_at_line_ends(tmp_path: Path) -> None:
    text = b"".join(b"line %d %s\n" % (i, b"y" * (i % 37)) for i in range(2000))
    pieces = [text[i : i + 999] for i in range(0, len(text), 999)]  # pieces end mid-line
    chunks = _written(tmp_path, pieces, 5000)
    assert b"".join(chunks) == text
    assert all(c.endswith(b"\n") and len(c) >= 5000 for c in chunks[:-1]), [len(c) for c in chunks]
    assert max(len(c) for c in chunks) < 5000 + 50  # one line more at most


def test_a_chunk_grows_until_its_line_ends(tmp_path: Path) -> None:
    long = b"z" * 20_000
    chunks = _written(tmp_path, [b"a\n", long[:7000], long[7000:], b"\nb\nc"], 100)
    assert chunks == [b"a\n" + long + b"\n", b"b\nc"]


def test_the_folder_holds_at_most_room_chunks(tmp_path: Path, own_spool_folder: Path) -> None:
    # the child writes ahead only as far as `room` allows, however slowly chunks are taken
    text = b"".join(b"[default0]:step %d\n" % i for i in range(20_000))
    path = _packed(tmp_path, text, "gz")
    most = 0
    with Spool(Source(str(path)), 4096, room=3, window=400) as spool:
        lineno = 1
        for chunk in spool.chunks():
            # the child has time to run ahead, if it could (up to a second on a busy machine)
            deadline = time.monotonic() + (1.0 if most < 4 else 0.0)
            while True:
                most = max(most, len(list(Path(spool.folder).iterdir())))
                if most >= 4 or time.monotonic() > deadline:
                    break
                threading.Event().wait(0.005)
            lines = Path(chunk.path).read_bytes().count(b"\n")
            spool.scanned(chunk, lineno, lines, [], None, False)  # nothing to keep
            lineno += lines
        spool.finish(KeepBudget())
        assert not spool.kept
    assert 3 <= most <= 4  # 3 written ahead, and the last one scanned until the next is
    assert not list(own_spool_folder.iterdir())


def _keeper_run(
    chunks: list[tuple[list[int], int | None]], most: int = 8, restart: int = -1
) -> list[int]:
    """Chunks of 100 lines each, with their failure lines and last progress line, through a
    Keeper with a 10-line window (a new attempt begins in chunk `restart`): the first lines of
    the chunks kept."""
    keeper = Keeper(10, most)
    for i, (failing, progress) in enumerate(chunks):
        keeper.fed(_Fed(Chunk(str(i), 1, i), 1 + 100 * i, 100), failing, progress, i == restart)
    keeper.finish()
    return [f.first_lineno for f in keeper.alive]


def test_keeper_keeps_failures_for_good_and_the_latest_progress() -> None:
    assert _keeper_run([([], None)] * 5) == []
    assert _keeper_run([([50], 60), ([], 160), ([], None), ([], None)]) == [1, 101]
    # a progress line near a chunk's edge keeps the neighbour too; a newer one lets both go
    assert _keeper_run([([], 95), ([], None), ([], None)]) == [1, 101]
    assert _keeper_run([([], 95), ([], 150), ([], None)]) == [101]
    assert _keeper_run([([], None), ([], 105), ([], None)]) == [1, 101]


def test_keeper_keeps_the_last_progress_of_an_attempt() -> None:
    # attempt 1 ends after its progress in chunk 1; attempt 2 starts logging in chunk 3
    run = [([], 50), ([], 150), ([], None), ([], 350), ([], 450)]
    assert _keeper_run(run) == [401]
    assert _keeper_run(run, restart=3) == [101, 301, 401]


def test_keeper_keeps_at_most_so_many_for_failures() -> None:
    assert _keeper_run([([50 + 100 * i], None) for i in range(6)], most=3) == [1, 101, 201]


def test_the_inputs_of_one_analysis_share_a_budget_for_kept_chunks(tmp_path: Path) -> None:
    text = b"".join(b"[default0]:RuntimeError: boom %d\n" % i for i in range(2000))
    path = _packed(tmp_path, text, "zst")
    with Spool(Source(str(path)), 4096, room=3, window=1) as spool:
        lineno, sizes = 1, []
        for chunk in spool.chunks():
            lines = Path(chunk.path).read_bytes().count(b"\n")
            spool.scanned(chunk, lineno, lines, [lineno + lines // 2], None, False)
            lineno += lines
            sizes.append(chunk.size)
        budget = KeepBudget(sizes[0] + sizes[1])
        spool.finish(budget)
        assert [k.first_lineno for k in spool.kept][:1] == [1] and len(spool.kept) == 2
        assert sorted(p.name for p in Path(spool.folder).iterdir()) == sorted(
            Path(k.path).name for k in spool.kept
        )
        assert budget.left == 0 and not budget.take(1)
