# ruff: noqa: E501  (log lines are kept whole)
"""How a job ended (logscope/analysis/job_outcome.py) on its own: decide_outcome from the
incidents, progress and end lines a real Engine makes of constructed lines, the silence each phase
allows, the hang incident, and make_job (formats: shared/FORMATS.md §5.1, §6.1)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from logscope.analysis.job_outcome import (
    Ending,
    decide_outcome,
    hang_incident,
    make_job,
    stops_the_job,
)
from logscope.analysis.silence import HANG_FLOOR_S, allowed_silence, hang_threshold
from logscope.engine.feed import Engine
from logscope.model import Outcome

from .helpers import analyze_doc, fed, incidents_of, megatron_iterations, write

START = datetime(2024, 4, 6, 2, 0, 0)
CUDA = "[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered"
# a stamped fault at 02:01:10, 10 s after iteration 6
FAULT = "[2024-04-06 02:01:10,000] [rank3]: RuntimeError: NCCL error: remote process exited or there was a network error"


def iterations(first: int, last: int) -> list[str]:
    """Megatron's lines, one every 10 s from START."""
    return megatron_iterations(first, last, START)


def time_limit(at: datetime) -> str:
    return f"slurmstepd: error: *** STEP 4711.0 ON gpu-a17 CANCELLED AT {at:%Y-%m-%dT%H:%M:%S} DUE TO TIME LIMIT ***"


def ending_of(
    engine: Engine,
    end_time: datetime | None = None,
    allowed_s: float | None = None,
) -> Ending:
    """decide_outcome as the Engine asks it for a log of one attempt; `end_time`: where the log
    ends (else its last stamped line)."""
    progress = engine.progress
    return decide_outcome(
        incidents_of(engine),
        progress,
        [m for m in engine.markers if m.kind == "exit"],
        progress.last_time(),
        end_time or engine.last_time,
        progress.logged_interval_s(),
        allowed_s,
    )


# -- decide_outcome ---------------------------------------------------------------------------


def test_a_failure_after_progress_is_a_crash() -> None:
    ending = ending_of(fed([*iterations(1, 5), CUDA]))
    assert ending.outcome is Outcome.crashed
    assert ending.reason.endswith("(cuda.illegal_memory_access)"), ending.reason


def test_a_node_failure_after_a_fault_is_the_ending_and_the_fault_stays_the_cause() -> None:
    banner = (
        "slurmstepd: error: *** JOB 4711 ON gpu-a17 CANCELLED AT 2024-04-06T02:10:00 DUE TO "
        "NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***"
    )
    engine = fed([*iterations(1, 5), CUDA, banner])
    (incident,) = incidents_of(engine)
    assert incident.root_cause.signature == "cuda.illegal_memory_access"
    ending = ending_of(engine)
    assert ending.outcome is Outcome.node_failure, ending
    # a cancel after the fault (srun --kill-on-bad-exit) is the fault's consequence: crashed
    cancel = "slurmstepd: error: *** JOB 4711 ON gpu-a17 CANCELLED AT 2024-04-06T02:10:00 ***"
    assert ending_of(fed([*iterations(1, 5), CUDA, cancel])).outcome is Outcome.crashed


def test_an_error_line_no_signature_knows_is_no_cause_of_the_schedulers_cancel(
    tmp_path: Path,
) -> None:
    # the failure of last resort: the cancel says how the job ended
    unknown = " [*] Failed to find a checkpoint"
    cancel = "slurmstepd: error: *** JOB 4711 ON gpu-a17 CANCELLED AT 2024-04-06T02:00:55 ***"
    log = write(tmp_path, "slurm-4711.out", [*iterations(1, 5), unknown, cancel])
    _code, doc, _err = analyze_doc(str(log))
    (incident,) = doc["incidents"]
    assert incident["root_cause"]["pattern"] == "slurm.cancelled", incident["root_cause"]
    assert doc["job"]["outcome"] == "cancelled", doc["job"]
    # a failure a signature knows is still the cause the cancel came after
    log = write(tmp_path, "slurm-4712.out", [*iterations(1, 5), CUDA, cancel])
    _code, doc, _err = analyze_doc(str(log))
    (incident,) = doc["incidents"]
    assert incident["root_cause"]["pattern"] == "cuda.illegal_memory_access"


def test_training_that_goes_on_after_a_failure_did_not_crash_of_it() -> None:
    # the failure a rank survived, then three progress lines: the log ends while training
    ending = ending_of(fed([*iterations(1, 5), CUDA, *iterations(6, 8)]))
    assert ending.outcome is Outcome.truncated
    # two lines are still the failure's cascade
    assert ending_of(fed([*iterations(1, 5), CUDA, *iterations(6, 7)])).outcome is Outcome.crashed


def test_reaching_the_last_iteration_is_completion() -> None:
    ending = ending_of(fed(iterations(95, 100)))
    assert (ending.outcome, ending.reason) == (
        Outcome.completed,
        "reached the last iteration (100/100)",
    )


def test_a_job_that_says_it_exited_completed() -> None:
    lines = [
        *iterations(1, 5),
        "[default0]:[exiting program after 0.9 minutes] datetime: 2024-04-06 02:01:00 ",
    ]
    ending = ending_of(fed(lines))
    assert ending.outcome is Outcome.completed
    assert "the job says it exited: [exiting program after 0.9 minutes]" in ending.reason
    assert ending.reason.endswith(" (line 6)")


