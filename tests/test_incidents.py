"""Incident rules for logs written by others: the incident of last resort, culprits from
partial evidence, warnings that name a failure, and how a log that stops mid-story ended.

Every log here is constructed (none is a corpus line): each test states a general fact about a
format and fails if logscope stops applying it.
"""

from __future__ import annotations

from typing import Any

import pytest

from logscope.analysis.culprits import World
from logscope.analysis.incidents import SPLIT_AFTER_PROGRESS, cascade_ranks
from logscope.model import Event, Incident, Stream

from .helpers import (
    Run,
    assert_root,
    child_failed_block,
    fed,
    incidents_of,
    lineno,
    verdict_incident,
)


def failed(
    run: Run, lines: list[str], category: str | None, root: int | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The document and verdict incident of a log that failed: exit 1, the verdict's category
    (None: not checked) and its root cause at physical line `root`, as written (None: not
    checked)."""
    code, doc, path = run(lines)
    assert code == 1, doc
    inc = verdict_incident(doc)
    if category is not None:
        assert inc["category"] == category, inc
    if root is not None:
        assert_root(inc, path, root, lines[root - 1])
    return doc, inc


def healthy(run: Run, lines: list[str]) -> dict[str, Any]:
    """The document of a log with no incident: exit 0, no verdict."""
    code, doc, _ = run(lines)
    assert code == 0 and doc["verdict"] is None, doc["incidents"]
    return doc


# --------------------------------------------------------------------------------------------
# never healthy on a plain failure


def test_unrecognized_error_line_is_an_incident(run: Run) -> None:
    lines = [
        "step 10 done",
        "worker 3: fatal: lost the lease on /shared/locks/job-42, giving up",
        "worker 3: fatal: lost the lease on /shared/locks/job-42, giving up",
    ]
    doc, _inc = failed(run, lines, "unknown", 2)
    assert doc["job"]["outcome"] == "crashed", doc["job"]


def test_glog_fatal_record_is_the_failure_whatever_its_words(run: Run) -> None:
    # LOG(FATAL) writes its record, then `*** Check failure stack trace: ***` and aborts
    # (google/glog src/logging.cc): the record says why, though no error word is in it
    trace = "*** Check failure stack trace: ***"
    frame = "    @     0x7f50dfba322e  google::LogMessage::Fail()"
    record = "F20251104 11:02:07.000317 90211 shard_index.cc:88] No shard left for reader 3"
    _doc, inc = failed(run, ["epoch 1 step 40", record, trace, frame], "unknown", 2)
    assert "No shard left for reader 3" in inc["title"], inc
    # behind a rank's tee header, in the year-less form
    tee = "[default2]:F1104 11:02:07.000317 90211 shard_index.cc:88] No shard left for reader 3"
    failed(run, ["[default0]:epoch 1", tee, f"[default2]:{trace}", f"[default2]:{frame}"], None, 2)
    # the same words at a level below FATAL, with no trace after them: no failure
    healthy(run, ["epoch 1 step 40", record.replace("F20251104", "W20251104")])


def test_unrecognized_line_takes_a_rule_category(run: Run) -> None:
    # no signature knows the sentence; the words say what failed (classify.nccl)
    lines = ["bootstrap: NCCL communicator setup failed on trainer-7, retries exhausted"]
    failed(run, lines, "comm_error", 1)


def test_info_and_warning_lines_are_not_failures(run: Run) -> None:
    lines = [
        "[2024-05-01 10:00:00,000] [INFO] [engine.py:12:step] failed to find optional op, using"
        " fallback",
        "gpu7:1234:1300 [0] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.",
        "W0501 10:00:01.000000 1234 torch/distributed/run.py:793] fatal warnings are disabled",
    ]
    healthy(run, lines)


def test_a_level_field_after_an_undecoded_time_says_warning(run: Run) -> None:
    # `%(asctime)s | %(levelname)s | %(message)s` with a comma in the date, loguru's padded level,
    # a `|date|time| [LEVEL]` header: none a prefix layer logscope knows
    lines = [
        "2025-03-01,10:00:01 | WARNING | Handling webdataset error (ValueError()). Ignoring.",
        "2025-03-01 10:00:02.114 | WARNING  | data:load:88 - shard 17 failed to open, skipped",
        "|2025-03-01|10:00:03.500| [WARNING] decoding error in sample 9912, skipped",
    ]
    healthy(run, lines)
    # counter-case: the same header at error level
    failed(run, ["2025-03-01,10:00:04 | ERROR | shard 17 failed to open"], None, 1)


def test_a_components_tag_then_its_level_in_words_says_info(run: Run) -> None:
    # `[component] Info: ` (a cluster agent's, a plugin's own logger): the level is the line's own
    lines = [
        "[Auto Restart] Info: job 12 step 0 failed - restarting the step on healthy nodes",
        "[dataloader]: WARNING: worker 3 failed to decode shard 17, skipped",
    ]
    healthy(run, lines)
    # counter-case: the same tag at error level, and an info word inside an exception's message
    failed(run, ["[Auto Restart] Error: job 12 failed, no healthy nodes left"], None, 1)
    failed(run, ["RuntimeError: [worker] Info: collective failed"], None, 1)
    # a time in brackets is no component's tag
    failed(run, ["[12/06/23 19:32:10] INFO: worker 3 failed: killed"], None, 1)


def test_counts_of_no_failures_and_go_loggers_info_lines_are_not_failures(run: Run) -> None:
    lines = [
        # an operator's reconcile status: no replica failed
        'time="2024-05-01T10:00:00Z" level=info msg="Job=train-7, ReplicaType=Worker expected=4,'
        ' running=4, succeeded=0, failed=0"',
        "epoch 3 summary: steps=1200 skipped=0 errors: 0 failed: 0",
        'time="2024-05-01T10:00:02Z" level=debug msg="probe failed once, rescheduling"',
    ]
    healthy(run, lines)
    # counter-case: a count that is not zero, at an error level, is a failure
    failed(run, ['time="2024-05-01T10:00:03Z" level=error msg="replicas failed=2"'], None, 1)


def test_python_warnings_are_not_failures(run: Run) -> None:
    # the warnings module's `file:line: Category: message`, whatever words the message holds
    lines = [
        "/opt/venv/lib/python3.10/site-packages/torch/autograd/graph.py:744: UserWarning: Error"
        " detected in the grad strides of a bucket view; this is not a failure",
        r"C:\envs\t\lib\site-packages\lightning\trainer.py:52: PossibleUserWarning: The"
        " dataloader failed to find num_workers",
    ]
    healthy(run, lines)
    # counter-case: the same words after a `file:line:` with no warning category are an error
    failed(run, ["graph.py:744: Error detected in the grad strides of a bucket view"], None, 1)
    # nor a warning glued to a progress bar's end, nor the source line the module prints under it
    bar = " 12%|#2        | 14/113 [01:02<07:21,  4.46s/it]"
    healthy(
        run,
        [
            bar + "/srv/data/clips.py:88: UserWarning: Failed to decode clip 7: no moov atom",
            '  warnings.warn(f"Failed to decode clip {idx}: {err}")',
        ],
    )


def test_known_failure_beats_unrecognized_lines(run: Run) -> None:
    lines = [
        "loader: error reading shard 17, skipping",
        "[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered",
    ]
    failed(run, lines, "cuda_error", 2)


def test_exception_category_from_its_type(run: Run) -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 88, in save',
        "    os.makedirs(out)",
        "PermissionError: [Errno 13] Permission denied: '/scratch/ckpt/run-7'",
    ]
    failed(run, lines, "io_error", 4)


def test_cpp_exception_category_from_its_message(run: Run) -> None:
    lines = [
        "[1,4]<stderr>:terminate called after throwing an instance of 'std::runtime_error'",
        "[1,4]<stderr>:  what():  cudaMemcpyAsync failed: unspecified launch failure",
        "[1,4]<stderr>:[gpu-n04:31337] *** Process received signal ***",
        "[1,4]<stderr>:[gpu-n04:31337] Signal: Aborted (6)",
    ]
    # the root is the what() line: it says more than the terminate line
    _doc, inc = failed(run, lines, "cuda_error", 2)
    assert inc["culprit"]["rank"] == 4, inc["culprit"]


def test_lines_that_retry_or_precede_the_end_are_not_the_failure(run: Run) -> None:
    lines = [
        "Epoch 1: 40%|####      | 400/1000 [01:00<01:30]uploader: Network error (Timeout), "
        "entering retry loop.",
        "checkpoint sync failed on attempt 1, retrying in 10 s",
        "{'train_runtime': 919.1, 'train_samples_per_second': 1.08, 'epoch': 1.0}",
    ]
    healthy(run, lines)
    # an error the job outlived: it says it finished after it
    lines = ["shard 3: error: checksum mismatch, skipping", *lines[2:]]
    healthy(run, lines)


def test_a_raised_exception_is_a_failure_whatever_it_says(run: Run) -> None:
    # `Connection reset by peer` alone is only a hint (a peer died), but raised it ended the
    # process: a log that shows nothing else still failed
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 40, in <module>',
        "    dist.init_process_group(backend='gloo')",
        "ConnectionResetError: [Errno 104] Connection reset by peer",
    ]
    failed(run, lines, "comm_error", 4)


def test_traceback_cut_before_its_exception_is_a_failure(run: Run) -> None:
    lines = [
        "gpu-17: step 5 loss 2.31",
        "gpu-17: Traceback (most recent call last):",
        'gpu-17:   File "pretrain.py", line 88, in <module>',
        "gpu-17:     main(args)",
    ]
    failed(run, lines, "python_exception", 2)


def test_interrupted_or_exited_traceback_is_no_failure(run: Run) -> None:
    for last in ("KeyboardInterrupt", "SystemExit: 0"):
        lines = [
            "Traceback (most recent call last):",
            '  File "train.py", line 12, in <module>',
            "    time.sleep(60)",
            last,
        ]
        _code, doc, _ = run(lines)
        assert all(i["category"] != "python_exception" for i in doc["incidents"]), doc["incidents"]


def test_elastic_error_record_is_the_exception_it_records(run: Run) -> None:
    # torch 1.9-1.10's @record logs the exception as JSON when TORCHELASTIC_ERROR_FILE is unset;
    # the paste often ends inside the escaped py_callstack
    head = [
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous'ing worker group",
        "ERROR:torch.distributed.elastic.multiprocessing.errors.error_handler:{",
        '  "message": {',
    ]
    tail = ['    "extraInfo": {', '      "py_callstack": "Traceback (most recent call last):\\n']
    failed(
        run,
        [*head, '    "message": "OSError: [Errno 28] No space left on device",', *tail],
        "io_error",
        4,
    )
    # the agent's own: the rendezvous was closed under it, which alone still ended this node
    failed(run, [*head, '    "message": "RendezvousClosedError: ",', *tail], "launcher_error", 4)


def test_xid_cleanup_that_names_its_cause_carries_it(run: Run) -> None:
    # newer drivers append ` caused by previous Xid N` to the cleanup: an excerpt that starts
    # after the Xid 79 still tells a dead GPU; a cleanup alone (a killed process) is no failure
    cleanup = "[ 4410.22] NVRM: Xid (PCI:0000:3b:00): 45, pid=771204, name=python, Ch 00000008"
    healthy(run, [cleanup])
    failed(run, [f"{cleanup} caused by previous Xid 79"], "gpu_hardware", 1)


def test_failure_signal_handlers_say_which_signal(run: Run) -> None:
    # abseil's and glog's handlers print the caught signal above a native stack
    frame = "    @     0x7f3a2c1ff700  (unknown)  (unknown)"
    failed(run, ["*** SIGSEGV received at time=1733990031 on cpu 17 ***", frame], "segfault", 1)
    glog = "*** SIGBUS (@0x7f00dead) received by PID 4021 (TID 0x7f3a) from PID 0; stack trace: ***"
    failed(run, [glog, frame], "segfault", 1)
    # an abort follows what the process printed first: gloo's libuv assertion
    uv = "[/src/third_party/gloo/gloo/transport/uv/libuv.h:602] uv_listen: address already in use"
    failed(run, [uv, "*** SIGABRT received at time=1733990031 ***", frame], "comm_error", 1)
    # a SIGTERM was sent: no failure of its own
    healthy(run, ["step 100/100 loss 1.02", "*** SIGTERM received at time=1733990031 on cpu 5 ***"])


def test_lsf_job_report_says_how_the_job_ended(run: Run) -> None:
    # the report LSF appends to the job's output file, with bacct's termination reason
    report = [
        "Job <4711>: <pretrain> in cluster <c1> Exited",
        "Job was executed on host(s) <8*gpu-a17>, in queue <gpu>, as user <ml>.",
    ]
    for reason, outcome in (
        ("TERM_RUNLIMIT: job killed after reaching LSF run time limit.", "timelimit"),
        ("TERM_OWNER: job killed by owner.", "cancelled"),
    ):
        _code, doc, _ = run([" iteration 10/100 | lm loss: 2.1E+00 |", *report, reason])
        assert doc["job"]["outcome"] == outcome, doc["job"]


def test_lsf_job_reports_state_says_whether_the_job_is_done(run: Run) -> None:
    # DONE: the job finished, whether the report stands above its output or below it
    # Megatron's step lines; an error line the run trained on after (no incident either way)
    steps = [
        f" iteration {i}/100 | consumed samples: {i * 64} | elapsed time per iteration (ms):"
        f" 812.4 | lm loss: 2.{i}E+00 |"
        for i in (10, 20, 30, 40, 50)
    ]
    noise = "rank 0: failed to load the optional fused kernel, using the fallback"
    done = ["Subject: Job 4711: <pretrain> in cluster <c1> Done", "", "Successfully completed."]
    for lines in ([*steps[:1], noise, *steps[1:], *done], [*done, *steps[:1], noise, *steps[1:]]):
        code, doc, _ = run(lines)
        assert code == 0 and doc["job"]["outcome"] == "completed", doc["job"]
        assert doc["incidents"] == [], doc["incidents"]
    # without the report the same log is a run still going
    _code, doc, _ = run([*steps[:1], noise, *steps[1:]])
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    # EXIT with a code of the job's own: it failed, the error above is the cause
    exited = ["Subject: Job 4712: <pretrain> in cluster <c1> Exited", "Exited with exit code 1."]
    failed(run, [*steps, "ValueError: bad shard", *exited], "python_exception", len(steps) + 1)
    _code, doc, _ = run([*steps, *exited])
    assert doc["job"]["outcome"] == "crashed", doc["job"]
    # an administrator's kill in newer LSF's words
    _code, doc, _ = run([*steps, exited[0], "TERM_ADMIN: job killed by root or an administrator."])
    assert doc["job"]["outcome"] == "cancelled", doc["job"]


def test_specific_error_beats_a_catch_all_in_one_burst(run: Run) -> None:
    lines = [
        "terminate called after throwing an instance of 'std::system_error'",
        "  what():  Broken pipe",
        "terminate called after throwing an instance of 'c10::Error'",
        "  what():  CUDA error: uncorrectable NVLink error detected during the execution",
    ]
    failed(run, lines, "gpu_hardware", 4)


# --------------------------------------------------------------------------------------------
# culprits from partial evidence


def test_mpirun_signal_report_names_the_rank(run: Run) -> None:
    lines = [
        "--------------------------------------------------------------------------",
        "mpirun noticed that process rank 5 with PID 3121 on node gpu-b09 exited on signal 9 "
        "(Killed).",
        "--------------------------------------------------------------------------",
    ]
    _doc, inc = failed(run, lines, "process_killed", 2)
    assert inc["culprit"]["rank"] == 5 and inc["culprit"]["host"] == "gpu-b09", inc["culprit"]


def test_same_stream_names_the_rank_a_few_lines_on(run: Run) -> None:
    lines = [
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
        "[E ProcessGroupNCCL.cpp:916] [Rank 3] NCCL watchdog thread terminated with exception: "
        "CUDA error: an illegal memory access was encountered",
    ]
    _doc, inc = failed(run, lines, None, 1)
    assert inc["culprit"]["rank"] == 3, inc["culprit"]


def test_store_barrier_waiters_name_the_missing_rank(run: Run) -> None:
    # torch 2.1 wording (num_workers_joined); rank 2 never reaches init
    lines = [
        f"INFO:torch.distributed.distributed_c10d:Waiting in store based barrier to initialize "
        f"process group for rank: {r}, key: store_based_barrier_key:1 (world_size=4, "
        f"num_workers_joined=3, timeout=0:30:00)"
        for r in (3, 0, 1)
    ]
    doc, inc = failed(run, lines, "hang", 1)
    assert inc["culprit"]["rank"] == 2, inc["culprit"]
    assert doc["job"]["outcome"] == "hung", doc["job"]


def test_default_process_group_rank_names_the_culprit(run: Run) -> None:
    lines = [
        "(RayWorkerWrapper pid=9120) [PG ID 0 PG GUID 0(default_pg) Rank 5] Process group watchdog "
        "thread terminated with exception: CUDA error: an illegal memory access was encountered",
    ]
    _doc, inc = failed(run, lines, None, None)
    assert inc["culprit"]["rank"] == 5, inc["culprit"]
    assert inc["culprit"]["confidence"] >= 0.7, inc["culprit"]


def test_ddp_error_naming_its_rank_at_its_end_names_the_culprit(run: Run) -> None:
    # reducer.cpp ends the unused-parameters error with the rank of DDP's group that raised it
    lines = [
        "RuntimeError: Expected to have finished reduction in the prior iteration before starting "
        "a new one. This error indicates that your module has parameters that were not used in "
        "producing loss.",
        "making sure all `forward` function outputs participate in calculating loss.",
        "Parameter indices which did not receive grad for rank 6: 101 102",
    ]
    _doc, inc = failed(run, lines, "python_exception", 1)
    assert inc["culprit"]["rank"] == 6, inc["culprit"]


def test_other_process_group_rank_is_not_a_global_rank(run: Run) -> None:
    lines = [
        "[PG ID 3 PG GUID 3 Rank 1] Process group watchdog thread terminated with exception: "
        "CUDA error: an illegal memory access was encountered",
    ]
    _doc, inc = failed(run, lines, None, None)
    culprit = inc["culprit"]
    assert culprit is None or culprit["rank"] is None, culprit


def test_bare_error_belongs_to_the_one_failed_worker(run: Run) -> None:
    lines = [
        "terminate called after throwing an instance of 'std::bad_alloc'",
        "  what():  std::bad_alloc",
        "E0301 09:00:00.000000 4000 torch/distributed/elastic/multiprocessing/api.py:874] failed "
        "(exitcode: -6) local_rank: 1 (pid: 4242) of binary: /usr/bin/python3",
    ]
    _doc, inc = failed(run, lines, "oom_host", None)
    assert inc["culprit"]["rank"] == 1, inc["culprit"]


def test_launcher_names_the_first_failed_rank(run: Run) -> None:
    # every rank prints Horovod's shutdown (a cascade); mpirun names the one that exited first
    shutdown = (
        "RuntimeError: Horovod has been shut down. This was caused by an exception on one of the "
        "ranks or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks "
        "finished execution."
    )
    lines = [f"[1,{r}]<stderr>:{shutdown}" for r in range(4)] + [
        "Primary job  terminated normally, but 1 process returned",
        "a non-zero exit code. Per user-direction, the job has been aborted.",
        "mpirun detected that one or more processes exited with non-zero status, thus causing",
        "the job to be terminated. The first process to do so was:",
        "",
        "  Process name: [[4123,1],2]",
        "  Exit code:    1",
    ]
    _doc, inc = failed(run, lines, None, 1)
    assert inc["culprit"]["rank"] == 2, inc["culprit"]


def test_catch_all_error_after_own_timeout_is_cascade(run: Run) -> None:
    timeout = (
        "[rank{r}]:[E301 09:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=7, OpType=BROADCAST, NumelIn=8, "
        "NumelOut=8, Timeout(ms)=600000) ran for 600010 milliseconds before timing out."
    )
    lines = [
        timeout.format(r=1),
        timeout.format(r=0),
        "[rank1]: RuntimeError: Expected to have finished reduction in the prior iteration",
    ]
    failed(run, lines, "collective_timeout", 1)


_STUCK = (
    "[rank{r}]:[F301 09:10:00.000000000 ProcessGroupNCCL.cpp:1169] [PG 0 Rank {r}] "
    "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in "
    "monitoring enqueued collectives."
)
_TIMEOUT = (
    "[rank{r}]:[E301 09:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=8, "
    "NumelOut=8, Timeout(ms)=600000) ran for 600010 milliseconds before timing out."
)


def test_a_stuck_watchdog_after_its_own_timeout_is_cascade(run: Run) -> None:
    # the communicator abort after the rank's own timeout hung: the timeout is what it saw first
    lines = [
        _TIMEOUT.format(r=1),
        "[rank1]:[E301 09:10:00.000000000 ProcessGroupNCCL.cpp:1316] [PG 0 Rank 1] Heartbeat "
        "monitor timed out! Process will be terminated after dumping debug info.",
        _STUCK.format(r=1),
    ]
    _doc, inc = failed(run, lines, "collective_timeout", 1)
    assert inc["culprit"]["rank"] == 0, inc["culprit"]


def test_a_stuck_watchdog_with_no_timeout_of_its_own_is_the_cause(run: Run) -> None:
    # rank 3's watchdog hung in a call that never returned; rank 0 timed out waiting for it
    lines = [_TIMEOUT.format(r=0), _STUCK.format(r=3)]
    _doc, inc = failed(run, lines, "hang", 2)
    assert inc["culprit"]["rank"] == 3, inc["culprit"]


# --------------------------------------------------------------------------------------------
# a warning that names the failure; how a log that stops mid-story ended


def test_nccl_warning_before_its_error_code_is_the_root(run: Run) -> None:
    lines = [
        "trn-04:7781:7781 [6] NCCL INFO Bootstrap : Using eth0:10.1.0.4<0>",
        "trn-04:7781:7790 [6] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
        "10.1.0.9<42311> failed : Software caused connection abort",
        "trn-04:7781:7790 [6] NCCL INFO misc/socket.cc:565 -> 2",
        "trn-04:7781:7790 [6] NCCL INFO bootstrap.cc:274 -> 2",
        "trn-04:7781:7790 [6] NCCL INFO init.cc:1378 -> 2",
    ]
    failed(run, lines, "comm_error", lineno(lines, lines[1]))


def test_an_old_nccls_warning_before_its_cuda_file_frames_is_the_root(run: Run) -> None:
    # NCCL <= 2.3 built its sources as CUDA files: its frames read `init.cu:568 -> 1`
    lines = [
        "gpu-a:2753:2762 [0] transport/p2p.cu:548 NCCL WARN failed to open CUDA IPC handle : 64 "
        "peer access is not supported between these two devices",
        "gpu-a:2753:2762 [0] NCCL INFO init.cu:568 -> 1",
        "gpu-a:2753:2762 [0] NCCL INFO init.cu:642 -> 1",
    ]
    failed(run, lines, "comm_error", 1)


def test_a_processs_first_failure_is_not_replaced_by_a_later_other_one(run: Run) -> None:
    # an IB completion error (an error), NCCL tears the communicator down, then the same process
    # hits a CUDA fault (fatal): the network failure came first and is the root
    ib = (
        "gpu5:35917:35994 [0] transport/net_ib.cc:788 NCCL WARN NET/IB : Got completion with "
        "error 12, opcode 1, len 0, vendor err 129"
    )
    lines = [
        ib,
        "gpu5:35917:35994 [0] NCCL INFO transport/net.cc:537 -> 2",
        "gpu5:35917:35994 [0] NCCL INFO transport.cc:163 -> 2 [Proxy Thread]",
        "gpu5:35917:35917 [0] NCCL INFO Destroyed comm 0x7f24c4001af0 rank 4",
        "gpu5:35917:35917 [1] init.cc:194 NCCL WARN Cuda failure 'an illegal memory access was "
        "encountered'",
    ]
    failed(run, lines, "comm_error", 1)
    # the same report's stronger line still wins: `terminate called`, then its `what():`
    lines = [
        "[default1]:terminate called after throwing an instance of 'c10::CUDAError'",
        "[default1]:  what():  CUDA error: an illegal memory access was encountered",
    ]
    failed(run, lines, "cuda_error", 2)


def test_with_no_nccl_warning_the_error_its_caller_reported_is_the_root(run: Run) -> None:
    # NCCL's return trace, no WARN before it: the frames only point; torch's exception says what
    # came back (a frame alone, with nothing after it, stays the root)
    frames = [
        "trn-04:7781:7790 [6] NCCL INFO misc/socket.cc:565 -> 2",
        "trn-04:7781:7790 [6] NCCL INFO bootstrap.cc:274 -> 2",
        "trn-04:7781:7790 [6] NCCL INFO init.cc:1378 -> 2",
    ]
    error = (
        "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1251, "
        "unhandled system error, NCCL version 2.14.3"
    )
    lines = ["trn-04:7781:7781 [6] NCCL INFO Bootstrap : Using eth0:10.1.0.4<0>", *frames, error]
    failed(run, lines, "comm_error", len(lines))
    failed(run, lines[:-1], "comm_error", 4)


def test_handled_nccl_error_frame_is_no_failure(run: Run) -> None:
    # an inner frame after an INFO probe: NCCL handles it and goes on
    lines = [
        "trn-04:7781:7781 [0] NCCL INFO Could not find real path of /sys/class/net/ib0/device",
        "trn-04:7781:7781 [0] NCCL INFO include/net.h:19 -> 2",
        "trn-04:7781:7781 [0] NCCL INFO Ring 00 : 0 -> 8 [receive] via NET/Socket/0",
    ]
    healthy(run, lines)


def test_log_that_stops_while_running_is_truncated(run: Run) -> None:
    # ranks print (their prefixes say so), nothing fails, nothing says the job ended
    lines = [f"[default{r}]:building the model on cuda:{r}" for r in range(2)]
    doc = healthy(run, lines)
    assert doc["job"]["outcome"] == "truncated", doc["job"]


# --------------------------------------------------------------------------------------------
# excerpts that start mid-story

_BLOCK = [
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2024-11-02_07:15:40",
    "  host      : gpu-a17.cluster",
    "  rank      : 5 (local_rank: 1)",
    "  exitcode  : -9 (pid: 88123)",
    "  error_file: <N/A>",
    "  traceback : Signal 9 (SIGKILL) received by PID 88123",
    "============================================================",
]


def test_failure_block_without_its_header(run: Run) -> None:
    # the entry's root line is where it says what happened in words: the signal its traceback
    # field names (the exit code says the same as a number)
    for start in (0, 2):  # from its Root Cause header, or from the entry's first field
        lines = _BLOCK[start:]
        _doc, inc = failed(
            run,
            lines,
            "process_killed",
            lineno(lines, "  traceback : Signal 9 (SIGKILL) received by PID 88123"),
        )
        assert inc["culprit"]["rank"] == 5 and inc["culprit"]["host"] == "gpu-a17.cluster", inc


def test_failure_block_root_cause_entry_is_first_observed(run: Run) -> None:
    # torchrun prints the other failures above the Root Cause entry; without a rank's own line
    # the Root Cause entry is the root, at its exitcode line when its traceback names no signal
    other = [
        "  time      : 2024-11-02_07:15:44",
        "  host      : gpu-a17.cluster",
        "  rank      : 6 (local_rank: 2)",
        "  exitcode  : 1 (pid: 88124)",
        "  error_file: <N/A>",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "------------------------------------------------------------",
    ]
    root = [line.replace("-9 (pid: 88123)", "1 (pid: 88123)") for line in _BLOCK[:7]]
    root[-1] = other[-2]
    lines = [*other, *root, _BLOCK[-1]]
    _doc, inc = failed(run, lines, None, lineno(lines, "  exitcode  : 1 (pid: 88123)"))
    assert inc["culprit"]["rank"] == 5, inc["culprit"]
    # two workers killed: the Root Cause entry's signal line
    killed = [line.replace("1 (pid: 88124)", "-9 (pid: 88124)") for line in other]
    killed[-2] = "  traceback : Signal 9 (SIGKILL) received by PID 88124"
    lines = [*killed, *_BLOCK]
    failed(run, lines, "process_killed", lineno(lines, _BLOCK[-2]))


def test_exception_at_the_end_of_an_entrys_traceback_is_read(run: Run) -> None:
    # torchrun prints a worker's error file under `traceback :`, frames indented below it; the
    # exception line ends the block (it is no field of it) and is a line of its own: the cause
    frames = [
        '    File "/opt/train/model.py", line 88, in forward',
        "      h = layer(h)",
        '    File "/opt/torch/nn/modules/module.py", line 1751, in _call_impl',
        "      return forward_call(*args, **kwargs)",
        '    File "/opt/train/layers.py", line 41, in forward',
        "      buf = torch.empty(n, device=device)",
    ]
    oom = (
        "  torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 3 has "
        "a total capacity of 79.15 GiB of which 20.00 MiB is free."
    )
    entry = [
        "[1]:",
        "  time      : 2024-11-02_07:15:40",
        "  host      : gpu-a17.cluster",
        "  rank      : 3 (local_rank: 3)",
        "  exitcode  : 1 (pid: 88123)",
        "  error_file: /tmp/torchelastic_x/attempt_0/3/error.json",
        "  traceback : Traceback (most recent call last):",
        *frames,
        oom,
        "  ",
    ]
    lines = ["Failures:", *entry, *entry, "=" * 60]
    failed(run, lines, "oom_gpu", lines.index(oom) + 1)


def test_a_terminate_whose_what_is_lost_takes_the_category_of_its_burst(run: Run) -> None:
    # two ranks abort together; rank 0's `what():` is glued into rank 5's backtrace, so its
    # terminate line says nothing of its own: the burst's known error says what failed
    lines = [
        "[1,0]<stderr>:terminate called after throwing an instance of 'std::logic_error'",
        "[1,5]<stderr>:terminate called after throwing an instance of 'std::logic_error'",
        "[1,5]<stderr>:  what():  cudaStreamSynchronize failed: unspecified launch failure",
        "[1,5]<stderr>:[gpu-2:7781] *** Process received signal ***",
        "[1,5]<stderr>:[gpu-2:7781] [ 0] [1,0]<stderr>:  what():  cudaStreamSynchronize fail",
    ]
    _doc, inc = failed(run, lines, "cuda_error", None)
    assert inc["root_cause"]["line"] in (1, 3), inc["root_cause"]
    # a terminate alone, nothing known near it, stays unknown
    failed(run, lines[:2], "unknown", 1)


def test_an_abort_while_the_exception_unwinds_is_not_the_error(run: Run) -> None:
    # the process's Python error, then libstdc++'s abort from a destructor that threw on the
    # way out: the error is the root, the abort how the process died of it
    lines = [
        "Traceback (most recent call last):",
        '  File "/work/train.py", line 210, in load_state',
        "    state = torch.load(path)",
        "RuntimeError: read(): fd 33 failed with Stale file handle",
        "terminate called after throwing an instance of 'c10::Error'",
        "  what():  owning_ptr == NullType::singleton() || owning_ptr->refcount_.load() > 0 "
        "INTERNAL ASSERT FAILED at ../c10/util/intrusive_ptr.h:475",
    ]
    failed(run, lines, "io_error", 4)
    # the terminate's own what() still refines the terminate
    failed(run, lines[4:], None, 2)


@pytest.mark.parametrize(
    ("signal", "category"),
    [("SIGBUS", "segfault"), ("SIGSEGV", "segfault"), ("SIGKILL", "process_killed")],
)
def test_a_report_naming_the_signal_takes_its_category(
    run: Run, signal: str, category: str
) -> None:
    # mp.spawn names the child's signal, not an exit code
    lines = [
        "[rank0]: ProcessGroupNCCL initialization options: size: 2",
        "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal "
        + signal,
    ]
    failed(run, lines, category, 2)


def test_a_cut_traceback_is_explained_by_the_warning_just_before_it(run: Run) -> None:
    # the log ends inside the traceback: the NCCL WARN the process printed just before it says
    # what failed (its host named only by NCCL's own prefix)
    warn = (
        "gpu-node-4:140:140 [0] graph/rings.cc:47 NCCL WARN Error : ring 0 does not loop back "
        "to start (1 != 0)"
    )
    lines = [
        "[2/20][4084/7614] Loss: 9.590029",
        warn,
        "gpu-node-4:140:140 [0] NCCL INFO transport/net.cc:1007 -> 6",
        "Traceback (most recent call last):",
        '  File "train.py", line 135, in train',
        "    average_gradients(model)",
    ]
    failed(run, lines, "comm_error", 2)
    # a warning far from it says nothing of it
    far = [lines[0], warn, *[f"step {n} done" for n in range(8)], *lines[3:]]
    failed(run, far, "python_exception", far.index("Traceback (most recent call last):") + 1)


def test_a_launcher_s_ssh_failure_is_the_launch_s_not_the_code_s(run: Run) -> None:
    # OpenSSH's own error (sshconnect.c), then the runner's CalledProcessError for the ssh command
    # given as a list: the launch failed at the ssh, whatever host and error it names
    lines = [
        "ssh: connect to host 10.8.1.22 port 2222: Connection timed out",
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/launcher", line 8, in <module>',
        "    sys.exit(main())",
        '  File "/usr/lib/python3.10/subprocess.py", line 526, in run',
        "    raise CalledProcessError(retcode, process.args,",
        "subprocess.CalledProcessError: Command '['ssh', '-p', '2222', '10.8.1.22', 'hostname']' "
        "returned non-zero exit status 255.",
    ]
    failed(run, lines, "launcher_error", 1)
    # without ssh's line, the runner's exception alone says the same
    failed(run, lines[1:], "launcher_error", len(lines) - 1)


def test_streams_agree_where_neither_contradicts_the_other() -> None:
    nccl = Stream(None, "gpu-node-4", None, None)  # NCCL's prefix names the host only
    assert nccl.agrees(Stream(None, None, None, None))
    assert nccl.agrees(Stream(None, "gpu-node-4", 0, 3))
    assert not nccl.agrees(Stream(None, "gpu-node-5", None, None))
    assert not Stream(None, None, 1, None).agrees(Stream(None, None, 2, None))


def test_state_dict_list_without_its_head(run: Run) -> None:
    lines = [
        f"[rank3]:        size mismatch for decoder.layers.{i}.fc1.weight: copying a param with "
        f"shape torch.Size([3072, 768]) from checkpoint, the shape in current model is "
        f"torch.Size([4096, 1024])."
        for i in range(3)
    ]
    _doc, inc = failed(run, lines, None, 1)
    assert inc["culprit"]["rank"] == 3, inc["culprit"]


# --------------------------------------------------------------------------------------------
# the incident engine on its own: build_incidents of the events a real Engine makes of lines

_CUDA = "[rank{r}]: RuntimeError: CUDA error: an illegal memory access was encountered"
_WATCHDOG = (
    "[rank{r}]:[E1003 18:37:01.832146912 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=6463, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=1800000) ran for 1800017 milliseconds before timing out."
)
_ITERATION = (
    " iteration {it:8d}/    1000 | consumed samples: {samples:12d} | elapsed time per iteration "
    "(ms): 1381.9 | learning rate: 1.390E-04 | global batch size:     4 | lm loss: 7.512811E+00 "
    "| loss scale: 16384.0 | grad norm: 3.182 | number of skipped iterations:   0 | number of "
    "nan iterations:   0 |"
)
_AGENT_SIGTERM = (
    "W0409 07:28:49.531000 1359 torch/distributed/elastic/multiprocessing/api.py:897] Sending "
    "process {pid} closing signal SIGTERM"
)
_AGENT_FAILED = (
    "E0409 07:28:50.980000 1359 torch/distributed/elastic/multiprocessing/api.py:984] failed "
    "(exitcode: {code}) local_rank: {local} (pid: {pid}) of binary: /opt/venv/bin/python3"
)
_TIME_LIMIT = (
    "slurmstepd: error: *** STEP 4711.0 ON gpu-a17 CANCELLED AT 2025-04-09T07:28:40 DUE TO TIME "
    "LIMIT ***"
)


def _iterations(first: int, last: int) -> list[str]:
    return [_ITERATION.format(it=i, samples=4 * i) for i in range(first, last + 1)]


def _built(lines: list[str]) -> tuple[list[Incident], World]:
    engine = fed(lines)
    return incidents_of(engine), engine.world()


def _where(events: tuple[Event, ...]) -> list[int]:
    return [e.line.lineno for e in events]


def test_the_error_of_one_rank_is_the_root_and_the_others_timeouts_its_cascade() -> None:
    lines = [
        *_iterations(1, 3),
        _CUDA.format(r=2),
        *(_WATCHDOG.format(r=r) for r in (0, 1, 3)),
    ]
    (inc,), world = _built(lines)
    assert (inc.id, inc.category, inc.root_cause.line.lineno) == ("I1", "cuda_error", 4)
    assert inc.culprit is not None and (inc.culprit.rank, inc.culprit.confidence) == (2, 0.9)
    assert "not a symptom of another rank's failure" in inc.culprit.reason
    assert _where(inc.cascade) == [5, 6, 7]
    assert cascade_ranks(inc, world) == [0, 1, 3]
    assert inc.iteration == 3


def test_timeouts_alone_blame_the_rank_that_did_not_time_out() -> None:
    (inc,), _ = _built([_WATCHDOG.format(r=r) for r in (0, 1, 3)])
    assert (inc.category, inc.root_cause.line.lineno) == ("collective_timeout", 1)
    assert inc.culprit is not None and inc.culprit.rank == 2
    assert inc.title.endswith("(rank 2 stopped answering)"), inc.title


def test_training_that_goes_on_between_two_failures_makes_two_incidents() -> None:
    lines = [
        *_iterations(1, 3),
        _CUDA.format(r=1),
        *_iterations(4, 3 + SPLIT_AFTER_PROGRESS),
        _CUDA.format(r=5),
    ]
    first, second = _built(lines)[0]
    assert (first.id, first.root_cause.line.lineno, first.iteration) == ("I1", 4, 3)
    assert (second.id, second.root_cause.line.lineno) == ("I2", 5 + SPLIT_AFTER_PROGRESS)
    assert first.culprit is not None and second.culprit is not None
    assert (first.culprit.rank, second.culprit.rank) == (1, 5)
    # a line or two of progress while the cascade is under way is not recovery
    lines = [_CUDA.format(r=1), *_iterations(4, 2 + SPLIT_AFTER_PROGRESS), _CUDA.format(r=5)]
    (one,) = _built(lines)[0]
    assert _where(one.cascade) == [len(lines)]


def test_what_follows_the_schedulers_end_is_its_consequence() -> None:
    lines = [
        *_iterations(1, 3),
        _TIME_LIMIT,
        _AGENT_SIGTERM.format(pid=1365),
        "srun: error: gpu-a17: task 0: Exited with exit code 1",
    ]
    (inc,), _ = _built(lines)
    assert (inc.category, inc.root_cause.line.lineno, inc.culprit) == ("timelimit", 4, None)
    assert _where(inc.cascade) == [5, 6]


def test_an_error_before_the_schedulers_end_is_the_root() -> None:
    lines = [*_iterations(1, 3), _CUDA.format(r=2), _TIME_LIMIT]
    (inc,), _ = _built(lines)
    assert (inc.category, inc.root_cause.line.lineno) == ("cuda_error", 4)
    assert _where(inc.evidence) == [5]  # the banner: evidence, not cascade
    assert inc.cascade == ()


def test_a_rank_killed_by_a_signal_it_did_not_report_is_the_root() -> None:
    lines = [
        *_iterations(1, 3),
        _AGENT_SIGTERM.format(pid=1365),
        _AGENT_FAILED.format(code=-9, local=2, pid=1367),
    ]
    (inc,), _ = _built(lines)
    assert (inc.category, inc.root_cause.line.lineno) == ("process_killed", 5)
    assert inc.culprit is not None
    assert (inc.culprit.rank, inc.culprit.local_rank, inc.culprit.confidence) == (2, 2, 0.85)
    assert "died of SIGKILL (exit code -9)" in inc.culprit.reason


def test_the_abort_of_a_rank_that_reported_a_timeout_is_no_root() -> None:
    # rank 0's watchdog takes its process down (SIGABRT) after its timeout: a symptom
    lines = [
        *(_WATCHDOG.format(r=r) for r in (0, 1, 3)),
        _AGENT_FAILED.format(code=-6, local=0, pid=1364),
    ]
    (inc,), _ = _built(lines)
    assert (inc.category, inc.root_cause.line.lineno) == ("collective_timeout", 1)
    assert inc.culprit is not None and inc.culprit.rank == 2


def test_the_telling_line_of_the_first_failing_ranks_burst_is_the_root() -> None:
    lines = [
        "[default3]:terminate called after throwing an instance of 'c10::CUDAError'",
        "[default3]:  what():  CUDA error: unknown error",
        "[default3]:Exception raised from query at ../aten/src/ATen/cuda/CUDAEvent.h:95 (most "
        "recent call first):",
        "[default5]:  what():  CUDA error: an illegal memory access was encountered",
    ]
    (inc,), _ = _built(lines)
    assert (inc.root_cause.line.lineno, inc.root_cause.signature) == (2, "cuda.unknown_error")
    assert inc.culprit is not None and inc.culprit.rank == 3
    assert 1 in _where(inc.cascade) and 4 in _where(inc.cascade)


def test_an_nccl_warning_right_before_its_error_is_the_root() -> None:
    # NCCL prints `NCCL WARN <what failed>`, then the error code unwinding its stack
    # (a connect being retried is an error of its own, nccl.connect_retrying: not this case)
    warn = (
        "gpu-n04:31337:31401 [3] proxy.cc:1519 NCCL WARN [Proxy Service 3] Failed to execute "
        "operation Connect from rank 4, retcode 6"
    )
    returned = "gpu-n04:31337:31401 [3] NCCL INFO init.cc:1378 -> 6"
    (inc,), _ = _built(
        [warn, "gpu-n04:31337:31401 [3] NCCL INFO transport/net.cc:702 -> 6", returned]
    )
    assert (inc.category, inc.root_cause.line.lineno) == ("comm_error", 1)
    # the network transport's frame and the entry point's are both the error returning
    assert _where(inc.cascade) == [2, 3]
    # a warning long before says nothing of this error
    channels = [
        f"gpu-n04:31337:31401 [3] NCCL INFO Channel {c:02d}/0 : 3[3] -> 4[4] via P2P/IPC"
        for c in range(6)
    ]
    (inc,), _ = _built([warn, *channels, returned])
    assert inc.root_cause.line.lineno == 8


@pytest.mark.parametrize("prefix", ["", "[rank2]: ", "[default2]:", "3: "])
def test_a_frames_raise_statement_is_code_the_exception_line_is_the_message(
    run: Run, prefix: str
) -> None:
    # CPython quotes each frame's source line four spaces in: the `raise` there names the
    # exception (or even carries its text), but the line after the frames is what was raised
    lines = [
        f"{prefix}Traceback (most recent call last):",
        f'{prefix}  File "/opt/venv/lib/python3.11/site-packages/trainer/io.py", line 88, in load',
        f"{prefix}    shard = read_shard(path)",
        f'{prefix}  File "/opt/venv/lib/python3.11/site-packages/io.py", line 41, in read_shard',
        f'{prefix}    raise RuntimeError("CUDA error: an illegal memory access was encountered")',
        f"{prefix}FileNotFoundError: [Errno 2] No such file or directory: '/data/shard-00017.bin'",
    ]
    failed(run, lines, "io_error", 6)


def test_torchruns_failure_block_alone_is_what_its_root_cause_entry_says() -> None:
    # only the launcher's block is in the log: exit code 1 is a worker that raised, a signal
    # one that was killed (torch/distributed/elastic/multiprocessing/errors)
    for code, category in ((1, "python_exception"), (-9, "process_killed")):
        lines = child_failed_block(
            "tools/train.py",
            time="2025-07-05_11:44:10",
            host="841d68780d16",
            rank=1,
            local_rank=1,
            exitcode=code,
            pid=49992,
        )
        (inc,) = incidents_of(fed(lines))
        assert inc.category == category, (code, inc.root_cause)
        # its root is the Root Cause entry that says how the worker ended, not the header that
        # only announces the block
        assert inc.root_cause.signature == "torchrun.failure_entry", inc.root_cause
