# ruff: noqa: E501  (log lines are kept whole)
"""A C++ terminate whose `what():` is a known symptom is that symptom's abort, not a cause
(logscope/analysis/aborts.py). Lines are built from their emitters' format strings: libstdc++'s
verbose terminate handler (`terminate called after throwing an instance of '%s'` then
`  what():  %s`), ProcessGroupNCCL's watchdog and gloo's tcp pair."""

from __future__ import annotations

from .helpers import Failure, failure_block, fed, incidents_of

TERMINATE = "terminate called after throwing an instance of '{cls}'"
WHAT = "  what():  {message}"
# ProcessGroupNCCL.cpp (torch 1.x) watchdog, without NumelIn/NumelOut
WATCHDOG = "[E ProcessGroupNCCL.cpp:{line}] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLGATHER, Timeout(ms)=1800000) ran for 1800321 milliseconds before timing out."
# gloo/transport/tcp/pair.cc
CLOSED = "[/opt/src/third_party/gloo/gloo/transport/tcp/pair.cc:{line}] Connection closed by peer [192.168.3.17]:{port}"


def test_terminate_after_a_watchdog_timeout_is_not_the_cause() -> None:
    lines = [
        WATCHDOG.format(line=587, rank=3, seq=412),
        "[E ProcessGroupNCCL.cpp:341] To avoid data inconsistency, we are taking the entire process down.",
        TERMINATE.format(cls="std::runtime_error"),
        WHAT.format(message=WATCHDOG.format(line=587, rank=3, seq=412).split("] ", 1)[1]),
    ]
    (inc,) = incidents_of(fed(lines))
    assert inc.category == "collective_timeout"
    assert inc.root_cause.line.lineno == 1


def test_terminate_whose_what_was_cut_after_the_watchdog_takes_the_process_down() -> None:
    # a second process's abort, cut before its `what():`; then the agent's report of SIGABRT
    # (torch/distributed/elastic/multiprocessing/api.py, torch 1.x logging.basicConfig header)
    taking_down = "[E ProcessGroupNCCL.cpp:460] To avoid data inconsistency, we are taking the entire process down."
    lines = [
        WATCHDOG.format(line=828, rank=1, seq=4),
        taking_down,
        TERMINATE.format(cls="std::runtime_error"),
        WHAT.format(message=WATCHDOG.format(line=828, rank=1, seq=4).split("] ", 1)[1]),
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: 0 (pid: 95313) of binary: /usr/bin/python3",
        taking_down,
        TERMINATE.format(cls="std::runtime_error"),
    ]
    (inc,) = incidents_of(fed(lines))
    assert inc.category == "collective_timeout", inc.root_cause
    assert inc.root_cause.line.lineno == 1


def test_terminate_cut_after_the_torch_1_watchdog_line_that_takes_the_process_down() -> None:
    # torch 1.x says it in one line, `Some NCCL operations have failed or timed out. ... To avoid
    # this inconsistency, we are taking the entire process down.` (ProcessGroupNCCL.cpp's
    # abort message), then rethrows: the terminate is that, its `what():` cut off
    some_failed = "[E ProcessGroupNCCL.cpp:{line}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. To avoid this inconsistency, we are taking the entire process down."
    lines = [
        WATCHDOG.format(line=587, rank=2, seq=96),
        some_failed.format(line=341),
        WATCHDOG.format(line=587, rank=6, seq=96),
        TERMINATE.format(cls="std::runtime_error"),
    ]
    (inc,) = incidents_of(fed(lines))
    assert inc.category == "collective_timeout", inc.root_cause
    assert inc.root_cause.line.lineno == 1


def test_a_sigabrt_of_a_rank_the_log_does_not_show_follows_the_shown_ranks_takedown() -> None:
    # only rank 0's output is kept (torchtitan's --local-ranks-filter 0); its watchdog times out
    # and takes its process down, then the agent reports local rank 1's SIGABRT first
    takedown = "[rank0]:[E520 06:32:05.050391214 ProcessGroupNCCL.cpp:832] [Rank 0] To avoid data inconsistency, we are taking the entire process down."
    died = "E0520 06:32:08.379000 27616 torch/distributed/elastic/multiprocessing/api.py:988] failed (exitcode: -6) local_rank: {r} (pid: 27638) of binary: /usr/bin/python3"
    lines = [
        "[rank0]:" + WATCHDOG.format(line=757, rank=0, seq=3),
        takedown,
        died.format(r=1),
    ]
    (inc,) = incidents_of(fed(lines))
    assert inc.category == "collective_timeout", inc.root_cause
    assert inc.root_cause.line.lineno == 1
    # counter-case: a rank the log shows, which said no error of its own, died of its own abort
    # before the others' wait ran out (the agent reports a death within seconds)
    shown = ["[rank1]: step 3 loss 2.01", died.format(r=1), *lines[:2]]
    (inc,) = incidents_of(fed(shown))
    assert inc.root_cause.line.lineno == 2, inc.root_cause


