"""Slowdowns and training health: generated runs against their truth, real logs that
must yield nothing, constructed lines of each format, and the findings through every output."""

from __future__ import annotations

import gzip
import json
import math
import random
import re
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pytest

from logscope.engine.analyze import analyze
from logscope.engine.feed import default_library
from logscope.findings.slowdowns import StepTimes, find_slowdowns
from logscope.model import (
    Analysis,
    CountDetail,
    EvidenceDetail,
    Finding,
    ScaleDetail,
    SlowdownDetail,
    SpikeDetail,
)
from logscope.render.document import document

from .generators import bloom_run
from .generators.health_run import Plan, generate
from .helpers import CORPUS_CASES, FIXTURES, corpus_logs

SEEDS = range(8)


def _run(tmp_path: Path, plan: Plan) -> tuple[object, Analysis]:
    out = tmp_path / f"run{plan.seed}"
    truth = generate(out, plan)
    return truth, analyze([str(out / "train.log")])


def _kinds(findings: tuple[Finding, ...], kind: str) -> list[Finding]:
    return [f for f in findings if f.kind == kind]


# -- slowdowns ------------------------------------------------------------------------------------

SHAPES = [
    pytest.param("within", False, 1, id="to-the-end"),
    pytest.param("within", True, 1, id="for-a-while"),
    pytest.param("restart", False, 1, id="after-a-restart"),
    pytest.param("within", False, 5, id="log-interval-5"),
]


@pytest.mark.statistical
@pytest.mark.parametrize("fraction", [0.05, 0.10])
@pytest.mark.parametrize(("mode", "transient", "interval"), SHAPES)
def test_slowdowns_of_5_percent_and_more_are_found_with_their_cost(
    tmp_path: Path, fraction: float, mode: str, transient: bool, interval: int
) -> None:
    for seed in SEEDS:
        plan = Plan(seed, fraction, mode, transient, log_interval=interval)
        truth, a = _run(tmp_path, plan)
        (want,) = truth.slowdowns  # type: ignore[attr-defined]
        (got,) = a.findings  # nothing else: no spike, no NaN in these runs
        assert got.kind == "slowdown" and got.attempt == want.attempt, (seed, got)
        assert abs(got.start_iteration - want.first_iteration) <= 10, (seed, got, want)
        assert abs(got.lost_s - want.lost_s) <= 0.10 * want.lost_s, (seed, got, want)
        assert isinstance(got.detail, SlowdownDetail), (seed, got)
        assert abs(got.detail.fraction_slower - fraction) <= 0.01, (seed, got)
        assert got.detail.hosts_joined == want.hosts_joined, (seed, got)
        assert math.isclose(got.lost_gpu_hours, got.lost_s * truth.gpus / 3600)  # type: ignore[attr-defined]
        ledger = a.ledger
        assert abs(ledger.badput_s["slowdown"] - want.lost_s) <= 0.10 * want.lost_s
        assert math.isclose(ledger.productive_s + sum(ledger.badput_s.values()), ledger.wall_s)


@pytest.mark.statistical
@pytest.mark.parametrize(("mode", "transient", "interval"), SHAPES)
def test_slowdowns_of_3_percent_are_found_in_most_runs(
    tmp_path: Path, mode: str, transient: bool, interval: int
) -> None:
    found = 0
    for seed in SEEDS:
        truth, a = _run(tmp_path, Plan(seed, 0.03, mode, transient, log_interval=interval))
        (want,) = truth.slowdowns  # type: ignore[attr-defined]
        slow = _kinds(a.findings, "slowdown")
        assert len(a.findings) == len(slow) <= 1
        found += bool(slow) and abs(slow[0].start_iteration - want.first_iteration) <= 10
    assert found >= 0.75 * len(SEEDS)


@pytest.mark.parametrize(
    ("slower", "lines", "found"),
    [(0.03, 12, False), (0.03, 40, True), (0.06, 12, True)],
    ids=["3%-for-12-lines", "3%-for-40-lines", "6%-for-12-lines"],
)
def test_a_few_percent_for_a_few_lines_is_the_machines_noise(
    slower: float, lines: int, found: bool
) -> None:
    """A warning-sized slowdown counts from MIN_LINES lines; a few percent must last longer:
    shorter, it is a neighbour's job or a page-cache flush, not a part failing slow."""
    n, lo = 300, 150
    rng = np.random.default_rng(7)
    secs = 2.0 * (1 + rng.normal(0, 0.003, n))
    secs[lo : lo + lines] *= 1 + slower
    series = StepTimes(
        attempt=0,
        rows=slice(0, n),
        seq=np.arange(n, dtype=np.int64),
        iteration=np.arange(1, n + 1, dtype=np.int64),
        covered=np.ones(n),
        seconds=secs,
        units=np.ones(n),
        time=np.cumsum(secs) + 1.7e9,
    )
    got = find_slowdowns([series], 8, {}, lambda seq: (None, None))
    assert [f.start_iteration for f in got] == ([lo + 1] if found else []), got