def test_wandb_s_exit_status_says_whether_the_script_ended_well() -> None:
    # wandb/sdk/wandb_run.py _display_exit_status: the exit code its exit hook saw
    ok = "wandb: Waiting for W&B process to finish... (success)."
    ending = ending_of(fed([*iterations(1, 5), ok, "wandb: Run history:"]))
    assert ending.outcome is Outcome.completed, ending
    failed = (
        "wandb: Waiting for W&B process to finish... (failed 1). Press ctrl-c to abort syncing."
    )
    ending = ending_of(fed([*iterations(1, 5), failed, "wandb: Run history:"]))
    assert ending.outcome is Outcome.crashed, ending


def test_wandb_s_footer_says_the_process_ended_not_how() -> None:
    # wandb_run.py _footer, printed from its exit hook whatever the exit code (0.16+ says none)
    for footer in (
        "wandb: 🚀 View run glad-fire-12 at: https://wandb.ai/team/proj/runs/3k2j1h0g",
        "wandb: Synced glad-fire-12: https://wandb.ai/team/proj/runs/3k2j1h0g",
        "wandb: Find logs at: ./wandb/run-20250225_183028-3k2j1h0g/logs",
    ):
        ending = ending_of(fed([*iterations(1, 5), "wandb:", footer]))
        assert ending.outcome is Outcome.completed, (footer, ending)
        # a failure before it is still how the process ended
        ending = ending_of(fed([*iterations(1, 5), CUDA, "wandb:", footer]))
        assert ending.outcome is Outcome.crashed, (footer, ending)
    # the start of a run prints its link with no name: the log still ends mid-run
    start = "wandb: 🚀 View run at https://wandb.ai/team/proj/runs/3k2j1h0g"
    assert ending_of(fed([start, *iterations(1, 5)])).outcome is Outcome.truncated


def test_the_job_script_s_exit_status_0_after_training_is_completion() -> None:
    # the batch script's `echo "EXIT_CODE=$?"` after the command it waited for
    for said in ("EXIT_CODE=0", "exit code: 0"):
        ending = ending_of(fed([*iterations(1, 5), said]))
        assert ending.outcome is Outcome.completed, (said, ending)
        assert ending.reason.startswith(f"the job says it exited: {said}"), ending


def test_an_end_that_training_went_on_after_is_one_stage_s_not_the_job_s() -> None:
    # a pipeline's first stage prints its loop's end (nanochat's base_train), the next trains on
    stage = "Total training time: 0.92m"
    ending = ending_of(fed([*iterations(1, 5), stage, *iterations(6, 12)]))
    assert ending.outcome is Outcome.truncated, ending
    # ... and where the next stage only evaluates, the end stands
    ending = ending_of(fed([*iterations(1, 5), stage, "ARC-Easy accuracy: 39.69%"]))
    assert ending.outcome is Outcome.completed, ending


def test_a_pipeline_s_report_after_its_evaluations_is_the_job_s_end() -> None:
    # nanochat's speedrun ends with the report generated after the evaluation stages, which
    # print no loop end of their own
    report = [
        "Generating report to /root/.cache/nanochat/report/report.md",
        "Warning: /root/.cache/nanochat/report/chat-rl.md does not exist, skipping",
        "Copying report.md to current directory for convenience",
    ]
    ending = ending_of(fed([*iterations(1, 5), "HumanEval accuracy: 12.20%", *report]))
    assert ending.outcome is Outcome.completed, ending
    assert ending_of(fed([*iterations(1, 5), *report[:2]])).outcome is Outcome.truncated


def test_a_long_exit_line_is_quoted_by_its_start() -> None:
    stop = (
        ':::MLLOG {"namespace": "", "time_ms": 1700000000000, "event_type": "INTERVAL_END", '
        '"key": "run_stop", "value": null, "metadata": {"file": "/workspace/a/very/long/path/'
        'to/the/benchmark/train.py", "lineno": 975, "status": "success"}}'
    )
    ending = ending_of(fed([*iterations(1, 5), stop]))
    assert ending.outcome is Outcome.completed
    quoted = ending.reason.removeprefix("the job says it exited: ")
    assert quoted.startswith(':::MLLOG {"namespace"')
    assert quoted.endswith("… (line 6; status success)"), quoted
    assert len(quoted) < len(stop)


def test_silence_longer_than_five_intervals_to_the_end_of_the_log_is_a_hang() -> None:
    engine = fed(iterations(1, 5))  # the last at 02:00:50; one every 10 s: a hang after 50 s
    last = engine.progress.last_time()
    assert last == START + timedelta(seconds=50)
    ending = ending_of(engine, end_time=last + timedelta(seconds=60))
    assert (ending.outcome, ending.hang_s) == (Outcome.hung, 60.0)
    assert ending.reason == "no progress for the last 1.0 min of the log", ending.reason
    ending = ending_of(engine, end_time=last + timedelta(seconds=40))
    assert ending.outcome is Outcome.truncated


def test_lines_long_after_the_only_progress_line_are_no_hang(tmp_path) -> None:
    """One progress line tells no step time: the run is still starting up, whose silence may
    last 30 minutes (a trainer whose own step lines logscope does not read goes on logging)."""
    # DeepSpeed's engine logs its step counter (log_dist `step=%d, skipped=%d, lr=%s, mom=%s`)
    step = "[2024-04-06 02:00:10,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, lr=[0.0003], mom=[(0.9, 0.95)]"
    # a trainer's own step lines, which no signature reads as progress, still stamp the log
    after = [
        f"[2024-04-06 02:{m:02d}:00,000] [INFO] trainer: global_step={m}.0 tokens_per_s=1834.2"
        for m in range(1, 10)
    ]
    _, doc, _ = analyze_doc(str(write(tmp_path, "a.log", [step, *after])))
    assert (doc["job"]["outcome"], doc["incidents"]) == ("truncated", []), doc["job"]
    late = "[2024-04-06 02:45:00,000] [INFO] trainer: global_step=45.0 tokens_per_s=1834.2"
    _, doc, _ = analyze_doc(str(write(tmp_path, "b.log", [step, *after, late])))
    assert doc["job"]["outcome"] == "hung", doc["job"]


