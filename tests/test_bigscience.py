"""Real BigScience material (tests/fixtures/bigscience, Apache-2.0, see expected.toml): each
chronicle excerpt yields what the chronicle says happened (its spikes at their iterations, its
GPU failure), healthy excerpts yield nothing; and the short-excerpt spike rule on constructed
lines: an order of magnitude against the first lines, not less, and not at training's start."""

from __future__ import annotations

import tomllib
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from logscope.engine.analyze import analyze
from logscope.model import SpikeDetail

FIXTURES = Path(__file__).parent / "fixtures" / "bigscience"
EXPECTED: list[dict[str, Any]] = tomllib.loads((FIXTURES / "expected.toml").read_text())["excerpt"]
SPIKES = ("loss_spike", "grad_norm_spike")


@pytest.mark.parametrize("case", EXPECTED, ids=[c["file"] for c in EXPECTED])
def test_chronicle_excerpt(case: dict[str, Any]) -> None:
    a = analyze([str(FIXTURES / case["file"])])
    spikes = sorted(
        [f.kind, f.start_iteration, f.end_iteration] for f in a.findings if f.kind in SPIKES
    )
    assert spikes == sorted(case["spikes"])
    assert [i.category for i in a.incidents] == case["incidents"]
    if "outcome" in case:
        assert a.job.outcome.value == case["outcome"]
    if "hang_iteration" in case:
        (hang,) = a.incidents
        assert hang.iteration == case["hang_iteration"]
    if "loss_recovered_after" in case:
        (loss,) = [f for f in a.findings if f.kind == "loss_spike"]
        assert isinstance(loss.detail, SpikeDetail)
        assert loss.detail.recovered_after == case["loss_recovered_after"]


def test_every_fixture_is_listed() -> None:
    listed = {c["file"] for c in EXPECTED}
    present = {p.name for p in FIXTURES.iterdir() if p.name != "expected.toml"}
    assert listed == present


def _excerpt(tmp_path: Path, first: int, losses: list[float], norms: list[float]) -> list[Any]:
    """Megatron-DeepSpeed iteration lines (training.py's log format) from `first` on."""
    lines = [
        f" iteration {first + i:8d}/  200000 | consumed samples: {(first + i) * 512:12d} | "
        f"elapsed time per iteration (s): 12.31 | learning rate: 1.000E-04 | global batch size: "
        f"  512 | lm loss: {loss:.6E} | grad norm: {norm:.3f} | num zeros: 0.0 | number of "
        "skipped iterations:   0 | number of nan iterations:   0 |"
        for i, (loss, norm) in enumerate(zip(losses, norms, strict=True))
    ]
    path = tmp_path / "excerpt.log"
    path.write_text("\n".join(lines) + "\n")
    return [f for f in analyze([str(path)]).findings if f.kind in SPIKES]


LOSS = [1.90, 1.92, 1.91, 1.93, 1.90, 4.45, 3.1, 2.4, 1.95]
NORM = [0.31, 0.29, 0.33, 0.30, 0.32, 4.1, 2.0, 0.6, 0.35]


def test_an_order_of_magnitude_against_the_first_lines(tmp_path: Path) -> None:
    found = _excerpt(tmp_path, 70001, LOSS, NORM)
    assert sorted((f.kind, f.start_iteration) for f in found) == [
        ("grad_norm_spike", 70006),
        ("loss_spike", 70006),
    ]


def test_less_than_an_order_of_magnitude_is_no_spike(tmp_path: Path) -> None:
    """+2.2 nats (9x perplexity) and a 9x gradient norm: large, yet no order of magnitude."""
    loss = [*LOSS[:5], 1.91 + 2.2, *LOSS[6:]]
    norm = [*NORM[:5], 0.31 * 9, *NORM[6:]]
    assert _excerpt(tmp_path, 70001, loss, norm) == []


def test_not_at_trainings_start(tmp_path: Path) -> None:
    """The same lines at iterations 1 to 9, in the LR warm-up: training settling."""
    assert _excerpt(tmp_path, 1, LOSS, NORM) == []


def test_a_loss_that_is_no_cross_entropy(tmp_path: Path) -> None:
    """A loss in the hundreds rising by 5 (more than ln 10): less than half again its level,
    so no tenfold perplexity and no spike."""
    loss = [190.0, 191.0, 190.0, 192.0, 190.0, 195.0, 194.0, 192.0, 190.0]
    found = _excerpt(tmp_path, 70001, loss, [0.3] * len(loss))
    assert found == []


@pytest.mark.parametrize(("minutes", "outcome"), [(2, "truncated"), (90, "hung")])
def test_untimed_progress_then_stamped_lines(tmp_path: Path, minutes: int, outcome: str) -> None:
    """Iteration lines with no time, then stamped lines of a monitor that says the job still
    runs: the last iteration line was written before the first of them, so the log shows at
    least their span without progress: a hang past five 30 s intervals, a log cut within them."""
    lines = [
        f" iteration {i:8d}/  200000 | elapsed time per iteration (s): 30.00 | lm loss: "
        "2.1E+00 | grad norm: 0.2 |"
        for i in range(52001, 52011)
    ]
    start = datetime(2024, 5, 1, 10, 0, 0)
    for m in range(minutes + 1):
        t = start + timedelta(minutes=m)
        lines.append(
            f"[{t:%Y-%m-%d %H:%M:%S}] PULSE: gpt-xl is running for 1:{m % 60:02d}:00 since "
            "2024-05-01T09:00:00 (4711 on 'gpu' partition (node[01-02])"
        )
    path = tmp_path / "untimed.log"
    path.write_text("\n".join(lines) + "\n")
    a = analyze([str(path)])
    assert a.job.outcome.value == outcome
