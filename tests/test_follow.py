"""follow(): tail -F by polling; appends, partial lines, truncation, rotation, late files, load."""

from __future__ import annotations

import gzip
import itertools
import os
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from logscope.live import follow as following
from logscope.live.follow import Chunk, Notice, Tick, follow

from .helpers import COMPRESSORS

Item = Chunk | Notice | Tick


def no_sleep(seconds: float) -> None:
    pass


def next_round(gen: Iterator[Item]) -> list[Item]:
    """The items of one poll round, up to and including its Tick."""
    out: list[Item] = []
    for item in gen:
        out.append(item)
        if isinstance(item, Tick):
            return out
    raise AssertionError(f"generator ended mid-round after {out}")


def rounds(gen: Iterator[Item], n: int) -> list[Item]:
    return [item for _ in range(n) for item in next_round(gen)]


class Script:
    """A fake sleep: each call performs the next scripted write instead of sleeping."""

    def __init__(self, *steps: Callable[[], object]) -> None:
        self.steps = list(steps)
        self.done = False
        self.sleeps = 0

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        if self.steps:
            self.steps.pop(0)()
        else:
            self.done = True


def run(patterns: list[Path | str], *steps: Callable[[], object], **kw: object) -> list[Item]:
    """Follow until every scripted step ran and one idle round followed the last."""
    script = Script(*steps)
    gen = follow(
        [str(p) for p in patterns],
        sleep=script.sleep,
        stop=lambda: script.done,
        **kw,  # type: ignore[arg-type]
    )
    return list(gen)


def lines(items: list[Item], path: Path | None = None) -> list[tuple[int, bytes]]:
    """(lineno, bytes without newline) of every line in the chunks, checking numbering runs on."""
    out: list[tuple[int, bytes]] = []
    for item in items:
        if not isinstance(item, Chunk) or (path is not None and item.path != str(path)):
            continue
        data = item.block.data
        body = data[:-1] if data.endswith(b"\n") else data
        out.extend(enumerate(body.split(b"\n"), start=item.block.first_lineno))
    return out


def notices(items: list[Item]) -> list[tuple[str, str]]:
    return [(Path(i.path).name, i.what) for i in items if isinstance(i, Notice)]


def append(path: Path, data: bytes) -> Callable[[], None]:
    def go() -> None:
        with path.open("ab") as f:
            f.write(data)

    return go


# 1 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("block_size", [1 << 20, 5])
def test_appends_from_end_skip_existing_lines_but_count_them(
    tmp_path: Path, block_size: int
) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"old1\nold2\n")
    items = run([log], append(log, b"new1\n"), append(log, b"new2\nnew3\n"), block_size=block_size)
    assert lines(items) == [(3, b"new1"), (4, b"new2"), (5, b"new3")]
    assert notices(items) == [("x.log", "opened")]
    assert "from its end" in next(i.message for i in items if isinstance(i, Notice))


def test_from_start_reads_existing_content(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"old1\nold2\n")
    items = run([log], append(log, b"new1\n"), from_start=True)
    assert lines(items) == [(1, b"old1"), (2, b"old2"), (3, b"new1")]


def test_from_end_inside_a_partial_line_emits_that_line_whole(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"old1\npar")
    items = run([log], append(log, b"tial\nnext\n"), block_size=3)
    assert lines(items) == [(2, b"partial"), (3, b"next")]


def test_from_end_inside_an_overlong_line_skips_its_rest(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"old1\n" + b"y" * 100)
    items = run([log], append(log, b"yyy\nnext\n"), max_line=10)
    assert lines(items) == [(3, b"next")]


# 2 -----------------------------------------------------------------------------------------


def test_partial_last_line_is_held_until_its_newline(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"one\n")
    gen = follow([str(log)], from_start=True, sleep=no_sleep)
    assert lines(next_round(gen)) == [(1, b"one")]
    append(log, b"two, still being writ")()
    assert lines(next_round(gen)) == []
    append(log, b"ten")()
    assert lines(next_round(gen)) == []
    append(log, b"\nthree\n")()
    got = next_round(gen)
    assert lines(got) == [(2, b"two, still being written"), (3, b"three")]
    chunk = next(i for i in got if isinstance(i, Chunk))
    assert chunk.block.truncated == []


