# ruff: noqa: E501  (log lines are kept whole)
"""Whole-log behaviour of the signatures read from the emitters' own texts (patterns/glibc.toml,
openmpi.toml, horovod.toml, paddle.toml, make.toml, slurm.toml, cloud.toml, lightning.toml, torchx.toml, openpcdet.toml, hydra.toml, dgl.toml, sample_factory.toml, olmo.toml, exceptions.toml, nvflare.toml, python.toml's thread exception, the teardown warning of
nccl.toml): which line is the root cause, which rank the culprit, how the job ended. Lines are
constructed from the emitters' format strings (see each pattern file's header)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import (
    Run,
    analyze_doc,
    assert_root,
    child_failed_block,
    failed_verdict,
    told,
    verdict_incident,
    write,
)


def test_a_glibc_heap_text_is_the_root_not_the_abort_reports_after_it(run: Run) -> None:
    lines = [
        "[1,0]<stdout>:step 10 loss 2.01",
        "[1,3]<stderr>:double free or corruption (out)",
        "[1,3]<stderr>:[gpu-n04:31337] *** Process received signal ***",
        "[1,3]<stderr>:[gpu-n04:31337] Signal: Aborted (6)",
        "mpirun noticed that process rank 3 with PID 31337 on node gpu-n04 exited on signal 6 (Aborted).",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "segfault", inc
    assert_root(inc, path, 2, lines[1])
    assert inc["culprit"]["rank"] == 3, inc["culprit"]


def test_mpi_abort_names_the_rank_that_printed_nothing_else(run: Run) -> None:
    lines = [
        "[1,0]<stdout>:step 10 loss 2.01",
        "--------------------------------------------------------------------------",
        "MPI_ABORT was invoked on rank 5 in communicator MPI_COMM_WORLD",
        "with errorcode 1.",
        "--------------------------------------------------------------------------",
    ]
    _doc, inc, _path = failed_verdict(run, lines)
    assert inc["culprit"]["rank"] == 5, inc["culprit"]


def test_a_crash_signal_from_mpirun_is_a_native_crash(run: Run) -> None:
    lines = [
        "[1,0]<stdout>:step 10 loss 2.01",
        "prterun noticed that process rank 6 with PID 40211 on node gpu-node-7 exited on",
        "signal 11 (Segmentation fault).",
        "mpiexec noticed that process rank 6 with PID 40211 on node gpu-node-7 exited on signal 11 (Segmentation fault).",
    ]
    _doc, inc, _path = failed_verdict(run, lines)
    assert inc["category"] == "segfault", inc
    assert inc["culprit"]["rank"] == 6, inc["culprit"]


def test_the_teardown_warning_is_never_an_incident(run: Run) -> None:
    warning = "[rank0]:[W731 10:50:06.313201823 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())"
    code, doc, _path = run(["`Trainer.fit` stopped: `max_epochs=3` reached.", warning])
    assert code == 0 and doc["verdict"] is None and doc["incidents"] == [], doc["incidents"]
    assert doc["job"]["outcome"] == "completed", doc["job"]
    # with no end marker before it, it still explains nothing
    code, doc, _path = run(["step 100 loss 2.0", warning])
    assert doc["verdict"] is None and doc["incidents"] == [], doc["incidents"]
    # after a failure it is not the root either
    lines = ["[rank1]: ValueError: bad shard", warning]
    _doc, inc, path = failed_verdict(run, lines)
    assert_root(inc, path, 1, lines[0])


def test_lightning_names_the_child_that_failed(run: Run) -> None:
    lines = [
        "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/4",
        "[rank: 2] Child process with PID 40213 terminated with code -9. Forcefully terminating all other processes to avoid zombies 🧟",
    ]
    _doc, inc, _path = failed_verdict(run, lines)
    assert inc["category"] == "process_killed", inc
    assert 2 in (inc["culprit"].get("local_rank"), inc["culprit"].get("rank")), inc["culprit"]


def test_lightnings_own_sigterm_with_nothing_failing_before_it_is_a_stop_from_outside(
    run: Run,
) -> None:
    # signal_connector.py logs the process's SIGTERM; the loop was progressing
    bar = (
        "Epoch 0:  50%|█████     | 579/1150 [13:58<13:47,  0.69it/s, v_num=pdt5, train_loss=2.310]"
    )
    lines = [bar, "[rank: 0] Received SIGTERM: 15"]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "cancelled", inc
    assert_root(inc, path, 2, lines[1])
    # Lightning's launcher ended the others itself after a child failed: that child's exit
    # is the story, not the SIGTERM it sent
    failed = "[rank: 1] Child process with PID 4242 terminated with code 1. Forcefully terminating all other processes to avoid zombies 🧟"
    doc, inc, path = failed_verdict(run, [bar, failed, lines[1]])
    assert doc["job"]["outcome"] == "crashed", doc["job"]
    assert_root(inc, path, 2, failed)


@pytest.mark.parametrize(
    "notice",
    [
        "preemption watcher: instance/preempted returned TRUE",
        '{"action": "terminate", "time": "2017-09-18T08:22:00Z"}',
        "  Warning  Terminated  2m  kubelet  Pod was terminated in response to imminent node shutdown.",
    ],
)
def test_a_cloud_reclaiming_the_machine_is_a_preemption(run: Run, notice: str) -> None:
    lines = ["step 100 loss 2.0", notice, "[rank: 0] Received SIGTERM: 15"]
    code, doc, _path = run(lines)
    assert doc["job"]["outcome"] == "preempted", (code, doc["job"])


def test_skypilot_s_controller_tells_a_preemption_a_success_and_a_failure(run: Run) -> None:
    # sky/jobs/controller.py (sky/spot/controller.py before 0.6) and its logger's header
    # (sky/sky_logging.py): the cluster lost, the job's cleanup on it failing after
    lost = [
        "I 07-19 08:00:02 controller.py:155] Started monitoring.",
        "I 07-19 09:30:02 controller.py:260] Cluster is preempted or failed (status: INIT). Recovering...",
        "I 07-19 09:30:02 state.py:344] === Recovering... ===",
        "E 07-19 09:30:32 backend_utils.py:998] Command failed with code 255: python3 -u -c 'from sky.skylet import job_lib;job_lib.cancel_jobs(None)'",
        "E 07-19 09:30:32 backend_utils.py:999] Failed to cancel jobs on cluster train-4.",
    ]
    code, doc, _path = run(lost)
    assert doc["job"]["outcome"] == "preempted", (code, doc["job"])
    assert verdict_incident(doc)["category"] == "preemption", doc["incidents"]
    done = "I 07-19 12:01:55 controller.py:299] Managed job 4 (task: 0) SUCCEEDED. Cleaning up the cluster train-4."
    code, doc, _path = run([*lost, "I 07-19 09:41:10 state.py:367] ==== Recovered. ====", done])
    assert (code, doc["job"]["outcome"]) == (0, "completed"), doc["job"]
    failed = [
        lost[0],
        "I 07-19 09:30:07 controller.py:273] The user job failed. Please check the logs below.",
        "== Logs of the user job (ID: 4) ==",
        "Traceback (most recent call last):",
        '  File "train.py", line 9, in <module>',
        "KeyError: 'labels'",
    ]
    _doc, inc, path = failed_verdict(run, failed)
    assert_root(inc, path, 6, failed[5])


@pytest.mark.parametrize(
    ("line", "category"),
    [
        ("      Reason:       OOMKilled", "oom_host"),
        (
            "slurmstepd: error: StepId=1528763.0 exceeded memory limit (82345678336 > 81604378624), being killed",
            "oom_host",
        ),
        ("pdsh@worker-0: worker-3: ssh exited with exit code 255", "launcher_error"),
        ("*** stack smashing detected ***: terminated", "segfault"),
        # tvm-ffi's SIGSEGV handler (src/ffi/backtrace.cc), its frames after it
        ("!!!!!!! Segfault encountered !!!!!!!", "segfault"),
        # ATen's cuDNN convolution (Conv_v7.cpp), as the RuntimeError it raises
        ("RuntimeError: Unable to find a valid cuDNN algorithm to run convolution", "cuda_error"),
    ],
)
def test_the_emitters_word_decides_the_category(run: Run, line: str, category: str) -> None:
    _doc, inc, _path = failed_verdict(run, ["step 100 loss 2.0", line])
    assert inc["category"] == category, inc


def test_an_ssh_launch_that_failed_is_a_launcher_error(run: Run) -> None:
    # DeepSpeed's runner checks each host with ssh before launching (launcher/runner.py)
    tb = [
        "Traceback (most recent call last):",
        '  File "/opt/venv/lib/python3.10/site-packages/deepspeed/launcher/runner.py", line 437, in main',
        "    subprocess.check_call(ssh_check_cmd, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL, shell=True)",
    ]
    ssh = "subprocess.CalledProcessError: Command 'ssh -o PasswordAuthentication=no worker-7 hostname' returned non-zero exit status {code}."
    _, inc, _ = failed_verdict(run, [*tb, ssh.format(code=255)])
    assert inc["category"] == "launcher_error", inc
    # the remote command's own failure (not ssh's 255) is no launch failure
    _, inc, _ = failed_verdict(run, [*tb, ssh.format(code=1)])
    assert inc["category"] != "launcher_error", inc


def test_the_launchers_exit_code_of_its_first_failed_process_says_how_it_died(run: Run) -> None:
    """horovodrun (gloo_run.py) and mpirun (help-errmgr-base.txt) name the first process that
    exited non-zero and its exit code: 137 is SIGKILL (killed from outside), 1 an exception."""
    head = [
        "RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus causing the job to be terminated. The first process to do so was:",
        "Process name: gpu-worker-3[0]",
    ]
    _, inc, path = failed_verdict(run, [*head, "Exit code: 137"])
    assert inc["category"] == "process_killed", inc
    assert_root(inc, path, 3, "Exit code: 137")
    _, inc, path = failed_verdict(run, [*head, "Exit code: 1"])
    assert inc["category"] == "python_exception", inc
    assert_root(inc, path, 1, head[0])


def test_an_intel_gpu_runtime_result_is_that_ranks_failure_by_its_class(run: Run) -> None:
    # torchtitan on XPU: steps, then the SYCL runtime's report of a Unified Runtime result on one
    # rank (intel/llvm adapter.hpp), then the launcher's summary
    head = [
        f"[rank0]:[titan] 2025-03-01 10:00:{s:02d},000 - root - INFO - step: {s}  loss:  7.1"
        for s in range(1, 6)
    ]
    for code, name, category in [
        (40, "OUT_OF_RESOURCES", "oom_gpu"),
        (20, "DEVICE_LOST", "gpu_hardware"),
        (45, "INVALID_ARGUMENT", "cuda_error"),
    ]:
        error = f"[rank6]: RuntimeError: level_zero backend failed with error: {code} (UR_RESULT_ERROR_{name})"
        lines = [*head, "[rank6]: Traceback (most recent call last):", error]
        _doc, inc, path = failed_verdict(run, lines)
        assert inc["category"] == category, (name, inc)
        assert_root(inc, path, len(lines), error)
        assert inc["culprit"]["rank"] == 6, inc["culprit"]


def test_composers_crashed_rank_owns_the_driver_abort_printed_without_a_rank(run: Run) -> None:
    # Intel's driver runtime prints its abort bare (compute-runtime abortUnrecoverable), then
    # Composer's launcher names the rank that died of it (composer/cli/launcher.py)
    lines = [
        "2024-02-11 09:12:40,118 - composer.utils.checkpoint - DEBUG - Saving checkpoint to ckpt/ep1-ba300-rank{rank}.pt",
        "Abort was called at 231 line in file:",
        "./shared/source/os_interface/linux/drm_neo.cpp",
        "2024-02-11 09:12:44,501 - composer.cli.launcher - ERROR - Rank 5 crashed with exit code -6.",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "cuda_error", inc
    assert_root(inc, path, 2, lines[1])
    assert inc["culprit"]["rank"] == 5, inc["culprit"]
    # the launcher's line alone: a worker that died of SIGABRT
    _doc, inc, path = failed_verdict(run, [lines[0], lines[3]])
    assert inc["culprit"]["rank"] == 5, inc["culprit"]
    assert_root(inc, path, 2, lines[3])


def test_paddles_launcher_names_the_trainer_whose_error_it_prints_without_a_rank(
    run: Run,
) -> None:
    # fleet's launch_utils lists the trainers that exited non-zero in one poll; the error
    # itself is that trainer's own output, with no rank on it
    abort = "ERROR 2021-11-03 05:08:56,012 launch_utils.py:327] ABORT!!! Out of all 8 trainers, the trainer process with rank=[{ranks}] was aborted. Please check its log."
    lines = [
        "Traceback (most recent call last):",
        '  File "tools/train.py", line 118, in <module>',
        "ValueError: (InvalidArgument) The shape of input[0] and input[1] is expected to be equal.",
        abort.format(ranks="4"),
    ]
    category, rank = told(run, lines, 2)
    assert (category, rank) == ("python_exception", 4)
    # two trainers in one poll: the launcher does not say which failed first
    category, rank = told(run, [*lines[:3], abort.format(ranks="4, 6")], 2)
    assert rank is None


def test_a_failed_build_step_is_the_cause_of_the_store_resets_after_it(run: Run) -> None:
    # GNU make's child_error (src/job.c) after the compiler's error; the process that built
    # the helpers exits, and the others lose the store it hosted (ProcessGroupNCCL's
    # broadcastUniqueNCCLID text)
    reset = "RuntimeError: [{r}] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer. This may indicate a possible application crash on rank 0 or a network set up issue."
    lines = [
        "make: Entering directory '/opt/Megatron-LM/megatron/core/datasets'",
        "helpers.cpp:10:10: fatal error: pybind11/pybind11.h: No such file or directory",
        "compilation terminated.",
        "make: *** [Makefile:9: helpers.cpython-310-x86_64-linux-gnu.so] Error 1",
        "make: Leaving directory '/opt/Megatron-LM/megatron/core/datasets'",
        *(reset.format(r=r) for r in (3, 1, 2)),
    ]
    category, _rank = told(run, lines, 3)
    assert category == "python_exception"
    # a recipe marked `-` (make went on) is no failure: the resets are all there is
    _doc, inc, _path = failed_verdict(
        run, [*lines[:3], "make: [Makefile:9: clean] Error 1 (ignored)", *lines[4:]]
    )
    assert inc["root_cause"]["line"] == 6, inc["root_cause"]


def test_a_flight_recorder_dump_signal_is_a_collective_timeout_without_the_watchdog_line(
    run: Run,
) -> None:
    # ProcessGroupNCCL logs the dump signal at ERROR before its watchdog's timeout line; a log
    # cut between the two still shows that a collective timed out
    lines = [
        "[rank0]:[titan] 2025-08-04 23:00:01,000 - root - INFO - step: 40  loss:  3.1",
        "[rank0]:[E804 23:05:54.816499929 ProcessGroupNCCL.cpp:1849] [PG ID 0 PG GUID 0(default_pg) Rank 0] Observed flight recorder dump signal from another rank via TCPStore.",
        "[rank0]:[E804 23:05:54.817424543 ProcessGroupNCCL.cpp:1914] [PG ID 0 PG GUID 0(default_pg) Rank 0] Received a dump signal due to a collective timeout from  rank 5 and we will try our best to dump the debug info. Last enqueued NCCL work: 41, last completed NCCL work: 40.This is most likely caused by incorrect usages of collectives",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "collective_timeout", inc
    assert_root(inc, path, 3, lines[2])


def test_detectron2s_exception_notice_is_the_root_only_without_the_exception(run: Run) -> None:
    # engine/train_loop.py logs `Exception during training:`, then the traceback
    lines = [
        "[12/20 18:16:14 d2.utils.events]:  eta: 19:46:57  iter: 4979  total_loss: 9.924  lr: 0.0001",
        "ERROR [12/20 18:16:20 d2.engine.train_loop]: Exception during training:",
        "Traceback (most recent call last):",
        '  File "/opt/detectron2/engine/train_loop.py", line 155, in train',
        "    self.after_step()",
        "OSError: [Errno 28] No space left on device",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "io_error", inc
    assert_root(inc, path, 6, lines[5])
    # a paste cut after the notice: the loop raised, what is not said
    _doc, inc, path = failed_verdict(run, lines[:2])
    assert inc["category"] == "python_exception", inc
    assert_root(inc, path, 2, lines[1])


def test_an_interactive_shells_killed_is_a_sigkill_not_an_unknown_error(run: Run) -> None:
    # bash prints the signal's name alone for a foreground job that died of it (jobs.c)
    lines = [f"Epoch {e}: 100%|##########| 163/163 [18:08<00:00, loss=0.99]" for e in range(2)]
    lines.append("Killed")
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "process_killed", inc
    assert_root(inc, path, 3, "Killed")
    # a sentence that starts with the word is no report (the never-silent fallback may keep it)
    _code, doc, _ = run([*lines[:-1], "Killed 3 stale workers before the restart"])
    patterns = {i["root_cause"]["pattern"] for i in doc["incidents"]}
    assert "signals.killed_alone" not in patterns, patterns


def test_nccl_tests_own_cuda_check_is_the_root_before_srun_s_report(run: Run) -> None:
    # nccl-tests' CUDACHECK (src/common.h) names the host and the CUDA text; srun reports after
    lines = [
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0",
        "gpu-node-7: Test CUDA failure common.cu:893 'no CUDA-capable device is detected'",
        " .. gpu-node-7 pid 12377: Test failure common.cu:843",
        "srun: error: gpu-node-7: task 3: Exited with exit code 2",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "cuda_error", inc
    assert_root(inc, path, 2, lines[1])
    lines[1] = "gpu-node-7: Test CUDA failure common.cu:1021 'out of memory'"
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "oom_gpu", inc


def test_nccls_proxy_thread_failure_is_the_root_not_the_closed_connection_it_causes(
    run: Run,
) -> None:
    # src/proxy.cc: the service loop logs the failed operation and closes the asking rank's
    # connection; that rank's main thread then reads a closed socket and a failed proxy call
    lines = [
        "gpu-a07:51234:51301 [3] NCCL INFO transport/net_ib.cc:605 -> 2",
        "gpu-a07:51234:51301 [3] NCCL INFO proxy.cc:968 -> 2",
        "gpu-a07:51234:51301 [3] proxy.cc:1097 NCCL WARN [Proxy Service 11] Failed to execute operation Connect from rank 11, retcode 2",
        "gpu-a07:51234:51288 [3] misc/socket.cc:521 NCCL WARN Net : Connection closed by remote peer 10.1.4.7<41233>",
        "gpu-a07:51234:51288 [3] proxy.cc:862 NCCL WARN Proxy Call to rank 11 failed (Connect)",
        "gpu-a07:51234:51288 [3] NCCL INFO init.cc:1045 -> 6",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "comm_error", inc
    assert_root(inc, path, 3, lines[2])
    # the rank whose own thread failed is no peer that stopped answering
    assert "stopped answering" not in inc["title"], inc["title"]
    # the WARN of the call that failed, printed by the same process before the frames: the root
    connect = "gpu-a07:51234:51301 [3] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.1.4.9<45763> failed : Software caused connection abort"
    _doc, inc, path = failed_verdict(run, [connect, *lines])
    assert_root(inc, path, 1, connect)
    # another process's WARN (another pid) is not this one's reason
    other = connect.replace("gpu-a07:51234:", "gpu-a07:51240:")
    _doc, inc, path = failed_verdict(run, [other, *lines])
    assert_root(inc, path, 4, lines[2])
    # a peer's failure the proxy passes on (ncclRemoteError) is not a cause of its own
    remote = lines[2].replace("retcode 2", "retcode 6")
    _doc, inc, _path = failed_verdict(run, [*lines[:2], remote, *lines[3:]])
    assert inc["root_cause"]["pattern"] != "nccl.proxy_op_failed", inc["root_cause"]


def test_aws_ofi_nccls_memory_registration_failure_names_the_provider_error(run: Run) -> None:
    # src/nccl_ofi_sendrecv.cpp's WARN, printed by every rank of a node whose NIC cannot
    # register GPU memory, after the provider's own warnings
    lines = [
        "nid00212:3310:3402 [0] NCCL INFO NET/OFI Selected Provider is cxi (found 4 nics)",
        "libfabric:3311:1726869859::cxi:mr:cxip_do_map():94<warn> nid00212: cxil_map failed: -22:Invalid argument",
        "nid00212:3311:3404 [1] register_mr_buffers:647 NCCL WARN NET/OFI Unable to register memory (type = 2) for device 1. RC: -22, Error: Invalid argument",
        "nid00212:3311:3404 [1] NCCL INFO transport/net.cc:660 -> 2",
        "nid00212:3312:3405 [2] register_mr_buffers:647 NCCL WARN NET/OFI Unable to register memory (type = 2) for device 2. RC: -22, Error: Invalid argument",
        "srun: error: nid00212: tasks 0-3: Exited with exit code 3",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "comm_error", inc
    assert_root(inc, path, 3, lines[2])
    assert inc["title"].endswith(": Invalid argument"), inc["title"]


def test_an_older_aws_ofi_nccl_finding_no_provider_is_the_cause(run: Run) -> None:
    # src/nccl_ofi_net.c find_ofi_provider (the releases before the protocols), through NCCL's
    # logger and through the plugin's own (`WARN: Function: f Line: n: `, where no NCCL loaded
    # it: its tests), then the mpirun step's end
    for warn in (
        "ip-10-1-2-3:901:955 [3] NCCL WARN NET/OFI Could not find any optimal provider",
        "WARN: Function: find_ofi_provider Line: 512: NET/OFI Couldn't find any optimal provider",
    ):
        lines = [
            "ip-10-1-2-3:901:955 [3] NCCL INFO NET/OFI Forcing AWS OFI ndev 4",
            warn,
            "ip-10-1-2-3:901:955 [3] NCCL INFO bootstrap.cc:105 -> 2",
            "-------------------------------------------------------",
            "Primary job  terminated normally, but 1 process returned",
            "a non-zero exit code. Per user-direction, the job has been aborted.",
        ]
        _doc, inc, path = failed_verdict(run, lines)
        assert inc["category"] == "comm_error", inc
        assert_root(inc, path, 2, warn)


@pytest.mark.parametrize(
    "terminating",
    [
        "srun: Terminating StepId=88123.0",
        "srun: launch/slurm: _step_signal: Terminating StepId=88123.0",
    ],
)
def test_a_step_srun_took_down_after_a_failed_task_is_that_tasks_crash_not_a_cancel(
    run: Run, terminating: str
) -> None:
    # srun's kill-on-bad-exit: it terminates the step itself after a task exits non-zero, and
    # slurmstepd (< 25.05) prints the step's bare CANCELLED banner
    lines = [
        "epoch 3 step 200 loss 1.93",
        "srun: error: gpu-c12: task 2: Exited with exit code 1",
        terminating,
        "slurmstepd: error: *** STEP 88123.0 ON gpu-c12 CANCELLED AT 2024-03-01T11:02:09 ***",
        "srun: error: gpu-c12: tasks 0-1,3: Killed",
        "srun: Force Terminated StepId=88123.0",
    ]
    doc, inc, path = failed_verdict(run, lines)
    assert doc["job"]["outcome"] == "crashed", doc["job"]
    assert_root(inc, path, 2, lines[1])
    assert inc["culprit"]["rank"] == 2, inc["culprit"]
    # the banner without srun's own takedown before it: somebody cancelled the step
    doc, inc, _path = failed_verdict(run, [lines[0], lines[1], *lines[3:]])
    assert doc["job"]["outcome"] == "cancelled", doc["job"]


@pytest.mark.parametrize(("code", "category"), [(-6, "unknown"), (-9, "process_killed")])
def test_a_rank_that_aborted_with_nothing_else_said_is_of_unknown_cause_not_killed(
    run: Run, code: int, category: str
) -> None:
    # torch.distributed.elastic's failure block for a worker that died of a signal: SIGABRT is
    # the process's own abort (a C++ terminate, an assert, the NCCL watchdog), whose reason the
    # log does not hold; SIGKILL came from outside it (the OOM killer, a kill)
    lines = child_failed_block(
        "train.py",
        time="2024-07-26_10:59:45",
        host="node-17",
        rank=10,
        local_rank=2,
        exitcode=code,
        pid=214033,
    )
    _doc, inc, _path = failed_verdict(run, lines)
    assert inc["category"] == category, inc
    assert inc["culprit"]["rank"] == 10, inc["culprit"]


def test_nccls_shared_memory_transport_failing_at_set_up_is_a_communication_failure(
    run: Run,
) -> None:
    # src/misc/shmutils.cc: the segment NCCL's SHM transport needs could not be made (a
    # container's small /dev/shm); the communicator fails at creation
    lines = [
        "node-4:7312:7312 [2] NCCL INFO Channel 00 : 2[2] -> 3[3] via SHM/direct/direct",
        "node-4:7312:7390 [2] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-Q1w2E3 to 33554432 bytes, error: No space left on device (28)",
        "node-4:7312:7390 [2] NCCL INFO transport/shm.cc:114 -> 2",
        "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.18.1",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "comm_error", inc
    assert_root(inc, path, 2, lines[1])


def test_megatrons_nan_grad_norm_check_names_the_rank_device_and_node_that_found_it(
    run: Run,
) -> None:
    # megatron/core/distributed/param_and_grad_buffer.py: the assertion message names the
    # process's own global rank, CUDA device and node; its traceback carries no rank prefix
    lines = [
        " iteration     1200/  500000 | consumed samples:      1228800 | elapsed time per iteration (ms): 912.3 | lm loss: 2.310411E+00 |",
        "Traceback (most recent call last):",
        '  File "/workspace/megatron/core/distributed/param_and_grad_buffer.py", line 114, in start_grad_sync',
        "    assert not norm.isnan(), (",
        "AssertionError: Rank 12: found NaN in local grad norm in backward pass before data-parallel communication collective. Device: 4, node: gpu-node-2",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert_root(inc, path, 5, lines[4])
    culprit = inc["culprit"]
    assert (culprit["rank"], culprit["host"]) == (12, "gpu-node-2"), culprit


@pytest.mark.parametrize(
    ("death", "category", "outcome"),
    [
        ("the actor's node was preempted: spot instance reclaimed", "preemption", "preempted"),
        (
            "the actor's node was terminated unexpectedly: health check failed due to missing too many heartbeats",
            "node_failure",
            "node_failure",
        ),
        (
            "the actor's node was terminated expectedly: received SIGTERM",
            "process_killed",
            "crashed",
        ),
    ],
)
def test_a_ray_worker_whose_node_died_names_how_the_node_went(
    run: Run, death: str, category: str, outcome: str
) -> None:
    # the GCS's death cause of an actor on a node that died (gcs_actor_manager GenNodeDiedCause),
    # as Ray Train's controller prints the failed worker's ActorDiedError
    lines = [
        "(RayTrainWorker pid=5120, ip=10.0.3.17) step 40 loss 2.31",
        "(TrainController pid=4121) The actor died unexpectedly before finishing this task.",
        "(TrainController pid=4121) \tclass_name: RayTrainWorker",
        "(TrainController pid=4121) \tpid: 5120",
        "(TrainController pid=4121) The actor died because its node has died. Node Id: 9b8a7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d",
        f"(TrainController pid=4121) \t{death}",
    ]
    doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == category, inc
    assert_root(inc, path, 6, lines[5])
    assert doc["job"]["outcome"] == outcome, doc["job"]


def test_before_ray_2_10_the_actors_death_cause_alone_says_its_node_died(run: Run) -> None:
    # GenNodeDiedCause's older text stands alone, under the driver's RayActorError
    lines = [
        "(RayTrainWorker pid=5120, ip=10.0.3.17) step 40 loss 2.31",
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
        "\tclass_name: RayTrainWorker",
        "\tactor_id: 8f0e1d2c3b4a59687f6e5d4c03000000",
        "\tip: 10.0.3.17",
        "The actor is dead because its node has died. Node Id: 0d1c2b3a495867f8e9d0c1b2a3948576e5f4d3c2b1a09f8e7d6c5b4a",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "node_failure", inc
    assert_root(inc, path, 6, lines[5])
    # counter-case: the worker process died, its node lived on
    lines[5] = (
        "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2."
    )
    _doc, inc, _path = failed_verdict(run, lines)
    assert inc["category"] == "process_killed", inc


def test_the_rank_waiting_in_another_collective_at_the_same_number_is_the_culprit(
    run: Run,
) -> None:
    # ProcessGroupNCCL's watchdog names each rank's timed-out work; the ranks of one group issue
    # the same collectives in order, so one rank in another operation at that number diverged
    line = "[rank{r}]:[E1201 10:00:0{r}.000000000 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType={op}, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600091 milliseconds before timing out."
    ops = {0: "_ALLGATHER_BASE", 1: "_ALLGATHER_BASE", 2: "REDUCE", 3: "_ALLGATHER_BASE"}
    lines = [line.format(r=r, op=op) for r, op in ops.items()]
    _doc, inc, _path = failed_verdict(run, lines)
    assert inc["category"] == "collective_timeout", inc
    assert inc["culprit"]["rank"] == 2, inc["culprit"]
    # all in one operation: nothing singles a rank out by it
    same = [line.format(r=r, op="_ALLGATHER_BASE") for r in ops]
    _doc, inc, _path = failed_verdict(run, same)
    assert inc["culprit"] is None or "another path" not in inc["culprit"]["reason"], inc


def test_a_cgroup_oom_kill_of_one_srun_task_names_its_rank_where_srun_started_the_ranks(
    run: Run,
) -> None:
    # slurmstepd's cgroup OOM notice, then srun's report of the task it killed; with no
    # launcher of its own (no tee header), srun's task id is the rank (SLURM_PROCID)
    lines = [
        "Epoch [3][1200/7330]\tlr: 2.000e-02, eta: 14:33:02, time: 0.598, loss: 1.2035",
        "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=7712.0. Some of your processes may have been killed by the cgroup out-of-memory handler.",
        "srun: error: gpu-a03: task 3: Out Of Memory",
        "srun: Terminating StepId=7712.0",
    ]
    _doc, inc, _path = failed_verdict(run, lines)
    assert inc["category"] == "oom_host", inc
    assert inc["culprit"]["rank"] == 3, inc["culprit"]
    # with srun --label, slurmstepd's notice carries the label of the stream it went to: task 0's
    # label on the daemon's line is not rank 0's failure
    labelled = [f"{r}: " + lines[0].replace("lr:", f"r{r} lr:") for r in range(4)]
    _doc, inc, _path = failed_verdict(run, [*labelled, "0: " + lines[1], *lines[2:]])
    assert inc["culprit"]["rank"] == 3, inc["culprit"]
    # under torchrun (tee headers), an srun task is a node: no rank from it
    torchrun = ["[default0]:" + lines[0], *lines[1:]]
    _doc, inc, _path = failed_verdict(run, torchrun)
    assert inc["culprit"] is None or inc["culprit"]["rank"] != 3, inc["culprit"]


def test_an_exception_a_launcher_raises_after_the_interrupt_is_its_teardown(run: Run) -> None:
    # Ctrl-C: the ranks print KeyboardInterrupt, and DeepSpeed's runner, killing its workers in
    # its SIGINT handler, fails there itself (deepspeed/launcher/runner.py sigkill_handler)
    lines = [
        "[2022-10-29 00:11:40,001] [INFO] [logging.py:68:log_dist] [Rank 0] step=2120, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]",
        "[2022-10-29 00:11:48,109] [INFO] [launch.py:286:sigkill_handler] Killing subprocess 58799",
        "KeyboardInterrupt",
        "Traceback (most recent call last):",
        '  File "/opt/conda/lib/python3.8/site-packages/deepspeed/launcher/runner.py", line 548, in sigkill_handler',
        "    result_kill = subprocess.Popen(kill_cmd, env=env)",
        "NameError: free variable 'kill_cmd' referenced before assignment in enclosing scope",
    ]
    doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "cancelled", inc
    assert_root(inc, path, 3, lines[2])
    assert doc["job"]["outcome"] == "cancelled", doc["job"]
    # a failure before the interrupt is still the root: the launcher interrupted the others
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    doc, inc, path = failed_verdict(run, [lines[0], oom, *lines[1:]])
    assert inc["category"] == "oom_gpu", inc
    assert_root(inc, path, 2, oom)


def test_nccl_tests_footer_says_the_sweep_finished(run: Run) -> None:
    # nccl-tests src/util.cu writeResultFooter, behind mpirun --tag-output; nothing follows it
    # but MPI's finalize
    rows = [
        f"[1,0]<stdout>:  {n:>10}  {n // 4:>10}     float     sum      -1   {t:7.1f}   10.80   20.25  5e-07"
        for n, t in ((33554432, 3106.8), (67108864, 5567.2))
    ]
    lines = [
        *rows,
        "[1,0]<stdout>:# Out of bounds values : 0 OK",
        "[1,0]<stdout>:# Avg bus bandwidth    : 7.80081 ",
    ]
    code, doc, _path = run(lines)
    assert (code, doc["job"]["outcome"]) == (0, "completed"), doc["job"]
    # cut inside the sweep: the run's end is not in the log
    code, doc, _path = run(rows)
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_the_kernels_hung_task_report_of_the_trainer_is_a_hang(run: Run) -> None:
    # kernel/hung_task.c check_hung_task, as dmesg -T prints it, then the task's stack
    lines = [
        "[Tue Jun 11 02:10:01 2024] nvidia-nvswitch0: open (major=508)",
        "[Tue Jun 11 02:14:07 2024] INFO: task pt_main_thread:91723 blocked for more than 241 seconds.",
        "[Tue Jun 11 02:14:07 2024]       Tainted: P           OE     5.15.0-91-generic #101-Ubuntu",
        '[Tue Jun 11 02:14:07 2024] "echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.',
        "[Tue Jun 11 02:14:07 2024] task:pt_main_thread  state:D stack:    0 pid:91723 ppid:91700 flags:0x00004002",
        "[Tue Jun 11 02:14:07 2024]  nfs_wait_bit_killable+0x1f/0x70 [nfs]",
    ]
    doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "hang", inc
    assert_root(inc, path, 2, lines[1])
    assert doc["job"]["outcome"] == "hung", doc["job"]


def test_the_bare_cublas_sample_error_names_the_rank_that_repeats_it(run: Run) -> None:
    # `!!!! kernel execution error.` (NVIDIA's CUDA samples, DeepSpeed's kernels before 0.3.x)
    # from one OpenMPI rank, its first copy glued behind another rank's progress bar
    bar = "Iteration:  31%|███▏      | 491/1559 [04:35<07:28,  2.38it/s]"
    lines = [
        "[1,0]<stdout>:step=3599, loss=1.78",
        f"{bar}[1,17]<stderr>:!!!! kernel execution error.",
        *["[1,17]<stderr>:!!!! kernel execution error."] * 3,
    ]
    _doc, inc, _path = failed_verdict(run, lines)
    assert inc["category"] == "cuda_error", inc
    assert inc["culprit"]["rank"] == 17, inc["culprit"]


def test_a_store_client_still_retrying_when_the_log_ends_is_cut_not_crashed(run: Run) -> None:
    # torch's TCPStore client warns before each new attempt (TCPStore.cpp, torch >= 2.4)
    retry = "[W1104 03:12:{s:02d}.019281734 TCPStore.cpp:343] [c10d] TCP client failed to connect/validate to host node-0.cluster:29500 - retrying (try={n}, timeout=600000ms, delay=1766ms): Connection refused"
    lines = [retry.format(s=10 + 2 * n, n=n) for n in range(3)]
    _code, doc, path = run(lines)
    inc = verdict_incident(doc)
    assert inc["category"] == "launcher_error", inc
    assert_root(inc, path, 1, lines[0])
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_srun_that_cannot_get_a_munge_credential_never_launched(run: Run) -> None:
    # auth_munge.c (cred_create) then slurm_protocol_api.c, as srun prints them, over and over
    lines = [
        "+ srun -p gpu --gres=gpu:8 --ntasks-per-node=8 python -u train.py",
        "srun: error: If munged is up, restart with --num-threads=10",
        'srun: error: Munge encode failed: Failed to access "/run/munge/munge.socket.2": Connection refused',
        "srun: error: slurm_send_node_msg: auth_g_create: REQUEST_RESOURCE_ALLOCATION has authentication error",
    ] * 2
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "launcher_error", inc
    assert_root(inc, path, 3, lines[2])


def test_amdgpus_fatal_ras_interrupt_is_the_root_over_the_other_gpus_error_banks(run: Run) -> None:
    # amdgpu_ras.c's fatal interrupt report, then amdgpu_aca.c's banks on the node's other GPUs
    lines = [
        "[ 5120.004117] amdgpu 0000:75:00.0: amdgpu: {2}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!",
        "[ 5120.019310] amdgpu 0000:05:00.0: {2}[Hardware Error]: Accelerator Check Architecture events logged",
        "[ 5120.019322] amdgpu 0000:05:00.0: {2}[Hardware Error]: aca entry[00].STATUS=0x98000800003e0000",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "gpu_hardware", inc
    assert_root(inc, path, 1, lines[0])


def test_ignites_launcher_says_the_training_function_returned(run: Run) -> None:
    # ignite/distributed/launcher.py Parallel.run: `End of run` after the function returned
    lines = [
        "2025-01-06 20:55:18,014 ignite.distributed.launcher.Parallel INFO: - Run '<function training at 0x7f2e1c>' in 8 processes",
        "2025-01-06 20:58:03,608 trainer INFO: Engine run complete. Time taken: 00:01:45.348",
        "2025-01-06 20:58:03,681 ignite.distributed.launcher.Parallel INFO: End of run",
    ]
    code, doc, _path = run(lines)
    assert (code, doc["job"]["outcome"]) == (0, "completed"), doc["job"]
    # an evaluator's or trainer's Engine run alone is no end of the program
    code, doc, _path = run(lines[:2])
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_the_watchdogs_failed_or_timed_out_notice_yields_to_the_failure_before_it(run: Run) -> None:
    # torch 1.x: NCCL's WARN of the socket call that failed and its return frames, then
    # ProcessGroupNCCL's `Some NCCL operations have failed or timed out` (either, it says)
    lines = [
        "gpu-a1:36759:36970 [0] include/socket.h:421 NCCL WARN Call to recv failed : Connection reset by peer",
        "gpu-a1:36759:36970 [0] NCCL INFO transport/net_ib.cc:593 -> 2",
        "gpu-a1:36759:36970 [0] NCCL INFO proxy.cc:198 -> 2 [Proxy Thread]",
        "[E ProcessGroupNCCL.cpp:325] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. To avoid this inconsistency, we are taking the entire process down.",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "comm_error", inc
    assert_root(inc, path, 1, lines[0])
    # alone, it is the timeout it most often reports
    _doc, inc, path = failed_verdict(run, lines[3:])
    assert inc["category"] == "collective_timeout", inc


def test_a_failed_cpp_check_is_the_root_not_the_abort_after_it(run: Run) -> None:
    # glog's CHECK logs at FATAL, prints its stack trace banner and aborts; a CUDA status
    # compared to cudaSuccess gives the class
    lines = [
        "[1,0]<stdout>:step 10 loss 2.01",
        "[1,2]<stderr>:F0311 08:09:10.111213  4242 allreduce_op.cc:91] Check failed: error == cudaSuccess (700 vs. 0)  an illegal memory access was encountered",
        "[1,2]<stderr>:*** Check failure stack trace: ***",
        "[1,2]<stderr>:    @     0x7f26e6cbb5cd  google::LogMessage::Fail()",
        "mpirun noticed that process rank 2 with PID 4242 on node gpu-n04 exited on signal 6 (Aborted).",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "cuda_error", inc
    assert_root(inc, path, 2, lines[1])
    assert inc["culprit"]["rank"] == 2, inc["culprit"]


def test_pals_names_the_rank_that_crashed_among_those_it_tore_down(run: Run) -> None:
    # HPE Cray PALS's mpiexec: one line per rank that died of a signal, 15 for those it stopped
    lines = [
        "step 100 loss 2.1",
        "x1002c3s5b0n0.hsn.cm.polaris.alcf.anl.gov: rank 5 died from signal 15",
        "x1002c3s4b0n0.hsn.cm.polaris.alcf.anl.gov: rank 2 died from signal 7 and dumped core",
        "x1002c3s5b0n0.hsn.cm.polaris.alcf.anl.gov: rank 6 died from signal 15",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "segfault", inc
    assert_root(inc, path, 3, lines[2])
    assert (inc["culprit"]["rank"], inc["culprit"]["host"]) == (
        2,
        "x1002c3s4b0n0.hsn.cm.polaris.alcf.anl.gov",
    ), inc["culprit"]


def test_hydras_bad_termination_report_yields_to_the_ranks_own_error(run: Run) -> None:
    block = [
        "=" * 83,
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
        "=   PID 28488 RUNNING AT gpu-n12",
        "=   EXIT CODE: 9",
        "=   CLEANING UP REMAINING PROCESSES",
        "=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES",
        "=" * 83,
        "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)",
    ]
    _doc, inc, _path = failed_verdict(run, ["epoch 1 step 21 loss 1.8", *block])
    assert inc["category"] == "process_killed", inc
    assert inc["root_cause"]["text"] in block, inc["root_cause"]
    oom = "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    _doc, inc, path = failed_verdict(run, ["epoch 1 step 21 loss 1.8", oom, *block])
    assert inc["category"] == "oom_gpu", inc
    assert_root(inc, path, 2, oom)


def test_hydras_report_names_the_process_on_the_line_above_its_signal(run: Run) -> None:
    # Intel MPI's Hydra names the rank and node, MPICH's the node only
    def report(running: str) -> list[str]:
        return [
            "[0] epoch 1 step 21 loss 1.8",
            "=" * 83,
            "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
            running,
            "=   KILLED BY SIGNAL: 9 (Killed)",
            "=" * 83,
        ]

    _doc, inc, _path = failed_verdict(run, report("=   RANK 5 PID 7730 RUNNING AT cn-0417"))
    assert (inc["culprit"]["rank"], inc["culprit"]["host"]) == (5, "cn-0417"), inc["culprit"]
    _doc, inc, _path = failed_verdict(run, report("=   PID 7730 RUNNING AT cn-0417"))
    assert (inc["culprit"]["rank"], inc["culprit"]["host"]) == (None, "cn-0417"), inc["culprit"]


def test_pyxis_failing_to_start_the_container_is_a_launch_failure_not_the_tasks_exit(
    run: Run,
) -> None:
    lines = [
        "pyxis: importing docker image: nvcr.io/nvidia/pytorch:24.05-py3",
        "slurmstepd: error: pyxis: container start failed with error code: 1",
        "slurmstepd: error: pyxis: printing contents of log file ...",
        "slurmstepd: error: pyxis:     enroot-switchroot: failed to execute: /bin/sh: No such file or directory",
        "slurmstepd: error: pyxis: if the image has an unusual entrypoint, try using --no-container-entrypoint",
        "srun: error: gpu-b7: task 0: Exited with exit code 1",
    ]
    assert told(run, lines, 1)[0] == "launcher_error"


def test_paddles_gpu_allocator_out_of_memory_is_the_root_over_its_error_summary(
    run: Run,
) -> None:
    lines = [
        "Error Message Summary:",
        "----------------------",
        "ResourceExhaustedError: ",
        "",
        "Out of memory error on GPU 2. Cannot allocate 1.500000GB memory on GPU 2, 78.250000GB memory has been allocated and available memory is only 1.125000GB.",
        " (at /paddle/paddle/phi/core/memory/allocation/cuda_allocator.cc:86)",
        "LAUNCH INFO 2025-03-01 10:00:00,000 Exit code 1",
    ]
    assert told(run, lines, 4)[0] == "oom_gpu"


def test_openmpi_names_the_launcher_as_it_was_run(run: Run) -> None:
    # help-orterun.txt prints the tool's basename: a container's `mpirun.real`, Debian's
    # `mpirun.openmpi`
    for launcher in ("mpirun.real", "mpirun.openmpi"):
        lines = [
            "[1,0]<stdout>:step 10 loss 2.01",
            f"{launcher} noticed that process rank 1 with PID 39 on node worker-1 exited on signal 9 (Killed).",
        ]
        _doc, inc, _path = failed_verdict(run, lines)
        assert (inc["category"], inc["culprit"]["rank"]) == ("process_killed", 1), inc


def test_ranks_that_reached_monitored_barrier_name_rank_0_which_runs_it(run: Run) -> None:
    # a real gloo job here (torch 2.13, torchrun --tee 3): rank 0 exited before the barrier, the
    # others' exchange with it failed; before, rank 2's RuntimeError made rank 2 the culprit
    report = "Rank {r} successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank."
    lines = [
        "[default2]:[rank2]:[E1204 17:04:13.589252987 ProcessGroupGloo.cpp:67] "
        + report.format(r=2),
        "[default1]:[rank1]:[E1204 17:04:13.589247529 ProcessGroupGloo.cpp:67] "
        + report.format(r=1),
        "[default2]:[rank2]: Traceback (most recent call last):",
        "[default2]:[rank2]: RuntimeError: " + report.format(r=2),
        "[default2]:[rank2]:  Original exception: ",
    ]
    # what rank 0 met is not in the reports (here it had exited, no timeout): unknown
    assert told(run, lines, 0) == ("unknown", 0)


def test_a_missing_libibverbs_is_no_root_nccl_goes_on_with_sockets(run: Run) -> None:
    # NCCL <= 2.12 warned when libibverbs was absent (newer NCCL logs it at INFO); the init
    # failure after it is the failure
    lines = [
        "trainer-0:311:311 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.5<0>",
        "trainer-0:311:311 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
        "trainer-0:311:311 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>",
        "trainer-0:311:340 [0] misc/topo.cc:22 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:3b/../../0000:3b:00.0",
        "trainer-0:311:340 [0] NCCL INFO init.cc:876 -> 2",
        "RuntimeError: NCCL error in: /opt/pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:492, unhandled system error, NCCL version 2.7.8",
    ]
    assert told(run, lines, 3)[0] == "comm_error"
    # alone, it is no failure
    _code, doc, _path = run(lines[:3])
    assert doc["incidents"] == [], doc["incidents"]
    # nor in NCCL 2.1-2.2's header, which had no `NCCL` before the level
    old = [
        "dgx-2:4411:4470 [1] misc/ibvwrap.cu:60 WARN Failed to open libibverbs.so[.1]",
        "dgx-2:4411:4470 [1] INFO Using internal Network Socket",
    ]
    _code, doc, _path = run(old)
    assert doc["incidents"] == [], doc["incidents"]


def test_jax_s_coordination_service_names_the_process_that_stopped_heartbeating(
    run: Run,
) -> None:
    # the leader's log: the service notices process 2's silence, then the others go down
    lines = [
        "I0614 03:10:01.000000  318822 train.py:88] step 400 loss 2.113",
        "E0614 03:12:44.118320  318822 coordination_service.cc:472] /job:jax_worker/replica:0/"
        "task:2 has been set to ERROR in coordination service: UNAVAILABLE: Task "
        "/job:jax_worker/replica:0/task:2 heartbeat timeout. This indicates that the remote "
        "task has failed, got preempted, or crashed unexpectedly.",
        "F0614 03:12:45.000100  318900 client.h:77] Terminating process because the JAX "
        "distributed service detected fatal errors. This most likely indicates that another "
        "task died; see the other task logs for more details. absl::Status: UNAVAILABLE: The "
        "following tasks are unhealthy (stopped sending heartbeats):",
        "/job:jax_worker/replica:0/task:2",
    ]
    assert told(run, lines, 1) == ("process_killed", 2)
    # a surviving process's own log: it was terminated; the task listed under its error is the
    # one that died
    assert told(run, [lines[0], lines[2], lines[3]], 2) == ("process_killed", 2)
    # ... with no list, it names no one
    assert told(run, lines[:3:2], 1) == ("process_killed", None)


def test_apptainer_s_fatal_is_the_launch_failure_under_srun_s_exit_255(run: Run) -> None:
    # sylog pads its level to eight columns: `FATAL:` then three spaces (Fatalf exits 255)
    fatal = "FATAL:   could not open image /scratch/sif/ngc-24.05.sif: image format not recognized"
    lines = [
        "+ srun apptainer exec --nv /scratch/sif/ngc-24.05.sif python train.py",
        *[f"{t}: {fatal}" for t in range(4)],
        "srun: error: gpu-c03: tasks 0-3: Exited with exit code 255",
    ]
    assert told(run, lines, 1)[0] == "launcher_error"
    # a program's own `FATAL:` with one space is its message, not the runtime's
    _doc, inc, _path = failed_verdict(
        run, ["step 10 loss 2.0", "FATAL: loss is NaN, stopping", lines[-1]]
    )
    assert inc["category"] != "launcher_error", inc
    # its command line refused (apptainer.go ExecuteApptainer): usage, then exit 1
    refused = [
        "+ srun apptainer run --nv",
        *[
            f'{t}: Error for command "run": requires at least 1 arg(s), only received 0'
            for t in range(2)
        ],
        "srun: error: gpu-c03: tasks 0-1: Exited with exit code 1",
    ]
    assert told(run, refused, 1)[0] == "launcher_error"


def test_the_agents_exit_barrier_error_is_caught_and_the_workers_result_stands(
    tmp_path: Path,
) -> None:
    # api.py `_exit_barrier`: logger.exception, then the agent reports its workers' result
    agent = "torch.distributed.elastic.agent.server.api"
    lines = [
        "step 200/200 loss 0.912",
        f"INFO:{agent}:[default] worker group successfully finished. Waiting 300 seconds for "
        "other agents to finish.",
        f"ERROR:{agent}:Error waiting on exit barrier. Elapsed: 300.52 seconds",
        "Traceback (most recent call last):",
        '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/elastic/utils/store.py",'
        " line 64, in barrier",
        "    synchronize(store, data, rank, world_size, key_prefix, barrier_timeout)",
        "RuntimeError: Socket Timeout",
    ]
    _code, doc, _path = analyze_doc(str(write(tmp_path, "agent.log", lines)))
    assert doc["verdict"] is None, doc["verdict"]
    assert doc["job"]["outcome"] == "completed", doc["job"]
    # the same traceback on its own is the agent's failure
    _code, doc, _path = analyze_doc(str(write(tmp_path, "bare.log", [lines[0], *lines[3:]])))
    assert doc["verdict"] is not None


_INTERNAL_ERROR = (
    "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
    "ProcessGroupNCCL.cpp:3144, internal error - please report this issue to the NCCL "
    "developers, NCCL version 2.21.5"
)
"""PyTorch's report of an ncclInternalError (ProcessGroupNCCL's `NCCL error in:` format)."""


def test_the_warn_nccl_printed_before_the_error_code_pytorch_raised_is_the_root(run: Run) -> None:
    # PyTorch raises `NCCL error in: ...` from the ncclResult_t a call returned; NCCL (and its
    # network plugin, through NCCL's logger) printed the WARN where the failure began, before the
    # return frames: aws-ofi-nccl src/nccl_ofi_rdma.cpp `Unexpected status (%d) for message %hu`
    lines = [
        "node-3:811:902 [2] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)",
        "node-3:811:905 [2] get_req_from_imm_data:1088 NCCL WARN NET/OFI Unexpected status (5) for message 17",
        "node-3:811:905 [2] NCCL INFO proxy.cc:1540 -> 3",
        "node-3:811:811 [2] NCCL INFO enqueue.cc:1981 -> 3",
        "Traceback (most recent call last):",
        '  File "train.py", line 88, in <module>',
        "    dist.reduce_scatter_tensor(out, inp)",
        _INTERNAL_ERROR,
        "ncclInternalError: Internal check failed.",
    ]
    assert told(run, lines, 1)[0] == "comm_error"


def test_another_rank_s_warn_is_not_the_reason_of_this_rank_s_nccl_error(run: Run) -> None:
    lines = [
        "[rank1]:node-3:812:905 [1] NCCL WARN Attempt to use communicator before the previous operation returned ncclSuccess",
        "[rank0]:Traceback (most recent call last):",
        "[rank0]:" + _INTERNAL_ERROR,
    ]
    assert told(run, lines, 2)[0] == "comm_error"


def test_a_generic_warn_before_pytorch_s_nccl_error_keeps_the_error_s_category(run: Run) -> None:
    # the WARN says where the failure began; `unhandled cuda error` says what kind it was
    lines = [
        "node-3:811:905 [2] transport/net.cc:1150 NCCL WARN Attempt to use communicator before the previous operation returned ncclSuccess",
        "node-3:811:811 [2] NCCL INFO enqueue.cc:1981 -> 1",
        "RuntimeError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled cuda error, NCCL version 2.14.3",
    ]
    assert told(run, lines, 0)[0] == "cuda_error"


def _mismatch(reporter: int, other: int) -> str:
    # torch's ProcessGroupWrapper.cpp: the reporter's fingerprint, then the first rank's that
    # differs from it, in rank order
    return (
        f"[rank{reporter}]: RuntimeError: Detected mismatch between collectives on ranks. Rank "
        f"{reporter} is running collective: CollectiveFingerPrint(SequenceNumber=101, "
        "OpType=ALLGATHER, TensorShape=[1], TensorDtypes=Long, TensorDeviceTypes=TensorOptions("
        f"dtype=float (default), device=cuda)), but Rank {other} is running collective: "
        "CollectiveFingerPrint(SequenceNumber=0OpType=REDUCE)."
    )


def test_the_first_rank_a_mismatch_report_finds_different_from_most_is_the_culprit(
    run: Run,
) -> None:
    # rank 4 of 8 agrees with ranks 0-6 and differs from rank 7: rank 7 took another path
    lines = [
        "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/8",
        _mismatch(4, 7),
    ]
    assert told(run, lines, 1) == ("python_exception", 7)


def test_a_mismatch_report_that_names_few_agreeing_ranks_names_no_other_culprit(
    run: Run,
) -> None:
    # rank 0 against rank 1: either may be the odd one
    assert told(run, [_mismatch(0, 1)], 0)[1] != 1
    # ranks 0-2 agree, but 16 ranks ran (Lightning's MEMBER r/N): rank 3 may be one of many
    lines = [
        "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/16",
        _mismatch(2, 3),
    ]
    _doc, inc, _path = failed_verdict(run, lines)
    assert inc["culprit"]["rank"] != 3, inc["culprit"]


def test_libtpu_s_fault_report_with_a_null_address_is_the_crash(run: Run) -> None:
    # Google-built libtpu prints the address with %p, `(@(nil))` for NULL, and a link before
    # `received`; the stall warning before it is no failure
    lines = [
        "/usr/lib/python3/site-packages/jax/_src/xla_bridge.py:184: UserWarning: TPU backend initialization is taking more than 60.0 seconds. Did you run your code on all TPU hosts?",
        "  warnings.warn(",
        "*** SIGSEGV (@(nil)), see go/stacktraces#s15 received by PID 2231 (TID 2290) on cpu 3; stack trace: ***",
        "PC: @     0x7facba4a8de2  (unknown)  (unknown)",
        "    @     0x7facbd838294        976  (unknown)",
    ]
    assert told(run, lines, 2)[0] == "segfault"


def test_detectron2_s_own_log_file_of_a_rank_names_the_rank_of_its_unprefixed_error(
    run: Run,
) -> None:
    # setup_logger: a rank above 0 logs to log.txt.rank<N> only; default_setup names the rank
    lines = [
        "[04/24 19:33:19] detectron2 INFO: Rank of current process: 3. World size: 4",
        "[04/24 19:33:20] d2.engine.train_loop INFO: Starting training from iteration 0",
        "[04/24 19:45:06] d2.engine.train_loop ERROR: Exception during training:",
        "Traceback (most recent call last):",
        '  File "train_net.py", line 88, in run_step',
        "RuntimeError: CUDA out of memory. Tried to allocate 428.00 MiB (GPU 3; 23.70 GiB total capacity; 19.95 GiB already allocated; 327.81 MiB free; 21.88 GiB reserved in total by PyTorch)",
    ]
    assert told(run, lines, 5) == ("oom_gpu", 3)
    # rank 0's file is also its console, where other ranks' errors can land: no rank from it
    own = "ValueError: Target 9 is out of bounds for 8 classes"
    rank0 = [lines[0].replace("process: 3", "process: 0"), *lines[1:-1], own]
    assert told(run, rank0, 5)[1] is None
    # but an OOM there names its device, which is its process's local rank (device_clues)
    rank0 = [lines[0].replace("process: 3", "process: 0"), *lines[1:]]
    assert told(run, rank0, 5)[1] == 3


def test_a_paddle_trainer_s_own_workerlog_names_the_rank_of_its_unprefixed_error(run: Run) -> None:
    # nccl_context.cc announces the trainer's global rank once per ring; the launcher writes
    # each trainer's output to workerlog.<rank>
    lines = [
        "I0412 08:15:02.481223  7731 nccl_context.cc:189] init nccl context nranks: 4 local rank: 2 gpu id: 2 ring id: 0",
        "I0412 08:15:02.493310  7731 nccl_context.cc:189] init nccl context nranks: 4 local rank: 2 gpu id: 2 ring id: 1",
        "Traceback (most recent call last):",
        '  File "tools/train.py", line 61, in <module>',
        "ValueError: Target 9 is out of bounds for 8 classes",
    ]
    assert told(run, lines, 4) == ("python_exception", 2)
    # several trainers' announcements in one file (the launcher's console): no rank from them
    console = [lines[0], lines[0].replace("local rank: 2 gpu id: 2", "local rank: 1 gpu id: 1")]
    assert told(run, [*console, *lines[2:]], 4)[1] is None


def test_gloo_with_no_interface_or_host_name_never_creates_its_group(run: Run) -> None:
    # GlooDeviceFactory's TORCH_CHECK, raised from ProcessGroupGloo's constructor in
    # init_process_group; the store warnings before it are its client's retries
    lines = [
        "[W socket.cpp:601] [c10d] The client socket has failed to connect to [trainer-a]:29511 (errno: 111 - Connection refused).",
        "Traceback (most recent call last):",
        '  File "train.py", line 41, in setup',
        "    dist.init_process_group('gloo', rank=rank, world_size=2)",
        "RuntimeError: GlooDeviceFactory::makeTCPDevice(): interface or hostname can't be empty",
    ]
    assert told(run, lines, 4)[0] == "launcher_error"


def test_vllm_s_engine_core_error_is_the_root_and_the_front_end_s_report_its_symptom(
    run: Run,
) -> None:
    # an RL trainer's rollout engine: the core process's start-up check (worker/utils.py), then
    # the front end's `See root cause above` (engine/utils.py)
    lines = [
        "(EngineCore_DP0 pid=4410) INFO 05-14 09:12:30 [gpu_worker.py:104] Initializing device cuda:0",
        "(EngineCore_DP0 pid=4410) ERROR 05-14 09:12:31 [core.py:708] ValueError: Free memory on device cuda:0 (31.20/79.33 GiB) on startup is less than desired GPU memory utilization (0.6, 47.60 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
        "(EngineCore_DP0 pid=4410) Process EngineCore_DP0:",
        "(APIServer pid=4321) Traceback (most recent call last):",
        "(APIServer pid=4321) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ]
    assert told(run, lines, 1)[0] == "oom_gpu"


def _ray_job(last: str) -> list[str]:
    # `ray job submit` tails the job's output, then reports its status (dashboard job cli.py)
    return [
        "Job submission server address: http://127.0.0.1:8265",
        *[
            f"(TaskRunner pid=8812) step:{n} - actor/pg_loss:0.0{n} - timing_s/step:41.2"
            for n in range(1, 4)
        ],
        "(TaskRunner pid=8812) Training Progress: 100%|██████████| 3/3 [02:03<00:00, 41.20s/it]",
        "",
        "------------------------------------------",
        last,
        "------------------------------------------",
    ]


def test_ray_s_job_cli_saying_the_job_succeeded_completes_the_run(run: Run) -> None:
    _code, doc, _path = run(_ray_job("Job 'raysubmit_9fLqWcS8bXm2Ke1T' succeeded"))
    assert doc["job"]["outcome"] == "completed", doc["job"]
    _code, doc, _path = run(_ray_job("Job 'raysubmit_9fLqWcS8bXm2Ke1T' was stopped"))
    assert doc["job"]["outcome"] == "cancelled", doc["job"]


def _ignored_at_exit(prefix: str = "") -> list[str]:
    # CPython's unraisable hook at interpreter shutdown: a DataLoader iterator's __del__
    return [
        f"{prefix}Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f2a1c3b8ee0>",
        f"{prefix}Traceback (most recent call last):",
        f'{prefix}  File "/opt/torch/utils/data/dataloader.py", line 1479, in __del__',
        f"{prefix}    self._shutdown_workers()",
        f"{prefix}AttributeError: 'NoneType' object has no attribute 'join'",
    ]


def test_an_exception_python_ignored_at_shutdown_is_no_failure(run: Run) -> None:
    steps = [f"2024-05-02 10:0{n}:00,000 - INFO - step {n}/3 loss 1.{n}" for n in range(1, 4)]
    _code, doc, _path = run([*steps, *_ignored_at_exit("[rank1]:")])
    assert doc["incidents"] == [], doc["incidents"]
    # a crash before it is still the crash
    crash = [
        "[rank0]:Traceback (most recent call last):",
        '[rank0]:  File "train.py", line 40, in <module>',
        "[rank0]:RuntimeError: CUDA error: an illegal memory access was encountered",
    ]
    assert told(run, [*steps, *crash, *_ignored_at_exit("[rank0]:")], 5)[0] == "cuda_error"


def test_wandb_s_own_errors_are_no_failure_of_the_run_it_logs(run: Run) -> None:
    steps = [f"2024-05-02 10:0{n}:00,000 - INFO - step {n}/300 loss 1.{n}" for n in range(1, 4)]
    own = [
        "wandb: ERROR Dropped streaming file chunk (see wandb/debug-internal.log)",
        "wandb: ERROR Error while calling W&B API: An internal error occurred. Please contact support. (<Response [500]>)",
    ]
    _code, doc, _path = run([*steps, *own])
    assert doc["incidents"] == [], doc["incidents"]
    # what W&B raises into the script is the script's failure
    raised = [
        "wandb: ERROR Run initialization has timed out after 90.0 sec.",
        "Traceback (most recent call last):",
        '  File "train.py", line 12, in <module>',
        "wandb.errors.CommError: Run initialization has timed out after 90.0 sec.",
    ]
    assert told(run, raised, 3)[0] == "python_exception"


def test_nccl_s_cuda_check_failing_as_the_driver_shuts_down_is_teardown(run: Run) -> None:
    # cudaErrorCudartUnloading through NCCL's CUDACHECK: the process was already exiting
    steps = [f"2024-05-02 10:0{n}:00,000 - INFO - step {n}/300 loss 1.{n}" for n in range(1, 4)]
    teardown = "node1:123:456 [0] NCCL WARN Cuda failure 4 'driver shutting down'"
    _code, doc, _path = run([*steps, teardown])
    assert doc["incidents"] == [], doc["incidents"]
    # any other CUDA failure NCCL reports is one
    broken = "node1:123:456 [0] NCCL WARN Cuda failure 'unspecified launch failure'"
    assert told(run, [*steps, broken], 3)[0] == "cuda_error"


def test_a_store_connect_the_client_retries_is_no_root_of_a_later_failure(run: Run) -> None:
    # socket.cpp's connect loop warns for each address it failed and tries again (a healthy
    # start often shows it); the job's failure is what came after
    lines = [
        "[W socket.cpp:601] [c10d] The client socket has failed to connect to [::ffff:127.0.0.1]:29500 (errno: 97 - Address family not supported by protocol).",
        "2024-05-02 10:01:00,000 - INFO - step 1/300 loss 1.1",
        "Traceback (most recent call last):",
        '  File "train.py", line 3, in <module>',
        "KeyError: 'labels'",
    ]
    assert told(run, lines, 4)[0] == "python_exception"


def test_torchx_says_how_the_job_it_waited_for_ended(run: Run) -> None:
    # torchx/cli/cmd_run.py `_wait_and_exit`: `Job finished: {AppState}`, behind its logger header
    steps = [f"trainer/0 epoch {n} loss 0.{9 - n}" for n in range(1, 10)]
    done = "torchx 2024-02-01 10:11:12 INFO     Job finished: {state}"
    code, doc, _ = run([*steps, done.format(state="SUCCEEDED")])
    assert code == 0 and doc["job"]["outcome"] == "completed", doc["job"]
    # a replica's own error is the cause; torchx's FAILED is its summary
    error = "trainer/0 ValueError: labels out of range"
    _doc, inc, path = failed_verdict(run, [*steps, error, done.format(state="FAILED")])
    assert_root(inc, path, 10, error)
    # cancelled with nothing else wrong
    code, doc, _ = run([*steps, done.format(state="CANCELLED")])
    assert doc["job"]["outcome"] == "cancelled", doc["job"]


def test_openpcdet_says_its_run_ended(run: Run) -> None:
    # tools/train.py and eval_utils.py, behind common_utils' `%(asctime)s  %(levelname)5s ` header
    head = "2024-03-02 10:{m:02d}:00,000   INFO  "
    tag = "cfgs/kitti_models/second(default)"
    train = [
        head.format(m=0) + f"**********************Start training {tag}**********************",
        *(head.format(m=n) + f"Train: {n}/80 loss 0.{9 - n}" for n in range(1, 9)),
        head.format(m=10) + f"**********************End training {tag}**********************",
        head.format(m=11) + f"**********************Start evaluation {tag}**********************",
    ]
    done = [
        head.format(m=20) + "****************Evaluation done.*****************",
        head.format(m=21) + f"**********************End evaluation {tag}**********************",
    ]
    code, doc, _ = run([*train, *done])
    assert code == 0 and doc["job"]["outcome"] == "completed", doc["job"]
    # a run that stops inside its evaluation did not complete
    error = "RuntimeError: CUDA error: an illegal memory access was encountered"
    _doc, inc, path = failed_verdict(run, [*train, error])
    assert_root(inc, path, len(train) + 1, error)


def test_open_mpi_s_shared_memory_single_copy_failing_falls_back_and_ends_nothing(run: Run) -> None:
    # btl_vader_get.c: opal_output(0, "Read %ld, expected %lu, errno = %d\n") behind opal_output's
    # `[host:pid] `, once per failed copy, from each local rank; ob1 retries the get, then asks
    # the sender to fall back to copy in/out (pml_ob1_recvreq.c): the run goes on
    steps = [f"[1,0]<stdout>:epoch 1 step {n} loss 0.{9 - n}" for n in range(1, 4)]
    copies = [
        f"[1,{r}]<stderr>:[trainer-7:0{4410 + r}] Read -1, expected {size}, errno = 1"
        for r, size in ((1, 262144), (0, 524288), (1, 26214400))
    ]
    _code, doc, _ = run([*steps, *copies])
    assert doc["incidents"] == [], doc["incidents"]
    # a failure after the copies is told by its own line
    error = "[1,1]<stderr>:RuntimeError: CUDA error: an illegal memory access was encountered"
    category, rank = told(run, [*steps, *copies, error], len(steps) + len(copies))
    assert (category, rank) == ("cuda_error", 1)
    # a file reader's own short-read report in the same words is not it
    other = "Read 4096, expected 8192, errno = 0 at /data/shard-0003.bin"
    _code, doc, _ = run([*steps, other])
    assert all(i["root_cause"]["pattern"] != "openmpi.cma_read_failed" for i in doc["incidents"])


def test_a_store_read_that_timed_out_is_the_first_word_of_a_wait_no_peer_answered(run: Run) -> None:
    # socket.cpp SocketImpl::waitForInput's warning (torch 2.13 libtorch_cpu.so), then the
    # client's call failing in the rank's traceback
    steps = [f"[rank0]:{{'loss': 0.{9 - n}, 'step': {n}}}" for n in range(1, 4)]
    lines = [
        *steps,
        "[rank0]:[W1104 03:12:44.019281734 socket.cpp:489] [c10d] waitForInput: socket SocketImpl(fd=58, addr=[node-0]:42412, remote=[node-0]:51216) timed out after 300000ms",
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "/work/grpo.py", line 88, in sync_weights',
        "[rank0]:     group = StatelessProcessGroup.create(host, port, rank, world_size)",
        "[rank0]: torch.distributed.DistStoreError: Socket Timeout",
    ]
    # the rank's exception is the root where the log shows it; where it does not (an excerpt
    # that stops in the traceback), the warning is
    assert told(run, lines, 7)[0] == "comm_error"
    assert told(run, lines[:6], 3)[0] == "comm_error"
    # poll()'s own report of an empty wait is not it
    poll = "[W1104 03:12:44.019281734 socket.cpp:460] [c10d] waitForInput: poll for socket SocketImpl(fd=12, addr=[10.0.0.7]:53318, remote=[10.0.0.2]:29500) returned 0, likely a timeout"
    _code, doc, _ = run([*steps, poll, *steps])
    assert all(i["root_cause"]["pattern"] != "c10d.store_read_timeout" for i in doc["incidents"])


def test_a_dataloader_worker_terminated_from_outside_is_a_killed_process(run: Run) -> None:
    # the DataLoader's `is killed by signal: {strsignal}`: SIGTERM is no data error
    steps = [f"[rank0]: step {n} loss 0.{9 - n}" for n in range(1, 4)]
    dead = "[rank0]: RuntimeError: DataLoader worker (pid 3349) is killed by signal: Terminated. "
    assert told(run, [*steps, dead], 3) == ("process_killed", 0)
    # the scheduler's cancel that sent it tells how the job ended
    cancel = "slurmstepd: error: *** JOB 4711 ON gpu-a17 CANCELLED AT 2025-03-04T10:11:12 ***"
    _code, doc, _ = run([*steps, dead, cancel])
    assert doc["job"]["outcome"] == "cancelled", doc["job"]
    # a segfault in a decoder stays the data pipeline's
    segv = "[rank0]: RuntimeError: DataLoader worker (pid 3349) is killed by signal: Segmentation fault. "
    assert told(run, [*steps, segv], 3)[0] == "data_error"


def test_a_ray_actor_s_death_is_a_killed_process_unless_its_creation_task_raised(run: Run) -> None:
    # ray/exceptions.py: ActorDiedError / RayActorError / WorkerCrashedError, also behind the
    # driver's RayTaskError(<type>) wrapper
    steps = [f"(main_task pid=4711) step:{n} - actor/loss:0.{9 - n}" for n in range(1, 4)]
    wrapped = (
        "ray.exceptions.RayTaskError(ActorDiedError): ray::main_task() (pid=4711, ip=10.0.0.5)"
    )
    assert told(run, [*steps, wrapped], 3)[0] == "process_killed"
    crashed = "ray.exceptions.WorkerCrashedError: The worker died unexpectedly while executing this task. Check python-core-worker-*.log files for more information."
    assert told(run, [*steps, crashed], 3)[0] == "process_killed"
    # an actor whose __init__ raised died of that error
    init = "ray.exceptions.ActorDiedError: The actor died because of an error raised in its creation task, ray::Worker.__init__() (pid=4790, ip=10.0.0.5, actor_id=1a2b3c4d5e6f708192a3b4c501000000, repr=<Worker object at 0x7f00>)"
    assert told(run, [*steps, init], 3)[0] == "python_exception"


def test_a_c10d_error_type_is_the_communication_layer_s_even_when_only_its_name_survives(
    run: Run,
) -> None:
    # c10/util/Exception.h: DistBackendError / DistNetworkError / DistStoreError as they reach
    # Python; Ray re-raises a worker's as RayTaskError(<type>) with the actor in the message
    steps = [
        f"(RayTrainWorker pid=2210, ip=10.0.4.12) step {n} loss 0.{9 - n}" for n in range(1, 4)
    ]
    wrapped = "ray.exceptions.RayTaskError(DistBackendError): ray::_RayTrainWorker__execute.get_next() (pid=2210, ip=10.0.4.12, actor_id=5c1e0a9b7d3f2e4a6b8c0d1e02000000, repr=<RayTrainWorker object at 0x7f3a2c1d5e80>)"
    assert told(run, [*steps, wrapped], 3)[0] == "comm_error"
    # torch 2.13's HashStore.wait past its timeout raises exactly this (run here)
    store = [
        "Traceback (most recent call last):",
        '  File "train.py", line 9, in <module>',
        "torch.distributed.DistStoreError: Wait timeout",
    ]
    assert told(run, [*steps, *store], 5)[0] == "comm_error"
    # what the message says first decides: a CUDA error raised through the backend is the GPU's
    cuda = (
        "torch.distributed.DistBackendError: CUDA error: an illegal memory access was encountered"
    )
    assert told(run, [*steps, cuda], 3)[0] == "cuda_error"


def test_lightning_s_graceful_shutdown_on_an_interrupt_is_a_cancel(run: Run) -> None:
    # trainer/call.py (2.x) and the 1.x trainer: rank_zero_warn("Detected KeyboardInterrupt,
    # attempting graceful shutdown ..."); `warnings` quotes the source line under the 1.x form
    steps = [
        f"Epoch 3:  {n}0%|####      | {n}0/100 [00:10<00:15, loss=0.{9 - n}]" for n in range(1, 4)
    ]
    caught = "/opt/conda/lib/python3.8/site-packages/pytorch_lightning/utilities/distributed.py:69: UserWarning: Detected KeyboardInterrupt, attempting graceful shutdown..."
    _code, doc, _ = run(
        [
            *steps,
            caught,
            '  rank_zero_warn("Detected KeyboardInterrupt, attempting graceful shutdown...")',
        ]
    )
    assert doc["job"]["outcome"] == "cancelled", doc["job"]
    assert [i["root_cause"]["line"] for i in doc["incidents"]] == [4], doc["incidents"]


def test_paddle_s_signal_report_says_whether_the_process_crashed_or_was_stopped(run: Run) -> None:
    # paddle/fluid/platform/init.cc SignalHandle: errors::Fatal("`%s` is detected by the operating
    # system.") with SignalErrorStrings' text, after the C++ traceback block
    steps = [
        f"[2024-03-02 10:0{n}:00,000] [    INFO] - loss: 0.{9 - n}, global_step: {n}"
        for n in range(1, 4)
    ]
    block = [
        "--------------------------------------",
        "C++ Traceback (most recent call last):",
        "--------------------------------------",
        "No stack trace in paddle, may be caused by external reasons.",
        "----------------------",
        "Error Message Summary:",
        "----------------------",
    ]
    fatal = "FatalError: `{text}` is detected by the operating system."
    info = "  [SignalInfo: *** {sig} (@0x3e8) received by PID 4711 (TID 0x7f60d4b6e740) from PID 4700 ***]"
    crashed = [*steps, *block, fatal.format(text="Segmentation fault"), info.format(sig="SIGSEGV")]
    assert told(run, crashed, 10)[0] == "segfault"
    stopped = [*steps, *block, fatal.format(text="Termination signal"), info.format(sig="SIGTERM")]
    assert told(run, stopped, 10)[0] == "process_killed"


def test_an_hccl_call_failing_under_an_npu_operator_is_a_communication_error(run: Run) -> None:
    # torch_npu's OPS_CHECK_ERROR with an HCCL API as the call: the code is an HcclResult
    steps = [f"[rank0]: step {n} loss 0.{9 - n}" for n in range(1, 4)]
    error = "[rank2]: RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function error: HcclAllGather, error code is 9"
    trailer = "[rank2]: [ERROR] 2025-04-08-18:07:20 (PID:4711, Device:2, RankID:2) ERR01100 OPS call acl api failed."
    category, rank = told(run, [*steps, error, trailer], 3)
    assert (category, rank) == ("comm_error", 2)


def test_a_ray_process_that_cannot_register_with_its_raylet_is_a_failed_start(run: Run) -> None:
    # core_worker_process.cc: RAY_LOG(FATAL) << "Failed to register worker to Raylet: " << status
    lines = [
        "2025-03-04 09:12:40,374 INFO worker.py:1837 -- Connecting to existing Ray cluster at address: 10.0.4.7:6379...",
        "2025-03-04 09:12:40,385 INFO worker.py:2023 -- Connected to Ray cluster.",
        "[2025-03-04 09:12:46,736 E 46008 46008] core_worker_process.cc:232: Failed to register worker to Raylet: IOError: Failed to read data from the socket: End of file worker_id=01000000ffffffffffffffffffffffffffffffffffffffffffffffff",
    ]
    assert told(run, lines, 2)[0] == "launcher_error"


def test_tensorflow_s_own_words_on_a_lost_peer_and_on_storage_that_gave_up(run: Run) -> None:
    steps = [f"{n}/100 [==>...........] - ETA: 1:0{n} - loss: 0.{9 - n}" for n in range(1, 4)]
    # collective_all_reduce_strategy.py _check_health: retries, then aborts the collectives
    lost = [
        "WARNING:tensorflow:/job:worker/replica:0/task:2 seems down, retrying 1/3",
        "WARNING:tensorflow:/job:worker/replica:0/task:2 seems down, retrying 2/3",
        "ERROR:tensorflow:Cluster check alive failed, /job:worker/replica:0/task:2 is down, aborting collectives: Deadline Exceeded",
    ]
    assert told(run, [*steps, *lost], 5)[0] == "comm_error"
    # retrying_utils.cc CallWithRetries, here under a checkpoint save to GCS
    gave_up = "tensorflow.python.framework.errors_impl.AbortedError: All 10 retry attempts failed. The last failure: Unavailable: Error executing an HTTP request: HTTP response code 503"
    assert told(run, [*steps, gave_up], 3)[0] == "io_error"
    # Google auth's warning of every run off GCP carries the same words and is no failure
    warning = '2024-05-02 10:00:00.000000: W tsl/platform/cloud/google_auth_provider.cc:184] All attempts to get a Google authentication bearer token failed, returning an empty token. Retrieving token from GCE failed with "ABORTED: All 10 retry attempts failed. The last failure: Error executing an HTTP request: libcurl code 6".'
    _code, doc, _ = run([*steps, warning, *steps])
    assert all(
        i["root_cause"]["pattern"] != "tensorflow.retries_exhausted" for i in doc["incidents"]
    )


def test_wandb_core_s_own_log_on_stderr_is_no_failure_of_the_run(run: Run) -> None:
    # core/cmd/wandb-core/main.go: slog.Error("main: failed to get logger path", "error", err) with
    # Go's default handler, then the service's own records on stderr
    steps = [f"2024-05-02 10:0{n}:00,000 - INFO - step {n}/300 loss 1.{n}" for n in range(1, 4)]
    own = [
        '2024/05/02 10:03:30 ERROR main: failed to get logger path error="error creating log directory: mkdir /home/u/.cache/wandb: permission denied"',
        "2024/05/02 10:03:30 INFO server: will exit if parent process dies ppid=4711",
    ]
    _code, doc, _path = run([*steps, *own])
    assert doc["incidents"] == [], doc["incidents"]


def test_ucx_s_vfs_thread_failing_is_no_failure_of_the_run(run: Run) -> None:
    # src/ucs/vfs/fuse/vfs_fuse.c: inotify's ENOSPC (the watch limit) in each process at start
    vfs = "[1724683625.658140] [gpu-n12:{pid}:f]        vfs_fuse.c:281  UCX  ERROR inotify_add_watch(/tmp) failed: No space left on device"
    steps = [f" iteration {n}/ 10 | lm loss: 2.{n} |" for n in range(1, 4)]
    _code, doc, _path = run([vfs.format(pid=p) for p in (96227, 96228)] + steps)
    assert doc["incidents"] == [], doc["incidents"]
    # a checkpoint write that fills the disk is the job's
    full = "OSError: [Errno 28] No space left on device: '/ckpt/iter_0000003/model.pt'"
    _code, doc, _path = run([vfs.format(pid=1), *steps, full])
    assert verdict_incident(doc)["category"] == "io_error", doc["incidents"]


def test_wandb_s_git_root_error_is_no_failure_of_the_run(run: Run) -> None:
    # wandb/sdk/lib/gitlib.py GitRepo.root catches GitPython's GitCommandError, logs it and goes
    # on: in 0.13 to 0.15 with logger.error(f"git root error: {e}"), later with
    # logger.exception("git root error") and the traceback after it (git/exc.py's text)
    start = [
        "2024-05-02 10:00:00,000 - INFO - building model",
        "wandb: Tracking run with wandb version 0.16.6",
    ]
    detail = [
        "  cmdline: git rev-parse --show-toplevel",
        "  stderr: 'fatal: detected dubious ownership in repository at '/workspace/proj''",
    ]
    logged = [
        "ERROR:2024-05-02 10:00:01,517:git root error: Cmd('git') failed due to: exit code(128)",
        *detail,
    ]
    excepted = [
        "ERROR:wandb.sdk.lib.gitlib:git root error",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.10/site-packages/wandb/sdk/lib/gitlib.py", line 94, in root',
        '    return self.repo.git.rev_parse("--show-toplevel")',
        "git.exc.GitCommandError: Cmd('git') failed due to: exit code(128)",
        *detail,
    ]
    for noted in (logged, excepted):
        _code, doc, _path = run(
            [*start, *noted, "wandb: Run data is saved locally in /workspace/proj/wandb"]
        )
        assert doc["incidents"] == [], doc["incidents"]
        assert doc["job"]["outcome"] == "truncated", doc["job"]
    # the same detail after a command the script itself ran and died of is that failure's
    _code, doc, _path = run(
        [*start, *excepted[1:], "wandb: Run data is saved locally in /workspace/proj/wandb"]
    )
    assert doc["incidents"], doc


def _crash_block(exitcode: int, rank: int) -> list[str]:
    """torchrun's failure block for one worker that died with `exitcode`."""
    return child_failed_block(
        "train.py",
        time="2024-03-02_10:11:12",
        host="node-3",
        rank=rank,
        local_rank=1,
        exitcode=exitcode,
        pid=4711,
    )


