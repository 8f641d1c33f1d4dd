"""Hard-wrapped logs: the wrap width is learned from the file, a cut message is matched whole."""

from __future__ import annotations

from pathlib import Path

from logscope.lines.wrap import rejoin, starts_record, wrap_width

from .helpers import Failure, analyze_doc, child_failed_block, failure_block, verdict_incident

WIDTH = 116
# A DeepSpeed launcher failure as a terminal 116 columns wide shows it: the return code line is
# cut inside `return code`, so neither physical line holds the words a signature looks for.
DS_ERROR = (
    "[2024-02-01 11:00:05,100] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', "
    "'-u', 'train.py', '--local_rank=3', '--deepspeed', 'ds_config.json', '--model', "
    "'llama-7b', '--epochs', '3', '--data', '/data/pile'] exits with return code = -9"
)
CHATTER = [
    "[2024-02-01 11:00:00,000] [INFO] [launch.py:145:main] WORLD INFO DICT: {'localhost': "
    "[0, 1, 2, 3]} and the rest of a long start-up line that the terminal also cut",
    "[2024-02-01 11:00:01,000] [INFO] [comm.py:637:init_distributed] cdb=None, initializing the "
    "torch distributed backend nccl with its defaults for this run",
]


def wrapped(lines: list[str], width: int = WIDTH) -> list[str]:
    """What a terminal `width` columns wide makes of `lines`: each cut into pieces of `width`."""
    return [line[i : i + width] for line in lines for i in range(0, len(line), width)]


def _write(tmp_path: Path, lines: list[str], name: str = "wrapped.log") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_width_is_learned_from_cut_lines() -> None:
    lines = wrapped([*CHATTER, DS_ERROR])
    assert {len(x) for x in lines} <= set(range(WIDTH + 1))
    assert wrap_width("\n".join(lines).encode() + b"\n") == WIDTH


def test_one_line_longer_than_the_width_does_not_hide_it() -> None:
    # a paste whose first line carries the poster's opening backtick: one stray line, one longer
    lines = wrapped([*CHATTER, DS_ERROR])
    lines[0] = "`" + lines[0]
    assert wrap_width("\n".join(lines).encode() + b"\n") == WIDTH
    # counter-case: two lines longer than the cut ones, of two lengths: no width is learned
    lines[2] = "``" + lines[2]
    assert wrap_width("\n".join(lines).encode() + b"\n") is None


def test_rules_of_one_length_are_no_wrap() -> None:
    # torchrun's failure block: rules of 60 `=` and `-`, each followed by a line of another shape
    lines = child_failed_block(
        "/opt/train/pretrain.py",
        time="2025-04-09_07:28:50",
        host="gpu-a17",
        rank=27,
        local_rank=3,
        exitcode=-6,
        pid=1387,
    )
    assert wrap_width("\n".join(lines).encode() + b"\n") is None


def test_one_long_line_printed_twice_is_no_wrap(tmp_path: Path) -> None:
    # torchrun's block names a long node name (a Kubernetes service's FQDN) in each entry: two
    # lines of that one length, each followed by a line of another shape
    host = (
        "trainer-7f3c9e-launcher.trainer-7f3c9e-launcher.team-llm-shared-gpu-pool.svc.cluster.local"
    )
    fail = [Failure("2025-04-09_07:28:50", host, r, r, 1, 1380 + r) for r in (1, 2)]
    lines = failure_block("/opt/train/pretrain.py", fail[0], fail[1:])
    assert wrap_width("\n".join(lines).encode() + b"\n") is None
    # and each entry keeps its rank
    _code, doc, _err = analyze_doc(str(_write(tmp_path, [*lines, "done"])))
    assert verdict_incident(doc)["culprit"]["rank"] == 1, doc["incidents"]


def test_one_template_at_the_width_followed_by_other_lines_is_no_wrap() -> None:
    # a fixed-format line (a checkpoint path with its step number) twice at the longest length,
    # each followed by a line of another shape: had they been cut, the pieces would be alike
    saved = (
        "Saved a checkpoint for iteration {i} at: (local)/home/ray/results/run/checkpoint_00000{i}"
    )
    lines = [
        saved.format(i=1),
        "Finished iteration 2 at 2024-05-02 10:10:00. Total running time: 10min 0s",
        saved.format(i=2),
        "Completed after 2 iterations at 2024-05-02 10:10:05. Total running time: 10min 5s",
    ]
    assert wrap_width(("\n".join(lines) + "\n").encode()) is None