@pytest.mark.statistical
@pytest.mark.parametrize("plan", [Plan(), Plan(fp16=True), Plan(log_interval=5, iterations=3000)])
def test_healthy_generated_runs_have_no_finding(tmp_path: Path, plan: Plan) -> None:
    """Step-time noise of +-1.5%, one-step hiccups of +30%, the fp16 scaler calibrating at the
    start and overflowing once after each growth window: all of it is a healthy run."""
    for seed in range(12):
        plan.seed = seed
        _, a = _run(tmp_path, plan)
        assert a.findings == (), (seed, a.findings)


# -- training health ----------------------------------------------------------------------------


@pytest.mark.statistical
@pytest.mark.parametrize("interval", [1, 5])
def test_spikes_nans_and_skipped_steps_are_found_at_their_iteration(
    tmp_path: Path, interval: int
) -> None:
    for seed in SEEDS:
        plan = Plan(seed, spikes=2, nan=True, fp16=True, skip_burst=True, log_interval=interval)
        plan.collapse = seed % 2 == 1
        truth, a = _run(tmp_path, plan)
        t = truth  # type: ignore[assignment]
        near = interval  # a line covers `interval` iterations
        loss = _kinds(a.findings, "loss_spike")
        assert len(loss) == len(t.spikes), (seed, loss, t.spikes)
        for f, k in zip(loss, t.spikes, strict=True):
            assert 0 <= f.start_iteration - k < near, (seed, f, k)
            assert isinstance(f.detail, SpikeDetail), (seed, f)
            assert f.detail.peak_ratio > 1.2 and f.detail.recovered_after is not None
        grad = _kinds(a.findings, "grad_norm_spike")
        assert [f.start_iteration for f in grad] == [f.start_iteration for f in loss]
        assert all(isinstance(f.detail, SpikeDetail) for f in grad), (seed, grad)
        (nan,) = _kinds(a.findings, "nan_loss")
        first, last = t.nans[0]
        assert 0 <= nan.start_iteration - first < near and nan.end_iteration >= last, (seed, nan)
        (skips,) = _kinds(a.findings, "skipped_steps")
        b_first, _, b_count = t.skip_bursts[0]
        assert abs(skips.start_iteration - b_first) < near + 2, (seed, skips, t.skip_bursts)
        assert isinstance(nan.detail, CountDetail), (seed, nan)
        assert skips.detail == CountDetail(b_count) and skips.lost_s and skips.lost_s > 0
        collapse = _kinds(a.findings, "loss_scale_collapse")
        if t.collapse is None:
            assert collapse == [], (seed, collapse)
        else:
            (c,) = collapse
            assert 0 <= c.start_iteration - t.collapse < near + 1, (seed, c, t.collapse)
            assert isinstance(c.detail, ScaleDetail) and c.detail.fell_to < c.detail.held
        assert _kinds(a.findings, "slowdown") == []


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_megatron_fields_read_from_a_constructed_line() -> None:
    """Megatron prints its training_log fields in a fixed order, each optional; a NaN loss is
    not printed at all, the nan-iterations counter says it."""
    lib = default_library()
    sig = next(s for s in lib.signatures if s.id == "progress.megatron_iteration")
    line = (
        " [2025-02-03 04:05:06] iteration     3120/  500000 | consumed samples:      1597440 | "
        "elapsed time per iteration (ms): 2210.4 | throughput per GPU (TFLOP/s/GPU): 401.2 | "
        "learning rate: 2.990000E-04 | global batch size:   512 | loss scale: 4096.0 | "
        "grad norm: 12.775 | number of skipped iterations:   1 | number of nan iterations:   2 |"
    )
    fields = sig.match(line)
    assert fields is not None
    assert {k: fields.get(k) for k in ("iteration", "iter_ms", "batch", "loss", "loss_scale")} == {
        "iteration": "3120",
        "iter_ms": "2210.4",
        "batch": "512",
        "loss": None,
        "loss_scale": "4096.0",
    }
    assert (fields["grad_norm"], fields["skipped"], fields["nan_iters"]) == ("12.775", "1", "2")