@pytest.mark.parametrize(
    ("report", "code", "rank"),
    [
        # signal(7): SIGFPE (8) and SIGILL (4) are crash signals like SIGSEGV; torchrun reports
        # the worker's exit as the negative signal, in its agent line and its failure block
        (
            "[2025-09-09 10:30:47,123] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -8) local_rank: 1 (pid: 52782) of binary: /usr/bin/python",
            -8,
            5,
        ),
        (
            "[2025-09-09 10:30:47,123] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -4) local_rank: 1 (pid: 52782) of binary: /usr/bin/python",
            -4,
            5,
        ),
        # ntstatus.h: a Windows process killed by an exception exits with its NTSTATUS
        # (0xC0000005 access violation = 3221225477, 0xC0000409 = 3221226505), which mp.spawn
        # and torchrun report as the exit code
        (
            "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with exit code 3221225477",
            3221226505,
            1,
        ),
    ],
)
def test_a_worker_that_died_of_a_native_crash_crashed(
    run: Run, report: str, code: int, rank: int
) -> None:
    steps = [f"[rank0]: step {n} loss 0.{9 - n}" for n in range(1, 4)]
    assert told(run, [*steps, report], 3)[0] == "segfault"
    _doc, inc, _path = failed_verdict(run, [*steps, *_crash_block(code, rank)])
    assert (inc["category"], inc["culprit"]["rank"]) == ("segfault", rank), inc


