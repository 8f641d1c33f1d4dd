"""Sanity of the BLOOM multi-attempt run generator itself (not of logscope)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest

from tests.generators.bloom_run import HOSTS, Truth, generate

ITER = re.compile(
    r"^\[default7\]: iteration\s+(\d+)/\s*\d+ \| consumed samples:\s+\d+ \| "
    r"consumed tokens:\s+\d+ \| "
    r"elapsed time per iteration \(s\): (\d+\.\d\d) \|"
)
SAVE_MS = re.compile(r"^\[default7\]:time \(ms\) \| save-checkpoint: (\d+\.\d\d)$")
LOOP = re.compile(r"^\[default0\]:\[before the start of training step\] datetime: (.+) $")
LOADED = re.compile(r"^\[default0\]:  successfully loaded checkpoint from \S+ at iteration (\d+)$")
PULSE = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] PULSE: tr11-176B-ml is (running|waiting)"
)


@pytest.fixture(scope="module")
def run(bloom_run: tuple[Path, Truth]) -> tuple[Path, Truth, list[str]]:
    out, truth = bloom_run
    lines = (out / "main_log.txt").read_text(encoding="utf-8").splitlines()
    return out, truth, lines


def test_files_exist_and_are_small(run: tuple[Path, Truth, list[str]]) -> None:
    out, truth, _ = run
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(
        [
            "main_log.txt",
            "tr11-176B-ml-1528763.out",
            "tr11-176B-ml-1528874.out",
            "tr11-176B-ml-1528875.out",
        ]
    )
    assert sorted(truth.files) == names
    assert sum(p.stat().st_size for p in out.iterdir()) < 10 * 1024 * 1024


def test_truth_sums_to_wall(run: tuple[Path, Truth, list[str]]) -> None:
    _, t, _ = run
    parts = (
        t.productive_s,
        t.checkpointing_s,
        t.startup_s,
        t.disruption_recovery_s,
        t.wasted_progress_s,
        t.hang_s,
        t.other_s,
    )
    assert all(p >= 0 for p in parts)
    assert sum(parts) == pytest.approx(t.wall_s, abs=1e-6)
    assert t.ettr == pytest.approx(t.productive_s / t.wall_s)
    assert t.gpus == 384
    assert t.wall_s == pytest.approx((t.run_end - t.run_start).total_seconds(), abs=1e-5)
    assert [i.kind for i in t.incidents] == ["crash", "hang"]
    assert t.disruption_recovery_s == pytest.approx(sum(i.restart_s or 0 for i in t.incidents))
    # the kill switch's save and the exit after the last iteration: 40 s and 5-15 s
    assert 39 + 5 < t.other_s < 41 + 16


def test_first_attempt_wastes_about_248_iterations(run: tuple[Path, Truth, list[str]]) -> None:
    _, t, _ = run
    crash = t.incidents[0]
    assert crash.local_rank == 3
    assert crash.last_checkpoint_iteration == 500
    assert t.attempts[0].last_iteration == 748  # the GPU died during iteration 749
    assert 248 * 104 < crash.wasted_progress_s < 249 * 107
    assert crash.wasted_progress_s == pytest.approx(248.5 * t.iter_s_mean, rel=0.02)
    assert 1800 < crash.hang_s < 1800 + 40
    hang = t.incidents[1]
    assert 6 * 3600 <= hang.hang_s <= 8 * 3600 + 1
    assert hang.wasted_progress_s == pytest.approx(37 * t.iter_s_mean, rel=0.02)


def test_iterations_restart_from_the_checkpoint(run: tuple[Path, Truth, list[str]]) -> None:
    _, t, lines = run
    its = [int(m[1]) for line in lines if (m := ITER.match(line))]
    loaded = [int(m[1]) for line in lines if (m := LOADED.match(line))]
    restarts = [(a, b) for a, b in pairwise(its) if b != a + 1]
    assert its[0] == 1
    assert restarts == [(748, 501), (1037, 1001)]
    assert loaded == [500, 1000]
    assert [a.resumed_from_iteration for a in t.attempts] == [None, 500, 1000]
    assert [(a.first_iteration, a.last_iteration) for a in t.attempts] == [
        (1, 748),
        (501, 1037),
        (1001, 1280),
    ]
    assert "Detected kill switch at" in lines[-1]  # the log ends on the kill switch


def test_iteration_lines_have_no_timestamp(run: tuple[Path, Truth, list[str]]) -> None:
    _, _, lines = run
    iteration_lines = [line for line in lines if " iteration " in line and "consumed" in line]
    assert len(iteration_lines) == 748 + 537 + 280
    for line in iteration_lines:
        assert ITER.match(line), line
        assert not re.search(r"\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d", line), line
        assert line.endswith(" TFLOPs: " + line.rsplit("TFLOPs: ", 1)[1])


def test_printed_values_rebuild_the_truth_clock(run: tuple[Path, Truth, list[str]]) -> None:
    """L + printed elapsed + printed save ms reproduces U and the run's end exactly."""
    _, t, lines = run
    loops = [datetime.fromisoformat(m[1]) for line in lines if (m := LOOP.match(line))]
    assert loops == [a.loop_start for a in t.attempts]
    clock: datetime | None = None
    save_end = datetime.min
    last_save_end: list[datetime] = []
    for line in lines:
        if m := LOOP.match(line):
            if clock is not None:
                last_save_end.append(save_end)
            clock = datetime.fromisoformat(m[1])
        elif (m := ITER.match(line)) and clock is not None:
            clock += timedelta(seconds=float(m[2]))
        elif (m := SAVE_MS.match(line)) and clock is not None:
            clock += timedelta(milliseconds=float(m[1]))
            save_end = clock
    assert last_save_end == [a.useful_end for a in t.attempts[:2]]
    # the last attempt: its last iteration, then the kill switch's save
    assert clock - t.attempts[2].useful_end == timedelta(
        milliseconds=float(SAVE_MS.match(lines[-2])[1])
    )


