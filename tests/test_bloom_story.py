"""The BLOOM-like three-job run told exactly, whatever its seed and however its hung job's `.out`
reads: one incident per failure (a scheduler banner or srun's abort in the job's own `.out` is
its hang's evidence, never an incident of its own), each incident's iteration and context from
its own attempt, and the hang's exposure quantified from the hang itself when the log prints no
configuration."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from logscope.engine.analyze import analyze
from logscope.model import Analysis, EvidenceDetail, gpu_hours
from logscope.render import markdown, terminal
from logscope.render.document import document

from .generators.bloom_run import Truth, generate

_LAUNCH = "WARNING:torch.distributed.run:"


def _story(tmp_path: Path, seed: int, **options: object) -> tuple[Analysis, Truth]:
    truth = generate(tmp_path, seed=seed, **options)  # type: ignore[arg-type]
    return analyze([str(tmp_path)]), truth


def _attempt_starts(main_log: Path) -> list[int]:
    """The line numbers where each attempt's launch begins in the merged log: torchrun's
    banner block, after any line that is not part of one (read from the text, not from
    logscope)."""
    lines = main_log.read_text().splitlines()
    return [
        n
        for n, line in enumerate(lines, start=1)
        if line.startswith(_LAUNCH) and (n == 1 or not lines[n - 2].startswith("*****"))
    ]


def _check_story(a: Analysis, truth: Truth, main_log: Path) -> None:
    assert a.ledger is not None
    # exactly the failures, in the attempts they ended
    assert [(r.kind, r.attempt + 1) for r in a.ledger.incidents] == [
        (i.kind, i.attempt) for i in truth.incidents
    ]
    assert len(a.incidents) == len(truth.incidents)
    assert [i.category for i in a.incidents] == ["gpu_hardware", "hang"]
    # each incident's iteration from its own attempt
    for inc, want in zip(a.incidents, truth.incidents, strict=True):
        own = truth.attempts[want.attempt - 1]
        assert inc.iteration is not None
        assert own.first_iteration <= inc.iteration <= own.last_iteration, inc
    # no context line from another attempt
    starts = _attempt_starts(main_log)
    assert len(starts) == len(truth.attempts)
    bounds = [*starts[1:], 1 << 62]
    for inc, want in zip(a.incidents, truth.incidents, strict=True):
        lo, hi = starts[want.attempt - 1], bounds[want.attempt - 1]
        assert inc.root_cause.line.path == str(main_log)
        shown = [n for n, _ in a.context[inc.id]]
        assert shown and all(lo <= n < hi for n in shown), (inc.id, shown, lo, hi)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_seeds_tell_exactly_the_failures(tmp_path: Path, seed: int) -> None:
    a, truth = _story(tmp_path, seed)
    _check_story(a, truth, tmp_path / "main_log.txt")


@pytest.mark.parametrize("hang_out", ["end_time", "no_trace", "job_banner"])
def test_the_hung_jobs_out_is_its_evidence_however_it_reads(tmp_path: Path, hang_out: str) -> None:
    """END TIME after the banners, a `.out` without the `set -x` trace, the JOB banner alone:
    still one hang, in the attempt it ended."""
    a, truth = _story(tmp_path, 1, hang_out=hang_out)
    _check_story(a, truth, tmp_path / "main_log.txt")


@pytest.mark.parametrize(("hours", "pulse"), [(-1, True), (1, True), (2, True), (2, False)])
def test_whatever_the_outs_clock(tmp_path: Path, hours: int, pulse: bool) -> None:
    """The batch host's clock (its zone) is not the training log's: a `.out` an hour behind
    (UTC against CET) or ahead still tells its own job's story, its banners its hang's end;
    without the monitor's PULSE lines too (then the `.out` alone says the job hung)."""
    a, truth = _story(tmp_path, 0, hang_out="end_time", out_clock_h=hours, pulse=pulse)
    _check_story(a, truth, tmp_path / "main_log.txt")
    assert a.ledger is not None
    hang = a.ledger.incidents[1]
    assert abs(hang.hang_s - truth.incidents[1].hang_s) <= 0.02 * truth.incidents[1].hang_s