def test_an_exit_code_of_the_program_s_own_is_no_crash(run: Run) -> None:
    steps = [f"[rank0]: step {n} loss 0.{9 - n}" for n in range(1, 4)]
    spawn = "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with exit code {code}"
    assert told(run, [*steps, spawn.format(code=3221225477)], 3) == ("segfault", 0)
    # Python exits 1 on an uncaught exception; another code is the program's own choice, whose
    # reason the report does not give (250 is `exit(-6)`: above 128 + 64, no signal's)
    assert told(run, [*steps, spawn.format(code=1)], 3)[0] == "python_exception"
    assert told(run, [*steps, spawn.format(code=3)], 3)[0] == "unknown"
    gloo = [*steps, "Process 2 exit with status code 250.", "Process 0 exit with status code 250."]
    assert told(run, gloo, 3) == ("unknown", 2)


def test_a_slurm_command_that_rejects_its_own_option_never_launched(run: Run) -> None:
    # src/common/proc_args.c verify_node_count: error("\"%s\" is not a valid node count")
    lines = [
        "+ NNODES=t",
        "+ sbatch -N t run.sub",
        'sbatch: error: "t" is not a valid node count',
    ]
    assert told(run, lines, 2)[0] == "launcher_error"


def test_paddle_s_launcher_says_which_local_rank_failed_and_when_its_pod_completed(
    run: Run,
) -> None:
    # paddle/distributed/launch/controllers/controller.py `watch`, behind `LAUNCH <LEVEL> <asctime> `
    head = "LAUNCH {lvl} 2024-03-02 10:{m:02d}:00,000 "
    start = [
        head.format(lvl="INFO", m=0) + "Run Pod: wnfrei, replicas 4, status ready",
        head.format(lvl="INFO", m=0) + "Watching Pod: wnfrei, replicas 4, status running",
        # its own warnings are no failure of the job
        head.format(lvl="WARNING", m=5) + "save gpu log failed",
    ]
    failed = [
        head.format(lvl="INFO", m=9) + "Pod failed",
        head.format(lvl="ERROR", m=9) + "Container failed !!!",
        "Container rank 2 status failed cmd ['/usr/bin/python', '-u', 'train.py'] code -9 log log/workerlog.2 ",
        head.format(lvl="INFO", m=9)
        + "------------------------- ERROR LOG DETAIL -------------------------",
        head.format(lvl="INFO", m=9) + "Exit code -9",
    ]
    _doc, inc, path = failed_verdict(run, [*start, *failed])
    assert_root(inc, path, 6, failed[2])
    assert (inc["category"], inc["culprit"]["local_rank"]) == ("process_killed", 2), inc
    code, doc, _ = run([*start, head.format(lvl="INFO", m=9) + "Pod completed"])
    assert code == 0 and doc["job"]["outcome"] == "completed", doc["job"]


