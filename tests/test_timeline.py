# ruff: noqa: E501  (real log lines are kept whole)
"""Attempts and clocks: each anchor format, unfinished saves, the attempt splitter."""

from __future__ import annotations

import math
import os
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from logscope.analysis.slurm_jobs import job_in_name
from logscope.analysis.timeline import zeroed
from logscope.engine.analyze import analyze

from .helpers import child_failed_block

ITER = (
    "[default7]: iteration {it:8d}/  115311 | consumed samples: {s:12d} | elapsed time per "
    "iteration (s): 100.00 | learning rate: 5.969E-05 | global batch size:  2048 | lm loss: "
    "2.463556E+00 | grad norm: 0.174 |"
)


def iters(first: int, last: int) -> list[str]:
    return [ITER.format(it=i, s=i * 2048) for i in range(first, last + 1)]


def run(tmp_path: Path, *files: tuple[str, list[str]]):
    for name, lines in files:
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    return analyze([str(tmp_path / name) for name, _ in files])


# Each anchor format, as a line before three iteration lines of 100 s: the third ends 300 s after.
ANCHORS = [
    ("megatron print_datetime", "[default0]:[before the start of training step] datetime: 2022-03-21 13:20:00 "),
    ("PULSE status line", "[2022-03-21 13:20:00] PULSE: tr11-176B-ml is running for 1:00:00 since 2022-03-21T12:20:00 (1528763 on 'gpu_p5' partition (jean-zay-iam[01-34,36-49])"),
    ("START TIME (date, zone name)", "START TIME: Mon Mar 21 13:20:00 CET 2022"),
    ("c10 glog stamp", "[default0]:[rank0]:[W321 13:20:00.123456789 Utils.hpp:137] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())"),
    ("torch._logging stamp", "W0321 13:20:00.000000 1359 torch/distributed/elastic/multiprocessing/api.py:897] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded"),
    ("DeepSpeed asctime", "[default0]:[2022-03-21 13:20:00,000] [INFO] [logging.py:69:log_dist] [Rank 0] step=0, skipped=0, lr=[5e-05], mom=[[0.9, 0.999]]"),
    ("torchtitan ISO prefix", "2022-03-21 13:20:00,000 - root - INFO - Training starts at step 1"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "anchor"), ANCHORS, ids=[a[0] for a in ANCHORS])
def test_anchor_places_stampless_iterations(tmp_path: Path, name: str, anchor: str) -> None:
    a = run(tmp_path, ("log.txt", [anchor, *iters(1, 3)]))
    (attempt,) = a.attempts
    # stamps without a year (c10, glog) take it from the file: compare the rest
    assert attempt.loop_start.replace(year=2022) == datetime(2022, 3, 21, 13, 20, 0), name
    assert attempt.last_progress.replace(year=2022) == datetime(2022, 3, 21, 13, 25, 0), name


@pytest.mark.parametrize(
    "end_line",
    [
        "slurmstepd: error: *** JOB 1528763 ON jean-zay-iam01 CANCELLED AT 2022-03-21T14:25:00 ***",
        "END TIME: Mon Mar 21 14:25:00 CET 2022",
    ],
)
def test_end_anchor_after_silence_makes_a_hang(tmp_path: Path, end_line: str) -> None:
    lines = [ANCHORS[0][1], *iters(1, 3), end_line]
    a = run(tmp_path, ("log.txt", lines))
    (attempt,) = a.attempts
    assert attempt.end == datetime(2022, 3, 21, 14, 25, 0)
    # an hour without progress or error before the end: hung, whoever ended it
    assert a.job.outcome.value == "hung"
    assert a.verdict is not None and a.verdict.category == "hang"


def test_torchrun_block_time_is_an_anchor(tmp_path: Path) -> None:
    block = child_failed_block(
        "train.py",
        time="2022-03-21_13:40:00",
        host="node01",
        rank=3,
        local_rank=3,
        exitcode=-9,
        pid=4711,
    )
    a = run(tmp_path, ("log.txt", [ANCHORS[0][1], *iters(1, 3), *block]))
    (attempt,) = a.attempts
    assert attempt.end == datetime(2022, 3, 21, 13, 40, 0)