def test_the_time_limit_after_a_long_silence_ends_a_hang() -> None:
    lines = [*iterations(1, 5), time_limit(START + timedelta(minutes=30))]
    ending = ending_of(fed(lines))
    assert ending.outcome is Outcome.hung
    assert ending.hang_s == 30 * 60 - 50
    assert ending.reason.endswith("before the job was killed at its time limit"), ending.reason


def test_the_time_limit_while_training_progresses_is_the_time_limit() -> None:
    lines = [*iterations(1, 5), time_limit(START + timedelta(seconds=70))]
    assert ending_of(fed(lines)).outcome is Outcome.timelimit


def test_a_save_under_way_allows_a_longer_silence() -> None:
    lines = [*iterations(1, 5), time_limit(START + timedelta(minutes=5))]
    engine = fed(lines)
    base = hang_threshold(engine.progress.median_interval_s())
    assert ending_of(engine).outcome is Outcome.hung
    allowed = allowed_silence("save", base)
    assert ending_of(engine, allowed_s=allowed).outcome is Outcome.timelimit


def test_ranks_that_wait_when_the_log_ends_hung() -> None:
    # torch 2.1's store barrier: three of four ranks wait for the one that never came
    lines = [
        f"INFO:torch.distributed.distributed_c10d:Waiting in store based barrier to initialize process group for rank: {r}, key: store_based_barrier_key:1 (world_size=4, num_workers_joined=3, timeout=0:30:00)"
        for r in (0, 1, 3)
    ]
    ending = ending_of(fed(lines))
    assert ending.outcome is Outcome.hung
    assert ending.reason.startswith("the log ends while ranks wait"), ending.reason


def test_a_stuck_watchdog_that_terminates_its_process_crashed() -> None:
    # torch's heartbeat monitor finds the watchdog stuck, then LOG(FATAL)s: the process ends
    prefix = "[rank5]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 5]"
    lines = [
        *iterations(1, 3),
        f"{prefix} Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=1",
        "[rank5]:[F ProcessGroupNCCL.cpp:1169] [PG 0 Rank 5] [PG 0 Rank 5] ProcessGroupNCCL's watchdog got stuck for 600 seconds without making progress in monitoring enqueued collectives.",
    ]
    assert ending_of(fed(lines)).outcome is Outcome.crashed
    # counter-case: the monitor's notice alone, the process not yet terminated, is a wait
    assert ending_of(fed(lines[:-1])).outcome is Outcome.hung
    # torch >= 2.5 says it after the notice, in a line of its own (ProcessGroupNCCL.cpp's monitor:
    # `LOG(FATAL) << prefix << "Terminating the process " << kReason`): the cascade, not the root
    newer = [
        *lines[:-1],
        "[rank5]:[F429 14:03:49.385461578 ProcessGroupNCCL.cpp:1554] [PG ID 0 PG GUID 0(default_pg) Rank 5] [PG ID 0 PG GUID 0(default_pg) Rank 5] Terminating the process after attempting to dump debug info, due to ProcessGroupNCCL watchdog hang.",
    ]
    assert ending_of(fed(newer)).outcome is Outcome.crashed


def test_a_log_of_a_job_that_says_nothing_of_its_end_is_truncated() -> None:
    # a window of a run's output: the job ran (it printed), its end is not in the log
    engine = fed(["Loading extension module fused_adam..."])
    assert ending_of(engine).outcome is Outcome.truncated
    assert ending_of(engine).reason == "the log ends with no sign that the job ended"


# -- the silence each phase allows -------------------------------------------------------------


def test_the_silence_that_makes_a_hang() -> None:
    assert hang_threshold(None) == HANG_FLOOR_S == 30.0
    assert hang_threshold(2.0) == 30.0
    assert hang_threshold(100.0) == 500.0
    assert allowed_silence("training", 500.0) == 500.0
    assert allowed_silence("save", 500.0) == 600.0  # the first save: 10 min
    assert allowed_silence("save", 500.0, save_max=300.0) == 1500.0
    assert allowed_silence("eval", 500.0, eval_max=1000.0) == 1500.0
    assert allowed_silence("startup", 500.0) == 1800.0
    assert allowed_silence("first_step", 500.0) == 600.0


# -- the hang incident and the job ------------------------------------------------------------


def test_a_hang_is_rooted_at_the_last_progress_line_with_the_end_as_evidence() -> None:
    lines = [*iterations(1, 5), time_limit(START + timedelta(minutes=30))]
    engine = fed(lines)
    (banner,) = incidents_of(engine)
    assert stops_the_job(banner)
    ending = ending_of(engine)
    (hang,) = hang_incident([banner], engine.progress.last, ending)
    assert (hang.category, hang.iteration, hang.root_cause.line.lineno) == ("hang", 5, 5)
    assert [e.line.lineno for e in hang.evidence] == [6]
    assert hang.title == f"Training hung after iteration 5: {ending.reason}"
    assert hang.start == START + timedelta(seconds=50)


