# ruff: noqa: E501  (log lines are kept whole)
"""k2-fsa/icefall's recipes (patterns/icefall.toml and its logger header in lines.headers): lines
constructed from train.py's and icefall/utils.py's formats."""

from __future__ import annotations

from logscope.lines.decode import parse_line

from .helpers import Run, assert_root, failed_verdict

HEADER = "2024-03-02 11:{m:02d}:{s:02d},{ms:03d} {lvl} [train.py:{ln}] ({rank}/4) "
STEP = "Epoch 3, batch {b}, loss[loss=0.2113, simple_loss=0.2432, pruned_loss=0.04121, over 5432.00 frames. ], tot_loss[loss=0.2201, simple_loss=0.2517, pruned_loss=0.04377, over 1085327.16 frames. ], batch size: 56, lr: 2.10e-02, grad_scale: {scale}"


def line(m: int, rank: int, text: str, lvl: str = "INFO", ln: int = 1203) -> str:
    return HEADER.format(m=m, s=7 * rank, ms=120 + rank, lvl=lvl, ln=ln, rank=rank) + text


def test_icefalls_logger_header_gives_the_time_level_and_rank() -> None:
    (rec,) = parse_line(line(4, 3, "Grad scale is small: 0.0078125", "WARNING", 1057))
    assert (rec.rank, rec.level, rec.text) == (3, "W", "Grad scale is small: 0.0078125")
    assert rec.time is not None and (rec.time.minute, rec.time.second) == (4, 21)
    # without a process group, icefall logs no (rank/world_size)
    (rec,) = parse_line(
        "2024-03-02 11:04:21,120 INFO [asr_datamodule.py:57] About to get train cuts"
    )
    assert (rec.rank, rec.level, rec.text) == (None, "I", "About to get train cuts")


def test_a_grad_scale_below_the_raise_threshold_is_the_failure_of_no_one_rank(run: Run) -> None:
    # train.py: a warning below 0.01, then below 1e-05 bad-model-<rank>.pt and the raise
    lines = [line(m, r, STEP.format(b=100 * m, scale=0.5)) for m in range(1, 4) for r in (0, 2)]
    lines += [
        line(5, 2, "Grad scale is small: 1.2924697071141057e-26", "WARNING", 1057),
        line(5, 2, "Saving checkpoint to zipformer/exp/bad-model-2.pt", ln=75),
        line(5, 0, "Grad scale is small: 1.2924697071141057e-26", "WARNING", 1057),
        "Traceback (most recent call last):",
    ]
    doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "python_exception", inc
    assert_root(inc, path, 7, lines[6])
    # every rank's scaler collapses alike: the first to say so is not to blame
    assert inc["culprit"]["rank"] is None, inc["culprit"]
    # the steps before it are the run's progress
    assert doc["training"]["loss"] == [0.2113] * 6, doc["training"]


def test_a_small_grad_scale_the_run_outlives_is_no_failure(run: Run) -> None:
    lines = [line(m, 0, STEP.format(b=100 * m, scale=0.5)) for m in range(1, 3)]
    lines.append(line(3, 0, "Grad scale is small: 0.0078125", "WARNING", 1057))
    lines += [line(m, 0, STEP.format(b=100 * m, scale=1.0)) for m in range(4, 8)]
    code, doc, _path = run(lines)
    assert (code, doc["incidents"]) == (0, []), doc["incidents"]
    assert doc["job"]["outcome_reason"] == "the log ends while training was still progressing"