def test_hf_trainer_nan_loss_and_spike(tmp_path: Path) -> None:
    """HF Trainer's log dicts carry no iteration: findings name their line."""
    lines = []
    for k in range(80):
        loss = 1.2 - k * 0.002
        if k == 50:
            loss = 2.9
        text = "nan" if k >= 70 else f"{loss:.4f}"
        lines.append(
            f"{{'loss': {text}, 'grad_norm': {0.8 + (k % 3) * 0.05:.2f}, "
            f"'learning_rate': 4.8e-05, 'epoch': {k / 80:.2f}}}"
        )
    a = analyze([str(_write(tmp_path / "hf.log", lines))])
    spike, nan = a.findings
    assert (spike.kind, spike.line, spike.start_iteration) == ("loss_spike", 51, None)
    assert (nan.kind, nan.line, nan.detail) == ("nan_loss", 71, CountDetail(10))


def test_deepspeed_overflow_bursts_and_routine_overflows(tmp_path: Path) -> None:
    """DeepSpeed prints a line per skipped step. The scaler's search at the start and one or two
    overflows per loss-scale window are routine; six within a few steps are a burst."""
    lines = []
    scale = 2.0**16

    def overflow(s: float, hysteresis: bool = False) -> str:
        tail = (
            ", but hysteresis is 2. Reducing hysteresis to 1"
            if hysteresis
            else f", reducing to {s / 2:g}"
        )
        return (
            "[2024-01-01 10:00:00,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] "
            f"OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {s:g}{tail}"
        )

    for _ in range(5):  # calibrating down from 2^21 before the first step line
        lines.append(overflow(scale * 32))
    for step in range(1, 401):
        if step % 100 == 50:  # routine: hysteresis spent, then one halving
            lines += [overflow(scale, True), overflow(scale)]
        if 300 <= step < 306:
            lines.append(overflow(scale))
            scale /= 2
        lines.append(
            f"[2024-01-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step={step}, "
            f"skipped={step // 100}, lr=[1e-05], mom=[(0.9, 0.95)]"
        )
    a = analyze([str(_write(tmp_path / "ds.log", lines))])
    (burst,) = a.findings
    assert (burst.kind, burst.start_iteration, burst.end_iteration) == ("skipped_steps", 300, 305)
    assert burst.detail == CountDetail(6)


# -- real logs ----------------------------------------------------------------------------------


def _spiking() -> set[Path]:
    """The BigScience chronicle excerpts that show a spike (test_bigscience checks them)."""
    listed = FIXTURES / "bigscience" / "expected.toml"
    cases = tomllib.loads(listed.read_text())["excerpt"]
    return {listed.parent / c["file"] for c in cases if c["spikes"]}


def _real_logs() -> list[Path]:
    spiking = _spiking()
    fixtures = [
        p
        for p in sorted(FIXTURES.rglob("*"))
        if p.is_file() and p.suffix in (".log", ".out", ".gz", ".txt") and p not in spiking
    ]
    corpus = sorted(CORPUS_CASES.glob("*/log.txt"))  # beside the clone in CI only
    return fixtures + corpus


CONFIG_KINDS = {"hang_exposure", "gloo_on_gpu", "duplicate_gpu", "mixed_gpu_memory"}