def test_a_vllm_worker_method_is_told_by_the_exception_its_traceback_ends_with(run: Run) -> None:
    # vllm/worker/worker_base.py execute_method (0.8.2): logger.exception, then the re-raise;
    # the cumem allocator's `CUDA Error: %s at %s:%d` (its .so's text) at the end of it
    head = "(LLMRayActor pid=5120) ERROR 03-18 18:41:02 [worker_base.py:620] "
    said = (
        head
        + "Error executing method 'wake_up'. This might cause deadlock in distributed execution."
    )
    frames = [
        head + "Traceback (most recent call last):",
        head + '  File "/opt/vllm/worker/worker_base.py", line 612, in execute_method',
        head + "    return run_method(self, method, args, kwargs)",
        head + '  File "/opt/vllm/device_allocator/cumem.py", line 200, in wake_up',
        head + "    create_and_map(handle)",
    ]
    oom = head + "RuntimeError: CUDA Error: out of memory at /opt/vllm/csrc/cumem_allocator.cpp:62"
    assert told(run, [said, *frames, oom], 6)[0] == "oom_gpu"
    # cut before its exception: the method's own line, an exception of the program
    assert told(run, [said, *frames], 0)[0] == "python_exception"


# hydra/_internal/utils.py run_and_report (1.0 to 1.3): a Hydra error of the configuration printed
# as its message alone, then the footer; a task's own exception as a traceback, then the footer
HYDRA_FOOTER = "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace."


