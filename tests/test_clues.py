# ruff: noqa: E501  (log lines are kept whole)
"""Culprit clues (logscope/analysis/clues.py, launcher_clues.py), each on the events a real Engine makes of lines
built from their emitters' format strings, with a counter-case that must name no one."""

from __future__ import annotations

from pathlib import Path

from logscope.analysis.clues import (
    barrier_culprit,
    quoted_culprit,
    raised_after_culprit,
    same_error_culprit,
    store_barrier_culprit,
)
from logscope.analysis.culprits import build_world
from logscope.analysis.launcher_clues import first_exit, launcher_culprit, oom_culprit, pid_culprit
from logscope.analysis.nccl_clues import raised_nccl_culprit
from logscope.model import Culprit, Event, Stream, World

from .helpers import analyze_doc, cli, fed, incidents_of, write

FIRST_ERROR = Culprit(None, None, None, 0.6, "first error")
# kernel mm/oom_kill.c: "%s: Killed process %d (%s) total-vm:%lukB, anon-rss:%lukB, ..."
KILLED = "[ 9123.480121] Out of memory: Killed process {pid} (python) total-vm:81204400kB, anon-rss:51842000kB, file-rss:1240kB, shmem-rss:0kB, UID:1000 pgtables:10240kB oom_score_adj:0"
# kernel dump_oom_summary: "oom-kill:constraint=%s,nodemask=%*pbl" ... ",task_memcg=%s,task=%s,pid=%d,uid=%d"
CONSTRAINT = "[ 1171.795502] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,oom_memcg=/slurm/uid_1000/job_1528763,task_memcg=/slurm/uid_1000/job_1528763/step_0/task_{task},task=python,pid=40211,uid=1000"
# slurm task_cgroup_memory.c >= 23.02, and srun's report
SLURM_OOM = "slurmstepd: error: Detected 1 oom_kill event in StepId=1528763.0. Some of the step tasks have been OOM Killed."
SRUN_OOM = "srun: error: nic5-w052: task {task}: Out Of Memory"
# torch elastic multiprocessing/api.py (torch >= 2.4 logger)
FAILED = "E0409 07:28:50.980000 1359 torch/distributed/elastic/multiprocessing/api.py:984] failed (exitcode: {code}) local_rank: {local} (pid: {pid}) of binary: /opt/venv/bin/python3"
SIGTERM = "W0409 07:28:49.531000 1359 torch/distributed/elastic/multiprocessing/api.py:897] Sending process {pid} closing signal SIGTERM"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.02 GiB is free."
# ProcessGroupGloo.cpp (torch 2.13), as printed by a real 4-process gloo run
BARRIER = "[rank0]:[E1202 15:54:22.032206043 ProcessGroupGloo.cpp:67] [Rank 0]: {which} failed to pass monitoredBarrier in 1000 ms"
# distributed_c10d.py _store_based_barrier (torch 2.13)
STORE = "[rank{r}]: torch.distributed.DistStoreError: Timed out initializing process group in store based barrier on rank {r}, for key: store_based_barrier_key:1 (world_size=4, num_workers_joined={joined}, timeout=0:30:00 error=Wait timeout)"


def events_of(lines: list[str]) -> list[Event]:
    return fed(lines).failures


def the(events: list[Event], signature: str) -> Event:
    return next(e for e in events if e.signature == signature)


def one_node(n: int) -> World:
    return build_world([Stream(None, None, r, None) for r in range(n)])


def failure_block(entries: list[tuple[int, int, int, str]], root: int) -> list[str]:
    """torchrun's ChildFailedError block (elastic/multiprocessing/errors/__init__.py templates):
    entries of (rank, exitcode, pid, time); `root` the index of the Root Cause entry."""

    def entry(i: int, rank: int, code: int, pid: int, time: str) -> list[str]:
        sig = {-15: "Signal 15 (SIGTERM) received by PID", -6: "Signal 6 (SIGABRT) received by PID"}
        tb = (
            f"{sig[code]} {pid}"
            if code in sig
            else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
        )
        return [
            f"[{i}]:",
            f"  time      : {time}",
            "  host      : gpu-a17",
            f"  rank      : {rank} (local_rank: {rank % 8})",
            f"  exitcode  : {code} (pid: {pid})",
            "  error_file: <N/A>",
            f"  traceback : {tb}",
        ]

    others = [ln for i, e in enumerate(entries) if i != root for ln in entry(i, *e)]
    return [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "train.py FAILED",
        "------------------------------------------------------------",
        "Failures:",
        *(others or ["  <NO_OTHER_FAILURES>"]),
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        *entry(root, *entries[root]),
        "============================================================",
        "srun: error: gpu-a17: task 0: Exited with exit code 1",
    ]


# -- an OOM kill names a process ----------------------------------------------------------------


def test_the_oom_killed_pid_is_the_rank_the_launcher_reports_with_it() -> None:
    lines = [
        KILLED.format(pid=4714),
        SIGTERM.format(pid=4712),
        SIGTERM.format(pid=4713),
        FAILED.format(code=-9, local=2, pid=4714),
    ]
    events = events_of(lines)
    root = the(events, "signals.kernel_oom_kill")
    culprit = oom_culprit(FIRST_ERROR, root, events, one_node(4))
    assert (culprit.rank, culprit.local_rank) == (2, 2)
    assert "killed pid 4714, which the launcher reports as rank 2" in culprit.reason
    # a pid the launcher never reported names no one
    events = events_of([KILLED.format(pid=999), *lines[1:]])
    root = the(events, "signals.kernel_oom_kill")
    assert oom_culprit(FIRST_ERROR, root, events, one_node(4)) == FIRST_ERROR


# OpenMPI's signal handler (opal/util/stacktrace.c: `[%s:%05d] Signal: %s (%d)`) and mpirun's
# report (help-orterun.txt proc-aborted-strsignal)
OMPI_SIGNAL = "[{host}:{pid}] Signal: Segmentation fault (11)"
MPIRUN = "mpirun noticed that process rank {rank} with PID {pid} on node {host} exited on signal 11 (Segmentation fault)."


def test_the_root_s_own_pid_is_the_rank_the_launcher_reports_with_it() -> None:
    lines = [
        "[gpu-b03:40211] *** Process received signal ***",
        OMPI_SIGNAL.format(host="gpu-b03", pid=40211),
        "--------------------------------------------------------------------------",
        MPIRUN.format(rank=6, pid=40211, host="gpu-b03"),
    ]
    events = events_of(lines)
    root = the(events, "openmpi.signal_crash")
    culprit = pid_culprit(FIRST_ERROR, root, events, one_node(8))
    assert culprit.rank == 6 and "pid 40211" in culprit.reason, culprit
    # the same pid on another host is another process
    events = events_of([*lines[:3], MPIRUN.format(rank=6, pid=40211, host="gpu-b04")])
    root = the(events, "openmpi.signal_crash")
    assert pid_culprit(FIRST_ERROR, root, events, one_node(8)) == FIRST_ERROR


