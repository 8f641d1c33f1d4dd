"""The lost-compute ledger and checkpoint advice, against a generated run's truth and real runs."""

from __future__ import annotations

import io
import math
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logscope.analysis.ledger import advise, build_ledger, daly, young
from logscope.engine.analyze import analyze
from logscope.model import Analysis, Attempt, Ledger, Save, gpu_hours_of
from logscope.render.terminal import render as render_terminal

from .generators.bloom_run import Truth, generate
from .helpers import FIXTURES

BUCKETS = {
    "wasted_progress": "wasted_progress_s",
    "hang": "hang_s",
    "disruption_recovery": "disruption_recovery_s",
    "checkpointing": "checkpointing_s",
    "startup": "startup_s",
}


def _close(got: float | None, want: float, rel: float = 0.02) -> bool:
    return got is not None and abs(got - want) <= rel * abs(want) + 1e-6


@pytest.fixture(scope="module", params=[0, 1, 2])
def bloom_analysis(request, tmp_path_factory) -> tuple[Truth, Analysis]:
    out = tmp_path_factory.mktemp(f"bloom{request.param}")
    truth = generate(out, seed=request.param)
    return truth, analyze([str(out)])


@pytest.fixture
def bloom(bloom_analysis) -> tuple[Truth, Ledger]:
    truth, analysis = bloom_analysis
    return truth, analysis.ledger


def test_the_story_of_a_three_job_run(bloom_analysis) -> None:
    """A GPU dies in job 1, job 2 hangs until scancel, job 3 stops at the kill switch: two
    failures, each in its own job, and the costliest leads."""
    truth, a = bloom_analysis
    crash, hang = a.incidents
    dead = truth.incidents[0]
    assert (crash.category, crash.culprit.rank, crash.culprit.host) == (
        "gpu_hardware",
        dead.rank,
        f"{dead.host}.idris.fr",
    )
    assert hang.category == "hang" and hang.root_cause.kind == "iteration"
    assert hang.iteration == truth.attempts[1].last_iteration
    # every line of a job's .out stays in that job's incident
    for inc, attempt in ((crash, truth.attempts[0]), (hang, truth.attempts[1])):
        outs = {
            Path(e.line.path).name
            for e in (inc.root_cause, *inc.cascade, *inc.evidence)
            if e.line.path.endswith(".out")
        }
        assert outs == {attempt.out_file}, (inc.id, outs)
    assert a.job.outcome.value == "completed"  # the kill switch: stopped on purpose
    # srun's task exits in job 1's .out come before the run's completion in job 3: not its exit
    assert a.job.exit_code is None
    ledger = a.ledger
    costliest = max(ledger.incidents, key=lambda r: r.lost_gpu_hours or 0.0)
    assert a.verdict is not None and a.verdict.id == costliest.incident
    advice = a.advice
    assert advice.interval_iterations == truth.save_interval_iterations
    assert any(w.label == "now" for w in advice.what_if)
    text = io.StringIO()
    render_terminal(a, text)
    head = text.getvalue().split("\n\nIncident ")[0]
    assert "2 failures cost" in head and head.count("GPU-h (") == 2, head
    assert head.index(costliest.incident + " ") < head.index(
        next(r.incident for r in ledger.incidents if r is not costliest) + " "
    )


def test_run_figures_within_2_percent(bloom) -> None:
    truth, ledger = bloom
    assert ledger.gpus == truth.gpus
    assert _close(ledger.wall_s, truth.wall_s), (ledger.wall_s, truth.wall_s)
    assert _close(ledger.productive_s, truth.productive_s)
    assert _close(ledger.ettr, truth.ettr)
    for bucket, name in BUCKETS.items():
        assert _close(ledger.badput_s[bucket], getattr(truth, name)), bucket
    assert ledger.badput_s["other"] <= 0.02 * truth.wall_s


def test_incident_figures_within_2_percent(bloom) -> None:
    truth, ledger = bloom
    assert [i.kind for i in ledger.incidents] == [i.kind for i in truth.incidents]
    for got, want in zip(ledger.incidents, truth.incidents, strict=True):
        assert _close(got.wasted_progress_s, want.wasted_progress_s), (got, want)
        assert _close(got.hang_s, want.hang_s), (got, want)
        assert want.restart_s is not None and _close(got.restart_s, want.restart_s)
        assert got.last_checkpoint_iteration == want.last_checkpoint_iteration
        lost = (want.wasted_progress_s + want.hang_s + want.restart_s) * truth.gpus / 3600
        assert _close(got.lost_gpu_hours, lost)