def test_crlf_cr_and_invalid_utf8_stay_bytes(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    raw = b"a\r\n\x1b[31mred\rover\n\xff\xfe\x00bin\n"
    log.write_bytes(raw)
    items = run([log], from_start=True)
    assert b"".join(i.block.data for i in items if isinstance(i, Chunk)) == raw
    assert [n for n, _ in lines(items)] == [1, 2, 3]


# 3 -----------------------------------------------------------------------------------------


def test_truncation_restarts_numbering(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"a\nb\nc\n")
    gen = follow([str(log)], from_start=True, sleep=no_sleep)
    assert lines(next_round(gen)) == [(1, b"a"), (2, b"b"), (3, b"c")]
    with log.open("w") as f:
        f.write("new\n")
    got = next_round(gen)
    assert notices(got) == [("x.log", "truncated")]
    notice = next(i for i in got if isinstance(i, Notice))
    assert notice.message == f"{log}: truncated (size 4 < 6 read); reading from its start"
    assert lines(got) == [(1, b"new")]
    append(log, b"more\n")()
    assert lines(next_round(gen)) == [(2, b"more")]


# 4 -----------------------------------------------------------------------------------------


def test_rotation_reads_the_rest_of_the_old_file_then_the_new_one(tmp_path: Path) -> None:
    log, old = tmp_path / "x.log", tmp_path / "x.log.1"
    log.write_bytes(b"a\n")
    gen = follow([str(tmp_path / "x.log*")], from_start=True, sleep=no_sleep)
    assert lines(next_round(gen)) == [(1, b"a")]
    append(log, b"b, written just before the rename\n")()
    log.rename(old)
    log.write_bytes(b"n1\nn2\n")
    got = next_round(gen)
    assert lines(got) == [(2, b"b, written just before the rename"), (1, b"n1"), (2, b"n2")]
    assert notices(got) == [("x.log", "rotated")]
    assert {i.path for i in got if isinstance(i, Chunk)} == {str(log)}
    append(old, b"late write to the rotated file\n")()
    append(log, b"n3\n")()
    got = rounds(gen, 2)
    assert lines(got) == [(3, b"n3")]
    assert notices(got) == []


def test_rotation_to_a_compressed_sibling(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"a\n")
    items = run(
        [tmp_path],
        lambda: (tmp_path / "x.log.1.gz").write_bytes(gzip.compress(log.read_bytes())),
        log.unlink,
        append(log, b"fresh\n"),
        from_start=True,
    )
    assert lines(items) == [(1, b"a"), (1, b"fresh")]
    assert notices(items) == [("x.log", "opened"), ("x.log", "vanished"), ("x.log", "opened")]


# 5 -----------------------------------------------------------------------------------------


def test_file_appearing_later_is_read_from_its_start(tmp_path: Path) -> None:
    first, second = tmp_path / "slurm-1.out", tmp_path / "slurm-2.out"
    first.write_bytes(b"attempt 1\n")
    items = run(
        [tmp_path / "slurm-*"],
        lambda: (tmp_path / "slurm-1.out.gz").write_bytes(gzip.compress(b"zipped\n")),
        lambda: (tmp_path / "slurm-1.out.2").write_bytes(b"rotated\n"),
        append(second, b"attempt 2 starts\nstep 1\n"),
        append(first, b"attempt 1 last words\n"),
    )
    assert lines(items, first) == [(2, b"attempt 1 last words")]
    assert lines(items, second) == [(1, b"attempt 2 starts"), (2, b"step 1")]
    assert {i.path for i in items if not isinstance(i, Tick)} == {str(first), str(second)}
    opened = [i.message for i in items if isinstance(i, Notice)]
    assert opened == [
        f"{first}: following from its end (byte 10)",
        f"{second}: reading from its start",
    ]


def test_directory_follows_files_below_it_but_not_hidden_or_rotated(tmp_path: Path) -> None:
    (tmp_path / "node0").mkdir()
    (tmp_path / ".cache").mkdir()
    late = tmp_path / "node1" / "rank1.log"
    items = run(
        [tmp_path],
        append(tmp_path / "node0" / "rank0.log", b"r0\n"),
        append(tmp_path / ".cache" / "x.log", b"hidden\n"),
        append(tmp_path / "node0" / "rank0.log.3", b"old\n"),
        lambda: late.parent.mkdir(),
        append(late, b"r1\n"),
    )
    assert lines(items) == [(1, b"r0"), (1, b"r1")]


@pytest.mark.parametrize(
    ("name", "rotated"),
    [
        ("x.log.1", True),
        ("x.log.12", True),
        ("x.log.2.gz", True),
        ("slurm-77.out.gz", True),
        ("x.log.bz2", True),
        ("x.log.xz", True),
        ("x.log.zst", True),
        ("x.log", False),
        ("slurm-1234.out", False),
        ("slurm-1234.5.out", False),
        ("node.3", False),
        ("rank3.log", False),
    ],
)
def test_rotated_names_in_a_folder_are_not_followed(
    tmp_path: Path, name: str, rotated: bool
) -> None:
    (tmp_path / "job.err").write_bytes(b"live\n")
    (tmp_path / name).write_bytes(b"old\n")
    got = {item.path for item in run([tmp_path], from_start=True) if isinstance(item, Chunk)}
    want = {str(tmp_path / "job.err")} | (set() if rotated else {str(tmp_path / name)})
    assert got == want


def test_rotated_name_given_exactly_is_followed(tmp_path: Path) -> None:
    log = tmp_path / "x.log.1"
    log.write_bytes(b"a\n")
    assert lines(run([log], from_start=True)) == [(1, b"a")]


def test_files_in_a_round_come_in_sorted_path_order(tmp_path: Path) -> None:
    names = ["b.log", "a.log", "c.log"]
    items = run(
        [tmp_path / "*.log"],
        *[append(tmp_path / n, f"{n}\n".encode()) for n in names],
        lambda: [append(tmp_path / n, b"again\n")() for n in names],
    )
    last = [i.path for i in items if isinstance(i, Chunk)][-3:]
    assert last == sorted(str(tmp_path / n) for n in names)


# 6 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", ["x.log", "*.log"])
def test_vanished_and_recreated(tmp_path: Path, pattern: str) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"a\n")
    gen = follow([str(tmp_path / pattern)], from_start=True, sleep=no_sleep)
    assert lines(next_round(gen)) == [(1, b"a")]
    append(log, b"b\nunfinished")()
    log.unlink()
    got = next_round(gen)
    # what its writer left before the delete is still read, the unfinished line included
    assert lines(got) == [(2, b"b"), (3, b"unfinished")]
    assert notices(got) == [("x.log", "vanished")]
    assert notices(rounds(gen, 3)) == []
    log.write_bytes(b"back\n")
    got = next_round(gen)
    assert notices(got) == [("x.log", "opened")]
    assert lines(got) == [(1, b"back")]