# NCCL's tree line (graph/connect.cc, `Trees [%d] %d/%d/%d->%d->%d`: the process's own rank in the
# middle) and torchrun's report of the worker by its pid (torch 1.x logger)
TREES = "node2:{pid}:767 [{dev}] NCCL INFO Trees [0] 2/-1/-1->{rank}->4 [1] -1/-1/-1->{rank}->4"
SIGBUS = "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -7) local_rank: 1 (pid: {pid}) of binary: /opt/conda/bin/python3"


def test_the_rank_nccl_gives_the_pid_the_launcher_reports_is_the_culprit(tmp_path: Path) -> None:
    # the second node's agent: its local rank 1 is rank 5, which NCCL's line of that pid says
    lines = [
        TREES.format(pid=729, dev=0, rank=4),
        TREES.format(pid=730, dev=1, rank=5),
        SIGBUS.format(pid=730),
    ]
    _, doc, _ = analyze_doc(str(write(tmp_path, "node2.log", lines)))
    culprit = doc["incidents"][0]["culprit"]
    assert (culprit["rank"], culprit["local_rank"]) == (5, 1), culprit
    assert "NCCL's lines of process 730 give it rank 5" in culprit["reason"]
    # counter-case: no NCCL line of that pid: the local rank stands for the rank on one node
    _, doc, _ = analyze_doc(str(write(tmp_path, "other.log", [lines[0], SIGBUS.format(pid=730)])))
    assert doc["incidents"][0]["culprit"]["rank"] == 1, doc["incidents"][0]["culprit"]


# deepspeed/launcher/launch.py sigkill_handler: `Killing subprocess {pid}`, workers in start order
KILLING = (
    "[2025-06-02 20:51:24,182] [INFO] [launch.py:319:sigkill_handler] Killing subprocess {pid}"
)


def test_the_oom_killed_pid_in_the_launchers_kill_list_is_its_local_rank() -> None:
    kills = [KILLING.format(pid=p) for p in (4712, 4713, 4714)]
    events = events_of([KILLED.format(pid=4713), *kills])
    root = the(events, "signals.kernel_oom_kill")
    culprit = oom_culprit(FIRST_ERROR, root, events, one_node(3))
    assert (culprit.rank, culprit.local_rank) == (1, 1), culprit
    assert "kill list" in culprit.reason, culprit
    # two lists far apart are two launches: each starts at local rank 0
    far = [*kills, *(["step 10 loss 2.1"] * 5), KILLING.format(pid=5001)]
    events = events_of([KILLED.format(pid=5001), *far])
    root = the(events, "signals.kernel_oom_kill")
    assert oom_culprit(FIRST_ERROR, root, events, one_node(3)).local_rank == 0


def test_the_cgroup_of_the_killed_task_names_the_srun_task() -> None:
    world = build_world([], declared_size=8, tasks=range(8))  # srun started every rank
    events = events_of([CONSTRAINT.format(task=3), SLURM_OOM])
    root = the(events, "signals.kernel_oom_constraint")
    culprit = oom_culprit(FIRST_ERROR, root, events, world)
    assert (culprit.rank, culprit.task) == (3, 3)
    assert "names srun task 3 only, which is rank 3" in culprit.reason


def test_srun_naming_one_oom_task_names_it() -> None:
    world = build_world([], declared_size=16, tasks=range(16))
    events = events_of([SLURM_OOM, SRUN_OOM.format(task=13)])
    root = the(events, "signals.slurm_oom_kill")
    assert oom_culprit(FIRST_ERROR, root, events, world).rank == 13
    # two tasks out of memory: either may have been first
    events = events_of([SLURM_OOM, SRUN_OOM.format(task="12-13")])
    root = the(events, "signals.slurm_oom_kill")
    assert oom_culprit(FIRST_ERROR, root, events, world) == FIRST_ERROR


# -- the same error, printed by one rank --------------------------------------------------------


def test_an_oom_printed_by_one_rank_only_is_that_ranks() -> None:
    events = events_of([OOM, f"[rank5]: {OOM}", "[rank1]: step 7 done"])
    root = events[0]
    assert root.line.rank is None
    culprit = same_error_culprit(FIRST_ERROR, root, events, build_world([]))
    assert culprit.rank == 5
    assert "printed with a rank by rank 5 only" in culprit.reason
    # printed by two ranks: no one
    events = events_of([OOM, f"[rank5]: {OOM}", f"[rank6]: {OOM}"])
    assert same_error_culprit(FIRST_ERROR, events[0], events, build_world([])) == FIRST_ERROR


def test_an_error_logged_right_before_one_ranks_traceback_opens_is_that_ranks() -> None:
    # a program prints the error with no prefix (a loader's last try), then raises it: torch's
    # excepthook prints the traceback under the rank's `[rankN]: ` prefix
    logged = "FileNotFoundError: [Errno 2] No such file or directory: '/data/part-00007.arrow'"
    opens = "[rank2]: Traceback (most recent call last):"
    events = events_of(["[rank0]: step 40 loss 1.9", logged, "", opens])
    root = next(e for e in events if e.line.lineno == 2)
    culprit = raised_after_culprit(FIRST_ERROR, root, events)
    assert culprit.rank == 2, culprit
    # the traceback opens too far below, or under no prefix: no one
    for later in (["", "", "", opens], ["Traceback (most recent call last):"]):
        events = events_of(["[rank0]: step 40 loss 1.9", logged, *later])
        root = next(e for e in events if e.line.lineno == 2)
        assert raised_after_culprit(FIRST_ERROR, root, events) == FIRST_ERROR


# NCCL 2.23 src/misc/ibvwrap.cc's WARN of a verbs call that failed (its process's device, no rank),
# and ProcessGroupNCCL's exception for the ncclSystemError it returned to its caller
IBV_WARN = "gpu-n3:40213:40377 [2] misc/ibvwrap.cc:188 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory"
NCCL_RAISED = "[rank{r}]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.23.4"


def test_the_one_rank_that_raised_ncclsystemerror_printed_the_verbs_warn() -> None:
    events = events_of([NCCL_RAISED.format(r=11), IBV_WARN, "[rank3]: step 7 done"])
    root = next(e for e in events if "ibvwrap" in e.line.raw)
    culprit = raised_nccl_culprit(FIRST_ERROR, root, events, build_world([]))
    assert culprit.rank == 11, culprit
    assert "rank 11 alone raised the system error" in culprit.reason
    # raised by two ranks: no one
    events = events_of([NCCL_RAISED.format(r=11), NCCL_RAISED.format(r=12), IBV_WARN])
    root = next(e for e in events if "ibvwrap" in e.line.raw)
    assert raised_nccl_culprit(FIRST_ERROR, root, events, build_world([])) == FIRST_ERROR