def test_save_without_completion_is_no_checkpoint(tmp_path: Path) -> None:
    lines = [
        ANCHORS[0][1],
        *iters(1, 2),
        "[default0]:saving checkpoint at iteration       2 to /ckpt",
        "[default0]:  successfully saved checkpoint at iteration       2 to /ckpt",
        "[default7]:time (ms) | save-checkpoint: 30000.00",
        *iters(3, 4),
        "[default0]:saving checkpoint at iteration       4 to /ckpt",
        "[default3]:  what():  CUDA error: unknown error",
    ]
    a = run(tmp_path, ("log.txt", lines))
    (attempt,) = a.attempts
    assert [s.iteration for s in attempt.saves] == [2]
    assert attempt.saves[0].duration_s == 30.0
    assert attempt.unfinished_saves == (4,)
    (inc,) = a.ledger.incidents
    assert inc.last_checkpoint_iteration == 2
    # from the save's completion (200 s + 30 s) to the failure during iteration 5 (~450 s)
    assert 200 <= inc.wasted_progress_s <= 300


BANNER = [
    "*****************************************",
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ",
]  # fmt: skip


@pytest.mark.parametrize(
    ("second_start", "boundary"),
    [
        (BANNER, "launch"),
        (["[default0]: loading checkpoint from /ckpt at iteration 2"], "checkpoint_load"),
        (["START TIME: Mon Mar 21 16:00:00 CET 2022"], "start"),
        ([], "iteration_reset"),
    ],
)
def test_attempt_splitter(tmp_path: Path, second_start: list[str], boundary: str) -> None:
    lines = [ANCHORS[0][1], *iters(1, 5), *second_start, *iters(3, 8)]
    a = run(tmp_path, ("main_log.txt", lines))
    attempts = a.attempts
    assert [(x.first_iteration, x.last_iteration) for x in attempts] == [(1, 5), (3, 8)]
    assert attempts[1].boundary == boundary
    assert a.job.first_iteration == 1 and a.job.last_iteration == 8


def test_every_rank_logging_the_same_step_is_one_attempt(tmp_path: Path) -> None:
    # a run that does not filter its ranks' logs prints each step once per rank
    step = (
        "[rank{r}]:2025-03-02 10:{m:02d}:0{r},000 - INFO - step: {it:3d}  loss:  2.1031  tps: 1,204"
    )
    lines = [step.format(r=r, m=i, it=10 * i) for i in range(1, 6) for r in (2, 0, 3, 1)]
    a = run(tmp_path, ("log.txt", lines))
    assert [(x.first_iteration, x.last_iteration) for x in a.attempts] == [(10, 50)]
    # a step below the last one is still a restart
    a = run(tmp_path, ("log2.txt", [*lines, step.format(r=0, m=9, it=20)]))
    assert [x.boundary for x in a.attempts] == ["start", "iteration_reset"]


def test_one_attempt_per_file_and_companion_out_files(tmp_path: Path) -> None:
    a = run(
        tmp_path,
        ("a-1.out", ["START TIME: Mon Mar 21 13:10:00 CET 2022"]),
        ("a-2.out", ["START TIME: Mon Mar 21 16:00:00 CET 2022", "END TIME: Mon Mar 21 17:00:00 CET 2022"]),
        ("main_log.txt", [ANCHORS[0][1], *iters(1, 5), "[default0]:[before the start of training step] datetime: 2022-03-21 16:10:00 ", *iters(3, 8)]),
    )  # fmt: skip
    attempts = a.attempts
    assert [(x.first_iteration, x.last_iteration) for x in attempts] == [(1, 5), (3, 8)]
    assert attempts[0].start == datetime(2022, 3, 21, 13, 10, 0)
    assert attempts[1].start == datetime(2022, 3, 21, 16, 0, 0)
    assert attempts[1].end == datetime(2022, 3, 21, 17, 0, 0)
    assert a.ledger.badput_s["startup"] == 600


def test_status_lines_are_not_progress(tmp_path: Path) -> None:
    pulse = "[2022-03-21 {h}:00:00] PULSE: tr11-176B-ml is running for 1:00:00 since 2022-03-21T12:20:00 (1528763 on 'gpu_p5' partition (jean-zay-iam[01-34,36-49])"
    lines = [ANCHORS[0][1], *iters(1, 3), *(pulse.format(h=h) for h in (14, 15, 16, 17))]
    a = run(tmp_path, ("log.txt", lines))
    assert len(a.progress) == 3
    assert a.job.last_iteration == 3
    # the job kept saying "running" while making no progress: a hang
    assert a.job.outcome.value == "hung"


def test_a_monitor_stamp_inside_the_first_iteration_does_not_delay_it(tmp_path: Path) -> None:
    # the loop starts at 13:20:00; a monitor writes its PULSE line at 13:21:00, during the first
    # 100 s iteration: that iteration still ends at 13:21:40, not 100 s after the PULSE
    pulse = "[2022-03-21 13:21:00] PULSE: tr11-176B-ml is running for 1:00:00 since 2022-03-21T12:20:00 (1528763 on 'gpu_p5' partition (jean-zay-iam[01-34,36-49])"
    a = run(tmp_path, ("log.txt", [ANCHORS[0][1], pulse, *iters(1, 3)]))
    (attempt,) = a.attempts
    assert attempt.loop_start == datetime(2022, 3, 21, 13, 20, 0)
    assert attempt.last_progress == datetime(2022, 3, 21, 13, 25, 0)