def test_mtbf_7d_advises_about_66_iterations(tmp_path: Path, analyze_json, run_cli) -> None:
    truth = generate(tmp_path)
    code, out, err = run_cli("analyze", str(tmp_path), "--mtbf", "7d", "--format", "json")
    assert code == 1, err
    import json

    advice = json.loads(out)["checkpoint_advice"]
    assert advice["mtbf_source"] == "given"
    assert advice["mtbf_s"] == 7 * 86400
    assert 39 <= advice["save_s"] <= 41
    # the kill switch's save on the way out is no interval
    assert advice["interval_iterations"] == truth.save_interval_iterations
    now = [w for w in advice["what_if"] if w["label"] == "now"]
    assert {w["interval_iterations"] for w in now} == {truth.save_interval_iterations}
    assert {w["detection_s"] for w in now} == {60, advice["detection_s"]}
    assert 65 <= advice["young_interval_iterations"] <= 67, advice
    assert "(66 iterations)" in advice["verdict"], advice["verdict"]


def test_young_and_daly() -> None:
    assert young(40, 7 * 86400) == pytest.approx(math.sqrt(2 * 40 * 604800))
    # Daly's interval is a little below Young's for C << M, and M for C >= 2M
    assert young(40, 604800) - 60 < daly(40, 604800) < young(40, 604800)
    assert daly(100, 40) == 40


def test_real_two_attempt_run_wastes_the_redone_iterations() -> None:
    """Attempt 1 died in iteration 17, 6 iterations after its checkpoint at 10; attempt 2
    resumed from 10 and redid 11-16 (tests/fixtures/slurm/two_attempts, a real SLURM run)."""
    analysis = analyze([str(FIXTURES / "slurm" / "two_attempts")])
    attempts = analysis.attempts
    ledger = analysis.ledger
    assert [(a.first_iteration, a.last_iteration, a.resumed_from) for a in attempts] == [
        (1, 16, None),
        (11, 40, 10),
    ]
    (inc,) = ledger.incidents
    redone = attempts[0].last_iteration - attempts[1].resumed_from
    iteration_s = analysis.progress.median_interval_s()
    # the failure came during the next iteration: at most one more iteration of lost work
    assert redone * iteration_s <= inc.wasted_progress_s <= (redone + 1) * iteration_s
    assert inc.last_checkpoint_iteration == 10
    assert inc.restart_s is not None and inc.restart_s > 0


# -- invariants ----------------------------------------------------------------------------------

T0 = datetime(2026, 1, 1)


@st.composite
def runs(draw) -> tuple[list[Attempt], dict[int, tuple[str, None]]]:
    n = draw(st.integers(1, 4))
    t = draw(st.floats(0, 1000))
    attempts = []
    endings: dict[int, tuple[str, None]] = {}
    for i in range(n):
        start = t
        loop = start + draw(st.floats(0, 3600))
        saves = []
        s = loop
        for _ in range(draw(st.integers(0, 4))):
            s += draw(st.floats(1, 5000))
            d = draw(st.floats(0, 100))
            saves.append(Save(None, T0 + timedelta(seconds=s), T0 + timedelta(seconds=s + d), d))
            s += d
        last = s + draw(st.floats(0, 5000))
        end = last + draw(st.floats(0, 20000))
        attempts.append(
            Attempt(
                index=i,
                input=0,
                first_seq=i * 100,
                last_seq=i * 100 + 99,
                boundary="launch",
                start=T0 + timedelta(seconds=start),
                loop_start=T0 + timedelta(seconds=loop),
                end=T0 + timedelta(seconds=end),
                last_progress=T0 + timedelta(seconds=last),
                first_iteration=1,
                last_iteration=2,
                resumed_from=None,
                saves=tuple(saves),
                unfinished_saves=(),
                progress=(0, 1),
                last_event=None,
            )
        )
        if i < n - 1 or draw(st.booleans()):
            endings[i] = (draw(st.sampled_from(["crash", "hang", "end"])), None)
        t = end + draw(st.floats(0, 20000))
    return attempts, endings


@pytest.mark.hypothesis
@settings(max_examples=200, deadline=None)
@given(runs(), st.none() | st.floats(1, 1000))
def test_ledger_buckets_are_non_negative_and_sum_to_wall(run, cadence) -> None:
    attempts, endings = run
    ledger = build_ledger(attempts, endings, 8, cadence)
    assert ledger is not None
    assert ledger.productive_s >= 0
    assert all(v >= -1e-6 for v in ledger.badput_s.values()), ledger.badput_s
    total = ledger.productive_s + sum(ledger.badput_s.values())
    assert total == pytest.approx(ledger.wall_s, rel=1e-9, abs=1e-6)
    for inc in ledger.incidents:
        assert inc.wasted_progress_s >= 0 and inc.hang_s >= 0
        assert inc.restart_s is None or inc.restart_s >= 0
    advice = advise(attempts, ledger, cadence, None)
    assert advice.overhead_now is None or advice.overhead_now > 0


def test_gpu_hours_of_is_wall_time_times_gpus() -> None:
    # the 7.3 h the brief's run lost, on 384 GPUs
    assert gpu_hours_of(7.3 * 3600, 384) == pytest.approx(2803.2)
    assert gpu_hours_of(None, 8) is None
    assert gpu_hours_of(60.0, None) is None
