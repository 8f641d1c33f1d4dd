"""How each attempt of a run ended (logscope/analysis/attempt_endings.py) on its own: the
attempts a real Engine's timeline makes of constructed lines (Megatron's training log, its
checkpoint load at a restart, slurmstepd's banners: shared/FORMATS.md §5.1, §6.1), their
incidents, and what attempt_endings makes of them."""

from __future__ import annotations

from datetime import datetime, timedelta

from logscope.analysis.attempt_endings import attempt_endings
from logscope.analysis.job_outcome import Ending
from logscope.model import Incident, Outcome

from .helpers import fed, incidents_of, megatron_iterations

START = datetime(2024, 4, 6, 2, 0, 0)
RESTART = START + timedelta(hours=2)
CUDA = "[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered"
LOAD = " loading checkpoint from /ckpt/gpt at iteration 40"


def banner(entity: str, at: datetime) -> str:
    return (
        f"slurmstepd: error: *** {entity} ON gpu-a17 CANCELLED AT {at:%Y-%m-%dT%H:%M:%S} DUE TO "
        "TIME LIMIT ***"
    )


def c10_warning(at: datetime) -> str:
    """A stamped line no signature takes as a failure: a moment of its attempt (FORMATS §1.2)."""
    return (
        f"[rank0]:[W{at.month}{at.day:02d} {at:%H:%M:%S}.123456789 Utils.hpp:137] Warning: "
        "Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use "
        "TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())"
    )


def first_attempt(*end: str) -> list[str]:
    """Iterations 1-50 from START, one every 10 s (the last at 02:08:20), then `end`."""
    return [*megatron_iterations(1, 50, START), *end]


def restarted(last: int = 100) -> list[str]:
    """The run restarted two hours on from the checkpoint of iteration 40."""
    return [LOAD, *megatron_iterations(41, last, RESTART - timedelta(seconds=400))]


def endings_of(
    lines: list[str],
) -> tuple[list[Incident], dict[int, tuple[str, Incident | None]], Ending]:
    """attempt_endings as the Engine calls it: the timeline's attempts, the incidents, the exit
    lines, the progress, and that the job ran."""
    engine = fed(lines)
    attempts = engine.timeline.finish()
    assert [a.index for a in attempts] == list(range(len(attempts)))
    exits = [m for m in engine.markers if m.kind == "exit"]
    return attempt_endings(attempts, incidents_of(engine), exits, engine.progress)


def lines_of(incident: Incident) -> tuple[int, list[int]]:
    return incident.root_cause.line.lineno, [e.line.lineno for e in incident.evidence]


def test_a_crashed_attempt_then_one_that_completes() -> None:
    incidents, endings, ending = endings_of([*first_attempt(CUDA), *restarted()])
    (crash,) = incidents
    assert (crash.id, crash.category, lines_of(crash)) == ("I1", "cuda_error", (51, []))
    assert endings == {0: ("crash", crash)}
    assert (ending.outcome, ending.reason) == (
        Outcome.completed,
        "reached the last iteration (100/100)",
    )


def test_an_attempt_the_time_limit_ended_after_a_long_silence_hung() -> None:
    lines = [*first_attempt(banner("STEP 4711.0", START + timedelta(hours=1))), *restarted()]
    incidents, endings, ending = endings_of(lines)
    (hang,) = incidents
    # rooted at the last progress line, the banner its evidence
    assert (hang.category, hang.iteration, lines_of(hang)) == ("hang", 50, (50, [51]))
    assert hang.title.startswith("Training hung after iteration 50: no progress for 51.7 min")
    assert endings == {0: ("hang", hang)}
    assert ending.outcome is Outcome.completed


def test_an_attempt_the_time_limit_ended_while_it_progressed_ended() -> None:
    lines = [*first_attempt(banner("STEP 4711.0", START + timedelta(seconds=510))), *restarted()]
    incidents, endings, _ = endings_of(lines)
    (end,) = incidents
    assert (end.category, lines_of(end)) == ("timelimit", (51, []))
    assert endings == {0: ("end", end)}


def test_a_silent_attempt_with_no_incident_hung() -> None:
    # nothing failed; the attempt's last stamped line is an hour after its last progress
    lines = [*first_attempt(c10_warning(START + timedelta(hours=1))), *restarted()]
    incidents, endings, _ = endings_of(lines)
    (hang,) = incidents
    assert (hang.id, hang.category, lines_of(hang)) == ("I1", "hang", (50, []))
    assert endings == {0: ("hang", hang)}
    # a moment of silence is not one
    lines = [*first_attempt(c10_warning(START + timedelta(seconds=520))), *restarted()]
    assert endings_of(lines)[:2] == ([], {})


def test_the_last_attempt_decides_the_jobs_outcome() -> None:
    lines = [*first_attempt(CUDA), *restarted(60), banner("JOB 4711", RESTART + timedelta(hours=1))]
    incidents, endings, ending = endings_of(lines)
    crash, hang = incidents
    assert [i.id for i in incidents] == ["I1", "I2"]
    assert (crash.category, hang.category) == ("cuda_error", "hang")
    assert endings == {0: ("crash", crash), 1: ("hang", hang)}
    assert ending.outcome is Outcome.hung
    assert ending.reason.endswith("before the job was killed at its time limit"), ending.reason


def test_the_end_banners_of_an_attempt_are_one_end() -> None:
    # the step's banner, a rank's last lines while it is being killed, then the job's banner
    at = START + timedelta(seconds=510)
    lines = [
        *first_attempt(banner("STEP 4711.0", at)),
        *megatron_iterations(51, 53, START),
        c10_warning(at + timedelta(seconds=25)),
        banner("JOB 4711", at + timedelta(seconds=30)),
        *restarted(),
    ]
    engine = fed(lines)
    assert len(incidents_of(engine)) == 2  # two groups: progress came between them
    incidents, endings, ending = endings_of(lines)
    (end,) = incidents
    assert (end.category, lines_of(end)) == ("timelimit", (51, [56]))
    assert endings == {0: ("end", end)}
    assert ending.outcome is Outcome.completed