def test_a_lone_banner_on_another_clock_ends_its_hang(tmp_path: Path) -> None:
    """The training log and the hung job's `.out` alone, which holds nothing but the JOB banner,
    two hours ahead, no PULSE lines: the banner cannot be the end of the attempt still
    progressing at its time on the log's clock, so it ends the hang before; no incident or note
    of its own."""
    truth = generate(tmp_path, seed=1, hang_out="job_banner", out_clock_h=2, pulse=False)
    hung = tmp_path / truth.attempts[1].out_file
    a = analyze([str(tmp_path / "main_log.txt"), str(hung)])
    assert [i.category for i in a.incidents] == ["gpu_hardware", "hang"]
    assert a.ledger is not None
    assert [(r.kind, r.attempt) for r in a.ledger.incidents] == [("crash", 0), ("hang", 1)]
    assert not a.survived


def test_the_context_says_where_the_attempt_ends(tmp_path: Path) -> None:
    """The hang's last progress line is followed, in the merged log, by the next job's
    restart: the context stops at the attempt's last line and a mark says so."""
    a, _ = _story(tmp_path, 0)
    hang = a.incidents[1]
    starts = _attempt_starts(tmp_path / "main_log.txt")
    ((after, text),) = a.context_marks[hang.id]
    # the next launch's message (OMP_NUM_THREADS) is 2 lines into torchrun's warning block
    # (the logger's `WARNING:torch.distributed.run:` header and a ruler): no rank's line
    assert starts[2] - 1 <= after <= starts[2] + 1
    assert not [n for n, _ in a.context[hang.id] if n > after]
    # and the terminal and Markdown say so, under the root cause and in the context
    out = io.StringIO()
    terminal.render(a, out, width=200)
    assert "attempt 2 (job 1528874) ends here" in out.getvalue()
    md = markdown.render(document(a))
    block = md[md.index("## I2") :]
    assert block.index(" iteration     1037/") < block.index("attempt 2 (job 1528874) ends here")
    assert "attempt 2" in text and "ends here" in text


def test_hang_exposure_from_the_hang_itself(tmp_path: Path) -> None:
    """No line prints the process-group options, yet the hang ran hours past every timeout
    the log states (the crash's watchdog lines): that is the evidence nothing ended it. The
    finding names the hang and what it would have cost with a watchdog or a stall alarm."""
    a, truth = _story(tmp_path, 2, print_config=False)
    assert "ProcessGroupNCCL initialized" not in (tmp_path / "main_log.txt").read_text()
    (f,) = [f for f in a.findings if f.kind == "hang_exposure"]
    hang = truth.incidents[1]
    assert a.ledger is not None and a.ledger.gpus == truth.gpus
    (row,) = [r for r in a.ledger.incidents if r.kind == "hang"]
    assert row.lost_gpu_hours is not None
    would = row.lost_gpu_hours - (hang.hang_s - 600) * truth.gpus / 3600
    assert "--stall-after 10m" in f.title
    assert f"~{gpu_hours(would)} GPU-h" in f.title
    assert f.lost_gpu_hours is not None and f.lost_gpu_hours > 0
    assert isinstance(f.detail, EvidenceDetail)
    last = truth.attempts[1].last_iteration
    assert any(f" iteration {last:8d}/" in t for _, _, t in f.detail.lines)


@pytest.mark.parametrize(("cancelled_at", "exposed"), [("10:20:00", False), ("10:50:00", True)])
def test_hang_exposure_only_past_torchs_default_timeout(
    tmp_path: Path, cancelled_at: str, exposed: bool
) -> None:
    """A stall shorter than torch's default 30 min timeout is no evidence against the
    watchdog; one longer is (no line states a timeout or the process-group options)."""
    lines = [
        f"[2024-01-01 10:00:{i:02d}]  iteration {i:8d}/   10000 | elapsed time per iteration "
        "(s): 1.00 | lm loss: 2.0E+00 |"
        for i in range(1, 40)
    ]
    lines.append(
        f"[2024-01-01 {cancelled_at}] slurmstepd: error: *** JOB 12 ON n1 CANCELLED AT "
        f"2024-01-01T{cancelled_at} ***"
    )
    path = tmp_path / "job.log"
    path.write_text("\n".join(lines) + "\n")
    a = analyze([str(path)])
    assert [i.category for i in a.incidents] == ["hang"]
    assert bool([f for f in a.findings if f.kind == "hang_exposure"]) is exposed