def test_the_one_rank_whose_traceback_follows_an_nccl_warn_of_its_own_call_printed_it() -> None:
    """The window is cut inside the traceback, before the exception line: the one rank that
    says anything after the WARN, opening a traceback, is the caller NCCL returned to."""
    oom = "host-a:2375:2649 [1] include/alloc.h:65 NCCL WARN Cuda failure 2 'out of memory'"
    chain = ["host-a:2375:2375 [1] NCCL INFO enqueue.cc:2299 -> 1"]
    opens = [
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "train.py", line 28, in <module>',
    ]
    events = events_of(
        [
            oom,
            *chain,
            "host-a:2374:2653 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct",
            *opens,
        ]
    )
    root = events[0]
    culprit = raised_nccl_culprit(FIRST_ERROR, root, events, build_world([]))
    assert culprit.rank == 1, culprit
    # another rank reports too: no one; no traceback after it: no one
    timeout = "[rank0]:[E ProcessGroupNCCL.cpp:1316] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out."
    events = events_of([oom, timeout, *opens])
    assert raised_nccl_culprit(FIRST_ERROR, events[0], events, build_world([])) == FIRST_ERROR
    events = events_of([oom, "[rank1]: step 7 done"])
    assert raised_nccl_culprit(FIRST_ERROR, events[0], events, build_world([])) == FIRST_ERROR


def test_the_rank_that_raised_what_nccl_returned_is_no_peer_that_stopped_answering(
    tmp_path: Path,
) -> None:
    log = write(tmp_path, "job.log", ["[rank3]: step 7 done", NCCL_RAISED.format(r=11), IBV_WARN])
    _code, doc, _ = analyze_doc(str(log))
    (inc,) = doc["incidents"]
    assert inc["culprit"]["rank"] == 11, inc["culprit"]
    assert "stopped answering" not in inc["title"], inc["title"]


# c10/cuda/CUDAException.h C10_CUDA_CHECK_WARNING under TORCH_WARN, and C10_CUDA_CHECK's error
CUDA_WARNING = (
    "[rank{r}]:[W CUDAGuardImpl.h:115] Warning: CUDA warning: {error} (function destroyEvent)"
)
KERNEL_FAULT = "RuntimeError: CUDA error: unspecified launch failure"


def test_the_one_rank_whose_later_cuda_call_fails_with_the_root_s_error_is_the_culprit() -> None:
    timeout = "[rank{r}]:[E ProcessGroupNCCL.cpp:754] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=71974, OpType=ALLGATHER, NumelIn=3840000, NumelOut=61440000, Timeout(ms)=1800000) ran for 1800699 milliseconds before timing out."
    peers = [timeout.format(r=r) for r in (0, 2, 10)]
    warned = CUDA_WARNING.format(r=11, error="unspecified launch failure")
    events = events_of([KERNEL_FAULT, warned, *peers])
    culprit = same_error_culprit(FIRST_ERROR, events[0], events, build_world([]))
    assert culprit.rank == 11, culprit
    assert "rank 11 alone reports a later CUDA call failing with the same error" in culprit.reason
    # through the whole analysis: the fault stays the root, rank 11 its culprit
    (inc,) = incidents_of(fed([KERNEL_FAULT, warned, *peers]))
    assert inc.root_cause.line.text == KERNEL_FAULT
    assert inc.culprit is not None and inc.culprit.rank == 11, inc.culprit
    # another error's warning, or the same one from two ranks: no one
    for lines in (
        [KERNEL_FAULT, CUDA_WARNING.format(r=11, error="invalid resource handle"), *peers],
        [KERNEL_FAULT, warned, CUDA_WARNING.format(r=3, error="unspecified launch failure")],
    ):
        events = events_of(lines)
        assert same_error_culprit(FIRST_ERROR, events[0], events, build_world([])) == FIRST_ERROR


# ATen's CUDA_KERNEL_ASSERT (the device's printf, no host prefix), then c10's check on the host
# (torch 2.13 ProcessGroupNCCL watchdog) of the one process whose kernel asserted
KERNEL_ASSERT = '/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [41,0,0], thread: [96,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.'
DEVICE_ASSERT = "[rank{r}]:[E1202 09:26:18.136731159 ProcessGroupNCCL.cpp:2068] [PG ID 0 PG GUID 0(default_pg) Rank {r}] Process group watchdog thread terminated with exception: CUDA error: device-side assert triggered"


def test_the_one_rank_whose_host_reports_the_device_side_assert_owns_the_kernels_assertion() -> (
    None
):
    events = events_of([KERNEL_ASSERT, KERNEL_ASSERT, DEVICE_ASSERT.format(r=5)])
    culprit = same_error_culprit(FIRST_ERROR, events[0], events, build_world([]))
    assert culprit.rank == 5, culprit
    assert "rank 5 alone reports the device-side assert" in culprit.reason
    # counter-case: two ranks' kernels asserted: either may have been first
    events = events_of([KERNEL_ASSERT, DEVICE_ASSERT.format(r=5), DEVICE_ASSERT.format(r=2)])
    assert same_error_culprit(FIRST_ERROR, events[0], events, build_world([])) == FIRST_ERROR


# -- barriers -----------------------------------------------------------------------------------


def test_a_monitored_barrier_names_the_rank_that_did_not_arrive() -> None:
    culprit = barrier_culprit(events_of([BARRIER.format(which="Rank 1")]))
    assert culprit is not None and culprit.rank == 1  # not rank 0, which reports
    assert "reports rank 1 as the only rank that failed to pass it" in culprit.reason
    assert barrier_culprit(events_of([BARRIER.format(which="Ranks 1, 3")])) is None


def test_a_monitored_barrier_report_beats_the_silent_ranks() -> None:
    # rank 0 reports rank 2; ranks 1 and 3 say nothing: the barrier's word decides
    engine = fed([BARRIER.format(which="Rank 2"), "[rank1]: waiting", "[rank3]: waiting"])
    (inc,) = incidents_of(engine)
    assert inc.culprit is not None and inc.culprit.rank == 2, inc.culprit


def test_the_barrier_report_is_the_root_over_a_peer_s_bare_timeout() -> None:
    # a waiting peer's Gloo recv timeout (gloo/transport/tcp/unbound_buffer.cc) comes first; rank
    # 0's report of who never arrived is the line that explains it, a timeout of its own
    gloo = "[rank3]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 5000ms for recv operation to complete"
    engine = fed([gloo, BARRIER.format(which="Rank 1"), "[rank2]: waiting"])
    (inc,) = incidents_of(engine)
    assert inc.root_cause.signature == "gloo.monitored_barrier", inc.root_cause
    assert inc.category == "collective_timeout"
    assert inc.culprit is not None and inc.culprit.rank == 1


def test_the_one_rank_never_seen_missed_the_store_barrier() -> None:
    lines = [STORE.format(r=r, joined=3) for r in (0, 3)] + ["[rank1]: loading data"]
    events = events_of(lines)
    engine = fed(lines)
    culprit = store_barrier_culprit(events, engine.world())
    assert culprit is not None and culprit.rank == 2
    assert "counted 3 of 4 ranks" in culprit.reason
    # two ranks missing: the count does not say which
    lines = [STORE.format(r=r, joined=2) for r in (0, 3)]
    assert store_barrier_culprit(events_of(lines), fed(lines).world()) is None
    # one missing, but two ranks never seen
    lines = [STORE.format(r=0, joined=3)]
    assert store_barrier_culprit(events_of(lines), fed(lines).world()) is None