def test_hydras_report_of_a_config_error_is_the_root_before_torchruns_failure(run: Run) -> None:
    lines = [
        "[default0]:Could not override 'trainer.max_step'.",
        "[default0]:To append to your config use +trainer.max_step=1000",
        "[default0]:Key 'max_step' is not in struct",
        "[default0]:",
        f"[default0]:{HYDRA_FOOTER}",
        *child_failed_block(
            "train.py",
            time="2025-02-07_17:31:58",
            host="gpu-n02",
            rank=0,
            local_rank=0,
            exitcode=1,
            pid=40211,
        ),
    ]
    # the message Hydra printed is the root (config_loader_impl.py's first line), the footer closes it
    category, rank = told(run, lines, 0)
    assert (category, rank) == ("launcher_error", 0)
    ambiguous = [
        "Ambiguous value for argument 'model.data.splits=90,5,5'",
        "1. To use it as a list, use key=[value1,value2]",
        "2. To use it as string, quote the value: key=\\'value1,value2\\'",
        "3. To sweep over it, add --multirun to your command line",
        "",
        HYDRA_FOOTER,
    ]
    assert told(run, ambiguous * 2, 0) == ("launcher_error", None)


def test_hydras_footer_after_a_traceback_leaves_the_exception_the_root(run: Run) -> None:
    # counter-case: the task raised; the footer only closes Hydra's print of it
    lines = [
        "Error executing job with overrides: ['data.path=/data/c4']",
        "Traceback (most recent call last):",
        '  File "/work/train.py", line 41, in main',
        "    batch = next(it)",
        "ValueError: sequence length 4096 exceeds the model's 2048",
        "",
        HYDRA_FOOTER,
    ]
    category, _rank = told(run, lines, 4)
    assert category == "python_exception"