def test_a_hang_after_progress_without_numbers_names_no_iteration() -> None:
    # HF Trainer's log dicts (trainer.py `self.log`) carry an epoch, no step number
    dicts = [f"{{'loss': 2.{i}, 'learning_rate': 1e-05, 'epoch': 0.{i}}}" for i in range(1, 5)]
    engine = fed(dicts)
    last = engine.progress.last
    assert last is not None and "iteration" not in last.fields
    ending = Ending(Outcome.hung, "no progress for the last 1.0 min of the log", 60.0)
    (hang,) = hang_incident([], last, ending)
    assert hang.title == f"Training hung: {ending.reason}", hang.title


def test_a_hang_with_no_incident_is_a_new_one() -> None:
    engine = fed(iterations(1, 5))
    ending = Ending(Outcome.hung, "no progress for the last 1.0 min of the log", 60.0)
    (hang,) = hang_incident([], engine.progress.last, ending)
    assert (hang.category, hang.root_cause.line.lineno, hang.evidence) == ("hang", 5, ())
    # a crash is not turned into a hang
    crash = incidents_of(fed([*iterations(1, 5), CUDA]))
    assert hang_incident(crash, engine.progress.last, ending) == crash


def test_the_job_holds_what_the_ending_and_the_progress_say() -> None:
    engine = fed(iterations(95, 100))
    ending = ending_of(engine)
    job = make_job(
        ending,
        engine.world(),
        ["gpu-a18", "gpu-a17", "gpu-a18"],
        engine.first_time,
        engine.last_time,
        engine.progress,
        engine.progress.last_time(),
    )
    assert (job.outcome, job.outcome_reason) == (ending.outcome, ending.reason)
    assert job.hosts == ("gpu-a17", "gpu-a18")
    assert (job.first_iteration, job.last_iteration, job.train_iters) == (95, 100, 100)
    assert job.start == START + timedelta(seconds=950)
    assert job.end == job.last_progress == START + timedelta(seconds=1000)


def test_a_step_bar_at_its_total_is_the_runs_last_step() -> None:
    # diffusers' training examples draw one tqdm bar over max_train_steps
    def bar(n: int, total: int = 3000) -> str:
        return f"Steps: {n * 100 // total:3d}%|#         | {n}/{total} [59:47<00:00,  1.20s/it, loss=0.0033, lr=0.004]"

    assert ending_of(fed([bar(n) for n in (2998, 2999, 3000)])).outcome is Outcome.completed
    assert ending_of(fed([bar(n) for n in (1000, 1001, 1002)])).outcome is Outcome.truncated
    # an epoch's bar at its end is no run's end
    epoch = "Epoch 3: 100%|##########| 500/500 [01:23<00:00,  6.00it/s, loss=0.123, v_num=0]"
    assert ending_of(fed([epoch])).outcome is Outcome.truncated


def test_a_whole_run_eta_under_one_logging_interval_is_the_runs_last_step_line() -> None:
    """Trainers whose `eta:` counts to the end of the run (PaddleDetection's LogPrinter,
    OpenMMLab's runners, detectron2's printer) print their last step line with less left than one
    logging interval; a log cut mid-run ends on a line with more left."""
    ppdet = (
        "[08/02 {t}] ppdet.engine INFO: Epoch: [{e}] [{s:3d}/464] learning_rate: 0.000100 "
        "loss_class: 0.33 loss_bbox: 0.04 loss: 9.14 eta: {eta} batch_cost: 0.4682 "
        "data_cost: 0.0002 ips: 4.2716 images/s"
    )
    mmengine = (
        "2023/06/12 {t} - mmengine - INFO - Epoch(train) [{e}][{s:4d}/1250]  lr: 4.0000e-04  "
        "eta: {eta}  time: 0.3803  data_time: 0.0034  memory: 9870  loss: 0.4121"
    )
    d2 = "[04/11 {t}] d2.utils.events INFO:  eta: {eta}  iter: {s}  total_loss: 1.204  time: 0.4410  lr: 0.0031968  max_mem: 5403M"
    times = ("08:17:25", "08:19:13")
    for fmt, etas in (
        (ppdet, ("0:02:00", "0:00:28")),
        (mmengine, ("0:02:00", "0:00:19")),
        (d2, ("0:01:50", "0:00:00")),
    ):
        lines = [
            fmt.format(t=t, e=71, s=200 * i + 200, eta=eta)
            for i, (t, eta) in enumerate(zip(times, etas, strict=True))
        ]
        assert ending_of(fed(lines)).outcome is Outcome.completed, lines
        # the same lines with more than an interval left: the log was cut
        cut = [fmt.format(t=t, e=3, s=200 * i + 200, eta="1:42:00") for i, t in enumerate(times)]
        assert ending_of(fed(cut)).outcome is Outcome.truncated, cut
    # an ETA to the end of the epoch (torchvision's MetricLogger) says nothing of the run's end
    epoch = "{t} Epoch: [3]  [{s:4d}/1251]  eta: {eta}  lr: 0.000400  loss: 6.1203 (6.2451)  time: 0.3876  data: 0.0012  max mem: 15122"
    lines = [
        epoch.format(t=f"2024-01-01 {t}", s=s, eta=eta)
        for t, s, eta in zip(times, (1000, 1250), ("0:01:37", "0:00:00"), strict=True)
    ]
    assert ending_of(fed(lines)).outcome is Outcome.truncated