def test_a_shell_s_abort_status_is_an_abort_a_launcher_reports_as_the_rank_s_exit_code() -> None:
    # HPE PALS passes each rank's status through: 134 is 128 + SIGABRT, here rank 0's watchdog
    # (its output not kept) taking its process down like rank 2's, over the same collective
    takedown = "[rank2]:[E ProcessGroupNCCL.cpp:583] [Rank 2] To avoid data inconsistency, we are taking the entire process down."
    lines = [
        "[rank2]:" + WATCHDOG.format(line=1537, rank=2, seq=1),
        takedown,
        "x1000c0s3b0n0.hsn.cm.polaris.alcf.anl.gov: rank 0 exited with code 134",
        "x1000c0s3b0n0.hsn.cm.polaris.alcf.anl.gov: rank 1 died from signal 15",
    ]
    (inc,) = incidents_of(fed(lines))
    assert inc.category == "collective_timeout", inc.root_cause
    assert inc.root_cause.line.lineno == 1


def test_a_death_torchrun_reports_after_a_collective_timeout_did_not_cause_it() -> None:
    # the agent polls its workers: a SIGKILL it reports after rank 0's watchdog ran its whole
    # timeout came after the wait (the takedown, or a stuck rank killed), not before it
    died = "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 1 (pid: 12076) of binary: /usr/bin/python3"
    lines = [WATCHDOG.format(line=737, rank=0, seq=3424), died]
    (inc,) = incidents_of(fed(lines))
    assert (inc.category, inc.root_cause.line.lineno) == ("collective_timeout", 1), inc.root_cause
    # counter-case: reported first, the kill is what the others then waited for
    (inc,) = incidents_of(fed(lines[::-1]))
    assert (inc.category, inc.root_cause.line.lineno) == ("process_killed", 1), inc.root_cause


def test_a_death_srun_reports_after_a_collective_timeout_did_not_cause_it() -> None:
    # srun reports each task as it exits: a task aborted after the ranks' watchdogs ran their
    # whole timeout is their takedown (each rank's own prefix, no srun label to tie task to rank)
    aborted = "srun: error: gpu-n02: task 8: Aborted (core dumped)"
    lines = [f"[rank{r}]:" + WATCHDOG.format(line=629, rank=r % 8, seq=2) for r in (13, 6, 0)] + [
        aborted
    ]
    (inc,) = incidents_of(fed(lines))
    assert (inc.category, inc.root_cause.line.lineno) == ("collective_timeout", 1), inc.root_cause
    # counter-case: reported first, the abort is what the others then waited for
    (inc,) = incidents_of(fed([aborted, *lines[:3]]))
    assert inc.root_cause.line.lineno == 1, inc.root_cause


def test_the_timeout_that_names_the_work_is_the_root_over_a_takedown_notice() -> None:
    # another process's `taking the entire process down` comes first in the interleaved output;
    # the watchdog line that names the collective (SeqNum, OpType) says what failed
    lines = [
        "[E ProcessGroupNCCL.cpp:495] To avoid data inconsistency, we are taking the entire process down.",
        WATCHDOG.format(line=587, rank=3, seq=412),
        "[E ProcessGroupNCCL.cpp:495] To avoid data inconsistency, we are taking the entire process down.",
    ]
    (inc,) = incidents_of(fed(lines))
    assert inc.root_cause.line.lineno == 2, inc.root_cause


def test_terminate_whose_what_is_a_closed_peer_is_a_comm_error() -> None:
    tag = "Mon Mar  4 09:12:44 2024[{r}]<stderr>:"
    lines = [
        tag.format(r=5) + TERMINATE.format(cls="gloo::IoException"),
        tag.format(r=5) + WHAT.format(message=CLOSED.format(line=581, port=40112)),
        tag.format(r=5) + "Fatal Python error: Aborted",
    ]
    (inc,) = incidents_of(fed(lines))
    assert inc.category == "comm_error"


def test_a_bare_python_abort_is_a_native_crash_not_a_kill() -> None:
    # faulthandler's note of SIGABRT with nothing before it: the process aborted itself
    (inc,) = incidents_of(fed(["step 120 done", "Fatal Python error: Aborted"]))
    assert (inc.root_cause.signature, inc.category) == ("signals.python_abort", "segfault")