LOOP = "[default0]:[before the start of training step] datetime: 2022-03-21 {}:00:00 "
PULSE = "[2022-03-21 {h}:00:00] PULSE: train is running for 1:00:00 since 2022-03-21T16:00:00 (12 on 'gpu' partition (node[01-02])"
CRASH = [
    "[default5]:terminate called after throwing an instance of 'c10::CUDAError'",
    "[default5]:  what():  CUDA error: unknown error",
]


def _two_jobs(tmp_path: Path, crash_out: list[str]) -> object:
    """Job 11 crashes on local rank 5 after iteration 5; job 12 resumes at 16:00 and goes silent
    after iteration 9 until someone cancels it at 20:00. srun's own messages are in each job's
    `.out`, not in the main log."""
    return run(
        tmp_path,
        ("main_log.txt", [LOOP.format(13), *iters(1, 5), *CRASH, LOOP.format(16), *iters(3, 9)]),
        ("train-11.out", ["START TIME: Mon Mar 21 12:50:00 CET 2022", *crash_out, "END TIME: Mon Mar 21 14:00:00 CET 2022"]),
        ("train-12.out", [
            "START TIME: Mon Mar 21 15:50:00 CET 2022",
            "slurmstepd: error: *** JOB 12 ON node01 CANCELLED AT 2022-03-21T20:00:00 ***",
        ]),
    )  # fmt: skip


def test_a_jobs_out_lines_stay_in_its_own_attempt(tmp_path: Path) -> None:
    a = _two_jobs(
        tmp_path,
        [
            "srun: error: node03: task 2: Exited with exit code 1",
            "srun: error: node01: tasks 0-1,3: Killed",
            "slurmstepd: error: *** STEP 11.0 ON node01 CANCELLED AT 2022-03-21T13:59:00 ***",
        ],
    )
    crash, hang = a.incidents
    ledger = a.ledger
    assert [(r.incident, r.attempt, r.kind) for r in ledger.incidents] == [
        (crash.id, 0, "crash"),
        (hang.id, 1, "hang"),
    ]
    # the srun lines and the step banner are the crash's consequences, not a failure of job 12
    assert "unknown error" in crash.title and crash.culprit and crash.culprit.local_rank == 5
    assert {e.line.path.rsplit("/", 1)[-1] for e in (*crash.cascade, *crash.evidence)} >= {
        "train-11.out"
    }
    # the hang: rooted at the last progress line of job 12, its cancel banner the evidence
    assert hang.category == "hang" and hang.iteration == 9
    assert hang.root_cause.kind == "iteration"
    assert [e.line.path.rsplit("/", 1)[-1] for e in hang.evidence] == ["train-12.out"]
    assert a.job.outcome.value == "hung"
    assert a.verdict is hang  # the failure that ended the run explains it


def test_a_finished_run_leads_with_its_costliest_failure(tmp_path: Path) -> None:
    a = run(
        tmp_path,
        ("main_log.txt", [
            LOOP.format(13), *iters(1, 5), *CRASH,  # ~100 s lost: no checkpoint, 1 iteration
            LOOP.format(16), *iters(1, 9),  # from scratch again: 9 iterations, then 4 h silent
            *(PULSE.format(h=h) for h in (17, 18, 19, 20)),  # while the job still runs
            LOOP.format(21), *iters(1, 4),
            "[default0]:[Detected kill switch at /work/kill-switch. Exiting] datetime: 2022-03-21 21:07:00 ",
        ]),
    )  # fmt: skip
    crash, hang = a.incidents
    assert ("unknown error" in crash.title, hang.category) == (True, "hang")
    assert a.job.outcome.value == "completed"
    costs = {
        r.incident: r.lost_gpu_hours or r.wasted_progress_s + r.hang_s for r in a.ledger.incidents
    }
    assert costs[hang.id] > costs[crash.id]
    assert a.verdict is hang


