# ruff: noqa: E501  (log lines are kept whole)
"""Whole-log behaviour of what schedulers and launchers print before or around a job that does not
start: SLURM refusing the allocation (patterns/slurm.toml), torch's c10d store client warning as it
retries (patterns/c10d.toml), Kubernetes restarting a container (patterns/cloud.toml). Lines are
constructed from the emitters' format strings (see each pattern file's header)."""

from __future__ import annotations

import pytest

from .helpers import Run, assert_root, failed_verdict, verdict_incident

_SBATCH = "+ sbatch --time=72:00:00 --gres=gpu:8 train.sbatch"
_POPRUN = "+ poprun --num-instances $N --replicas {2,4} python train.py"


@pytest.mark.parametrize(
    ("command", "line"),
    [
        (_SBATCH, "sbatch: error: Batch job submission failed: Invalid qos specification"),
        (
            _SBATCH,
            "salloc: error: Job submit/allocate failed: Requested node configuration is not available",
        ),
        (_SBATCH, "srun: error: Unable to allocate resources: Invalid partition name specified"),
        # a tool's command line refused by boost::program_options (value_semantic.cpp,
        # cmdline.cpp templates)
        (_POPRUN, "the argument ('{2,4}') for option '--replicas' is invalid"),
        (_POPRUN, "Error: the required argument for option '--ipus-per-replica' is missing"),
    ],
)
def test_a_job_the_scheduler_or_a_tools_command_line_refused_is_a_launch_error(
    run: Run, command: str, line: str
) -> None:
    _doc, inc, path = failed_verdict(run, [command, line])
    assert inc["category"] == "launcher_error", inc
    assert_root(inc, path, 2, line)


def test_store_connect_warnings_at_the_logs_end_are_a_wait_not_a_crash(run: Run) -> None:
    # socket.cpp logs each failed address as a c10d warning, its error_code as
    # `(<category>: <value> - <message>)` (Windows' `system error`), and tries again
    warn = "[W1202 09:14:{s:02d}.000000000 socket.cpp:752] [c10d] The client socket has failed to connect to [head-node.local]:29500 (system error: 10049 - The requested address is not valid in its context.)."
    lines = [
        "W1202 09:14:05.102000 8812 torch\\distributed\\elastic\\multiprocessing\\redirects.py:29] NOTE: Redirects are currently not supported in Windows or MacOs.",
        warn.format(s=7),
        warn.format(s=13),
    ]
    code, doc, path = run(lines)
    inc = verdict_incident(doc)
    assert inc["category"] == "launcher_error", inc
    assert_root(inc, path, 2, lines[1])
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    # raised to the caller (no c10d tag), the same words end the process
    raised = "torch.distributed.DistNetworkError: The client socket has failed to connect to [head-node.local]:29500 (errno: 111 - Connection refused)."
    code, doc, _path = run([*lines[:1], raised])
    assert (code, doc["job"]["outcome"]) == (1, "crashed"), doc["job"]