# DistDGL (dgl python/dgl/distributed/dist_context.py exit_client, rpc_server.py start_server):
# every trainer prints its exit, then the graph servers leave their loop on client 0's shutdown
DGL_END = [
    "Part 0 | Epoch 00019 | Step 00040 | Loss 0.4123 | Train Acc 0.8871 | Speed (samples/sec) 9120.4",
    "Client[0] in group[0] is exiting...",
    "Client[1] in group[0] is exiting...",
    "Server (0) shutdown.",
    "Server is exiting...",
]


def test_distdgls_servers_exiting_after_every_trainer_is_the_runs_end(run: Run) -> None:
    code, doc, _path = run(DGL_END)
    assert (code, doc["job"]["outcome"]) == (0, "completed"), doc["job"]


def test_distdgls_servers_exiting_after_a_trainers_exception_is_still_a_crash(run: Run) -> None:
    # counter-case: a trainer's exit runs at interpreter exit, after its traceback too
    lines = [
        DGL_END[0],
        "Traceback (most recent call last):",
        '  File "train_dist.py", line 210, in <module>',
        "    main(args)",
        "RuntimeError: DistTensor feat pull failed on part 1",
        *DGL_END[1:],
    ]
    category, _rank = told(run, lines, 4)
    assert category == "python_exception"