def test_traceback_frames_of_one_length_are_no_wrap() -> None:
    # two frame lines of a traceback happen to be the longest lines but one: each is whole, as
    # CPython writes it, and the frame's source line under it is no piece of it
    frames = [
        '  File "/opt/envs/a/lib/python3.10/site-packages/trainer/strategies/zero.py", line 154,'
        " in optimizer_step",
        "    optimizer.step()",
        '  File "/opt/envs/a/lib/python3.10/site-packages/trainer/optim/low_level_opt.py", line 48,'
        " in step_and_ze",
        "    self.optim.step()",
    ]
    assert len(frames[0]) == len(frames[2])
    lines = ["x" * 300 + " a pasted line longer than any", *frames, "RuntimeError: boom"]
    assert wrap_width(("\n".join(lines) + "\n").encode()) is None


def test_no_width_for_an_unwrapped_log() -> None:
    varied = [*CHATTER, DS_ERROR, "short line"]
    assert wrap_width("\n".join(varied).encode() + b"\n") is None
    # long lines of one length, all alike: a repeated line, not a wrap
    same = [CHATTER[0]] * 5
    assert wrap_width("\n".join(same).encode() + b"\n") is None
    # a fixed-format line, alike but for its numbers (Megatron's iteration lines)
    fixed = [
        f" iteration {it:6d}/ 100000 | lm loss: {it / 7:.6E} | loss scale: 4096.0 | "
        for it in range(1, 9)
    ]
    assert wrap_width(("\n".join(fixed) + "\n").encode()) is None
    # equal lengths below any terminal's width are a coincidence
    short = [f"rank {r}: ok" for r in range(5)]
    assert wrap_width("\n".join(short).encode() + b"\n") is None


def test_rejoin_grows_a_span_to_its_record() -> None:
    data = ("\n".join(wrapped([DS_ERROR, "Traceback (most recent call last):"])) + "\n").encode()
    last = data.rstrip(b"\n").rfind(b"\n")
    first_end = data.find(b"\n")
    spans = rejoin(data, [(0, first_end)], WIDTH)
    assert spans == [(0, last)], spans  # up to the traceback line, which starts a record
    assert rejoin(data, [(0, first_end)], None) == [(0, first_end)]


def test_cut_message_is_matched_whole(tmp_path: Path) -> None:
    lines = wrapped([*CHATTER, DS_ERROR])
    _code, doc, _ = analyze_doc(str(_write(tmp_path, lines)))
    inc = verdict_incident(doc)
    assert inc["category"] == "process_killed", inc
    # reported at a physical line of the file, the one where the launcher's words start
    assert inc["root_cause"]["text"] in lines, inc["root_cause"]


def test_a_cut_line_longer_than_the_width_is_rejoined_too(tmp_path: Path) -> None:
    # the poster's backtick glued to the first piece of the record: one stray line, still cut
    lines = wrapped([*CHATTER, DS_ERROR])
    first = len(wrapped(CHATTER))
    lines[first] = "`" + lines[first]
    _code, doc, _ = analyze_doc(str(_write(tmp_path, lines)))
    inc = verdict_incident(doc)
    assert inc["category"] == "process_killed", inc


def test_wrapped_file_read_in_ranges_gives_the_same_verdict(tmp_path: Path) -> None:
    # over 1 MiB: read in ranges (the workers' reader), with the width learned up front
    filler = wrapped(CHATTER) * 9000
    lines = [*filler, *wrapped([DS_ERROR])]
    path = _write(tmp_path, lines, "big.log")
    assert path.stat().st_size > 1 << 20
    _c1, one, _ = analyze_doc(str(path), "--jobs", "1")
    _c2, two, _ = analyze_doc(str(path), "--jobs", "2")
    assert verdict_incident(one)["category"] == "process_killed", one["incidents"]
    assert one["incidents"] == two["incidents"]


def test_lines_of_one_template_cut_alike_are_a_wrap() -> None:
    # two ranks' watchdog lines, alike but for their numbers, both cut mid-number
    watchdog = (
        "[rank{r}]:[E531 18:49:48.9288534{r} ProcessGroupNCCL.cpp:629] [Rank {r}] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=149489, OpType=_ALLGATHER_BASE, "
        "NumelIn=185614592, NumelOut=1484916736, Timeout(ms)=1800000) ran for 1800002 ms."
    )
    lines = wrapped([watchdog.format(r=r) for r in (2, 3)], 170)
    assert wrap_width(("\n".join(lines) + "\n").encode()) == 170


def test_rejoin_stops_at_the_next_line_of_one_template() -> None:
    # in a wrapped file, a line that happens to be exactly as wide is not joined with the next
    # line of its own template (two iteration lines)
    it = " iteration {:6d}/ 100000 | lm loss: 2.{:06d}E+00 | loss scale: 4096.0 | grad norm: 0.31 |"
    lines = [it.format(n, n) for n in (41, 42)]
    width = len(lines[0])
    data = ("\n".join(lines) + "\n").encode()
    first = (0, data.find(b"\n"))
    assert rejoin(data, [first], width) == [first]