# -- the launcher's first exit that is not a SIGTERM ---------------------------------------------


def test_the_first_exit_that_is_no_sigterm_is_the_culprit() -> None:
    # the Root Cause is a peer the agent terminated (same second, lower rank); the real failure
    # is among the others
    lines = failure_block(
        [
            (4, -15, 4712, "2024-04-06_02:40:05"),
            (5, 1, 4713, "2024-04-06_02:40:05"),
            (6, -6, 4714, "2024-04-06_02:40:09"),
        ],
        root=0,
    )
    events = events_of(lines)
    culprit = first_exit(events, build_world([]))
    assert culprit is not None and (culprit.rank, culprit.host) == (5, "gpu-a17")
    assert (
        "first reported exit that is not its own SIGTERM (1 peers it sent SIGTERM)"
        in culprit.reason
    )
    named = launcher_culprit(FIRST_ERROR, events, build_world([]))
    assert named.rank == 5 and "the error carries no rank" in named.reason
    # two non-SIGTERM exits in the same second: either may be first
    lines = failure_block(
        [
            (4, -15, 4712, "2024-04-06_02:40:05"),
            (5, 1, 4713, "2024-04-06_02:40:06"),
            (6, 1, 4714, "2024-04-06_02:40:06"),
        ],
        root=0,
    )
    assert first_exit(events_of(lines), build_world([])) is None


def test_srun_s_first_task_end_that_is_no_sigterm_is_the_culprit() -> None:
    # slurm step_io / srun: `srun: error: %s: task %s: %s`, printed as each task ends
    world = build_world([], declared_size=8, tasks=range(8))  # srun started every rank
    lines = [
        "srun: error: gpu-a17: task 6: Terminated",
        "srun: error: gpu-a18: task 5: Exited with exit code 1",
        "srun: error: gpu-a17: tasks 0-4,7: Killed",
    ]
    culprit = first_exit(events_of(lines), world)
    assert culprit is not None and (culprit.rank, culprit.host) == (5, "gpu-a18")
    assert "srun task 5's (exit code 1), rank 5" in culprit.reason
    # the first end names two tasks: either may have been first
    lines = ["srun: error: gpu-a17: tasks 4-5: Exited with exit code 1", *lines[2:]]
    assert first_exit(events_of(lines), world) is None
    # a task killed first is first
    lines = ["srun: error: gpu-a17: task 2: Killed", *lines]
    culprit = first_exit(events_of(lines), world)
    assert culprit is not None and culprit.rank == 2
    # a task the log does not tie to a rank (one torchrun agent a node) names no rank
    agent = "torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 4711 closing signal SIGTERM"
    assert first_exit(events_of([agent, *lines]), build_world([])) is None
    # no line shows a rank, a local rank or an agent: srun started the ranks itself (submitit)
    culprit = first_exit(events_of(lines), build_world([]))
    assert culprit is not None and culprit.rank == 2, culprit
    assert "srun started the ranks itself" in culprit.reason
    # a task list no job has (a malformed or hostile line) is not expanded id by id
    lines = ["srun: error: gpu-a17: tasks 0-99999999999: Killed", *lines[1:]]
    assert first_exit(events_of(lines), world) is None


# horovod/common/operations.cc (0.1x): `<tensor> [missing ranks: 1, 3]` under the stall warning
MISSING = "[1,0]<stderr>:DistributedOptimizer_Allreduce/HorovodAllreduce_gradients_{n} [missing ranks: {ranks}]"


def test_horovods_stall_list_names_its_one_missing_rank() -> None:
    lines = [MISSING.format(n=n, ranks="2") for n in range(3)]
    culprit = barrier_culprit(events_of(lines))
    assert culprit is not None and culprit.rank == 2, culprit
    assert "horovod.stall_missing_ranks" in culprit.reason
    (inc,) = incidents_of(fed(lines))
    assert inc.category == "hang" and inc.culprit is not None and inc.culprit.rank == 2
    # several missing ranks name no one
    assert barrier_culprit(events_of([MISSING.format(n=0, ranks="1, 3")])) is None


# horovod/common/stall_inspector.cc (0.20+): the warning, `Missing ranks:`, then `<rank>[!]: [<names>]`
STALL = (
    "[1,0]<stderr>:[2021-03-02 10:11:12.123456: W horovod/common/stall_inspector.cc:105] One or "
    "more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are "
    "waiting for remainder of ranks for more than 60 seconds. This may indicate that different "
    "ranks are trying to submit different tensors or that only subset of ranks is submitting "
    "tensors, which will cause deadlock. "
)


def test_horovods_stall_warning_names_the_rank_it_lists_not_the_coordinator() -> None:
    listed = "[1,0]<stderr>:{r}: [allreduce.fc.weight, allreduce.fc.bias]"
    lines = [STALL, "[1,0]<stderr>:Missing ranks:", listed.format(r=5)]
    (inc,) = incidents_of(fed(lines))
    assert inc.category == "hang" and inc.culprit is not None and inc.culprit.rank == 5, inc.culprit
    assert "horovod.stall_rank_list" in inc.culprit.reason
    # two ranks listed: the warning names no one rank
    (inc,) = incidents_of(fed([*lines, listed.format(r=6)]))
    assert inc.culprit is None or inc.culprit.rank not in (0, 5, 6), inc.culprit
    # ... and the warning itself, not one rank's list, is where the stall shows
    assert inc.root_cause.signature == "horovod.stall", inc.root_cause
    (inc,) = incidents_of(fed(lines))
    assert inc.root_cause.signature == "horovod.stall_rank_list", inc.root_cause
    # MXNet's op names carry `horovod_` (mxnet/mpi_ops.cc), with the head sentence hard-wrapped
    mxnet = "[1,0]<stderr>:3: [horovod_allreduce.embed.weight, horovod_allreduce.noname.4]"
    (inc,) = incidents_of(fed([STALL[:90], "[1,0]<stderr>:Stalled ranks:", mxnet]))
    assert inc.category == "hang" and inc.culprit is not None and inc.culprit.rank == 3, inc


def test_an_srun_task_with_no_rank_is_the_culprit_in_every_output(tmp_path: Path) -> None:
    # a launcher of its own under srun (its tee headers): srun's task 4 is a node, not a rank
    log = tmp_path / "job.out"
    step = "[default0]:epoch 3 step 200 loss 1.93"
    log.write_text(f"{step}\n{SLURM_OOM}\n{SRUN_OOM.format(task=4)}\n")
    _, doc, _ = analyze_doc(str(log))
    culprit = doc["incidents"][0]["culprit"]
    assert (culprit["rank"], culprit["task"]) == (None, 4), culprit
    _, text, _ = cli("analyze", str(log))
    assert "culprit     srun task 4 (confidence" in text, text
    _, md, _ = cli("analyze", str(log), "--format", "md")
    assert "srun task 4" in md, md