def test_a_cancel_long_after_the_training_loop_began_with_no_step_ends_a_hang(tmp_path) -> None:
    """The training loop said it begins (HF Trainer's banner, axolotl's `Starting trainer...`)
    and no step came: a person or the scheduler stopping the job more than ten minutes later
    stopped a hang; sooner, or with no such line (start-up allows 30 minutes), a cancel."""

    def job(begins: str, minutes: int) -> list[str]:
        return [
            "[2024-04-23 21:30:02,101] [INFO] [axolotl.utils.models.load_model:734] [PID:7741] [RANK:0] loading model",
            begins,
            f"^C[2024-04-23 21:{39 + minutes:02d}:33,011] torch.distributed.elastic.agent.server.api: [WARNING] Received Signals.SIGINT death signal, shutting down workers",
            f"[2024-04-23 21:{39 + minutes:02d}:33,012] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 7741 closing signal SIGINT",
        ]

    axolotl = "[2024-04-23 21:39:51,276] [INFO] [axolotl.train.train:173] [PID:7741] [RANK:0] Starting trainer..."
    hf = "[INFO|trainer.py:1749] 2024-04-23 21:39:51,276 >> ***** Running training *****"
    for begins in (axolotl, hf):
        _, doc, _ = analyze_doc(str(write(tmp_path, "a.log", job(begins, 15))))
        assert doc["job"]["outcome"] == "hung", doc["job"]
        assert doc["incidents"][0]["category"] == "hang", doc["incidents"]
        _, doc, _ = analyze_doc(str(write(tmp_path, "b.log", job(begins, 5))))
        assert doc["job"]["outcome"] == "cancelled", doc["job"]
    # still loading when it was stopped: start-up's allowance
    _, doc, _ = analyze_doc(
        str(
            write(
                tmp_path,
                "c.log",
                job(
                    "[2024-04-23 21:39:51,276] [INFO] [axolotl.utils.models.load_model:801] [PID:7741] [RANK:0] converting modules",
                    15,
                ),
            )
        )
    )
    assert doc["job"]["outcome"] == "cancelled", doc["job"]


def test_torchtune_saving_its_final_epoch_checkpoint_completed(tmp_path) -> None:
    steps = [
        f"1|{n}|Loss: 1.58: 100%|##########| {n}/1625 [21:54<00:00,  1.23it/s]"
        for n in (1624, 1625)
    ]
    final = "INFO:torchtune.utils._logging:Saving final epoch checkpoint."
    _, doc, _ = analyze_doc(str(write(tmp_path, "a.log", [*steps, final, steps[-1]])))
    assert doc["job"]["outcome"] == "completed", doc["job"]
    # the same steps without the final save: the log was cut
    _, doc, _ = analyze_doc(str(write(tmp_path, "b.log", [*steps, steps[-1]])))
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_a_step_srun_could_not_create_because_the_job_was_ending_is_no_cause() -> None:
    # srun waited for its step, the job was cancelled meanwhile: the cancel is the ending
    lines = [
        "srun: Job 4711 step creation temporarily disabled, retrying (Requested nodes are busy)",
        "srun: Job 4711 step creation still disabled, retrying (Requested nodes are busy)",
        "srun: error: Unable to create step for job 4711: Job/step already completing or completed",
        "slurmstepd: error: *** JOB 4711 ON gpu-a17 CANCELLED AT 2024-04-06T02:10:00 ***",
    ]
    engine = fed(lines)
    assert ending_of(engine).outcome is Outcome.cancelled
    assert incidents_of(engine)[0].root_cause.signature.startswith("slurm.")
    assert incidents_of(engine)[0].category == "cancelled"


def test_a_lost_node_is_the_ending_even_without_a_scheduler_banner() -> None:
    # Ray's control store marks a node dead: the node failed, whoever reports it
    dead = (
        "2024-04-06 02:01:10,118\tWARNING worker.py:2045 -- The node with node id: 9b8a7c6d5e4f3a2b"
        "1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d and address: 10.0.3.18 and node name: 10.0.3.18 "
        "has been marked dead because the detector has missed too many heartbeats from it."
    )
    ending = ending_of(fed([*iterations(1, 6), dead]))
    assert ending.outcome is Outcome.node_failure, ending
    # counter-case: a crash of the training code is a crash
    assert ending_of(fed([*iterations(1, 6), CUDA])).outcome is Outcome.crashed


def test_a_driver_that_raises_after_its_node_died_ended_in_a_crash() -> None:
    # the node is lost, then the driver (which outlived it) raises the actor's death: the job
    # ended in the driver's crash; the lost node stays the cause
    dead = (
        "2019-05-02 11:04:31,201\tERROR worker.py:1780 -- The node with client ID 5c0ffee15dead0"
        "beef0123456789abcdef012345 has been marked dead because the monitor has missed too many "
        "heartbeats from it."
    )
    raised = [
        "Traceback (most recent call last):",
        '  File "/srv/train.py", line 40, in <module>',
        "    result = trainer.fit()",
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
    ]
    engine = fed([*iterations(1, 6), dead, *raised])
    assert ending_of(engine).outcome is Outcome.crashed
    assert incidents_of(engine)[0].category == "node_failure"
    # the driver's traceback before the node's report says nothing of how the job ended
    assert ending_of(fed([*iterations(1, 6), *raised[:3], dead])).outcome is Outcome.node_failure


def test_a_log_that_ends_while_the_failed_process_tries_again_was_cut() -> None:
    # the etcd rendezvous handler raised, then its loop starts the next try: the agent is
    # alive, waiting for its rendezvous, when the log stops
    raised = [
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/dist-packages/etcd/client.py", line 595, in read',
        "    raise exc(msg, payload)",
        "etcd.EtcdKeyNotFound: Key not found : /torchelastic/p2p/run_7/rdzv/active_version",
    ]
    again = "INFO 2024-06-12 12:55:46,077 Attempting to join next rendezvous"
    engine = fed([*raised, again])
    assert ending_of(engine).outcome is Outcome.truncated
    assert incidents_of(engine)[0].category == "launcher_error"
    # the try before the error says nothing of how the log ended
    assert ending_of(fed([again, *raised])).outcome is Outcome.crashed


