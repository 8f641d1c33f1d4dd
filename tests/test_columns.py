"""Progress lines parsed in bulk (logscope.scan.bulk_progress) say what the per-line path says: the
same document on every fixture, every real log of the corpus and generated runs, and each line the
bulk path must not vouch for goes the per-line way."""

from __future__ import annotations

import gzip
import importlib.util
import itertools
import math
from pathlib import Path
from typing import Any

import pytest

from logscope.engine.analyze import analyze
from logscope.engine.feed import default_library
from logscope.errors import PatternError
from logscope.match.loader import load_library
from logscope.model import Event, Line, Progress
from logscope.render.document import document
from logscope.scan import bulk_progress as columns_module
from logscope.scan.bulk_progress import MIN_SHAPE_LINES as MIN_SHAPE
from logscope.scan.bulk_progress import Collector

from .helpers import FIXTURES, corpus_logs

BENCH = Path(__file__).resolve().parents[1] / "bench" / "generate.py"
LIBRARY = default_library()


def _per_line_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No signature is parsed in bulk: every candidate line takes the per-line path."""
    plan = columns_module.bulk_plan

    def none(library: object) -> columns_module.BulkPlan:
        whole = plan(library)  # type: ignore[arg-type]
        return columns_module.BulkPlan(frozenset(), whole.index, whole.block)

    monkeypatch.setattr(columns_module, "bulk_plan", none)


def _both(paths: list[str], monkeypatch: pytest.MonkeyPatch, **kw: object) -> tuple[dict, dict]:  # type: ignore[type-arg]
    bulk = document(analyze(paths, **kw))  # type: ignore[arg-type]
    with monkeypatch.context() as m:
        _per_line_only(m)
        one = document(analyze(paths, **kw))  # type: ignore[arg-type]
    return bulk, one


def _fixture_logs() -> list[Path]:
    return sorted(
        p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".log", ".out", ".gz")
    )


@pytest.mark.sweep
@pytest.mark.parametrize("path", _fixture_logs(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_documents_are_the_same(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bulk, one = _both([str(path)], monkeypatch)
    assert bulk == one


@pytest.mark.slow
def test_real_logs_read_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    logs = [
        f for log in corpus_logs() for f in sorted(log.parent.iterdir()) if f.name != "truth.toml"
    ]
    assert logs
    for log in logs:
        bulk, one = _both([str(log)], monkeypatch)
        assert bulk == one, log.parent.name


def _bench_generator() -> Any:
    spec = importlib.util.spec_from_file_location("bench_generate", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["sparse", "dense", "hf", "mmengine"])
def test_bench_profiles_read_the_same_in_bulk_and_with_workers(
    tmp_path: Path, profile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / f"{profile}.txt"
    _bench_generator().generate(path, 3 << 20, nodes=4, profile=profile)
    bulk, one = _both([str(path)], monkeypatch)
    assert bulk == one
    workers = document(
        analyze([str(path)], jobs=2, chunk_bytes=300_001, parallel_min_bytes=0, range_min_bytes=0)
    )
    assert workers == bulk
    assert bulk["incidents"][-1]["category"] == "gpu_hardware"
    assert len(analyze([str(path)]).progress) > 200


def _values(lines: list[str], prefix: str = "") -> dict[str, dict[str, list[float]]]:
    """What the bulk path reads from lines (one run), and what the per-line path reads."""
    collector = Collector(LIBRARY, "x.log", 2024)
    taken = [collector.take(i + 1, (prefix + t).encode()) for i, t in enumerate(lines)]
    assert all(taken), taken
    cols, rejected = collector.finish()
    assert not rejected
    by_line: dict[str, list[float]] = {k: [] for k in cols.values}
    for t in lines:
        hit = LIBRARY.match(t, t)
        assert hit is not None
        for k in by_line:
            v = math.nan if hit[1].get(k) is None else float(hit[1][k])
            # Progress keeps a loss that is not finite as NaN, flagged in `nonfinite`
            by_line[k].append(v if k != "loss" or math.isfinite(v) else math.nan)
    bulk = {k: list(v) for k, v in cols.values.items()}
    return {"bulk": bulk, "line": by_line}


def _same(a: list[float], b: list[float]) -> bool:
    return all((math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b, strict=True))


def test_optional_fields_in_any_version_are_read_like_the_per_line_path() -> None:
    # constructed Megatron lines: fields missing, in ms, a NaN loss, a loss scale (fp16)
    lines = [
        " iteration        1/     100 | consumed samples:           64 | elapsed time per "
        "iteration (ms): 812.5 | learning rate: 1.0E-05 | global batch size:    64 | lm loss: "
        "1.050000E+01 | loss scale: 65536.0 | grad norm: 12.5 | number of skipped iterations:   "
        "1 | number of nan iterations:   0 |",
        " iteration        2/     100 | consumed samples:          128 | elapsed time per "
        "iteration (s): 0.79 | lm loss: nan | number of nan iterations:   2 |",
        " iteration        3/     100 | consumed samples:          192 |",
    ]
    got = _values(lines, "[default0]:")
    for k in got["bulk"]:
        assert _same(got["bulk"][k], got["line"][k]), k


def test_hf_dicts_with_and_without_grad_norm() -> None:
    lines = [
        "{'loss': 2.345, 'grad_norm': 1.5, 'learning_rate': 4.9e-05, 'epoch': 0.01}",
        "{'loss': '1.2', 'learning_rate': '4.9e-05', 'epoch': '0.02'}",
        "{'loss': inf, 'grad_norm': nan, 'learning_rate': 4.9e-05, 'epoch': 0.03}",
    ]
    got = _values(lines)
    for k in got["bulk"]:
        assert _same(got["bulk"][k], got["line"][k]), k


def test_a_field_an_earlier_column_lacks_is_read_from_a_later_one() -> None:
    # constructed maskrcnn-benchmark MetricLogger lines: detectron2's signature reads the loss
    # from `total_loss: ` first, `loss: x (avg)` second; a line with only the second has a loss
    lines = [
        f"2024-02-11 09:12:{s:02d},031 maskrcnn_benchmark.trainer INFO: eta: 5:41:02  iter: "
        f"{s * 20}  loss: 0.{9123 + s} (1.0467)  time: 0.2351 (0.2410)  lr: 0.020000  max mem: 3721"
        for s in (1, 3, 12, 140, 800)  # fewer than MIN_SHAPE a shape: read by the regex
    ]
    got = _values(lines)
    assert got["bulk"]["loss"] == got["line"]["loss"] == [0.9124, 0.9126, 0.9135, 0.9263, 0.9923]


@pytest.mark.parametrize(
    "line",
    [
        # mmengine's LoggerHook and torchvision's MetricLogger: `  time: ` between the fields,
        # the old torchrun failure block's `  time: ` field word (prefilter.BLOCK_TRIGGERS)
        "2023/06/12 10:00:01 - mmengine - INFO - Epoch(train) [1][ 100/1250]  lr: 4.0000e-04"
        "  eta: 1 day, 2:13:05  time: 0.3803  data_time: 0.0034  memory: 9870  loss: 0.1001",
        "Epoch: [0]  [ 100/5000]  eta: 0:49:01  lr: 0.100000  img/s: 512.3  loss: 1.0010 (1.2345)"
        "  acc1: 31.2500 (30.1)  time: 0.2500  data: 0.0010  max mem: 10427",
    ],
)
def test_a_step_line_with_a_failure_block_word_among_its_fields_is_read_in_bulk(
    line: str,
) -> None:
    many = [line.replace(" 100/", f" {100 + i}/") for i in range(MIN_SHAPE)]
    got = _values(many)
    assert got["bulk"]["loss"] == got["line"]["loss"] and not math.isnan(got["bulk"]["loss"][0])


@pytest.mark.parametrize(
    "raw",
    [
        # another rank's output glued into the progress line
        b"[default7]: iteration 5/ 10 | consumed samples: 5 |[default3]:RuntimeError: boom",
        # an earlier `\r` state with a rank prefix and a time
        b"[default1]:2024-01-02 03:04:05 step\r{'loss': 1.0, 'epoch': 0.1}",
        # ANSI colour, non-ASCII text
        b"\x1b[32m iteration 5/ 10 | consumed samples: 5 |\x1b[0m",
        " iteration 5/ 10 | consumed samples: 5 | note: \u00e9t\u00e9".encode(),
        # torchrun's failure block words
        b"  time      : 2024-01-02_03:04:05 {'loss': 1.0, 'epoch': 0.1}",
        # a failure signature's trigger beside the progress one
        b"{'loss': 1.0, 'epoch': 0.1} CUDA error: an illegal memory access was encountered",
    ],
)
def test_lines_the_bulk_path_cannot_vouch_for_go_line_by_line(raw: bytes) -> None:
    # refused at once, or taken and handed back by the bulk parse: never parsed in bulk
    collector = Collector(LIBRARY, "x.log", 2024)
    taken = collector.take(1, raw)
    cols, rejected = collector.finish()
    assert not len(cols) and rejected == ([(1, raw)] if taken else [])


def test_an_inert_progress_bar_before_a_dict_is_left_behind() -> None:
    raw = (
        b"\r 12%|\xe2\x96\x88         | 120/1000 [01:00<07:20,  2.00it/s]\r"
        + b" " * 50
        + b"\r{'loss': 1.5, 'grad_norm': 0.5, 'learning_rate': 4.9e-05, 'epoch': 0.12}"
    )
    collector = Collector(LIBRARY, "x.log", 2024)
    assert collector.take(1, raw)
    cols, rejected = collector.finish()
    assert not rejected and list(cols.values["loss"]) == [1.5]
    assert list(cols.values["grad_norm"]) == [0.5]


def test_a_prefix_is_decoded_once_and_stamps_each_line() -> None:
    lines = [
        f"[rank0]:2024-10-03 15:01:{s:02d},520 - root - INFO - step: {s}  loss:  3.9053"
        "  memory: 36.20GiB(81.50%)  wps: 1,710  mfu: 23.50%"
        for s in range(1, 4)
    ]
    collector = Collector(LIBRARY, "x.log", 2024)
    assert all(collector.take(i + 1, t.encode()) for i, t in enumerate(lines))
    cols, _ = collector.finish()
    assert cols.heads == [(None, None, 0, None)]  # torchtitan's tee header: local rank 0
    assert [round(b - a, 3) for a, b in itertools.pairwise(cols.time)] == [1.0, 1.0]
    assert list(cols.values["iteration"]) == [1.0, 2.0, 3.0]


def test_columns_must_compile_and_name_their_groups(tmp_path: Path) -> None:
    base = (
        '[[signature]]\nid = "x.step"\nkind = "iteration"\ntitle = "t"\ntrigger = ["step "]\n'
        "regex = 'step (?P<iteration>\\d+)'\nsamples = [\"step 1 loss 2\"]\n"
    )
    (tmp_path / "a.toml").write_text(base + "columns = ['loss (\\d+)']\n")
    with pytest.raises(PatternError, match="named group"):
        load_library([tmp_path])
    (tmp_path / "a.toml").write_text(base + "columns = ['loss (?P<loss>']\n")
    with pytest.raises(PatternError, match="does not compile"):
        load_library([tmp_path])


def test_a_gzipped_real_log_reads_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the sequential path (a compressed input) parses in bulk too
    src = FIXTURES / "lab" / "healthy.log"
    packed = tmp_path / "healthy.log.gz"
    packed.write_bytes(gzip.compress(src.read_bytes()))
    bulk, one = _both([str(packed)], monkeypatch)
    assert bulk == one
    plain = document(analyze([str(src)]))
    assert bulk["progress"] == plain["progress"] and bulk["training"] == plain["training"]


def test_progress_holds_only_the_first_and_latest_events() -> None:
    # a long run's iteration lines are columns, not Events: only those the timeline can ask for
    p = Progress()
    events = [
        Event(seq=i + 1, signature="s", kind="iteration", line=Line("x", i + 1, "", ""))
        for i in range(3)
    ]
    for e in events:
        p.add(e, None, math.nan)
    assert p.event(0) is events[0] and p.event(2) is events[2] and p.event(1) is None


def test_a_line_the_per_line_path_reads_otherwise_still_makes_an_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # should the per-line path not find the signature in the message left after the prefix,
    # the event carries what the bulk parse read, never a traceback
    from logscope.engine import feed as engine_module
    from logscope.engine.feed import Engine
    from logscope.scan.range_scan import RangeScan

    raw = b"[default3]: iteration       43/     100 | consumed samples:  5504 | lm loss: 1.5 |"
    collector = Collector(LIBRARY, "x.log", 2024)
    assert collector.take(7, raw)
    cols, _ = collector.finish()
    real = engine_module.matched

    def no_hit(*args: Any) -> Any:
        return [(line, None) for line, _ in real(*args)]

    monkeypatch.setattr(engine_module, "matched", no_hit)
    scan = RangeScan(matches=[], lines=7, size=len(raw), cut=[], prefixes=(), progress=cols)
    (e,) = Engine(LIBRARY).feed(scan, "x.log", events=True)
    assert e.kind == "iteration" and e.line.lineno == 7 and e.line.local_rank == 3
    assert e.fields["iteration"] == "43" and e.fields["train_iters"] == "100"
    assert float(e.fields["loss"]) == 1.5


def test_tail_gets_an_event_for_every_progress_line_read_in_bulk() -> None:
    # `tail --format json` streams each iteration line; in bulk, analyze builds none of them
    from logscope.engine.feed import Engine
    from logscope.read.sources import Block

    lines = [
        f"[default7]: iteration {it:8d}/     100 | consumed samples: {it * 64:8d} | "
        f"elapsed time per iteration (ms): 812.5 | lm loss: 2.5E+00 |"
        for it in range(1, 41)
    ]
    lines.insert(20, "[default0]:saving checkpoint at iteration      20 to /ckpt")
    block = Block(("\n".join(lines) + "\n").encode(), 1)
    events = Engine(LIBRARY).feed_block(block, "x.log", 2024)
    its = [e.fields["iteration"] for e in events if e.kind == "iteration"]
    assert its == [str(i) for i in range(1, 41)]
    assert [e.line.lineno for e in events if e.kind == "iteration"][19:21] == [20, 22]
    assert Engine(LIBRARY).feed_block(block, "x.log", 2024, events=False) == []


def test_the_states_before_a_line_are_judged_by_their_own_shape() -> None:
    # a redrawn bar says nothing; a stamped, rank-prefixed state before the same text does:
    # that one goes line by line even after the bar (its verdict is not the bar's)
    text = b"{'loss': 1.5, 'learning_rate': 4.9e-05, 'epoch': 0.12}"
    stamped = b"[default1]:2024-01-02 03:04:05 step 100"
    bar = b"\r 12%|#   | 120/1000 [01:00<07:20]".ljust(len(stamped))
    collector = Collector(LIBRARY, "x.log", 2024)
    assert collector.take(1, bar + b"\r" + text)
    assert not collector.take(2, stamped + b"\r" + text)


@pytest.mark.parametrize("glued", [False, True])
def test_runs_between_other_lines_read_as_line_by_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, glued: bool
) -> None:
    # constructed Megatron run: saves and a restart split the iteration lines into runs; with
    # `glued`, one iteration line has another rank's error glued in, so it goes line by line
    # among the bulk-parsed ones (Engine._feed_sorted then adds the runs one at a time)
    lines = ["START TIME: Tue Jan  2 03:04:05 UTC 2024"]  # a clock for the lines' times
    for i in [*range(1, 41), *range(31, 61)]:  # a restart from iteration 30
        lines.append(
            f"[default0]: iteration {i:>8}/     100 | consumed samples: {64 * i:>8} | "
            f"elapsed time per iteration (ms): 8{i % 7}0.5 | lm loss: {2 + 1 / i:.6E} |"
        )
        if i % 10 == 0:
            lines.append(f"[default0]:saving checkpoint at iteration {i:>8} to /ckpt")
            lines.append(f"[default0]:  successfully saved checkpoint at iteration {i:>8} to /ckpt")
    if glued:
        lines[21] += "[default3]:RuntimeError: CUDA error: an illegal memory access"
    path = tmp_path / "run.log"
    path.write_text("\n".join(lines) + "\n")
    bulk = analyze([str(path)])
    with monkeypatch.context() as m:
        _per_line_only(m)
        one = analyze([str(path)])
    assert document(bulk) == document(one)
    assert len(bulk.progress) == 70
    for column in ("seq", "iteration", "time", "iter_s", "loss"):
        a, b = getattr(bulk.progress, column), getattr(one.progress, column)
        assert a.tobytes() == b.tobytes(), column  # NaN equal to NaN


def test_progress_columns_come_from_one_spec() -> None:
    """Progress's per-line columns, what a bulk parse reads and what it hands over are the
    model's one list (model.progress): a column added to one and not the others fails here."""
    from array import array
    from dataclasses import fields

    from logscope.compact_column import Packed
    from logscope.model import COLUMNS, PARSED, STATED, Progress
    from logscope.scan import bulk_progress, progress_arrays

    progress = Progress()
    per_line = {
        f.name for f in fields(Progress) if isinstance(getattr(progress, f.name), array | Packed)
    }
    assert per_line == set(COLUMNS)
    assert set(STATED) <= set(COLUMNS) and set(STATED) <= set(PARSED)
    # what a bulk parse hands over, and what the engine takes from it, are those lists
    raw = b"[default3]: iteration       43/     100 | consumed samples:  5504 | lm loss: 1.5 |"
    collector = bulk_progress.Collector(LIBRARY, "x.log", 2024)
    assert collector.take(7, raw)
    cols, _ = collector.finish()
    assert list(cols.values) == list(PARSED)
    assert list(progress_arrays.ScanArrays.of(cols, 0).health) == list(STATED)