def test_terminate_whose_what_no_signature_knows_stays_the_cause() -> None:
    # counter-case: the what() says nothing known, so the terminate is the failure
    lines = [
        TERMINATE.format(cls="c10::Error"),
        WHAT.format(message="widget index 7 out of range for table of 4"),
    ]
    (inc,) = incidents_of(fed(lines))
    assert inc.root_cause.signature in ("cpp.terminate", "cpp.what")
    assert inc.category != "comm_error"


def _watchdog_query(error: str) -> list[str]:
    """A watchdog thread's CUDA error raised at the completion-event query (c10/cuda/CUDAEvent.h
    `query`, ProcessGroupNCCL WorkNCCL::finishedGPUExecutionInternal), as torch >= 2.3 prints it."""
    lib = "/opt/venv/lib/python3.11/site-packages/torch/lib"
    return [
        f"[rank2]:[E305 10:11:12.000000000 ProcessGroupNCCL.cpp:1616] [PG ID 0 PG GUID 0(default_pg) Rank 2] Process group watchdog thread terminated with exception: CUDA error: {error}",
        "[rank2]:Exception raised from query at ../c10/cuda/CUDAEvent.h:111 (most recent call first):",
        f"[rank2]:frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f0 in {lib}/libc10.so)",
        f"[rank2]:frame #1: c10d::ProcessGroupNCCL::WorkNCCL::finishedGPUExecutionInternal() const + 0x56 (0x7f1 in {lib}/libtorch_cuda.so)",
        f"[rank2]:frame #2: c10d::ProcessGroupNCCL::WorkNCCL::isCompleted() + 0x70 (0x7f2 in {lib}/libtorch_cuda.so)",
    ]


def test_where_a_cuda_error_surfaced_does_not_change_what_it_was() -> None:
    # the event query is where any asynchronous CUDA error surfaces: a kernel's illegal address
    # stays a CUDA error, the driver's `unknown error` of a running job is the GPU
    (bug,) = incidents_of(fed(_watchdog_query("an illegal memory access was encountered")))
    assert bug.category == "cuda_error"
    (dead,) = incidents_of(fed(_watchdog_query("unknown error")))
    assert dead.category == "gpu_hardware"


def _aborts(seconds: dict[int, int]) -> list[str]:
    """torchrun's failure block of workers dead of SIGABRT at :SS (the first the Root Cause
    entry), then a line that closes the block."""
    (first, *others) = (
        Failure(f"2025-03-02_10:41:{s:02d}", "node-7", r, r, -6, 5300 + r)
        for r, s in seconds.items()
    )
    return [*failure_block("train.py", first, others), "done"]


def test_ranks_that_abort_in_the_same_second_were_taken_down_over_one_collective() -> None:
    # ProcessGroupNCCL's watchdog aborts each rank whose collective failed: several SIGABRTs at
    # once, with no error text of their own, are that takedown (the victims), not a cause
    (inc,) = incidents_of(fed(_aborts({1: 51, 2: 51, 3: 51})))
    assert inc.category == "collective_timeout", inc.root_cause
    assert inc.culprit is not None and inc.culprit.rank is None, inc.culprit
    # counter-case: one rank's SIGABRT alone is its own (aborts seconds apart in one block are
    # the agent's teardown after the first: the first is alone again)
    (inc,) = incidents_of(fed(_aborts({1: 51})))
    assert inc.category == "unknown", inc.root_cause
    assert inc.culprit is not None and inc.culprit.rank == 1, inc.culprit


def test_workers_the_agent_killed_after_the_first_failure_are_its_teardown() -> None:
    # rank 3 raised (exit 1) at :58; 31 s later the agent stopped the group: rank 0 SIGKILL
    # (after the SIGTERM grace), rank 2 SIGTERM. The kills are not the failure.
    teardown = [
        Failure("2026-09-07_13:03:29", "node-1", 0, 0, -9, 1400),
        Failure("2026-09-07_13:03:29", "node-1", 2, 2, -15, 1402),
    ]
    first = Failure("2026-09-07_13:02:58", "node-1", 3, 3, 1, 1403)
    lines = [*failure_block("train.py", first, teardown), "done"]
    (inc,) = incidents_of(fed(lines))
    assert inc.category == "python_exception", inc.root_cause
    assert inc.culprit is not None and inc.culprit.rank == 3, inc.culprit