def test_a_failure_the_job_sat_through_until_its_time_limit_is_a_hang() -> None:
    # the limit an hour after the fault: the peers waited for a dead rank
    late = time_limit(START + timedelta(hours=1, minutes=1))
    assert ending_of(fed([*iterations(1, 6), FAULT, late])).outcome is Outcome.hung
    # the limit a few seconds after: the limit is the ending
    soon = time_limit(START + timedelta(minutes=1, seconds=15))
    assert ending_of(fed([*iterations(1, 6), FAULT, soon])).outcome is Outcome.timelimit


def test_every_rank_printing_the_step_is_one_step_for_the_run_s_cadence() -> None:
    # torchtitan on 4 ranks with no log filter: each step 60 s, printed by every rank within
    # milliseconds; cancelled 40 s after the last step. The cadence is the step's 60 s, not the
    # ranks' milliseconds, so 40 s of silence is no hang.
    lines = [
        f"[rank{r}]:{START + timedelta(seconds=60 * step):%Y-%m-%d %H:%M:%S},{100 + 3 * r} - INFO -  step: {step:2d}  loss:  7.1000  memory: 31.20GiB(39.50%)  tps: 2,100"
        for step in range(1, 6)
        for r in range(4)
    ]
    cancel = START + timedelta(seconds=340)
    lines.append(
        f"slurmstepd: error: *** JOB 551 ON gpu-a17 CANCELLED AT {cancel:%Y-%m-%dT%H:%M:%S} ***"
    )
    engine = fed(lines)
    assert engine.progress.median_interval_s() == 60.0
    assert ending_of(engine).outcome is Outcome.cancelled


def test_srun_cancelling_a_step_right_after_a_crash_is_still_a_crash() -> None:
    cancel = "slurmstepd: error: *** STEP 4711.0 ON gpu-a17 CANCELLED AT 2024-04-06T02:01:12 ***"
    assert ending_of(fed([*iterations(1, 6), FAULT, cancel])).outcome is Outcome.crashed


def _teardown(rank: int, how: str = "Destroy") -> str:
    """NCCL's line (src/init.cc) when a process tears its communicator down."""
    return f"gpu-b3:{700 + rank}:{700 + rank} [{rank}] NCCL INFO comm 0x5f{rank}a0 rank {rank} nranks 2 cudaDev {rank} busId {rank}b000 - {how} COMPLETE"


def test_a_run_whose_processes_tore_their_communicators_down_completed(tmp_path) -> None:
    """No failure and no end banner, but every process took its NCCL communicator down after the
    last step: the run ended, it was not cut off. With a step after the teardown (a new
    communicator, a next phase) the log is only cut; with a failure the abort is the crash's."""
    steps = iterations(1, 5)
    _, doc, _ = analyze_doc(
        str(write(tmp_path, "a.log", [*steps, _teardown(0), _teardown(1, "Abort")]))
    )
    assert (doc["job"]["outcome"], doc["incidents"]) == ("completed", []), doc["job"]
    assert "tore their communicators down" in doc["job"]["outcome_reason"]
    assert "- Abort COMPLETE (line 7" in doc["job"]["outcome_reason"]
    _, doc, _ = analyze_doc(str(write(tmp_path, "b.log", [*steps[:3], _teardown(0), *steps[3:]])))
    assert doc["job"]["outcome"] == "truncated"
    _, doc, _ = analyze_doc(str(write(tmp_path, "c.log", [*steps, CUDA, _teardown(2, "Abort")])))
    assert doc["job"]["outcome"] == "crashed"


def test_nccl_s_own_reports_at_the_end_of_a_log_say_nothing_of_how_its_processes_ended(
    tmp_path,
) -> None:
    """NCCL returns an error to its caller, which raises, aborts the communicator or waits: a log
    that ends on the library's WARN and its return codes (src/misc/socket.cc, proxy.cc) shows no
    process ending. The caller's exception, or its abort of the communicator, does."""
    nccl = [
        "node-7:83:2526 [0] misc/socket.cc:503 NCCL WARN Net : Call to recv from 10.0.0.9<41468> failed : Connection timed out",
        "node-7:83:2526 [0] NCCL INFO misc/socket.cc:520 -> 2",
        "node-7:83:2520 [0] NCCL INFO proxy.cc:614 -> 2 [Proxy Thread]",
    ]
    steps = iterations(1, 5)
    _, doc, _ = analyze_doc(str(write(tmp_path, "a.log", [*steps, *nccl])))
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    assert "no process seen ending" in doc["job"]["outcome_reason"]
    raised = "[rank3]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL version 2.21.5"
    _, doc, _ = analyze_doc(str(write(tmp_path, "b.log", [*steps, *nccl, raised])))
    assert doc["job"]["outcome"] == "crashed", doc["job"]
    _, doc, _ = analyze_doc(str(write(tmp_path, "c.log", [*steps, *nccl, _teardown(3, "Abort")])))
    assert doc["job"]["outcome"] == "crashed", doc["job"]