# torch/multiprocessing/spawn.py ProcessContext.join (torch 2.13): ProcessRaisedException's message
SPAWN = [
    "torch.multiprocessing.spawn.ProcessRaisedException: ",
    "",
    "-- Process {n} terminated with the following error:",
    "Traceback (most recent call last):",
    '  File "/opt/venv/lib/python3.11/site-packages/torch/multiprocessing/spawn.py", line 90, in _wrap',
    "    fn(i, *args)",
    '  File "/work/train.py", line 77, in worker',
    "    loss.backward()",
    OOM,
]


def test_the_traceback_spawn_quotes_for_a_child_is_that_childs() -> None:
    lines = [line.format(n=2) for line in SPAWN]
    events = events_of(lines)
    found = quoted_culprit(FIRST_ERROR, the(events, "cuda.out_of_memory"), events, one_node(4))
    assert (found.rank, found.local_rank) == (2, 2), found
    assert "the output mp.spawn quotes for process 2" in found.reason


def test_an_error_before_spawns_header_is_not_the_childs() -> None:
    # counter-case: the error comes before the header, so the header says nothing of it
    lines = [OOM, *[line.format(n=2) for line in SPAWN[:3]]]
    events = events_of(lines)
    found = quoted_culprit(FIRST_ERROR, the(events, "cuda.out_of_memory"), events, one_node(4))
    assert found == FIRST_ERROR


# composer/cli/launcher.py _print_process_exit_status: a crashed worker's output, quoted at clean-up
COMPOSER = [
    "Global rank 3 (PID 40211) exited with code 1",
    "----------Begin global rank 3 STDOUT----------",
    "step 10 loss 2.0",
    "----------End global rank 3 STDOUT----------",
    "----------Begin global rank 3 STDERR----------",
    "Traceback (most recent call last):",
    '  File "/work/train.py", line 77, in <module>',
    OOM,
    "----------End global rank 3 STDERR----------",
    "ERROR:composer.cli.launcher:Global rank 0 (PID 40208) exited with code -15",
]


def test_the_output_composer_quotes_for_a_worker_is_that_workers() -> None:
    events = events_of(COMPOSER)
    found = quoted_culprit(FIRST_ERROR, the(events, "cuda.out_of_memory"), events, one_node(4))
    assert found.rank == 3, found
    assert "the output Composer's launcher quotes for rank 3" in found.reason
    # an excerpt that starts inside the quote: its End line closes it
    events = events_of(COMPOSER[6:])
    found = quoted_culprit(FIRST_ERROR, the(events, "cuda.out_of_memory"), events, one_node(4))
    assert found.rank == 3, found


def test_an_error_after_composers_quote_is_closed_is_not_the_workers() -> None:
    # counter-case: the quote ended before the error; the next quote's End line is another's
    lines = [*COMPOSER[4:9], OOM, "----------End global rank 5 STDERR----------"]
    events = events_of(lines)
    root = [e for e in events if e.signature == "cuda.out_of_memory"][-1]
    assert quoted_culprit(FIRST_ERROR, root, events, one_node(8)) == FIRST_ERROR


# Ray Train V2's WorkerGroupError (train/v2/_internal/execution/worker_group/poll.py,
# get_error_string): `[Rank {ranks}]:` above each group's exception
RAY_V2 = [
    "ray.train.v2.api.exceptions.WorkerGroupError: Training failed due to worker errors:",
    "[Rank {ranks}]:",
    "Traceback (most recent call last):",
    '  File "/home/ray/train.py", line 51, in train_func',
    "    loss.backward()",
    OOM,
]


def test_the_traceback_ray_train_quotes_under_one_rank_is_that_ranks() -> None:
    events = events_of([line.format(ranks=5) for line in RAY_V2])
    found = quoted_culprit(FIRST_ERROR, the(events, "cuda.out_of_memory"), events, one_node(8))
    assert found.rank == 5, found
    assert "the output Ray Train quotes for rank 5" in found.reason


def test_a_ray_train_header_naming_several_ranks_names_no_culprit() -> None:
    # counter-case: alike errors of ranks 1 and 3 are grouped under one header
    events = events_of([line.format(ranks="1, 3") for line in RAY_V2])
    found = quoted_culprit(FIRST_ERROR, the(events, "cuda.out_of_memory"), events, one_node(8))
    assert found == FIRST_ERROR


# -- srun's report of a task ---------------------------------------------------------------------

# srun (src/srun/srun_job.c / step_launch): `srun: error: <node>: task <id>: <strsignal>`
SRUN_SEGV = "srun: error: {host}: task {task}: Segmentation fault (core dumped)"


def test_srun_s_first_dead_task_is_the_rank_when_srun_started_the_ranks() -> None:
    lines = [
        SRUN_SEGV.format(host="cn0417", task=3),
        "srun: Terminating StepId=88121.0",
        SRUN_SEGV.format(host="cn0416", task=0),
    ]
    (inc,) = incidents_of(fed(lines))
    assert inc.culprit is not None, inc
    assert (inc.culprit.rank, inc.culprit.host, inc.culprit.task) == (3, "cn0417", 3)
    assert "task id = rank" in inc.culprit.reason


def test_srun_s_task_is_no_rank_under_a_launcher_with_local_ranks() -> None:
    # one torchrun agent a task: the tee headers show local ranks, so task 1 is a node, not rank 1
    lines = [
        "1: [default0]:step 10 loss 2.1",
        "1: [default1]:step 10 loss 2.1",
        "0: [default0]:step 10 loss 2.1",
        SRUN_SEGV.format(host="cn0417", task=1),
    ]
    (inc,) = incidents_of(fed(lines))
    assert inc.culprit is None or inc.culprit.rank != 1, inc.culprit


def test_an_error_on_an_srun_task_s_line_is_that_rank_s_when_srun_started_the_ranks() -> None:
    # srun --label, no launcher between srun and the ranks: the task id is SLURM_PROCID
    lines = ["0: step 10 loss 2.1", "1: step 10 loss 2.1", "1: " + OOM]
    (inc,) = incidents_of(fed(lines))
    assert inc.culprit is not None, inc
    assert (inc.culprit.rank, inc.culprit.task) == (1, 1), inc.culprit
    assert "task id = rank" in inc.culprit.reason
    # one torchrun agent a task: the local ranks show, so task 1 is a node, not rank 1
    lines = ["0: [default0]:step 10 loss 2.1", "1: [default1]:step 10 loss 2.1", "1: " + OOM]
    (inc,) = incidents_of(fed(lines))
    assert inc.culprit is None or inc.culprit.rank != 1, inc.culprit