def test_terminate_with_no_exception_after_a_ranks_own_timeout_is_how_it_exited() -> None:
    # gloo's tcp unbound_buffer.cc timeout on three ranks of four, one of which then destroys a
    # still-joinable std::thread on its way out (libstdc++ vterminate.cc)
    timeout = "[default{r}]:[rank{r}]: RuntimeError: [/opt/src/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:{line}] Timed out waiting 30000ms for {op} operation to complete"
    lines = [
        *(f"[default{r}]:step 9 loss 0.{r}" for r in range(4)),
        timeout.format(r=2, line=78, op="recv"),
        "[default2]:terminate called without an active exception",
        timeout.format(r=0, line=78, op="recv"),
        timeout.format(r=3, line=129, op="send"),
    ]
    (inc,) = incidents_of(fed(lines))
    assert inc.category == "collective_timeout", inc.root_cause
    assert inc.culprit is not None and inc.culprit.rank == 1, inc.culprit


def test_a_crash_signal_after_the_process_raised_is_how_it_died_not_the_cause() -> None:
    # a data reader's exception ends the Python traceback; the interpreter then crashes while
    # its CUDA state is torn down: Paddle's signal handler (paddle/fluid/platform/init.cc
    # `SignalHandle`), and the shell's report of the same death
    raised = [
        "Traceback (most recent call last):",
        '  File "train.py", line 188, in train',
        "    for data in loader:",
        "SystemError: (Fatal) Blocking queue is killed because the data reader raises an exception.",
        "  [Hint: Expected killed_ != true, but received killed_:1 == true:1.] (at /paddle/paddle/fluid/operators/reader/blocking_queue.h:158)",
        "--------------------------------------",
        "C++ Traceback (most recent call last):",
        "--------------------------------------",
        "0   paddle::platform::CUDADeviceContext::~CUDADeviceContext()",
        "1   cublasDestroy_v2",
        "----------------------",
        "Error Message Summary:",
        "----------------------",
        "FatalError: `Segmentation fault` is detected by the operating system.",
        "  [SignalInfo: *** SIGSEGV (@0x65) received by PID 2313 (TID 0x7fb347f27740) from PID 101 ***]",
    ]
    (inc,) = incidents_of(fed(raised))
    assert inc.root_cause.line.lineno == 4, inc.root_cause
    assert inc.category == "python_exception", inc.category
    # the crash with no exception before it is the process's own failure
    (inc,) = incidents_of(fed(raised[5:]))
    assert inc.category == "segfault" and inc.root_cause.line.lineno == 9, inc.root_cause


def test_a_terminate_entered_again_is_how_a_process_died_of_the_first_terminate() -> None:
    # two threads of one process terminate: libstdc++'s handler, entered again while the first
    # report is under way, writes `terminate called recursively` between the first's lines
    # (stdio interleaves them: the first report's line is cut by the second's)
    # and glog's failure-signal handler (google/glog src/signalhandler.cc) reports the abort
    lines = [
        "epoch 3 step 1200 loss 0.412",
        TERMINATE.format(cls="terminate called recursively").rstrip("'"),
        "terminate called recursively",
        "c10::Error'",
        '*** Aborted at 1700000000 (unix time) try "date -d @1700000000" if you are using GNU date ***',
        "terminate called recursively",
        WHAT.format(message="CUDA error: an illegal memory access was encountered"),
        "PC: @     0x7f4de4d401f7 __GI_raise",
    ]
    (inc,) = incidents_of(fed(lines))
    assert inc.category == "cuda_error"
    assert inc.root_cause.line.lineno == 7
    # alone, it is still how the process died
    (inc,) = incidents_of(fed([lines[0], "terminate called recursively"]))
    assert (inc.category, inc.root_cause.line.lineno) == ("segfault", 2)


def test_libcxxabi_s_terminate_line_is_the_exception_and_its_message() -> None:
    # LLVM libc++abi's handler (cxa_default_handlers.cpp) says type and what() on one line, then
    # OpenMPI's signal handler reports the abort (opal/util/stacktrace.c)
    abort = [
        "[Mac:46703] *** Process received signal ***",
        "[Mac:46703] Signal: Abort trap: 6 (6)",
        "[Mac:46703] Signal code:  (0)",
    ]
    metal = "libc++abi: terminating due to uncaught exception of type std::runtime_error: [METAL] Command buffer execution failed: Caused GPU Timeout Error (00000002:kIOGPUCommandBufferCallbackErrorTimeout)."
    (inc,) = incidents_of(fed([metal, *abort]))
    assert (inc.category, inc.root_cause.line.lineno) == ("cuda_error", 1)
    alloc = "libc++abi: terminating due to uncaught exception of type std::runtime_error: [metal::malloc] Attempting to allocate 68719476736 bytes which is greater than the maximum allowed buffer size of 28991029248 bytes."
    (inc,) = incidents_of(fed([alloc, *abort]))
    assert (inc.category, inc.root_cause.line.lineno) == ("oom_gpu", 1)