def test_anchors_match_truth(run: tuple[Path, Truth, list[str]]) -> None:
    out, t, lines = run
    for a in t.attempts:
        text = (out / a.out_file).read_text(encoding="utf-8")
        start = re.search(r"^START TIME: (.+)$", text, re.M)
        assert start is not None
        assert datetime.strptime(start[1], "%a %b %d %H:%M:%S CET %Y") == a.start
    end1 = re.search(r"^END TIME: (.+)$", (out / t.attempts[0].out_file).read_text(), re.M)
    assert end1 is not None
    assert datetime.strptime(end1[1], "%a %b %d %H:%M:%S CET %Y") == t.attempts[0].end
    cancel = re.search(r"CANCELLED AT (\S+) \*\*\*", (out / t.attempts[1].out_file).read_text())
    assert cancel is not None
    assert datetime.fromisoformat(cancel[1]) == t.attempts[1].end
    cf = next(line for line in lines if line.startswith("  time      : "))
    cf_time = datetime.strptime(cf.split(": ", 1)[1], "%Y-%m-%d_%H:%M:%S")
    assert 1800 < (cf_time - t.incidents[0].failure_time).total_seconds() < 1810
    assert "rank      : " in lines[lines.index(cf) + 2]
    assert "(local_rank: 3)" in lines[lines.index(cf) + 2]


def test_pulse_lines_are_hourly_and_in_time_order(run: tuple[Path, Truth, list[str]]) -> None:
    _, t, lines = run
    pulses = [(datetime.fromisoformat(m[1]), m[2]) for line in lines if (m := PULSE.match(line))]
    times = [p for p, _ in pulses]
    assert times == sorted(times)
    assert all(p.minute == 0 and p.second == 0 for p in times)
    assert all((b - a) == timedelta(hours=1) for a, b in pairwise(times))
    for when, state in pulses:
        running = any(a.start <= when < a.end for a in t.attempts)
        assert state == ("running" if running else "waiting"), when
    assert "waiting" in {s for _, s in pulses}


def test_deterministic(tmp_path: Path, run: tuple[Path, Truth, list[str]]) -> None:
    out0, t0, _ = run
    again = generate(tmp_path / "again", seed=0)
    other = generate(tmp_path / "other", seed=1)
    assert again == t0
    for name in t0.files:
        assert (tmp_path / "again" / name).read_bytes() == (out0 / name).read_bytes()
    assert other.wall_s != t0.wall_s


def test_srun_and_slurmstepd_write_to_the_jobs_own_out(run: tuple[Path, Truth, list[str]]) -> None:
    out, t, lines = run
    assert not [line for line in lines if line.startswith(("srun:", "slurmstepd"))]
    crashed, hung, stopped = ((out / a.out_file).read_text().splitlines() for a in t.attempts)
    dead = t.incidents[0].host
    assert f"srun: error: {dead}: task {HOSTS.index(dead)}: Exited with exit code 1" in crashed
    assert sum(line.endswith(": Killed") for line in crashed) == 47
    assert any("*** STEP 1528763.0 ON" in line for line in crashed)
    assert crashed[-1].startswith("END TIME: ")
    assert any("*** JOB 1528874 ON" in line for line in hung)
    assert not any(line.startswith("END TIME") for line in hung)  # scancel kills the script
    assert stopped[-1].startswith("END TIME: ")