def test_a_launcher_that_kills_its_one_worker_ran_one_process() -> None:
    # DeepSpeed's sigkill_handler logs one `Killing subprocess` line a worker
    one = [
        OOM,
        "[2024-05-02 10:11:12,000] [INFO] [launch.py:318:sigkill_handler] "
        + KILLING.format(pid=811),
    ]
    (inc,) = incidents_of(fed(one))
    assert inc.culprit is not None, inc
    assert (inc.culprit.rank, inc.culprit.local_rank) == (0, 0), inc.culprit
    assert "names one worker (pid 811)" in inc.culprit.reason
    # the kill list alone (the worker printed nothing) names it too
    (inc,) = incidents_of(fed(one[1:]))
    assert inc.culprit is not None and inc.culprit.rank == 0, inc
    # and the worker's death of a signal the launcher then reports (runner.py sigkill_handler)
    died = "[2024-05-02 10:11:12,006] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', '-u', 'main.py', '--local_rank=0'] exits with return code = -9"
    (inc,) = incidents_of(fed([*one[1:], died]))
    assert (inc.category, inc.culprit and inc.culprit.rank) == ("process_killed", 0), inc.culprit
    # two workers: the list says nothing of which one failed
    two = [OOM, KILLING.format(pid=811), KILLING.format(pid=812)]
    (inc,) = incidents_of(fed(two))
    assert inc.culprit is None or inc.culprit.rank is None, inc.culprit
    # two hosts (pdsh tags each node's lines): one worker on this node is no job of one process
    step = "[2024-05-02 10:11:12,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, lr=[0.1], mom=[(0.9, 0.999)]"
    hosts = ["node-1: " + OOM, "node-1: " + KILLING.format(pid=811), "node-2: " + step]
    (inc,) = incidents_of(fed(hosts))
    assert inc.culprit is None or inc.culprit.rank is None, inc.culprit
    # nor is one where the launcher declared a larger world
    world = "[2024-05-02 10:11:10,000] [INFO] [launch.py:163:main] dist_world_size=2"
    (inc,) = incidents_of(fed([world, *one]))
    assert inc.culprit is None or inc.culprit.rank is None, inc.culprit


def test_nccls_proxy_thread_names_the_rank_of_its_own_process() -> None:
    # src/misc/socket.cc and proxy.cc: both lines behind NCCL's `host:pid:tid [dev] ` head
    cause = (
        "gpu-b3:811:870 [1] misc/socket.cc:441 NCCL WARN socketFinalizeAccept: wrong type 4 != 3"
    )
    proxy = "{host}:{pid}:870 [1] proxy.cc:1519 NCCL WARN [Proxy Service {r}] Failed to execute operation Connect from rank 2, retcode 3"
    returned = "gpu-b3:811:811 [1] NCCL INFO init.cc:1228 -> 3"  # the code reached the caller
    (inc,) = incidents_of(fed([cause, proxy.format(host="gpu-b3", pid=811, r=5), returned]))
    assert inc.culprit is not None and inc.culprit.rank == 5, inc.culprit
    assert "[Proxy Service 5]" in inc.culprit.reason
    # another process's proxy (another pid, or the same pid on another host) says nothing of it
    # (passing a peer's failure on, retcode 6: a failure of its own would be a cause itself)
    remote = proxy.replace("retcode 3", "retcode 6")
    for host, pid in (("gpu-b3", 812), ("gpu-b4", 811)):
        (inc,) = incidents_of(fed([cause, remote.format(host=host, pid=pid, r=6), returned]))
        assert inc.culprit is None or inc.culprit.rank != 6, inc.culprit


def test_nccls_tree_and_init_lines_name_the_rank_of_their_own_process() -> None:
    # src/init.cc's INFO lines (NCCL 2.7 formats) behind the same `host:pid:tid [dev] ` head as
    # the transport's WARN (src/transport/p2p.cc)
    trees = "node-1:4711:4790 [0] NCCL INFO Trees [0] -1/-1/-1->3->2|2->3->-1/-1/-1 [1] -1/-1/-1->3->2|2->3->-1/-1/-1"
    other = "node-1:4712:4791 [1] NCCL INFO Trees [0] 3/-1/-1->2->1|1->2->3/-1/-1"
    warn = "node-1:4711:4790 [0] transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer access is not supported between these two devices"
    returned = "node-1:4711:4790 [0] NCCL INFO init.cc:766 -> 1"
    (inc,) = incidents_of(fed([trees, other, warn, returned]))
    assert inc.culprit is not None and inc.culprit.rank == 3, inc.culprit
    assert "give it rank 3" in inc.culprit.reason
    # the init lines are read wherever they are: hours of training between them and the WARN
    steps = [f"node-1:4711:4711 [0] step {n} loss 2.{n}" for n in range(1, 400)]
    (inc,) = incidents_of(fed([trees, other, *steps, warn, returned]))
    assert inc.culprit is not None and inc.culprit.rank == 3, inc.culprit
    # a process is in its world communicator and in smaller ones (point-to-point pairs,
    # subgroups), with another rank in each: the largest one's is the job's rank; two of the
    # same size that disagree name none
    init = "node-1:4711:4790 [0] NCCL INFO comm 0x5581d2f3c2a0 rank {r} nranks {n} cudaDev 0 busId 1b000 - Init COMPLETE"
    pair, world = init.format(r=1, n=2), init.format(r=3, n=4)
    (inc,) = incidents_of(fed([pair, world, warn, returned]))
    assert inc.culprit is not None and inc.culprit.rank == 3, inc.culprit
    (inc,) = incidents_of(fed([trees, pair, init.format(r=0, n=2), warn, returned]))
    assert inc.culprit is None or inc.culprit.rank is None, inc.culprit


def test_a_record_only_the_primary_rank_prints_names_rank_0() -> None:
    # detectron2's setup_logger attaches its console handler on rank 0 only (the other ranks
    # write log.txt.rankN), so the train loop's `Exception during training:` there is rank 0's
    lines = [
        "[12/20 18:16:14 d2.utils.events]:  eta: 19:46:57  iter: 4979  total_loss: 9.924  lr: 0.0001  max_mem: 20712M",
        "[12/20 18:16:20 fvcore.common.checkpoint]: Saving checkpoint to ./output/model_0004999.pth",
        "ERROR [12/20 18:16:20 d2.engine.train_loop]: Exception during training:",
    ]
    (inc,) = incidents_of(fed(lines))
    assert inc.culprit is not None and inc.culprit.rank == 0, inc.culprit
    assert "rank 0 only" in inc.culprit.reason
    # behind srun's label the task that printed it is known: no guess from the emitter
    (inc,) = incidents_of(fed([f"3: {t}" for t in lines] * 3))
    assert inc.culprit is None or "rank 0 only" not in inc.culprit.reason, inc.culprit


# A logger's prefix is on the first line of its record only: ParlAI's worker prefix
# (parlai/utils/distributed.py) before `logging.critical` with a traceback under it
PARLAI_RECORD = [
    "rank:  3 | 2022-04-03 18:44:26,615 CRITICAL | Traceback (most recent call last):",
    '  File "/opt/parlai/parlai/core/torch_agent.py", line 2314, in backward',
    "    loss.backward()",
    OOM,
]


def test_an_unprefixed_error_ends_the_traceback_its_records_prefixed_head_opened() -> None:
    (inc,) = incidents_of(fed(PARLAI_RECORD))
    assert inc.culprit is not None and inc.culprit.rank == 3, inc.culprit
    assert "the prefix of line 1, which opens the traceback it ends" in inc.culprit.reason