def test_a_crash_loop_report_does_not_say_why_the_container_exits(run: Run) -> None:
    lines = [
        "NAME                          READY   STATUS             RESTARTS   AGE",
        "bert-ddp-master-0             0/1     CrashLoopBackOff   6          7m12s",
        "bert-ddp-worker-0             0/1     Init:0/1           0          7m12s",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "unknown", inc
    assert_root(inc, path, 2, lines[1])


# MPICH's fatal error handler (src/mpi/errhan/errutil.c) through MPID_Abort, with Cray MPICH's
# prefix, and the error stack under it
CRAY_INIT = "MPICH ERROR [Rank 3] [job id 41.0] [Tue Mar  4 10:11:12 2025] [nid000132] - Abort(2665871) (rank 3 in comm 0): Fatal error in PMPI_Init_thread: Other MPI error, error stack:"
INIT_STACK = [
    "MPIR_Init_thread(170).................:",
    "MPID_Init(501)........................:",
    "MPIDI_OFI_mpi_init_hook(580)..........:",
    "open_fabric(1519).....................: OFI invalid value for environment variable",
]


def test_mpi_failing_to_start_is_a_launch_error_and_its_own_reason_comes_first(run: Run) -> None:
    reason = "MPICH ERROR: Unable to use a NIC_POLICY of 'NUMA'. Rank 3 is not confined to a single NUMA node.  There are 4 numa_nodes detected (rc=0)."
    _doc, inc, path = failed_verdict(run, [reason, CRAY_INIT, *INIT_STACK])
    assert inc["category"] == "launcher_error", inc
    assert_root(inc, path, 1, reason)
    # without it, the abort is the root, and it names its rank (comm 0 is the world) and node
    _doc, inc, path = failed_verdict(run, ["step 0: loading data", CRAY_INIT, *INIT_STACK])
    assert_root(inc, path, 2, CRAY_INIT)
    assert (inc["culprit"]["rank"], inc["culprit"]["host"]) == (3, "nid000132"), inc["culprit"]


def test_an_mpi_call_that_fails_after_start_up_is_a_communication_error(run: Run) -> None:
    # Intel MPI's form of the same abort, after UCX's own error (src/ucs/debug/log_def.h format)
    ucx = "[1613401128.440773] [cn042:11838:0]    ucp_request.c:269  UCX  ERROR failed to register user buffer datatype 0x8 address 0xabcf12c0 len 26400: Input/output error"
    abort = "Abort(672797967) on node 5 (rank 5 in comm 0): Fatal error in PMPI_Isend: Other MPI error, error stack:"
    _doc, inc, path = failed_verdict(run, ["epoch 2 step 40 loss 1.21", abort])
    assert (inc["category"], inc["culprit"]["rank"]) == ("comm_error", 5), inc
    assert_root(inc, path, 2, abort)
    # the transport's error just before it says what failed
    _doc, inc, path = failed_verdict(run, ["epoch 2 step 40 loss 1.21", ucx, abort])
    assert inc["category"] == "comm_error", inc
    assert_root(inc, path, 2, ucx)


# Lightning's announcement of each process (FORMATS §5.5), under srun --label
ANNOUNCE = "Initializing distributed: GLOBAL_RANK: {rank}, MEMBER: {member}/8"
MEMBER = "{task}: " + ANNOUNCE


def _members(pairs: list[tuple[int, int]]) -> list[str]:
    return [MEMBER.format(task=t, rank=r, member=r + 1) for t, r in pairs]


def test_two_processes_claiming_one_rank_are_a_launch_that_hangs(run: Run) -> None:
    # two srun tasks, each starting ranks 0-3 as if its node were the whole job of 8
    lines = _members([(0, 0), (0, 1), (1, 0), (0, 2), (1, 1), (1, 2)])
    doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "hang" and "claim global rank 0 of 8" in inc["title"], inc
    assert_root(inc, path, 3, lines[2])
    assert inc["culprit"] is None or inc["culprit"]["rank"] is None, inc["culprit"]
    assert doc["job"]["outcome"] == "hung", doc["job"]


def test_unlabelled_announcements_of_nodes_that_each_took_node_rank_0(run: Run) -> None:
    # no srun label: two nodes each start ranks 0-3 of 8 (the world's count of announcements,
    # ranks 0-3 exactly twice each); interleaved as the two nodes' output reached the file
    order = (2, 0, 2, 1, 3, 0, 1, 3)
    lines = [ANNOUNCE.format(rank=r, member=r + 1) for r in order]
    doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "hang" and "claim global rank 2 of 8" in inc["title"], inc
    assert_root(inc, path, 3, lines[2])
    assert doc["job"]["outcome"] == "hung", doc["job"]


@pytest.mark.parametrize(
    "lines",
    [
        # one task a rank, as srun should start them
        _members([(r, r) for r in range(8)]),
        # one process saying it twice (its console and its file handler), no task to tell apart;
        # rank 0 then says the group formed (without it, the log would end while ranks 2-7 are
        # awaited: a start-up hang, tests/test_startup_wait.py)
        [
            *(ANNOUNCE.format(rank=r, member=r + 1) for r in (0, 0, 1, 1)),
            "All distributed processes registered. Starting with 8 processes",
        ],
        # unlabelled, each said twice, but not the world's count: one node's processes, each
        # with two handlers, and the group formed
        [
            *(ANNOUNCE.format(rank=r, member=r + 1) for r in (0, 0, 1, 1, 2, 2)),
            "All distributed processes registered. Starting with 8 processes",
        ],
        # a claim the job outlived: training went on
        [*_members([(0, 0), (1, 0)]), *(f"0: step: {n:3d}  loss:  2.10{n}" for n in range(1, 10))],
    ],
    ids=["one-rank-each", "said-twice", "one-node-said-twice", "outlived"],
)
def test_ranks_announced_once_each_or_outlived_are_no_incident(run: Run, lines: list[str]) -> None:
    _code, doc, _ = run(lines)
    assert doc["incidents"] == [], doc["incidents"]


# torch/distributed/elastic/rendezvous/dynamic_rendezvous.py (torch 2.13): the agent's keep-alive
# thread and its shutdown, each logging the error type it met; the agent goes on after a failed
# keep-alive, so a run that went on after one outlived it
KEEP_ALIVE = "W1202 10:14:{s:02d}.551000 811 torch/distributed/elastic/rendezvous/dynamic_rendezvous.py:1346] The node 'node-3_811_0' has failed to send a keep-alive heartbeat to the rendezvous 'job-42' due to an error of type RendezvousConnectionError."
SHUTDOWN = "W1202 10:14:09.760000 811 torch/distributed/elastic/rendezvous/dynamic_rendezvous.py:1183] The node 'node-3_811_0' has failed to shutdown the rendezvous 'job-42' due to an error of type RendezvousConnectionError."


def test_a_failed_keep_alive_is_the_store_lost_before_the_agents_own_failure(run: Run) -> None:
    lines = [
        "[default0]:epoch 3 step 200 loss 1.93",
        KEEP_ALIVE.format(s=3),
        "W1202 10:14:08.742000 811 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 7687 closing signal SIGTERM",
        SHUTDOWN,
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "comm_error", inc
    assert_root(inc, path, 2, lines[1])


def test_a_failed_keep_alive_the_run_outlived_is_no_incident(run: Run) -> None:
    steps = [
        f"[default0]:2024-12-02 10:14:0{n % 10},000 - INFO - step: {n:3d}  loss:  2.1031"
        for n in range(200, 210)
    ]
    _code, doc, _ = run([*steps[:5], KEEP_ALIVE.format(s=3), *steps[5:]])
    assert doc["incidents"] == [], doc["incidents"]


# Kubeflow's init container waiting for the master (BusyBox nslookup, patterns/cloud.toml)
WAIT = ["nslookup: can't resolve 'mnist-job-master-0': Name does not resolve", "waiting for master"]


def test_a_worker_that_fails_right_after_waiting_for_the_master_began_there(run: Run) -> None:
    cut = [
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
    ]
    lines = [*WAIT, *WAIT, *cut]
    _doc, inc, _path = failed_verdict(run, lines)
    assert inc["category"] == "launcher_error", inc
    assert inc["root_cause"]["text"] == WAIT[0], inc["root_cause"]


def test_a_worker_that_waited_for_the_master_and_then_trained_is_no_incident(run: Run) -> None:
    steps = [f"Train Epoch: 1 [{n * 640}/60000 ({n}%)]\tloss: 2.{90 - n}" for n in range(1, 9)]
    _code, doc, _ = run([*WAIT, *WAIT, *steps])
    assert doc["incidents"] == [], doc["incidents"]


def test_numactl_refusing_a_binding_is_why_its_rank_never_joined(run: Run) -> None:
    """numactl (libnuma.c numa_warn, numactl.c) refuses a CPU range the node does not have and
    exits before the program starts: that task's rank never joins, the others wait until the
    time limit, and the binding is the cause."""
    lines = [
        *(f"{t}: STARTING TIMING RUN AT 2025-03-01 09:00:0{t}" for t in range(4)),
        "2: libnuma: Warning: cpu argument 96-103 is out of range",
        "2: ",
        "2: usage: numactl [--all | -a] [--balancing | -b]",
        "2:                [--interleave= | -i <nodes>] [--weighted-interleave= | -w <nodes>]",
        "2: <48-55,96-103> is invalid",
        "srun: error: node-a3: task 2: Exited with exit code 1",
        *(f"{t}: init_start rank {t}" for t in (0, 1, 3)),
        "slurmstepd: error: *** STEP 88.0 ON node-a3 CANCELLED AT 2025-03-01T09:30:00 DUE TO TIME LIMIT ***",
    ]
    _code, doc, _path = run(lines)
    (inc,) = doc["incidents"]
    assert inc["root_cause"]["line"] == 5, inc["root_cause"]
    assert inc["category"] == "launcher_error", inc["title"]
    assert inc["culprit"]["rank"] == 2, inc["culprit"]
    assert doc["job"]["outcome"] == "timelimit", doc["job"]


def test_accelerates_state_of_one_process_names_rank_0_the_culprit(run: Run) -> None:
    """accelerate's state (PartialState.__repr__) as a script logs it: `Num processes: 1` says
    the job ran one process, so an error with no rank prefix is rank 0's; with two, it is not."""

    def job(n: int) -> list[str]:
        return [
            "12/01/2024 10:00:00 - INFO - __main__ - Distributed environment: "
            + ("NO" if n == 1 else "MULTI_GPU  Backend: nccl"),
            f"Num processes: {n}",
            "Process index: 0",
            "Local process index: 0",
            "Device: cuda:0",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 14.75 GiB of which 1.02 GiB is free.",
        ]

    _doc, inc, _path = failed_verdict(run, job(1))
    assert inc["category"] == "oom_gpu" and inc["culprit"]["rank"] == 0, inc["culprit"]
    _doc, inc, _path = failed_verdict(run, job(2))
    assert (inc["culprit"] or {}).get("rank") is None, inc["culprit"]


def test_hf_trainers_batch_arithmetic_of_one_process_names_rank_0_the_culprit(run: Run) -> None:
    """HF Trainer's banner: a total batch equal to the process's batch times the accumulation
    steps says one process ran (DataParallel's adjusted batch is the process's), so an error with
    no rank is rank 0's; a total twice that is two processes, and names no rank."""

    def job(total: str, dp: bool = False) -> list[str]:
        head = "[INFO|trainer.py:2369] 2025-01-09 17:21:44,801 >>   "
        return [
            head + "***** Running training *****",
            head + "Num examples = 12,000",
            head + "Instantaneous batch size per device = 4",
            *(
                [head + "Training with DataParallel so batch size has been adjusted to: 16"]
                if dp
                else []
            ),
            head + f"Total train batch size (w. parallel, distributed & accumulation) = {total}",
            head + "Gradient Accumulation steps = 8",
            head + "Total optimization steps = 3,000",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 14.75 GiB of which 1.02 GiB is free.",
        ]

    for lines in (job("32"), job("128", dp=True)):
        _doc, inc, _path = failed_verdict(run, lines)
        assert inc["category"] == "oom_gpu" and inc["culprit"]["rank"] == 0, inc["culprit"]
    _doc, inc, _path = failed_verdict(run, job("64"))
    assert (inc["culprit"] or {}).get("rank") is None, inc["culprit"]


def test_kueue_preempting_the_workload_is_its_preemption(run: Run) -> None:
    """Kueue's Evicted condition, as `kubectl describe workload` shows it, after the pods trained:
    the workload was preempted for another, not failed."""
    step = "2025-02-04T19:0{m}:00Z Train Epoch: 1 [{n}/60000 ({p}%)]\tLoss: 0.31"
    lines = [step.format(m=m, n=1000 * m, p=m) for m in range(1, 5)] + [
        "Status:",
        "  Conditions:",
        "    Last Transition Time:  2025-02-04T19:06:25Z",
        "    Message:               Preempted to accommodate a workload (UID: 5b1f3c2e-9a41-4d07-b7a2-0f3e1c8d2a11, JobUID: 77c0e8a4-2b6d-4f15-9c3e-1d2a5b6f7e80) due to prioritization in the ClusterQueue; preemptor path: /a; preemptee path: /b",
        "    Reason:                Preempted",
        "    Type:                  Evicted",
    ]
    doc, inc, _path = failed_verdict(run, lines)
    assert inc["category"] == "preemption", inc
    assert doc["job"]["outcome"] == "preempted", doc["job"]


@pytest.mark.parametrize(
    "line",
    [
        "/bin/bash: line 1: ./pretrain.sh: Permission denied",
        "/var/spool/slurmd/job4411/slurm_script: line 9: ./launch.sh: /bin/bash^M: bad interpreter: No such file or directory",
    ],
)
def test_a_job_command_the_shell_could_not_execute_is_a_launch_error(run: Run, line: str) -> None:
    # bash's shell_execve report, then LSF's job summary (lsf.toml): bash's status 126
    lines = [
        line,
        "",
        "------------------------------------------------------------",
        "Sender: LSF System <lsfadmin@cluster.example.org>",
        "Subject: Job 7120: <pretrain> in cluster <hpc> Exited",
        "Exited with exit code 126.",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "launcher_error", inc
    assert_root(inc, path, 1, line)


def test_a_redirect_the_shell_could_not_open_before_a_run_that_trained_on_is_no_failure(
    run: Run,
) -> None:
    lines = [
        "bash: line 4: /shared/logs/gpu_usage.csv: Permission denied",
        *(f"step {s} | loss {2.0 - s / 100:.3f}" for s in range(1, 41)),
        "Training completed. Do not forget to share your model on huggingface.co/models =)",
    ]
    code, doc, _path = run(lines)
    assert (code, doc["incidents"]) == (0, []), doc["incidents"]


@pytest.mark.parametrize("verb", ["build", "built"])
def test_a_store_asked_for_libuv_in_a_build_without_it_is_a_launch_error(
    run: Run, verb: str
) -> None:
    # rendezvous.py's TCPStore(...) in a Windows wheel; torch 2.4's TCPStore.cpp said "build"
    lines = [
        "Traceback (most recent call last):",
        '  File "C:\\venv\\lib\\site-packages\\torch\\distributed\\rendezvous.py", line 195, in _create_c10d_store',
        "    return TCPStore(",
        f"RuntimeError: use_libuv was requested but PyTorch was {verb} without libuv support",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "launcher_error", inc
    assert_root(inc, path, 4, lines[3])