@pytest.mark.sweep
@pytest.mark.parametrize("path", _real_logs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_finding_on_real_logs(path: Path) -> None:
    """Real torchrun and SLURM runs made here, public DeepSpeed runs with routine fp16 overflows,
    and every corpus log: none slowed down, spiked or went NaN. A configuration finding only
    where the log holds its evidence lines."""
    found = analyze([str(path)]).findings
    assert [f for f in found if f.kind not in CONFIG_KINDS] == []
    text = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    for f in found:
        assert isinstance(f.detail, EvidenceDetail), f
        assert f.detail.lines and all(t.encode() in text for _, _, t in f.detail.lines), f


def test_corpus_is_there_in_ci() -> None:
    """The real-log test above reads the corpus where it is: CI must have it."""
    assert corpus_logs()


# -- outputs ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_bloom_like_run_with_a_slowdown_through_every_output(tmp_path: Path, run_cli) -> None:
    truth = bloom_run.generate(tmp_path, slowdown=(3, 1100, 0.05))
    code, out, _ = run_cli("analyze", str(tmp_path))
    assert code == 1  # its two failures; a finding alone would not change the exit status
    assert "Findings  2 without an incident; slowdowns cost" in out  # and its hang exposure
    assert re.search(r"\nslowdown +Steps \+5.0% slower from iteration 1100", out)
    step = next(line for line in out.splitlines() if line.startswith("step time"))
    assert any(c in step for c in "▇█") and "s/iteration" in step
    _, out, _ = run_cli("analyze", str(tmp_path), "--format", "json")
    doc = json.loads(out)
    (f,) = [f for f in doc["findings"] if f["kind"] == "slowdown"]
    assert (f["attempt"], f["start_iteration"]) == (2, 1100)
    assert abs(f["lost_s"] - truth.slowdown_s) <= 0.05 * truth.slowdown_s
    assert doc["ledger"]["badput_s"]["slowdown"] > 0
    training = doc["training"]
    assert set(training) == {"attempt", "iteration", "step_s", "loss", "grad_norm"}
    assert sorted(set(training["attempt"])) == [0, 1, 2]
    _, out, _ = run_cli("analyze", str(tmp_path), "--format", "md")
    assert (
        "## Findings" in out
        and "| warning | slowdown | Steps +5.0% slower from iteration 1100" in out
    )
    reports = tmp_path / "reports"
    run_cli("analyze", str(tmp_path), "--html", "--out", str(reports))
    (page,) = reports.glob("*.html")
    html = page.read_text()
    for chart in ("step time", "loss", "gradient norm"):
        assert f'aria-label="{chart} against iterations"' in html
    assert html.count('class="series a') == 9  # three charts, three attempts each
    assert '<rect class="finding slowdown"' in html and "<script src" not in html


def test_finding_text_is_escaped_in_html(tmp_path: Path, run_cli) -> None:
    """A file name is log-controlled text too: it reaches the findings table escaped."""
    d = tmp_path / "<b>x"
    generate(d, Plan(seed=1, nan=True))
    reports = tmp_path / "reports"
    run_cli("analyze", str(d / "train.log"), "--html", "--out", str(reports))
    html = next(reports.glob("*.html")).read_text()
    assert "&lt;b&gt;x/train.log:" in html and "<b>x" not in html


def test_document_lists_findings_in_the_order_they_began(tmp_path: Path) -> None:
    _, a = _run(tmp_path, Plan(seed=2, slowdown=0.05, spikes=2, nan=True))
    starts = [f["start_iteration"] for f in document(a)["findings"]]
    assert starts == sorted(starts) and len(starts) >= 4


def test_a_finding_alone_leaves_the_exit_status_of_a_healthy_run(tmp_path: Path, run_cli) -> None:
    generate(tmp_path, Plan(seed=5, slowdown=0.10, spikes=1, nan=True))
    code, out, _ = run_cli("analyze", str(tmp_path / "train.log"))
    assert code == 0, out
    assert "no incident found; 4 findings, slowdowns cost" in out


@pytest.mark.parametrize("level", [0.0, -0.4])
def test_a_loss_at_or_below_zero_has_no_spike_ratio(tmp_path: Path, level: float) -> None:
    """A policy or reward loss that sits at zero or below (RL objectives) before a jump has no
    baseline a ratio can be taken to: no spike, and no division by zero."""
    rng = random.Random(3)
    losses = [level + rng.uniform(-1e-3, 1e-3) * (level != 0) for _ in range(400)]
    losses[300] = 2.5
    lines = [
        f" iteration {it:8d}/  100000 | elapsed time per iteration (ms): 1000.0 | lm loss: "
        f"{v:.6E} | number of skipped iterations:   0 |"
        for it, v in enumerate(losses, 1)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = analyze([str(_write(tmp_path / "rl.log", lines))]).findings
    assert not [f for f in found if f.kind == "loss_spike"], found


@pytest.mark.parametrize("shape", ["uniform", "gauss", "lognormal"])
def test_noise_alone_makes_no_spike(tmp_path: Path, shape: str) -> None:
    """20,000 steps of independent noise, even a per-step gradient norm with a heavy tail
    (lognormal, sigma 0.5: 5x its median about once in 1,400 steps): no spike, no slowdown."""
    rng = random.Random(7)
    draw = {
        "uniform": lambda: rng.uniform(2, 3),
        "gauss": lambda: rng.gauss(2.5, 0.1),
        "lognormal": lambda: 2 * rng.lognormvariate(0, 0.1),
    }[shape]
    lines = [
        f" iteration {it:8d}/  100000 | consumed samples: {it * 8:12d} | elapsed time per "
        f"iteration (ms): {rng.uniform(990, 1010):.1f} | learning rate: 1.0E-04 | global batch "
        f"size:     8 | lm loss: {draw():.6E} | grad norm: {rng.lognormvariate(0, 0.5):.3f} | "
        "number of skipped iterations:   0 | number of nan iterations:   0 |"
        for it in range(1, 20_001)
    ]
    assert analyze([str(_write(tmp_path / "noise.log", lines))]).findings == ()