@pytest.mark.parametrize("last", [False, True], ids=["middle attempt", "last attempt"])
def test_a_hang_ended_by_srun_killing_the_tasks_is_a_hang(tmp_path: Path, last: bool) -> None:
    # job 12 goes silent after iteration 9 (16:15); at 20:00 srun kills its tasks
    later = [LOOP.format(21), *iters(8, 10)] if not last else []
    a = run(
        tmp_path,
        ("main_log.txt", [LOOP.format(16), *iters(1, 9), *later]),
        ("train-12.out", [
            "START TIME: Mon Mar 21 15:50:00 CET 2022",
            "srun: error: node01: tasks 0-7: Killed",
            "END TIME: Mon Mar 21 20:00:00 CET 2022",
        ]),
    )  # fmt: skip
    (hang,) = a.incidents
    assert hang.category == "hang" and hang.iteration == 9, hang
    assert [e.line.text for e in hang.evidence] == ["srun: error: node01: tasks 0-7: Killed"]
    (row,) = a.ledger.incidents
    assert row.kind == "hang" and 3.7 * 3600 < row.hang_s < 3.8 * 3600
    if last:
        assert a.job.outcome.value == "hung"


def test_an_attempt_stopped_during_a_long_save_did_not_hang(tmp_path: Path) -> None:
    # saves take 5 min here; the time limit strikes 10 min into a save, 10 min after the last
    # iteration: longer than training allows (5 x 100 s) but well within what a save does
    save = [
        "[default0]:saving checkpoint at iteration       {it} to /ckpt",
        "[default0]:  successfully saved checkpoint at iteration       {it} to /ckpt",
        "[default7]:time (ms) | save-checkpoint: 300000.00",
    ]
    lines = [
        LOOP.format(13),
        *iters(1, 2),
        *(x.format(it=2) for x in save),
        *iters(3, 4),
        save[0].format(it=4),
        "slurmstepd: error: *** JOB 11 ON node01 CANCELLED AT 2022-03-21T13:21:40 DUE TO TIME LIMIT ***",
    ]
    a = run(tmp_path, ("main_log.txt", lines))
    (attempt,) = a.attempts
    assert attempt.ended_saving
    assert a.job.outcome.value == "timelimit", a.job
    (inc,) = a.incidents
    assert inc.category == "timelimit"


@pytest.mark.parametrize(
    ("name", "job"),
    [
        ("slurm-4711.out", "4711"),
        ("slurm-4711_3.out", "4711"),  # an array task: %A_%a
        ("tr11-176B-ml-1528874.out", "1528874"),
        ("train.12345.err", "12345"),
        ("logs/run-4711.out.gz", "4711"),
        ("main_log.txt", None),
        ("job.out", None),
    ],
)
def test_the_job_an_output_file_is_named_after(name: str, job: str | None) -> None:
    assert job_in_name(name) == job


def test_a_stampless_out_goes_to_the_job_its_name_says(tmp_path: Path) -> None:
    # job 4711's .out has no time at all; the main log says which attempt job 4711 was
    a = run(
        tmp_path,
        ("main_log.txt", [
            LOOP.format(13), *iters(1, 5), "srun: Terminating StepId=4711.0",
            LOOP.format(16), *iters(3, 9),
        ]),
        ("slurm-4711.out", ["srun: error: node02: task 1: Out Of Memory"]),
    )  # fmt: skip
    first, second = a.attempts
    assert (first.job_id, second.job_id) == ("4711", None)
    (oom,) = a.incidents
    assert oom.root_cause.line.path.endswith("slurm-4711.out")
    assert [(r.incident, r.attempt) for r in a.ledger.incidents] == [(oom.id, 0)]


def test_zeroed_is_nan_to_num() -> None:
    # the shortcut for all-finite seconds must not change what a NaN or an infinity becomes
    cases = ([1.5, 2.0], [1.5, math.nan], [math.nan] * 3, [math.inf, 1.0], [-math.inf], [])
    for values in (*cases, [math.nan, math.inf, -0.0]):
        x = np.array(values, dtype=np.float64)
        assert np.array_equal(zeroed(x), np.nan_to_num(x))


@pytest.mark.parametrize(("written", "year"), [((2026, 1, 3), 2025), ((2026, 12, 31), 2026)])
def test_a_glog_day_later_than_the_file_was_written_is_last_years(
    tmp_path: Path, written: tuple[int, int, int], year: int
) -> None:
    # c10's header states month and day only: the year is the file's, unless that day is still
    # to come in the year the file was written (a log of late December read in January)
    f = tmp_path / "job.log"
    f.write_text(
        "[rank1]:[W1229 22:06:38.480071392 ProcessGroupNCCL.cpp:1662] [PG ID 0 PG GUID 0 Rank 1] "
        'Failed to check the "should dump" flag on TCPStore, with error: Broken pipe\n'
    )
    stamp = datetime(*written, 12, 0).timestamp()
    os.utime(f, (stamp, stamp))
    a = analyze([str(f)])
    assert a.job.start is not None and a.job.start.year == year, a.job