def test_pytorchs_cuda_hint_says_a_cuda_call_failed_where_the_error_line_was_lost(
    run: Run,
) -> None:
    hint = "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect."
    lines = [
        hint,
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
        "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 7310 closing signal SIGTERM",
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 1 (pid: 7311) of binary: /usr/bin/python",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "cuda_error", inc
    assert_root(inc, path, 1, hint)
    assert inc["culprit"]["rank"] == 1, inc["culprit"]
    # with the error's own line before it, that line is the root, in one incident
    error = "[rank1]: RuntimeError: CUDA error: misaligned address"
    doc, inc, path = failed_verdict(run, [error, f"[rank1]: {hint}", *lines[1:]])
    assert len(doc["incidents"]) == 1, doc["incidents"]
    assert_root(inc, path, 1, error)


def test_the_task_the_coordination_service_lists_is_the_culprit_not_the_printer(
    run: Run,
) -> None:
    # XLA's coordination service: its error's first line, then the task names one per line
    fatal = (
        "F0302 08:14:51.220931   40211 client.h:77] Terminating process because the JAX "
        "distributed service detected fatal errors. This most likely indicates that another task "
        "died; see the other task logs for more details. absl::Status: UNAVAILABLE: The following "
        "tasks are unhealthy (stopped sending heartbeats):"
    )
    lines = [
        "E0302 08:14:51.220801   40211 coordination_service_agent.cc:332] Polled an error from coordination service (this can be an error from this or another task).",
        fatal,
        "/job:jax_worker/replica:0/task:6",
        "The tasks have crashed. Check the task logs for an earlier error, or scheduler events (e.g. preemption, eviction) to debug further.",
    ]
    _doc, inc, _path = failed_verdict(run, lines)
    assert inc["culprit"]["rank"] == 6, inc["culprit"]
    # under a barrier's timeout the listed task is the one it waited for; the timeout stays the root
    barrier = (
        "E0302 08:14:51.220931   40211 pjrt_client.cc:99] DEADLINE_EXCEEDED: Barrier timed out. "
        "Id: sync_global_devices_3. # of tasks that reached the barrier: 7/8. The first task at "
        "the barrier: /job:jax_worker/replica:0/task:0. Some timed out task names:"
    )
    _doc, inc, path = failed_verdict(run, [barrier, "/job:jax_worker/replica:0/task:5"])
    assert (inc["category"], inc["culprit"]["rank"]) == ("collective_timeout", 5), inc
    assert_root(inc, path, 1, barrier)
    # two tasks listed: neither alone is the culprit
    _doc, inc, _path = failed_verdict(
        run, [*lines[:3], "/job:jax_worker/replica:0/task:7", lines[3]]
    )
    assert (inc["culprit"] or {}).get("rank") not in (6, 7), inc["culprit"]


def test_ascends_hccl_watchdog_timeout_is_a_collective_timeout_as_ncclss_is(run: Run) -> None:
    # torch_npu's ProcessGroupHCCL prints ProcessGroupNCCL's texts with HCCL and WorkHCCL
    lines = [
        "[rank0]: step 120 loss 2.31",
        "[E ProcessGroupHCCL.cpp:1088] [Rank 5] Watchdog caught collective operation timeout: WorkHCCL(SeqNum=812, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800411 milliseconds before timing out.",
        "[E ProcessGroupHCCL.cpp:612] [Rank 5] Some HCCL operations have failed or timed out. Due to the asynchronous nature of ASCEND kernels, subsequent NPU operations might run on corrupted/incomplete data.",
    ]
    assert told(run, lines, 1)[0] == "collective_timeout"


def test_the_interpreters_own_fatal_error_is_a_native_crash_of_that_rank(run: Run) -> None:
    # Py_FatalError: `Fatal Python error: <function>: <message>`, then abort() (SIGABRT)
    lines = [
        "[rank2]: step 40 loss 1.91",
        "[rank2]:Fatal Python error: subtype_dealloc: deallocating a freed object",
        "[rank2]:Python runtime state: initialized",
        "E1102 10:11:12.000000 411 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: -6) local_rank: 2 (pid: 4120) of binary: /usr/bin/python",
    ]
    assert told(run, lines, 1) == ("segfault", 2)


def test_a_pure_virtual_call_at_teardown_is_the_native_crash_torchrun_reports(run: Run) -> None:
    lines = [
        "[default1]:iteration 2000/2000 | lm loss: 2.113",
        "[default1]:pure virtual method called",
        "[default1]:terminate called without an active exception",
        "E1102 10:11:12.000000 411 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: -6) local_rank: 1 (pid: 4121) of binary: /usr/bin/python",
    ]
    assert told(run, lines, 1) == ("segfault", 1)
    # with no line before it, the terminate handler's own word is the root
    assert told(run, [lines[0], *lines[2:]], 1) == ("segfault", 1)


def test_a_runtimes_logged_error_status_is_no_failure_of_its_own(run: Run) -> None:
    """PMIX_ERROR_LOG / ORTE_ERROR_LOG print a status and hand it back: a start-up the job went on
    from is no incident, and when the caller gives up its own report is the root."""
    noise = [
        "[gpu-a07:55120] PMIX ERROR: ERROR in file ../../../../../../src/mca/gds/ds12/gds_ds12_lock_pthread.c at line 99",
        "[gpu-a08:61002] PMIX ERROR: ERROR in file ../../../../../../src/mca/gds/ds12/gds_ds12_lock_pthread.c at line 99",
        "[login-2:7711] [[40211,0],0] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file grpcomm_direct.c at line 321",
        "Initializing distributed training on 4 processes",
    ]
    code, doc, _path = run(noise)
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    assert doc["unrecognized"] == [], doc["unrecognized"]
    lines = [
        noise[0],
        "--------------------------------------------------------------------------",
        "It looks like MPI_INIT failed for some reason; your parallel process is",
        "likely to abort.  There are many reasons that a parallel process can",
        "--------------------------------------------------------------------------",
        "srun: error: gpu-a07: task 0: Exited with exit code 1",
    ]
    assert told(run, lines, 2)[0] == "launcher_error"


def test_an_exception_whose_message_starts_on_the_next_line_ends_its_traceback(run: Run) -> None:
    """Python prints `Name: ` alone when the message begins with a newline (Paddle 1.x's
    EnforceNotMet, whose C++ stack follows): that line is the exception."""
    frames = [
        "Traceback (most recent call last):",
        '  File "train.py", line 55, in <module>',
        "    exe.run(startup_program)",
    ]
    for exc in ("paddle.fluid.core_avx.EnforceNotMet:", "RuntimeError: "):
        lines = [*frames, exc, "", "--------------------------------------------"]
        assert told(run, lines, 3)[0] in ("unknown", "python_exception")
    # mp.spawn's re-raise of a child's exception is the parent's report, not the cause
    nccl = "RuntimeError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:82, invalid argument, NCCL version 2.4.8"
    for header in ("Exception:", "torch.multiprocessing.spawn.ProcessRaisedException: "):
        lines = [
            *frames,
            nccl,
            *frames[:2],
            header,
            "",
            "-- Process 0 terminated with the following error:",
        ]
        assert told(run, lines, 3)[0] == "comm_error"


def test_a_worker_group_torchrun_restarted_is_a_new_attempt_that_went_on(run: Run) -> None:
    """The legacy launcher's CalledProcessError reports the worker's exit (its NCCL error above
    is the root); the agent's `will restart worker group` starts the next attempt, whose steps
    the log ends in."""
    meter = "Epoch: [{e}][{i:>4d}/1563]\tTime  0.650 ( 0.833)\tData  0.043 ( 0.090)\tLoss 4.4603e+00 (4.4707e+00)"
    nccl = "RuntimeError: NCCL error: unhandled system error, NCCL version 2.7.8"
    failed = [
        *(meter.format(e=0, i=i) for i in range(0, 50, 10)),
        "Traceback (most recent call last):",
        '  File "main.py", line 471, in train',
        "    loss.backward()",
        nccl,
        "subprocess.CalledProcessError: Command '['/usr/bin/python3', '-u', 'main.py', '--arch=resnet18']' returned non-zero exit status 1.",
    ]
    doc, inc, path = failed_verdict(run, failed)
    assert_root(inc, path, 9, nccl)
    assert doc["job"]["outcome"] == "crashed", doc["job"]
    restart = "[INFO] 2021-02-11 09:12:40,001 api: [default] Worker group FAILED. 3/3 attempts left; will restart worker group"
    _code, doc, path = run([*failed, restart, *(meter.format(e=1, i=i) for i in range(0, 50, 10))])
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    assert len(doc["attempts"]) == 2, doc["attempts"]
    assert_root(doc["incidents"][0], path, 9, nccl)


def test_sample_factorys_silent_component_stops_the_run(run: Run) -> None:
    # runner.py _check_heartbeat: a component silent past heartbeat_report_sec, then every
    # component of its type: the runner stops the experiment as failed
    step = "[2023-09-18 21:{m:02d}:00,000][196071] Fps is (10 sec: 21504.0, 60 sec: 20889.6, 300 sec: 20111.2). Total num frames: {f}. Throughput: 0: 2100.3. Samples: {f}. Policy #0 lag: (min: 0.0, avg: 1.2, max: 3.0)"
    lines = [
        *(step.format(m=m, f=m * 100000) for m in range(20, 30)),
        "[2023-09-18 21:35:46,519][196071] No heartbeat for components: InferenceWorker_p0-w0 (337 seconds)",
        "[2023-09-18 21:35:46,519][196071] Stopping training due to lack of heartbeats from <class 'sample_factory.algo.sampling.inference_worker.InferenceWorker'>",
    ]
    doc, inc, _path = failed_verdict(run, lines)
    assert inc["category"] == "hang" and inc["root_cause"]["line"] == 11, inc
    assert doc["job"]["outcome"] in ("crashed", "hung"), doc["job"]


def test_olmos_excepthook_names_the_process_of_an_unprefixed_exception(run: Run) -> None:
    # the exception's own last line carries no prefix; OLMo's excepthook logs it again behind its
    # handler's header, which names the local rank (olmo/util.py excepthook, RichHandler)
    error = "HfHubHTTPError: 429 Client Error: Too Many Requests for url: https://huggingface.co/api/datasets/glue/paths-info/main"
    lines = [
        "[2024-04-18 15:50:00] INFO     [olmo.train:1240, rank=0] [step=10/500,epoch=0]",
        error,
        f"[2024-04-18 15:55:06] CRITICAL [olmo.util:158, rank=6] Uncaught {error}",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert_root(inc, path, 2, error)
    # the Hub refused a read: an input of the job, not its code
    assert inc["category"] == "io_error", inc
    assert inc["culprit"]["rank"] == 6, inc["culprit"]
    # another exception's report names no one
    other = lines[2].replace("429 Client Error", "503 Server Error")
    _doc, inc, path = failed_verdict(run, [*lines[:2], other])
    assert inc["culprit"]["rank"] is None, inc["culprit"]


# CPython's threading.excepthook: a thread's uncaught exception under its name, then its traceback
_THREAD_DIED = [
    "Exception in thread Thread-3 (_write_shards):",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.11/threading.py", line 1045, in _bootstrap_inner',
    "    self.run()",
    '  File "/workspace/ckpt/async_writer.py", line 58, in _write_shards',
    "    raise ValueError(f'cannot serialize shard {idx}')",
    "ValueError: cannot serialize shard 4",
]


def test_a_threads_exception_is_its_tracebacks_last_line_or_its_header_where_the_log_ends(
    run: Run,
) -> None:
    steps = [f"epoch 3 step {i} loss 0.41" for i in range(5)]
    _doc, inc, _path = failed_verdict(run, [*steps, *_THREAD_DIED])
    assert inc["root_cause"]["text"] == _THREAD_DIED[-1], inc["root_cause"]
    # the log cut inside the traceback: the thread's header stands for it
    assert told(run, [*steps, *_THREAD_DIED[:-1]], 5) == ("python_exception", None)


def test_an_nvflare_clients_worker_killed_by_a_signal_ends_the_log_as_its_failure(run: Run) -> None:
    # NVFlare's client log (`%(asctime)s - %(name)s - %(levelname)s - %(message)s`), 2.2-era wording
    lines = [
        "2023-02-01 10:00:00,101 - ClientRunner - INFO - [identity=site-2, run=3]: client runner started",
        "2023-02-01 10:00:05,200 - FederatedClient - INFO - Starting to fetch execute task.",
        "2023-02-01 10:00:09,913 - ClientExecutor - INFO - run (3): child worker process finished with execution code: -9",
    ]
    assert told(run, lines, 2) == ("process_killed", None)
    # its clean end is no failure
    code, doc, _path = run([*lines[:2], lines[2].replace("-9", "0")])
    assert code == 0 and doc["verdict"] is None, doc["verdict"]


# SageMaker's training toolkit on each host of a two-host MPI job (trainer.py), then the SDK's
# status line (session.py logs_for_job): the worker host reports SUCCESS once MPI is over
_SM_FAILED = (
    "2022-04-21 09:13:09,721 sagemaker-training-toolkit ERROR    Reporting training FAILURE"
)
_SM_WORKER_DONE = [
    "2022-04-21 09:13:39,767 sagemaker-training-toolkit INFO     MPI process finished.",
    "2022-04-21 09:13:39,767 sagemaker-training-toolkit INFO     Reporting training SUCCESS",
]


def test_a_sagemaker_hosts_success_after_a_reported_failure_is_not_the_runs_completion(
    run: Run,
) -> None:
    oom = "[1,mpirank:14,algo-2]<stderr>:RuntimeError: CUDA out of memory. Tried to allocate 64.00 MiB (GPU 6; 15.78 GiB total capacity; 14.05 GiB already allocated; 55.75 MiB free; 14.10 GiB reserved in total by PyTorch)"
    steps = [f"[1,mpirank:0,algo-1]<stdout>:step {i} loss 2.{i}" for i in range(5)]
    for report in (_SM_FAILED, "2022-04-21 09:13:45 Failed - Training job failed"):
        lines = [*steps, oom, report, *_SM_WORKER_DONE]
        assert told(run, lines, 5) == ("oom_gpu", 14), report
    # with no failure before it, the host's success ends the run
    code, doc, _path = run([*steps, *_SM_WORKER_DONE])
    assert code == 0 and doc["job"]["outcome"] == "completed", doc["job"]


def test_paddledets_evaluation_after_its_last_step_is_a_sign_of_life(run: Run) -> None:
    # ppdet's LogPrinter every 200 steps, then after each epoch its save (checkpoint.py), its
    # evaluation and Checkpointer's `Best test bbox ap is ...`: a log that ends in the evaluation
    # after its last step was alive until then, not silent since its last step
    t = 0
    lines: list[str] = []

    def at(text: str) -> str:
        return f"[08/02 {2 + t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}] {text}"

    for epoch in range(3):
        for step in (0, 200, 400):
            lines.append(
                at(
                    f"ppdet.engine INFO: Epoch: [{epoch}] [{step:3d}/464] learning_rate: 0.000100 "
                    "loss: 9.14 eta: 0:10:28 batch_cost: 0.5412 data_cost: 0.0009 ips: 3.6953 images/s"
                )
            )
            t += 108
        lines.append(
            at("ppdet.utils.checkpoint INFO: Save checkpoint: output/rtdetr_r50vd_6x_coco")
        )
        for k in (0, 100, 200):
            t += 11
            lines.append(at(f"ppdet.engine INFO: Eval iter: {k}"))
        t += 9
        lines.append(at("ppdet.engine INFO: Best test bbox ap is 0.756."))
    code, doc, _path = run(lines)
    assert code == 0 and doc["job"]["outcome"] == "truncated", doc["job"]
