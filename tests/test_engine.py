"""The Engine (logscope/engine/feed.py) on its own: constructed lines fed block by block, then
`conclude()`: the incidents, the job and the verdict it concludes, whatever the blocks and inputs
the lines come in (formats: shared/FORMATS.md §1-§6)."""

from __future__ import annotations

from datetime import datetime, timedelta

from logscope.engine.conclude import conclude
from logscope.engine.feed import Engine
from logscope.model import Analysis, InputInfo, Outcome
from logscope.read.sources import Block

from .helpers import child_failed_block, input_of, library, megatron_iterations

START = datetime(2024, 4, 6, 2, 0, 0)
CUDA = "[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered"
WATCHDOG = (
    "[rank{r}]:[E406 02:40:00.832146912 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=6463, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=1800000) ran for 1800017 milliseconds before timing out."
)
CRASH = [
    *megatron_iterations(1, 5, START),
    CUDA,
    *(WATCHDOG.format(r=r) for r in (0, 1, 3)),
    *child_failed_block(
        "/opt/train/pretrain_gpt.py",
        time="2024-04-06_02:40:05",
        host="gpu-a17",
        rank=2,
        local_rank=2,
        exitcode=1,
        pid=4712,
    ),
    "srun: error: gpu-a17: task 0: Exited with exit code 1",
]


def feed(engine: Engine, lines: list[str], path: str, first_lineno: int, offset: int) -> int:
    """Feed `lines` as one block of an input starting `offset` bytes in, the way `analyze`
    reads a small file; returns the offset of the next block."""
    block = Block(("\n".join(lines) + "\n").encode(), first_lineno)
    engine.feed_block(block, path, 2024, events=False, offset=offset)
    return offset + len(block.data)


