"""Regenerate real torchrun fault scenarios (torch CPU wheel, gloo) and check what logscope says.

Skipped only where torch is not installed; CI installs it (the `lab` extra), and there a missing
torch fails the run instead of skipping.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from .helpers import lab_marks

sys.path.insert(0, str(Path(__file__).parent / "lab"))

pytestmark = lab_marks()


def _line_of(path: Path, pattern: str) -> tuple[int, str]:
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if re.search(pattern, line):
            return n, line
    raise AssertionError(f"{pattern!r} not in {path}")


def test_raise_on_rank1_is_the_root_cause(tmp_path: Path, analyze_json) -> None:
    from run_faults import run_scenario

    log = run_scenario("raise_rank1", tmp_path, timeout_s=120)
    code, doc = analyze_json(log)
    assert code == 1
    inc = doc["incidents"][-1]
    lineno, text = _line_of(log, r"\[rank1\]: ValueError: injected fault")
    assert inc["category"] == "python_exception", inc
    assert (inc["root_cause"]["line"], inc["root_cause"]["text"]) == (lineno, text)
    assert inc["culprit"]["rank"] == 1
    assert doc["job"]["outcome"] == "crashed"


def test_hung_rank_is_named_although_torchrun_blames_a_victim(tmp_path: Path, analyze_json) -> None:
    from run_faults import run_scenario

    log = run_scenario("hang_rank1", tmp_path, timeout_s=150)
    text = log.read_text()
    root_block = text[text.index("Root Cause (first observed failure)") :]
    blamed = int(re.search(r"rank\s+: (\d+)", root_block).group(1))
    assert blamed != 1, "torchrun named the hung rank itself: the scenario proves nothing"
    code, doc = analyze_json(log)
    assert code == 1
    inc = doc["incidents"][-1]
    assert inc["category"] == "collective_timeout", inc
    assert inc["culprit"]["rank"] == 1, inc["culprit"]
    assert 1 not in inc["cascade"]["ranks"]


def test_a_slow_rank_slows_every_step_and_the_cost_is_measured(
    tmp_path: Path, analyze_json
) -> None:
    """Fail-slow for real: from iteration 31 rank 1 sleeps 30 ms more per step, and every rank
    waits for it in the gloo all-reduce. Found as a slowdown at its first slow iteration,
    sized like the sleep, costed, and no incident."""
    from run_faults import run_scenario

    log = run_scenario("slow_rank1", tmp_path, timeout_s=150)
    code, doc = analyze_json(log)
    assert code == 0 and doc["incidents"] == []
    # 4 ranks share 2 cores: a busy machine may slow a stretch more (a second regime after 31);
    # the start is the first slow iteration, or the step before it (one step's time on 2 shared
    # cores is noisy enough to move a changepoint by one), never earlier
    found = doc["findings"]
    assert all(f["kind"] == "slowdown" and f["start_iteration"] >= 30 for f in found), found
    f = found[0]
    assert f["start_iteration"] in (30, 31) and found[-1]["end_iteration"] == 70, found
    assert f["magnitude"] > 0.03 / f["baseline"] - 0.04, f  # the 30 ms, over the step it slowed
    lost = sum(x["lost_s"] for x in found)
    assert lost >= 0.8 * 40 * 0.03, found  # the 40 slowed steps' sleep, at least
    assert doc["ledger"]["badput_s"]["slowdown"] > 0


def test_nan_weights_on_one_rank_make_every_later_loss_nan(tmp_path: Path, analyze_json) -> None:
    """Rank 2's weights become NaN at iteration 25; the all-reduce spreads them and torch prints
    `NAN` from then on. Training goes on: a finding, not an incident."""
    from run_faults import run_scenario

    log = run_scenario("nan_rank2", tmp_path, timeout_s=120)
    code, doc = analyze_json(log)
    assert code == 0 and doc["incidents"] == []
    # step times on 2 shared cores may also show a slowdown; nothing else may appear
    found = doc["findings"]
    assert {x["kind"] for x in found} <= {"nan_loss", "slowdown"}, found
    (f,) = [x for x in found if x["kind"] == "nan_loss"]
    assert (f["kind"], f["start_iteration"], f["end_iteration"], f["magnitude"]) == (
        "nan_loss",
        25,
        40,
        16,
    )
    lineno, _ = _line_of(log, r"iteration +25/.*lm loss: NAN")
    assert f["line"] == lineno