def test_a_progress_line_whose_time_is_the_line_befores_has_only_a_floor() -> None:
    def progress(rows: list[tuple[int | None, float]]) -> Progress:
        p = Progress()
        for i, (it, t) in enumerate(rows):
            line = Line("x", i + 1, "", "")
            p.add(Event(seq=i + 1, signature="s", kind="iteration", line=line), it, math.nan)
            p.time[i] = t
        return p

    # unnumbered lines (HF log dicts) given the time of the one before
    assert progress([(None, 100.0), (None, 160.0), (None, 160.0)]).time_is_floor(0, 2)
    assert not progress([(None, 100.0), (None, 160.0), (None, 220.0)]).time_is_floor(0, 2)
    # every rank prints step 7 at one stamp: the step before is what it is compared with
    ranks = progress([(6, 100.0), (7, 160.0), (7, 160.0)])
    assert not ranks.time_is_floor(0, 2)
    assert progress([(6, 160.0), (7, 160.0), (7, 160.0)]).time_is_floor(0, 2)
    # the attempt's only line is dated; so is a line that states its duration
    assert not progress([(None, 100.0)]).time_is_floor(0, 0)
    timed = progress([(None, 100.0), (None, 100.0)])
    timed.iter_s[1] = 60.0
    assert not timed.time_is_floor(0, 1)