def concluded(*inputs: tuple[str, list[str]], blocks: int = 1) -> Analysis:
    """An Engine fed each input's lines in `blocks` blocks, in input order, then its result."""
    engine = Engine(library())
    for path, lines in inputs:
        size, offset = -(-len(lines) // blocks), 0
        for start in range(0, len(lines), size):
            offset = feed(engine, lines[start : start + size], path, start + 1, offset)
    return conclude(engine, [input_of(lines, path) for path, lines in inputs])


def test_a_crash_is_the_verdict_with_the_job_it_ended() -> None:
    a = concluded(("job.log", CRASH))
    (inc,) = a.incidents
    assert a.verdict is inc
    assert (inc.id, inc.category, inc.root_cause.line.lineno) == ("I1", "cuda_error", 6)
    assert inc.culprit is not None
    assert (inc.culprit.rank, inc.culprit.host) == (2, "gpu-a17")
    assert inc.iteration == 5
    assert [e.line.lineno for e in inc.cascade][:3] == [7, 8, 9]
    job = a.job
    assert job.outcome is Outcome.crashed
    assert (job.world_size, job.hosts) == (4, ("gpu-a17",))
    assert (job.first_iteration, job.last_iteration, job.train_iters) == (1, 5, 100)
    assert job.start == START + timedelta(seconds=10)


def test_the_blocks_the_lines_come_in_change_nothing() -> None:
    one = concluded(("job.log", CRASH))
    for blocks in (2, 3, len(CRASH)):
        many = concluded(("job.log", CRASH), blocks=blocks)
        assert many.incidents == one.incidents, blocks
        assert (many.job, many.verdict) == (one.job, one.verdict), blocks


def test_a_failure_in_the_jobs_out_file_is_placed_in_its_own_input() -> None:
    # the ranks' log ends in silence; the job's .out says a task ran out of memory
    main = megatron_iterations(1, 5, START)
    out = ["srun: error: gpu-a17: task 3: Out Of Memory"]
    a = concluded(("main_log.txt", main), ("slurm-4711.out", out))
    (inc,) = a.incidents
    assert a.verdict is inc
    assert (inc.root_cause.line.path, inc.root_cause.line.lineno) == ("slurm-4711.out", 1)
    assert a.job.hosts == ("gpu-a17",)
    assert a.job.last_iteration == 5


def test_the_incidents_of_several_inputs_are_in_input_order() -> None:
    # the main log's crash at its line 6, then the .out's report at its line 1
    exited = "srun: error: gpu-a17: task 0: Exited with exit code 1"
    a = concluded(("main_log.txt", CRASH[:6]), ("slurm-4711.out", [exited]))
    where = [(i.root_cause.line.path, i.root_cause.line.lineno) for i in a.incidents]
    assert where == [("main_log.txt", 6), ("slurm-4711.out", 1)]


def test_a_failure_block_the_log_cuts_is_read_when_the_engine_concludes() -> None:
    # the log ends before the block's border: conclude() closes it, and its entry names the host
    assert CRASH[-2].startswith("=====")
    (inc,) = concluded(("job.log", CRASH[:-2])).incidents
    assert inc.culprit is not None
    assert (inc.culprit.rank, inc.culprit.host) == (2, "gpu-a17")


def test_ranks_seen_only_in_their_prefixes_are_in_the_world() -> None:
    # eight tee headers at start-up; seven ranks time out: the eighth is the one they waited for
    lines = [f"[default{lr}]:building GPT model ..." for lr in range(8)] + [
        f"[default{lr}]:[E406 02:40:00.832146912 ProcessGroupNCCL.cpp:607] [Rank {lr}] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=6463, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=1800000) ran for 1800017 milliseconds before timing out."
        for lr in range(7)
    ]
    a = concluded(("job.log", lines))
    assert a.job.world_size == 8
    (inc,) = a.incidents
    assert inc.culprit is not None and inc.culprit.rank == 7


def test_a_run_that_reaches_its_last_iteration_has_no_verdict() -> None:
    a = concluded(("job.log", megatron_iterations(90, 100, START)))
    assert (a.incidents, a.verdict) == ((), None)
    assert a.job.outcome is Outcome.completed
    assert a.job.outcome_reason == "reached the last iteration (100/100)"


def test_the_time_limit_after_an_hour_of_silence_is_a_hang() -> None:
    lines = [
        *megatron_iterations(1, 5, START),
        "slurmstepd: error: *** JOB 4711 ON gpu-a17 CANCELLED AT 2024-04-06T03:00:50 DUE TO TIME "
        "LIMIT ***",
    ]
    a = concluded(("job.log", lines))
    (hang,) = a.incidents
    assert a.verdict is hang
    assert (hang.category, hang.iteration, hang.root_cause.line.lineno) == ("hang", 5, 5)
    assert [e.line.lineno for e in hang.evidence] == [6]
    assert a.job.outcome is Outcome.hung


def test_an_unrecognized_error_is_an_incident_only_when_nothing_else_failed() -> None:
    lease = "worker 3: fatal: lost the lease on /shared/locks/job-4711, giving up"
    a = concluded(("job.log", [*megatron_iterations(1, 5, START), lease]))
    (inc,) = a.incidents
    assert (inc.category, inc.root_cause.line.text) == ("unknown", lease)
    assert a.job.outcome is Outcome.crashed
    a = concluded(("job.log", [lease, *CRASH]))
    assert [i.root_cause.line.lineno for i in a.incidents] == [7]


def test_a_line_its_logger_marks_below_error_is_no_unrecognized_failure() -> None:
    # loguru's default header (loguru/_defaults.py): the level is the logger's word on the line
    said = "2025-01-24 15:34:50.240 | {} | worker.loop:run:61 - fatal: lost the lease, giving up"
    for level, failed in (("DEBUG   ", False), ("SUCCESS ", False), ("ERROR   ", True)):
        a = concluded(("job.log", [*megatron_iterations(1, 5, START), said.format(level)]))
        unknown = [i for i in a.incidents if i.category == "unknown"]
        assert bool(unknown) is failed, (level, a.incidents)


def test_inputs_with_no_line_say_nothing_of_the_job() -> None:
    engine = Engine(library())
    a = conclude(engine, [InputInfo("job.log", 0, 0)])
    assert (a.incidents, a.verdict) == ((), None)
    assert a.job.outcome is Outcome.unknown
    assert a.job.outcome_reason == "no input held a line: nothing says whether the job ran"


def test_a_declared_world_size_is_the_jobs() -> None:
    # BLOOM's main log: 48 nodes print the same 8 tee headers; Megatron says the world is 384
    lines = [
        "[default0]:using world size: 384, data-parallel-size: 8, tensor-model-parallel size: 4, "
        "pipeline-model-parallel size: 12 ",
        *(f"[default{lr}]:building GPT model ..." for lr in range(8)),
    ]
    assert concluded(("main_log.txt", lines)).job.world_size == 384


def test_slurm_banners_between_fixed_width_iteration_lines_are_lines_of_their_own() -> None:
    # the step's banner, a rank's last iteration while it is being killed, the job's banner
    lines = [
        *megatron_iterations(1, 5, START),
        "slurmstepd: error: *** STEP 4711.0 ON gpu-a17 CANCELLED AT 2024-04-06T02:01:00 DUE TO "
        "TIME LIMIT ***",
        *megatron_iterations(6, 6, START),
        "slurmstepd: error: *** JOB 4711 ON gpu-a17 CANCELLED AT 2024-04-06T02:01:05 DUE TO TIME "
        "LIMIT ***",
    ]
    a = concluded(("job.log", lines))
    assert a.job.outcome is Outcome.timelimit, a.job


def test_the_time_limit_after_progress_lines_with_no_time_of_their_own_is_the_time_limit() -> None:
    # HF Trainer's log dicts state no time: after the stamped start they get its time as a floor,
    # so an hour between it and the banner is no silence the log shows
    stamped = (
        "[2024-04-06 02:00:00,000] [INFO] [logging.py:107:log_dist] [Rank 0] step=0, skipped=0"
    )
    dicts = [
        f"{{'loss': {2 - n / 10:.4f}, 'learning_rate': 5e-05, 'epoch': 0.{n}}}" for n in range(1, 6)
    ]
    banner = (
        "slurmstepd: error: *** JOB 4711 ON gpu-a17 CANCELLED AT 2024-04-06T03:00:50 DUE TO TIME "
        "LIMIT ***"
    )
    a = concluded(("job.log", [stamped, *dicts, banner]))
    assert a.job.outcome is Outcome.timelimit, a.job
    assert [i.category for i in a.incidents] == ["timelimit"]
    # the same silence after progress lines that state their times is a hang
    timed = [f"2024-04-06 02:0{n}:00,000 - INFO - {d}" for n, d in enumerate(dicts)]
    a = concluded(("job.log", [stamped, *timed, banner]))
    assert a.job.outcome is Outcome.hung, a.job
    # and so after lines stamped to the second, the last two in the same one: each states its time
    same = [f"2024-04-06 02:01:0{(n + 1) // 2} - INFO - {d}" for n, d in enumerate(dicts)]
    a = concluded(("job.log", [stamped, *same, banner]))
    assert a.job.outcome is Outcome.hung, a.job