def test_an_error_after_its_own_unprefixed_traceback_is_not_the_prefixed_heads() -> None:
    # counter-cases: the unprefixed error ends an unprefixed traceback of its own, or comes
    # too far below the prefixed one
    own = [PARLAI_RECORD[0], "Traceback (most recent call last):", *PARLAI_RECORD[1:]]
    far = [PARLAI_RECORD[0], *["    frame"] * 400, *PARLAI_RECORD[1:]]
    for lines in (own, far):
        incs = incidents_of(fed(lines))
        root = next(i for i in incs if i.root_cause.signature == "cuda.out_of_memory")
        assert root.culprit is None or root.culprit.rank is None, root.culprit


# ProcessGroupNCCL's error (torch 1.x) with no rank, then torchrun's report of the worker
NCCL_SYSTEM = [
    "RuntimeError: NCCL error in: ../torch/lib/c10d/ProcessGroupNCCL.cpp:911, unhandled system error, NCCL version 2.7.8",
    "ncclSystemError: System call (socket, malloc, munmap, etc) failed.",
]
# torch elastic multiprocessing/api.py (torch 1.9-2.1 logger)
WORKER_FAILED = "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: {local} (pid: 4398{local}) of binary: /usr/bin/python3"
NCCL_TIMEOUT = "RuntimeError: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800542 milliseconds before timing out."


def test_a_comm_error_with_no_rank_is_the_one_worker_the_launcher_reports_failed() -> None:
    (inc,) = incidents_of(fed([*NCCL_SYSTEM, WORKER_FAILED.format(local=2)]))
    assert inc.culprit is not None and inc.culprit.rank == 2, inc.culprit
    assert "the launcher reports one failed worker only (rank 2)" in inc.culprit.reason


def test_no_worker_is_named_for_a_timeout_or_when_the_launcher_reports_several() -> None:
    # a timeout's reporter is a victim of whoever stalled; two failed workers name no one
    for lines in (
        [NCCL_TIMEOUT, WORKER_FAILED.format(local=1)],
        [*NCCL_SYSTEM, WORKER_FAILED.format(local=2), WORKER_FAILED.format(local=3)],
    ):
        incs = incidents_of(fed(lines))
        assert incs, lines
        assert all(i.culprit is None or i.culprit.rank is None for i in incs), incs


# -- the one rank that said nothing ------------------------------------------------------------------

# GNU make's `make: *** [<file>:<line>: <target>] Error <n>` (remake.c): a build with no rank prefix
MAKE_FAILED = "make: *** [Makefile:9: helpers.cpython-311-x86_64-linux-gnu.so] Error 1"
# ProcessGroupNCCL.cpp broadcastUniqueNCCLID (torch 2.1-2.9): every rank but the group's rank 0
UNIQUE_ID = "[rank{r}]: RuntimeError: [{r}] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer. This may indicate a possible application crash on rank 0 or a network set up issue."


def test_an_error_with_no_rank_is_the_one_rank_the_others_waited_for() -> None:
    lines = [MAKE_FAILED, *(UNIQUE_ID.format(r=r) for r in range(1, 8))]
    (inc,) = incidents_of(fed(lines))
    assert inc.root_cause.signature == "make.recipe_failed", inc.root_cause
    assert inc.culprit is not None and inc.culprit.rank == 0, inc.culprit
    assert "the error carries no rank" in inc.culprit.reason


def test_no_silent_rank_is_named_when_two_said_nothing_or_the_error_has_its_rank() -> None:
    # ranks 0 and 3 silent: either may have built and failed
    (inc,) = incidents_of(fed([MAKE_FAILED, *(UNIQUE_ID.format(r=r) for r in (1, 2, 4, 5, 6, 7))]))
    assert inc.culprit is None or inc.culprit.rank is None, inc.culprit
    # the error's own prefix names its rank, whoever else was silent
    (inc,) = incidents_of(
        fed([f"[rank5]: {MAKE_FAILED}", *(UNIQUE_ID.format(r=r) for r in (1, 2, 3))])
    )
    assert inc.culprit is not None and inc.culprit.rank == 5, inc.culprit


# -- a dead actor's name --------------------------------------------------------------------------

# ray python/ray/exceptions.py ActorDiedError (2.40) under verl's RayWorkerGroup, whose workers are
# named `{prefix}{class}_{pg_idx}:{local_rank}` (verl/single_controller/ray/base.py _create_worker)
ACTOR_DIED = [
    "(TaskRunner pid=4410) Traceback (most recent call last):",
    '(TaskRunner pid=4410)   File "/opt/verl/verl/single_controller/ray/base.py", line 48, in __call__',
    "(TaskRunner pid=4410)     output = ray.get(output)",
    "(TaskRunner pid=4410) ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
    "(TaskRunner pid=4410) \tclass_name: create_colocated_worker_cls.<locals>.WorkerDict",
    "(TaskRunner pid=4410) \tactor_id: 9f1c2e0b7a6d5c4b3a2f1e0d01000000",
    "(TaskRunner pid=4410) \tpid: 20311",
    "(TaskRunner pid=4410) \tname: Qm7TzpWorkerDict_{pg}:{bundle}",
    "(TaskRunner pid=4410) \tnamespace: 4e0c1d6a-2b7f-4b9e-9d1e-3a0c5f7e8b21",
    "(TaskRunner pid=4410) \tip: 10.0.3.17",
    "(TaskRunner pid=4410) The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file.",
]


def test_the_dead_verl_worker_ray_names_is_its_rank(tmp_path: Path) -> None:
    log = write(tmp_path, "driver.log", [line.format(pg=0, bundle=5) for line in ACTOR_DIED])
    _, doc, _ = analyze_doc(str(log))
    culprit = doc["incidents"][0]["culprit"]
    assert culprit["rank"] == 5, culprit
    assert "Ray reports verl's worker 0:5 dead" in culprit["reason"]


def test_a_cancelled_or_later_node_verl_worker_names_no_rank() -> None:
    # counter-cases: an actor cancelled before it ran died of nothing of its own; the worker of
    # placement group 1 has a rank that depends on how many workers a node holds
    cancelled = [line.format(pg=0, bundle=5) for line in ACTOR_DIED]
    cancelled.append(
        "(TaskRunner pid=4410) The actor never ran - it was cancelled before it started running."
    )
    other_node = [line.format(pg=1, bundle=5) for line in ACTOR_DIED]
    for lines in (cancelled, other_node):
        (inc,) = incidents_of(fed(lines))
        assert inc.culprit is None or inc.culprit.rank is None, inc.culprit