def test_lines_that_begin_alike_are_not_pieces_of_each_other() -> None:
    # a kernel log's Xid lines, one length by chance, differ in hex digits (`dc`, `ed`) that a
    # shape without numbers keeps; each begins as the other does, so none is a piece of another
    xid = "kernel: NVRM: Xid (PCI:0000:{}:00): 45, pid=40211, name=python, Ch 0000000{}"
    lines = [xid.format(bus, ch) for bus, ch in (("3b", "a"), ("af", "c"), ("d8", "e"))]
    data = ("\n".join(lines) + "\n").encode()
    assert wrap_width(data) is None
    first = (0, data.find(b"\n"))
    assert rejoin(data, [first], len(lines[0])) == [first]


def test_lines_of_one_indented_block_are_not_pieces_of_each_other() -> None:
    # a py-spy dump's frames (deepspeed 0.16.4's and torch 2.13's lines), two of them one length
    # by chance, each followed by the next frame at the same indent: siblings, not cut pieces
    frames = [
        'Thread 811 (active): "MainThread"',
        "    all_gather_coalesced (deepspeed/runtime/zero/partition_parameters.py:1261)",
        "    wrapped_fn (deepspeed/utils/nvtx.py:18)",
        "    fetch_sub_module (deepspeed/runtime/zero/partitioned_param_coordinator.py:314)",
        "    _pre_forward_module_hook (deepspeed/runtime/zero/parameter_offload.py:292)",
        "    _call_impl (torch/nn/modules/module.py:1821)",
    ]
    assert len(frames[1]) == len(frames[4]) >= 60
    data = ("\n".join(frames) + "\n").encode()
    assert wrap_width(data) is None
    # a cut piece begins wherever the cut fell, not at the cut line's indent
    cut = [
        "    the data loader of the second stage reads its shards from /mnt/fsx/data2/pre",
        "training/shard-0001.tar and",
        "    every rank opens the shard its index names, then the reader checks the heade",
        "r of each record",
    ]
    assert wrap_width(("\n".join(cut) + "\n").encode()) == 80


def test_crlf_lines_are_measured_without_their_carriage_return() -> None:
    lines = wrapped([*CHATTER, DS_ERROR])
    data = ("\r\n".join(lines) + "\r\n").encode()
    assert wrap_width(data) == WIDTH
    first_end = data.find(b"\r\n")
    spans = rejoin(data, [(0, first_end + 1)], WIDTH)  # a span ends at its newline, \r kept
    assert spans[0][1] > first_end + 2, spans  # grown into the next physical line


def test_the_width_is_counted_in_characters_as_a_terminal_cuts() -> None:
    # a progress bar's blocks are three bytes each in UTF-8 and one column each on the screen:
    # bars of different lengths glued to the records before them, every piece cut at the width
    bars = [f"Epoch {n}: |{'█' * (n * 7)}{' ' * (70 - n * 7)}| {n * 90}/1000 " for n in (1, 4, 6)]
    lines = wrapped([bar + DS_ERROR for bar in bars])
    data = "\n".join(lines).encode() + b"\n"
    assert len({len(x.encode()) for x in lines if len(x) == WIDTH}) > 1  # bytes tell no width
    assert wrap_width(data) == WIDTH
    first_end = data.find(b"\n")
    spans = rejoin(data, [(0, first_end)], WIDTH)
    assert data[spans[0][0] : spans[0][1]].count(b"\n") >= 2, spans  # grown to its record


def test_a_programs_own_log_line_starts_a_record() -> None:
    # SLURM's log.c writes `argv0: level: msg`; a banner after a fixed-width line is no piece of it
    for line in (
        b"slurmstepd: error: *** JOB 4711 ON gpu-a17 CANCELLED AT 2024-04-06T02:01:05 ***",
        b"slurmstepd-gpu-b03: error: Detected 1 oom_kill event in StepId=88.0.",
        b"srun: fatal: Invalid node name specified",
        b"srun: warning: can't run 1 processes on 2 nodes, setting nnodes to 1",
    ):
        assert starts_record(line), line
    for piece in (b"r: 0.25 | number of skipped iterations: 0 |", b"and more text: error: here"):
        assert not starts_record(piece), piece


def test_a_block_is_cut_before_a_wrapped_record_that_goes_on() -> None:
    from logscope.lines.wrap import MAX_PIECES, unfinished_tail

    w = 80
    piece, rest = b"x" * w + b"\n", b"tail of the record\n"
    assert unfinished_tail(piece + rest, w) == len(piece + rest)  # its last line is short
    assert unfinished_tail(rest + piece + piece, w) == len(rest)  # a record goes on
    assert unfinished_tail(rest + piece, None) == len(rest + piece)  # no wrap learned
    many = piece * (MAX_PIECES + 3)
    assert unfinished_tail(many, w) == len(piece) * 3  # at most MAX_PIECES held