def test_detectron2_s_final_checkpoint_ends_its_training(tmp_path) -> None:
    """fvcore's PeriodicCheckpointer writes `model_final.pth` once, after the last iteration:
    the steps before it are progress, and the run completed (a periodic save is no end)."""
    step = "[04/11 08:{m:02d}:40] d2.utils.events INFO:  eta: 0:{left:02d}:00  iter: {it}  total_loss: 1.204  loss_cls: 0.4412  time: 0.4410  data_time: 0.0107  lr: 0.0031968  max_mem: 5403M"
    steps = [step.format(m=i, left=9 - i, it=20 * i + 19) for i in range(5)]
    save = "[04/11 08:05:10] fvcore.common.checkpoint INFO: Saving checkpoint to ./output/model_{name}.pth"
    _, doc, _ = analyze_doc(str(write(tmp_path, "a.log", [*steps, save.format(name="final")])))
    assert doc["job"]["outcome"] == "completed", doc["job"]
    assert doc["job"]["last_iteration"] == 99
    _, doc, _ = analyze_doc(str(write(tmp_path, "b.log", [*steps, save.format(name="0000099")])))
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    # the writer hook reports the last step after the checkpointer: still the same step
    last = step.format(m=5, left=0, it=119)
    _, doc, _ = analyze_doc(
        str(write(tmp_path, "c.log", [*steps, save.format(name="final"), last]))
    )
    assert doc["job"]["outcome"] == "completed", doc["job"]
    # the evaluation at the last iteration runs after it: its failure is the run's own
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 23.65 GiB of which 1.02 GiB is free."
    _, doc, _ = analyze_doc(str(write(tmp_path, "d.log", [*steps, save.format(name="final"), oom])))
    assert (doc["job"]["outcome"], doc["incidents"][0]["category"]) == ("crashed", "oom_gpu")


def test_ray_train_s_reporter_tells_progress_and_the_end(tmp_path) -> None:
    """Ray Train's console reporter (tune/experimental/output.py): an iteration and a checkpoint
    per report, `completed after N iterations` at the end, `errored after` on a failure."""
    report = (
        "Training finished iteration {i} at 2024-05-02 10:{i:02d}:00. Total running time: {i}min 0s"
    )
    saved = "Training saved a checkpoint for iteration {i} at: (local)/home/ray/ray_results/run/checkpoint_{i:06d}"
    run = [line.format(i=i) for i in range(1, 4) for line in (report, saved)]
    done = (
        "Training completed after 3 iterations at 2024-05-02 10:03:05. Total running time: 3min 5s"
    )
    _, doc, _ = analyze_doc(str(write(tmp_path, "a.log", [*run, done])))
    assert doc["job"]["outcome"] == "completed", doc["job"]
    assert doc["job"]["last_iteration"] == 3
    # a Tune trial's completion is one trial's, not the experiment's
    trial = done.replace("Training", "Trial TorchTrainer_1a2b3_00000")
    _, doc, _ = analyze_doc(str(write(tmp_path, "b.log", [*run, trial])))
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    errored = (
        "Training errored after 3 iterations at 2024-05-02 10:03:05. Total running time: 3min 5s"
    )
    _, doc, _ = analyze_doc(str(write(tmp_path, "c.log", [*run, errored])))
    assert doc["job"]["outcome"] == "crashed", doc["job"]


def test_a_throughput_benchmark_s_total_ends_its_run(tmp_path) -> None:
    """Horovod's synthetic benchmarks and tf_cnn_benchmarks print a total once the timed loop is
    over; their step lines are progress."""
    iters = [f"[1,0]<stdout>:Iter #{i}: 402.{i} img/sec per GPU" for i in range(10)]
    total = "[1,0]<stdout>:Total img/sec on 16 GPU(s): 6431.2 +-51.0"
    _, doc, _ = analyze_doc(str(write(tmp_path, "a.log", [*iters, total])))
    assert (doc["job"]["outcome"], doc["job"]["last_iteration"]) == ("completed", 9), doc["job"]
    _, doc, _ = analyze_doc(str(write(tmp_path, "b.log", iters)))
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    steps = [f"{i}\timages/sec: 154.8 +/- 0.4 (jitter = 3.6)\t8.{i}" for i in range(10, 101, 10)]
    rule = "-" * 64
    _, doc, _ = analyze_doc(
        str(write(tmp_path, "c.log", [*steps, rule, "total images/sec: 308.27", rule]))
    )
    assert (doc["job"]["outcome"], doc["job"]["last_iteration"]) == ("completed", 100), doc["job"]


def test_the_schedulers_last_word_decides_how_it_ended(tmp_path) -> None:
    """slurmstepd cancels the step (no reason given), then the job `DUE TO PREEMPTION`: the job
    was preempted (slurmstepd's `*** JOB %u ON %s CANCELLED AT %s DUE TO %s ***`)."""
    step = "slurmstepd: error: *** STEP 4711.0 ON gpu-a17 CANCELLED AT 2024-04-06T02:01:10 ***"
    job = "slurmstepd: error: *** JOB 4711 ON gpu-a17 CANCELLED AT 2024-04-06T02:01:40 DUE TO PREEMPTION ***"
    _, doc, _ = analyze_doc(str(write(tmp_path, "a.log", [*iterations(1, 5), step, job])))
    assert doc["job"]["outcome"] == "preempted", doc["job"]
    assert "then the scheduler: slurmstepd: error: *** JOB 4711" in doc["job"]["outcome_reason"]
    # one stop: the step's plain cancel is where it shows first, the job's banner says why
    assert doc["incidents"][0]["category"] == "preemption", doc["incidents"][0]
    assert doc["incidents"][0]["root_cause"]["text"] == step
    _, doc, _ = analyze_doc(str(write(tmp_path, "b.log", [*iterations(1, 5), step])))
    assert doc["job"]["outcome"] == "cancelled", doc["job"]
    assert doc["incidents"][0]["category"] == "cancelled", doc["incidents"][0]
    # torchrun's own SignalException after the time limit says no more than the limit did
    limit = time_limit(datetime(2024, 4, 6, 2, 1, 10))
    signal = (
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 2449 got signal: 15"
    )
    _, doc, _ = analyze_doc(str(write(tmp_path, "c.log", [*iterations(1, 5), limit, signal])))
    assert doc["job"]["outcome"] == "timelimit", doc["job"]