def test_an_error_logged_without_a_rank_right_before_one_ranks_traceback_is_that_ranks() -> None:
    """ms-swift's loader logs the failed load (loader.py), then raises it on its last try:
    the logger writes no prefix, torch's excepthook writes `[rankN]: `."""
    logged = "[ERROR:swift] Dataset tatsu-lab/alpaca load failed: subset_name=default,split=train with error: Unable to find 'train' split"
    lines = [
        "[INFO:swift] Downloading the dataset from ModelScope",
        logged,
        "",
        "[rank3]: Traceback (most recent call last):",
        '[rank3]:   File "swift/cli/sft.py", line 5, in <module>',
    ]
    (inc,) = incidents_of(fed(lines))
    assert inc.category == "data_error" and inc.root_cause.line.text == logged, inc.root_cause
    assert inc.culprit is not None and inc.culprit.rank == 3, inc.culprit
    # a traceback further down is another story
    (inc,) = incidents_of(
        fed([*lines[:3], *[f"[INFO:swift] step {n}" for n in range(1, 5)], *lines[3:]])
    )
    assert inc.culprit is None or inc.culprit.rank is None, inc.culprit


# OLMo (allenai/OLMo olmo/util.py): its sys.excepthook logs `Uncaught %s: %s` (exception name,
# value) at CRITICAL under its `<time>\t<host>:<local rank>\t<logger>:<line>\t<LEVEL>\t` header,
# next to the bare traceback Python prints
def _olmo_oom(local: int, at: str) -> list[str]:
    message = (
        f"CUDA out of memory. Tried to allocate 3.50 GiB. GPU {local} has a total capacity of"
        " 79.10 GiB of which 1.02 GiB is free."
    )
    return [
        "Traceback (most recent call last):",
        '  File "/opt/olmo/scripts/train.py", line 341, in <module>',
        "    main(cfg)",
        f"torch.OutOfMemoryError: {message}",
        f"2025-03-04 {at}\tnode-7:{local}\tolmo.util:168\tCRITICAL\tUncaught OutOfMemoryError: {message}",
    ]


def test_the_rank_that_echoes_the_bare_error_next_to_it_owns_it(tmp_path: Path) -> None:
    start = [
        f"2025-03-04 10:00:0{r}.{n}00\tnode-7:{r}\tolmo.train:{n}\tINFO\t{what}"
        for n, what in enumerate(("Configuration:", "Building model...", "Starting training..."))
        for r in range(4)
    ]
    log = write(
        tmp_path,
        "olmo.log",
        [*start, *_olmo_oom(2, "10:00:31.500"), *_olmo_oom(0, "10:00:36.900")],
    )
    _, doc, _ = analyze_doc(str(log))
    (inc,) = doc["incidents"]
    assert inc["root_cause"]["line"] == 16, inc["root_cause"]
    assert inc["culprit"]["rank"] == 2, inc["culprit"]
    assert "repeats its message under rank 2's prefix" in inc["culprit"]["reason"]
    # an echo of another message says nothing
    other = [*_olmo_oom(2, "10:00:31.500")[:4], start[1]]
    _, doc, _ = analyze_doc(str(write(tmp_path, "other.log", [*start, *other])))
    assert doc["incidents"][0]["culprit"]["rank"] is None, doc["incidents"][0]["culprit"]


def test_a_job_that_states_a_world_of_one_process_failed_on_rank_0(tmp_path: Path) -> None:
    # YOLOX's trainer logs tools/train.py's arguments: devices=N on num_machines=1 is the world
    header = "2025-01-09 10:00:00.100 | INFO     | yolox.core.trainer:before_train:130 - "
    args = (
        header + "args: Namespace(experiment_name='yolox_s', name=None, dist_backend='nccl',"
        " dist_url=None, batch_size=16, devices={n}, exp_file='exps/yolox_s.py', resume=False,"
        " ckpt=None, start_epoch=None, num_machines=1, machine_rank=0, fp16=True, opts=[])"
    )
    error = [
        "Traceback (most recent call last):",
        '  File "tools/train.py", line 131, in <module>',
        "FileNotFoundError: [Errno 2] No such file or directory: 'datasets/coco/annotations/train.json'",
    ]
    for n, rank in ((1, 0), (2, None)):
        log = write(tmp_path, f"yolox_{n}.log", [args.format(n=n), *error])
        _, doc, _ = analyze_doc(str(log))
        assert doc["incidents"][0]["culprit"]["rank"] == rank, (n, doc["incidents"][0]["culprit"])
    # a world counted from the one rank seen is no statement of its size
    log = write(tmp_path, "seen.log", ["[rank0]: step 1 loss 2.1", *error])
    _, doc, _ = analyze_doc(str(log))
    assert doc["incidents"][0]["culprit"]["rank"] is None, doc["incidents"][0]["culprit"]


# torch c10/cuda/CUDACachingAllocator.cpp before 2.1: "Tried to allocate %s (GPU %d; %s total
# capacity; ...)"; Paddle memory/allocation: "Out of memory error on GPU %d. Cannot allocate ..."
OOM_ON = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU {gpu}; 23.69 GiB total capacity; 22.81 GiB already allocated; 5.06 MiB free; 23.01 GiB reserved in total by PyTorch)"
PADDLE_OOM_ON = "Out of memory error on GPU {gpu}. Cannot allocate 75.031250MB memory on GPU {gpu}, 23.575562GB memory has been allocated and available memory is only 68.937500MB."


def test_an_oom_on_device_n_of_a_job_of_several_processes_is_local_rank_n() -> None:
    # the launcher's kill list says there were several workers; GPU 3 is local rank 3's
    kills = [KILLING.format(pid=p) for p in (4712, 4713, 4714, 4715)]
    (inc,) = incidents_of(fed([OOM_ON.format(gpu=3), *kills]))
    assert inc.culprit is not None and (inc.culprit.rank, inc.culprit.local_rank) == (3, 3)
    assert "names GPU 3" in inc.culprit.reason, inc.culprit
    # two processes' OOMs name two devices: the first printed is the first observed failure
    (inc,) = incidents_of(fed([OOM_ON.format(gpu=5), OOM_ON.format(gpu=2)]))
    assert inc.culprit is not None and inc.culprit.rank == 5, inc.culprit
    (inc,) = incidents_of(fed([PADDLE_OOM_ON.format(gpu=1), PADDLE_OOM_ON.format(gpu=0)]))
    assert inc.culprit is not None and inc.culprit.rank == 1, inc.culprit


def test_an_oom_device_names_no_rank_of_one_process_nor_device_0() -> None:
    # one process (DataParallel, a model spread over devices): GPU 3 is not a rank
    (inc,) = incidents_of(fed([OOM_ON.format(gpu=3)]))
    assert inc.culprit is None or inc.culprit.rank is None, inc.culprit
    # device 0 is every process's own GPU where each sees only its own
    kills = [KILLING.format(pid=p) for p in (4712, 4713)]
    (inc,) = incidents_of(fed([OOM_ON.format(gpu=0), OOM_ON.format(gpu=0), *kills]))
    assert inc.culprit is None or inc.culprit.rank is None, inc.culprit
    # a prefix names the process: it wins over the device
    (inc,) = incidents_of(fed(["[rank2]: " + OOM_ON.format(gpu=3), *kills]))
    assert inc.culprit is not None and inc.culprit.rank == 2, inc.culprit