def test_missing_path_and_unmatched_glob_are_noted_once(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    gen = follow([str(log), str(tmp_path / "*.out")], sleep=no_sleep)
    got = rounds(gen, 3)
    assert notices(got) == [("*.out", "vanished"), ("later.log", "vanished")]
    log.write_bytes(b"hello\n")
    got = next_round(gen)
    assert notices(got) == [("later.log", "opened")]
    assert lines(got) == [(1, b"hello")]


# 7 -----------------------------------------------------------------------------------------


def test_huge_line_without_newline_is_cut_and_not_held(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"")
    piece = b"x" * (64 << 10)
    steps = [append(log, b"first\n")] + [append(log, piece)] * 80
    steps.append(append(log, b"y\nafter1\nafter2\n"))
    tracemalloc.start()
    try:
        items = run([log], *steps, max_line=4096)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert lines(items) == [(1, b"first"), (2, b"x" * 4096), (3, b"after1"), (4, b"after2")]
    cut = [i.block.truncated for i in items if isinstance(i, Chunk) and i.block.truncated]
    assert cut == [[2]]
    assert peak < (1 << 20), f"peak {peak} bytes while following a 5 MB line"


# 8 -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_fast_writer_every_line_once_in_order_with_bounded_memory(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"")
    rate, seconds, batch = 10_000, 2.0, 100
    total = int(rate * seconds)
    pad = b"p" * 80
    done = threading.Event()

    def writer() -> None:
        t0 = time.monotonic()
        with log.open("ab", buffering=0) as f:
            for start in range(0, total, batch):
                f.write(b"".join(b"%08d %s\n" % (n, pad) for n in range(start, start + batch)))
                ahead = t0 + (start + batch) / rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
        done.set()

    received = 0
    deadline = time.monotonic() + seconds + 10
    lineno = itertools.count(1)
    tracemalloc.start()
    thread = threading.Thread(target=writer)
    try:
        gen = follow(
            [str(log)],
            from_start=True,  # the writer may get ahead of the first round
            poll_s=0.02,
            block_size=16 << 10,
            stop=lambda: (done.is_set() and received == total) or time.monotonic() > deadline,
        )
        thread.start()
        for item in gen:
            if not isinstance(item, Chunk):
                continue
            assert item.block.first_lineno == received + 1
            for line in item.block.data.splitlines():
                assert line == b"%08d %s" % (received, pad), (received, line[:20])
                assert next(lineno) == received + 1
                received += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        thread.join(timeout=seconds + 10)
    assert received == total, f"{received} of {total} lines arrived"
    assert log.stat().st_size == total * 90
    assert peak < (256 << 10), f"peak {peak} bytes for a 16 KiB block size"


# 9 -----------------------------------------------------------------------------------------


def test_tick_every_round_and_stop_ends_the_generator(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"quiet\n")
    times = iter([10.0, 10.5, 11.0, 11.5])
    slept: list[float] = []
    calls = 0

    def stop() -> bool:
        nonlocal calls
        calls += 1
        return calls > 4

    items = list(
        follow([str(log)], poll_s=0.5, clock=lambda: next(times), sleep=slept.append, stop=stop)
    )
    assert [i.now for i in items if isinstance(i, Tick)] == [10.0, 10.5, 11.0, 11.5]
    assert slept == [0.5] * 4
    assert lines(items) == []


def test_pending_data_is_read_without_sleeping(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"".join(b"line %d\n" % n for n in range(1, 101)))
    script = Script()
    items = list(
        follow(
            [str(log)], from_start=True, block_size=64, sleep=script.sleep, stop=lambda: script.done
        )
    )
    assert [n for n, _ in lines(items)] == list(range(1, 101))
    assert sum(isinstance(i, Tick) for i in items) > 10
    assert script.sleeps == 1  # only once caught up


def test_open_error_is_a_notice_once_then_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"secret\n")
    real_open = Path.open
    denied = True

    # an unreadable file (chmod 0 proves nothing as root, which CI is): open() refuses it
    def fake_open(self: Path, *args: object, **kw: object) -> object:
        if denied and self == log:
            raise PermissionError(13, "Permission denied")
        return real_open(self, *args, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(Path, "open", fake_open)
    gen = follow([str(log)], from_start=True, sleep=no_sleep)
    got = rounds(gen, 3)
    assert notices(got) == [("x.log", "error")]
    assert [i.message for i in got if isinstance(i, Notice)] == [
        f"{log}: cannot open: Permission denied; retrying"
    ]
    denied = False
    got = next_round(gen)
    assert notices(got) == [("x.log", "opened")]
    assert lines(got) == [(1, b"secret")]


def test_catching_up_does_not_walk_the_directory_every_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.log").write_bytes(b"y\n" * 1000)  # 2000 rounds of 1 byte: always busy
    walks = 0
    real = following._follow_paths

    def counting(patterns: list[str]) -> tuple[set[str], list[str]]:
        nonlocal walks
        walks += 1
        return real(patterns)

    monkeypatch.setattr(following, "_follow_paths", counting)
    gen = follow([str(tmp_path)], from_start=True, block_size=1, sleep=no_sleep, clock=lambda: 5.0)
    got = rounds(gen, 200)
    assert sum(1 for i in got if isinstance(i, Chunk)) == 100  # a line every other round
    assert walks <= 2, walks


# compressed files ----------------------------------------------------------------------------


def _pieces(data: bytes, n: int) -> list[bytes]:
    step = max(1, len(data) // n)
    return [data[i : i + step] for i in range(0, len(data), step)]


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_a_compressed_file_growing_in_pieces_is_decompressed(tmp_path: Path, kind: str) -> None:
    # `job | zstd > job.out.zst`: the compressor writes whenever its buffer fills, so a poll
    # may end anywhere in a frame (even inside its magic bytes), and a second frame may follow
    text = b"".join(b"line %d\n" % i for i in range(1, 301))
    data = COMPRESSORS[kind](text[:1000]) + COMPRESSORS[kind](text[1000:])
    log = tmp_path / "job.out"
    log.write_bytes(data[:2])
    steps = [append(log, piece) for piece in _pieces(data[2:], 7)]
    items = run([log], *steps, from_start=True, block_size=97)
    assert lines(items) == [(i, b"line %d" % i) for i in range(1, 301)]
    assert notices(items) == [("job.out", "opened")]


@pytest.mark.parametrize("kind", ["gzip", "zstd", "lz4"])
def test_a_compressed_file_followed_from_its_end_counts_its_lines(
    tmp_path: Path, kind: str
) -> None:
    log = tmp_path / "job.out.gz"
    log.write_bytes(COMPRESSORS[kind](b"old1\nold2\npar"))  # a frame ending mid-line
    items = run([log], append(log, COMPRESSORS[kind](b"tial\nnew\n")), block_size=5)
    assert lines(items) == [(3, b"partial"), (4, b"new")]


def test_a_compressed_file_that_expands_past_max_line_is_cut_into_lines(tmp_path: Path) -> None:
    text = b"".join(b"%05d\n" % i for i in range(20_000))  # 120 kB from ~40 kB of zstd
    log = tmp_path / "job.out.zst"
    log.write_bytes(COMPRESSORS["zstd"](text))
    items = run([log], from_start=True, block_size=4096, max_line=4096)
    assert lines(items) == [(i + 1, b"%05d" % i) for i in range(20_000)]


def test_damaged_compressed_data_stops_the_file_with_a_notice(tmp_path: Path) -> None:
    good = COMPRESSORS["gzip"](b"one\ntwo\n")
    log = tmp_path / "job.out.gz"
    log.write_bytes(good + b"\x1f\x8b\x08\x00garbage that is no deflate stream\n" * 3)
    items = run([log], append(log, COMPRESSORS["gzip"](b"three\n")), from_start=True)
    assert lines(items) == [(1, b"one"), (2, b"two")]
    assert notices(items) == [("job.out.gz", "opened"), ("job.out.gz", "error")]
    assert "gzip data damaged after byte" in str(items), items


@pytest.mark.parametrize("kind", [None, "zstd"])
def test_a_fifo_is_read_as_it_comes_and_its_last_line_ends_with_its_writer(
    tmp_path: Path, kind: str | None
) -> None:
    text = b"one\ntwo\nthree"  # no newline at the end: the writer's close ends the line
    data = text if kind is None else COMPRESSORS[kind](text)
    fifo = tmp_path / "job.fifo"
    os.mkfifo(fifo)
    gen = follow([str(fifo)], sleep=no_sleep)  # a pipe has no end to follow from: all is new
    items = next_round(gen)  # opened without waiting for a writer
    assert notices(items) == [("job.fifo", "opened")]
    with fifo.open("wb") as w:
        w.write(data[:3])  # inside the zstd magic: nothing can be told yet
        w.flush()
        items += rounds(gen, 2)
        w.write(data[3:])
    items += rounds(gen, 3)
    gen.close()
    assert lines(items) == [(1, b"one"), (2, b"two"), (3, b"three")]