def test_silence_is_measured_in_logged_intervals_not_in_the_step_time_a_line_states() -> None:
    # a line every 200 steps of 0.54 s (PaddleDetection's LogPrinter states the step's time):
    # lines come 108 s apart, and a log that ends 80 s after the last one was not silent for
    # five of its intervals
    def line(t: int, epoch: int, step: int) -> str:
        stamp = f"[08/02 {2 + t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}]"
        return (
            f"{stamp} ppdet.engine INFO: Epoch: [{epoch}] [{step:3d}/464] learning_rate: 0.000100"
            " loss: 9.14 eta: 0:10:28 batch_cost: 0.5412 data_cost: 0.0009 ips: 3.6953 images/s"
        )

    steps = [line(108 * i, i // 3, 200 * (i % 3)) for i in range(9)]
    quiet = "[08/02 02:15:44] ppdet.engine INFO: Eval iter: 0"
    engine = fed([*steps, quiet])
    assert engine.progress.logged_interval_s() == 108.0
    assert engine.progress.median_interval_s() == 0.5412
    assert ending_of(engine).outcome is Outcome.truncated


def test_a_script_saying_its_training_loop_ended_completed_the_run(tmp_path) -> None:
    """The tutorial's `print('Finished Training')` and its paraphrases, alone on the log's last
    line with no failure and no step after: the loop returned. A step after it (a script that says
    so per epoch), or a failure after it, is not an ending."""
    steps = [
        f"Train Epoch: 2 [{n}/60000 ({n // 600}%)]\tLoss: {2.3 - n / 100000:.6f}"
        for n in (10000, 20000, 30000, 40000, 50000)
    ]
    for said in ("Finished Training", "Training is finished", "worker 1: Training complete!"):
        _, doc, _ = analyze_doc(str(write(tmp_path, "a.log", [*steps, said])))
        assert doc["job"]["outcome"] == "completed", (said, doc["job"])
    _, doc, _ = analyze_doc(str(write(tmp_path, "b.log", [*steps, "Training done", steps[0]])))
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    _, doc, _ = analyze_doc(str(write(tmp_path, "c.log", steps)))
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    failed = [
        *steps,
        "Finished Training",
        "Traceback (most recent call last):",
        '  File "train.py", line 88, in <module>',
        "    torch.save(net.state_dict(), PATH)",
        "OSError: [Errno 28] No space left on device",
    ]
    _, doc, _ = analyze_doc(str(write(tmp_path, "d.log", failed)))
    assert doc["job"]["outcome"] == "crashed", doc["job"]


def test_sevennet_ending_its_last_planned_epoch_completed_the_run(tmp_path) -> None:
    """SevenNet's epoch header states the epochs planned (`Epoch n/N  lr: x`), its timer closes
    each epoch (`Epoch n elapsed: H:MM:SS.ss`): the close of epoch N is the end of training, with
    or without the script's `Total wall time` after it. A log cut before it was cut."""

    def epochs(first: int, last: int, total: int) -> list[str]:
        out = []
        for n in range(first, last + 1):
            out += [
                f"Epoch {n}/{total}  lr: 0.000{total - n + 1:03d}",
                "Train               0.002594            0.032524",
                f"Epoch {n} elapsed: 0:08:{n % 60:02d}.22",
            ]
        return out

    _, doc, _ = analyze_doc(str(write(tmp_path, "a.log", epochs(47, 50, 50))))
    assert doc["job"]["outcome"] == "completed", doc["job"]
    assert "last epoch its plan states ended" in doc["job"]["outcome_reason"], doc["job"]
    _, doc, _ = analyze_doc(str(write(tmp_path, "b.log", epochs(47, 49, 50))))
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    # the last epoch began but did not end
    _, doc, _ = analyze_doc(str(write(tmp_path, "c.log", epochs(47, 50, 50)[:-1])))
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    wall = [*epochs(49, 50, 50), "Total wall time: 6:47:55.03"]
    _, doc, _ = analyze_doc(str(write(tmp_path, "d.log", wall)))
    assert doc["job"]["outcome"] == "completed", doc["job"]


def test_early_stopping_ends_a_time_series_library_training_loop(tmp_path) -> None:
    """Time-Series-Library's train(): `EarlyStopping counter: n out of n`, `Early stopping`, then
    the loop breaks and the test runs: the run ended there. Steps after it are the next run."""
    steps = [f"\titers: {n}00, epoch: 11 | loss: 0.2{n}60688" for n in range(1, 6)]
    stop = ["Epoch: 11 cost time: 914.84", "EarlyStopping counter: 10 out of 10", "Early stopping"]
    test = ["loading model", "test shape: (2785, 96, 7) (2785, 96, 7)", "mse:0.41, mae:0.39"]
    _, doc, _ = analyze_doc(str(write(tmp_path, "a.log", [*steps, *stop, *test])))
    assert doc["job"]["outcome"] == "completed", doc["job"]
    _, doc, _ = analyze_doc(str(write(tmp_path, "b.log", [*steps, *stop[:2]])))
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    _, doc, _ = analyze_doc(str(write(tmp_path, "c.log", [*steps, *stop, *test, *steps])))
    assert doc["job"]["outcome"] == "truncated", doc["job"]