def test_the_block_size_does_not_split_a_wrapped_record(tmp_path: Path) -> None:
    """A log hard-wrapped at 153 columns read in blocks smaller than a record: each record is
    still read whole (its loss and grad norm)."""
    from logscope.engine.analyze import analyze
    from logscope.engine.feed import default_library
    from logscope.render.document import document

    lines = []
    for it in range(1, 9):
        record = (
            f"[default7]: iteration {it:7d}/ 115311 | consumed samples: {it * 2048:11d} | "
            f"elapsed time per iteration (s): 105.16 | learning rate: 4.475E-05 | global batch "
            f"size: 2048 | lm loss: 2.1{it}7073E+00 | grad norm: 0.150 | num zeros: 0.0 |"
        )
        lines += [record[i : i + 153] for i in range(0, len(record), 153)]
    log = tmp_path / "wrapped.log"
    log.write_text("\n".join(lines) + "\n")
    library = default_library()
    whole = document(analyze([str(log)], library))["training"]
    small = document(analyze([str(log)], library, block_size=64))["training"]
    assert len(whole["loss"]) == 8 and None not in whole["loss"], whole
    assert small == whole, (small, whole)


def test_whole_records_carries_a_record_into_the_next_block() -> None:
    from logscope.lines.wrap import whole_records
    from logscope.read.sources import Block

    w = 80
    piece, last, other = b"x" * w + b"\n", b"end of it\n", b"another line\n"
    blocks = [Block(other + piece, 1), Block(piece, 3), Block(last + other, 4)]
    out = list(whole_records(blocks, w))
    assert [(b.data, b.first_lineno) for b in out] == [
        (other, 1),
        (piece + piece + last + other, 2),
    ]
    assert b"".join(b.data for b in whole_records(blocks, None)) == b"".join(b.data for b in blocks)


def test_a_screen_copy_padded_to_its_width_keeps_its_last_record_whole(tmp_path: Path) -> None:
    # a terminal's screen copied whole pads every row to the width: the rows of the input's last
    # block all look like pieces of a record going on, and nothing follows them
    w = 100
    record = (
        "2023-04-02 11:07:26.771566: E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2153]"
        " Execution of replica 1 failed: INTERNAL: external/xla/xla/service/gpu/nccl_all_reduce"
        "_thunk.cc:70: NCCL operation ncclAllReduce(send_buffer, recv_buffer, count, dtype, op,"
        " comm, stream) failed: unhandled cuda error"
    )
    rows = [record[i : i + w] for i in range(0, len(record), w)]
    rows += ["Traceback (most recent call last):", '  File "train.py", line 757, in <module>']
    rows += [f"    frame {n}" for n in range(3)]
    log = _write(tmp_path, [r.ljust(w) for r in rows])
    _code, doc, _ = analyze_doc(str(log))
    root = verdict_incident(doc)["root_cause"]
    assert (root["pattern"], root["line"]) == ("nccl.unhandled_cuda_error", 1), root
    # the last block is not cut, but one that more blocks follow still is
    from logscope.lines.wrap import whole_records
    from logscope.read.sources import Block

    piece = b"x" * w + b"\n"
    out = list(whole_records([Block(b"a\n" + piece, 1)], w))
    assert [(b.data, b.first_lineno) for b in out] == [(b"a\n" + piece, 1)]


def test_a_cut_record_is_reported_where_its_phrase_begins(tmp_path: Path) -> None:
    # the phrase a signature knows runs back from its trigger to the last bracketed field: the
    # watchdog's words begin at the end of the first piece, the launcher's at the `]` that
    # closes the command list
    stuck = (
        "[rank2]:[E0429 13:55:49.384372190 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID "
        "0(default_pg) Rank 2] ProcessGroupNCCL's watchdog got stuck for 480 seconds without "
        "making progress in monitoring enqueued collectives."
    )
    for record, phrase in ((stuck, "ProcessGroupNCCL's"), (DS_ERROR, "exits with return code")):
        lines = wrapped([*CHATTER, record])
        pieces = wrapped([record])
        # the trigger is not on the piece the phrase begins on: a test that can tell them apart
        start = next(i for i, p in enumerate(pieces) if phrase[:10] in p)
        _code, doc, _ = analyze_doc(str(_write(tmp_path, lines)))
        root = verdict_incident(doc)["root_cause"]
        assert root["text"] == pieces[start], (root, pieces)
        assert root["line"] == len(wrapped(CHATTER)) + start + 1, root
