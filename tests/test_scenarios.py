"""Realistic multi-rank logs the project was not tuned on, analyzed through the CLI.

Every log here is assembled from lines quoted verbatim in shared/FORMATS.md or in public GitHub
issues (the source is cited next to each scenario), arranged the way a real merged log shows them:
ranks interleaved, cascades after the root cause, one ChildFailedError block per node, prefixes
stacked. Where a line had to be adapted (a rank number, an iteration counter, a pid) only that
token was changed; lines built from a format string rather than copied are marked "constructed".

The expectations are what a person who knows these logs would conclude, not what logscope prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .helpers import assert_root, child_failed_block, lineno, verdict_incident, write

# --------------------------------------------------------------------------------------------
# helpers


_TORCH = "/gpfswork/rech/six/commun/conda/tr11-176B-ml/lib/python3.8/site-packages/torch/lib"
_BLOOM_ITER = (
    "[default7]: iteration    {it}/  115311 | consumed samples:      {cs} | consumed tokens:  "
    "{ct} | elapsed time per iteration (s): 105.22 | learning rate: 5.969E-05 | global batch "
    "size:  2048 | lm loss: 2.463556E+00 | grad norm: 0.174 | num zeros: 0.0 | number of skipped "
    "iterations:   0 | number of nan iterations:   0 | samples per second: 19.463 | TFLOPs: "
    "149.02 |"
)
BLOOM_WHAT = "[default3]:  what():  CUDA error: unknown error"
BLOOM_CUDA_BLOCK = [
    "[default3]:terminate called after throwing an instance of 'c10::CUDAError'",
    BLOOM_WHAT,
    "[default3]:Exception raised from query at ../aten/src/ATen/cuda/CUDAEvent.h:95 "
    "(most recent call first):",
    "[default3]:frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x42 "
    f"(0x1518a06137d2 in {_TORCH}/libc10.so)",
    "[default3]:frame #1: c10d::ProcessGroupNCCL::WorkNCCL::finishedGPUExecutionInternal() const "
    f"+ 0x11a (0x15190c6c29ea in {_TORCH}/libtorch_cuda_cpp.so)",
    "[default3]:frame #2: c10d::ProcessGroupNCCL::WorkNCCL::isCompleted() + 0x50 "
    f"(0x15190c6c4fd0 in {_TORCH}/libtorch_cuda_cpp.so)",
    "[default3]:frame #3: c10d::ProcessGroupNCCL::workCleanupLoop() + 0x145 "
    f"(0x15190c6c6265 in {_TORCH}/libtorch_cuda_cpp.so)",
    "[default3]:frame #4: <unknown function> + 0xc2ba3 (0x15191b339ba3 in /lib64/libstdc++.so.6)",
    "[default3]:frame #5: <unknown function> + 0x814a (0x15191c77d14a in /lib64/libpthread.so.0)",
    "[default3]:frame #6: clone + 0x43 (0x15191c4acdc3 in /lib64/libc.so.6)",
]


def _bloom_log(with_blocks: bool) -> list[str]:
    lines = [
        "[default0]:using world size: 384, data-parallel-size: 8, tensor-model-parallel size: 4, "
        "pipeline-model-parallel size: 12 ",
    ]
    for k, it in enumerate(range(12690, 12696)):
        lines.append(
            _BLOOM_ITER.format(
                it=it, cs=9841584 - 2048 * (5 - k), ct=20155564032 - 4194304 * (5 - k)
            )
        )
    lines += BLOOM_CUDA_BLOCK
    # the other 383 ranks wait in the allreduce the dead GPU never joins; after 30 min their
    # watchdogs fire (torch 1.11 forms, unprefixed C++ text after the tee header)
    for lr in (0, 5, 1, 7, 3, 2):
        lines.append(
            f"[default{lr}]:[E ProcessGroupNCCL.cpp:458] [Rank {lr}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, Timeout(ms)=1800000) "
            "ran for 1800648 milliseconds before timing out."
        )
    for lr in (0, 5, 1, 7, 3, 2):
        lines.append(
            f"[default{lr}]:[E ProcessGroupNCCL.cpp:414] Some NCCL operations have failed or timed "
            "out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might "
            "run on corrupted/incomplete data. To avoid this inconsistency, we are taking the "
            "entire process down."
        )
    # the agent of the node with the dead GPU (node 3: pids 514..521, local rank 3 = pid 517)
    for pid in (514, 515, 516, 518, 519, 520, 521):
        lines.append(
            "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process "
            f"{pid} closing signal SIGTERM"
        )
    lines.append(
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: 3 "
        "(pid: 517) of binary: /gpfswork/rech/six/commun/conda/tr11-176B-ml/bin/python"
    )
    if with_blocks:
        for host, rank, local, code, pid, when in (
            ("jean-zay-iam23", 27, 3, -6, 517, "2022-03-21_13:34:34"),
            ("jean-zay-iam01", 0, 0, -6, 1811, "2022-03-21_14:04:40"),
        ):
            lines += child_failed_block(
                "/gpfswork/rech/six/commun/code/tr11-176B-ml/Megatron-DeepSpeed/pretrain_gpt.py",
                time=when,
                host=host,
                rank=rank,
                local_rank=local,
                exitcode=code,
                pid=pid,
            )
    lines.append("srun: error: jean-zay-iam23: task 3: Exited with exit code 1")  # constructed §6.2
    return lines


@pytest.mark.parametrize("with_blocks", [False, True], ids=["main_log_only", "with_agent_blocks"])
def test_bloom_gpu_crash(tmp_path: Path, analyze_json, with_blocks: bool) -> None:
    lines = _bloom_log(with_blocks)
    path = write(tmp_path, "main_log.txt", lines)
    code, doc = analyze_json(path)
    assert code == 1
    assert doc["job"]["outcome"] == "crashed", doc["job"]
    assert doc["job"]["last_iteration"] == 12695
    assert doc["job"]["world_size"] == 384, doc["job"]
    inc = verdict_incident(doc)
    assert inc["category"] in ("cuda_error", "gpu_hardware"), inc
    # the telling line of the dead rank's terminate block: `what():  CUDA error: unknown error`
    assert_root(inc, path, lineno(lines, BLOOM_WHAT), BLOOM_WHAT)
    assert inc["root_cause"]["local_rank"] == 3
    culprit = inc["culprit"]
    assert culprit is not None and culprit["local_rank"] == 3, culprit
    # 48 nodes print `[default3]:`: the CUDA lines alone cannot say which global rank this is.
    # Only the dead node's agent block (rank 27, local_rank 3, SIGABRT at the crash time) can.
    allowed = {None, 27} if with_blocks else {None}
    assert culprit["rank"] in allowed, culprit
    assert inc["root_cause"]["rank"] in allowed, inc["root_cause"]
    # never a local rank passed off as a global one
    assert 3 not in inc["cascade"]["ranks"] or culprit["rank"] is None
    assert inc["cascade"]["count"] >= 12


# --------------------------------------------------------------------------------------------
# 2./3. NCCL watchdog timeouts, torch 2.4.1 (conda build pytorch_1724789560443), 8 ranks, torchrun
# without --tee. Source: FORMATS §2.2–§2.5 "observed (2.4.1, full sequence)" (rank number, seq,
# enqueued/completed numbers adapted per rank); agent lines FORMATS §3.2 era 3; ChildFailedError
# FORMATS §3.1; iteration lines FORMATS §5.1 (NVIDIA/Megatron-LM#756, iteration adapted).

_LIB = "/data2/mqyu/anaconda3/envs/rnafm/lib/python3.12/site-packages/torch/lib"


def _watchdog_rank(r: int, enq: int = 6463, done: int = 6462, seq: int = 6463) -> list[str]:
    work = (
        f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) "
        "ran for 1800017 milliseconds before timing out."
    )
    pg = f"[PG 0 (default_pg) Rank {r}]"
    return [
        f"[rank{r}]:[E1003 18:37:01.832146912 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught "
        f"collective operation timeout: {work}",
        f"[rank{r}]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] {pg} Exception (either an "
        f"error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {enq}, "
        f"last completed NCCL work: {done}.",
        f"[rank{r}]:[E1003 18:37:01.833621509 ProcessGroupNCCL.cpp:1709] {pg} Timeout at NCCL "
        f"work: {seq}, last enqueued NCCL work: {enq}, last completed NCCL work: {done}.",
        f"[rank{r}]:[E1003 18:37:01.833637681 ProcessGroupNCCL.cpp:621] [Rank {r}] Some NCCL "
        "operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, "
        "subsequent GPU operations might run on corrupted/incomplete data.",
        f"[rank{r}]:[E1003 18:37:01.833650825 ProcessGroupNCCL.cpp:627] [Rank {r}] To avoid data "
        "inconsistency, we are taking the entire process down.",
        f"[rank{r}]:[E1003 18:37:01.838048403 ProcessGroupNCCL.cpp:1515] {pg} Process group "
        f"watchdog thread terminated with exception: [Rank {r}] Watchdog caught collective "
        f"operation timeout: {work}",
        "Exception raised from checkTimeout at /opt/conda/conda-bld/pytorch_1724789560443/work/"
        "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:609 (most recent call first):",
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 "
        f"(0x7fbeb989ef86 in {_LIB}/libc10.so)",
        "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::"
        "duration<long, std::ratio<1l, 1000l> > >) + 0x1d2 "
        f"(0x7fbebab8bf22 in {_LIB}/libtorch_cuda.so)",
        "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 "
        f"(0x7fbebab92963 in {_LIB}/libtorch_cuda.so)",
        "frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x10c "
        f"(0x7fbebab94d4c in {_LIB}/libtorch_cuda.so)",
        "",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        f"  what():  {pg} Process group watchdog thread terminated with exception: [Rank {r}] "
        f"Watchdog caught collective operation timeout: {work}",
    ]


_MEGATRON_ITER = (
    " [2024-10-03 18:06:{s:02d}] iteration       {it}/     100 | consumed samples:         5504 | "
    "elapsed time per iteration (ms): 5444.9 | throughput per GPU (TFLOP/s/GPU): 239.8 | learning "
    "rate: 8.600000E-06 | global batch size:   128 | lm loss: 1.825991E+00 | load_balancing_loss: "
    "1.019746E+00 | loss scale: 1.0 | grad norm: 1.426 | num zeros: 0.0 | number of skipped "
    "iterations:   0 | number of nan iterations:   0 |"
)


def _timeout_log(reporters: dict[int, tuple[int, int, int]], silent: int | None) -> list[str]:
    lines = [_MEGATRON_ITER.format(s=s, it=it) for s, it in ((30, 41), (36, 42), (41, 43))]
    for r, (enq, done, seq) in reporters.items():
        lines += _watchdog_rank(r, enq, done, seq)
    agent = "1359 torch/distributed/elastic/multiprocessing/api.py"
    first = min(reporters)
    if silent is not None:
        lines.append(
            f"W1003 18:37:02.531000 {agent}:897] Sending process 1370 closing signal SIGTERM"
        )
    lines.append(
        f"E1003 18:37:03.980000 {agent}:984] failed (exitcode: -6) local_rank: {first} "
        f"(pid: {1365 + first}) of binary: /home/hychen/min_fa3_demo/.venv/bin/python3"
    )
    lines += [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "pretrain_gpt.py FAILED",
        "------------------------------------------------------------",
        "Failures:",
    ]
    for i, r in enumerate(sorted(set(range(8)) - {first}), 1):
        sig = 15 if r == silent else 6
        name = "SIGTERM" if sig == 15 else "SIGABRT"
        lines += [
            f"[{i}]:",
            "  time      : 2024-10-03_18:37:03",
            "  host      : gpu-node-17",
            f"  rank      : {r} (local_rank: {r})",
            f"  exitcode  : -{sig} (pid: {1365 + r})",
            "  error_file: <N/A>",
            f"  traceback : Signal {sig} ({name}) received by PID {1365 + r}",
        ]
    lines += [
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2024-10-03_18:37:02",
        "  host      : gpu-node-17",
        f"  rank      : {first} (local_rank: {first})",
        f"  exitcode  : -6 (pid: {1365 + first})",
        "  error_file: <N/A>",
        f"  traceback : Signal 6 (SIGABRT) received by PID {1365 + first}",
        "============================================================",
    ]
    return lines


def _check_timeout_incident(
    path: Path, lines: list[str], doc: dict[str, Any], culprit_rank: int
) -> dict[str, Any]:
    assert doc["job"]["outcome"] == "crashed", doc["job"]
    assert doc["job"]["world_size"] == 8, doc["job"]
    assert doc["job"]["last_iteration"] == 43
    inc = verdict_incident(doc)
    assert inc["category"] == "collective_timeout", inc
    first = next(x for x in lines if "Watchdog caught collective operation timeout" in x)
    assert_root(inc, path, lineno(lines, first), first)
    # the DistBackendError terminate blocks are the watchdog's consequence, never the cause
    assert "DistBackendError" not in inc["root_cause"]["text"]
    assert "terminate called" not in inc["root_cause"]["text"]
    assert inc["culprit"] is not None and inc["culprit"]["rank"] == culprit_rank, inc["culprit"]
    return inc


def test_watchdog_timeouts_silent_rank(tmp_path: Path, analyze_json) -> None:
    reporters = dict.fromkeys((0, 1, 2, 3, 4, 6, 7), (6463, 6462, 6463))
    lines = _timeout_log(reporters, silent=5)
    path = write(tmp_path, "timeout.log", lines)
    code, doc = analyze_json(path)
    assert code == 1
    inc = _check_timeout_incident(path, lines, doc, culprit_rank=5)
    assert inc["culprit"]["confidence"] >= 0.7, inc["culprit"]
    # torchrun's "Root Cause" (rank 0, SIGABRT) is a victim, and every reporter is cascade
    assert inc["cascade"]["ranks"] == [0, 1, 2, 3, 4, 6, 7], inc["cascade"]
    assert all(i["category"] != "cuda_error" for i in doc["incidents"]), doc["incidents"]


def test_watchdog_timeouts_lowest_last_enqueued(tmp_path: Path, analyze_json) -> None:
    # every rank reports; rank 5 never enqueued 6463: it is the one the others wait for
    reporters = dict.fromkeys(range(8), (6463, 6462, 6463))
    reporters[5] = (6462, 6461, 6462)
    lines = _timeout_log(reporters, silent=None)
    path = write(tmp_path, "timeout_all.log", lines)
    code, doc = analyze_json(path)
    assert code == 1
    inc = _check_timeout_incident(path, lines, doc, culprit_rank=5)
    assert 0 < inc["culprit"]["confidence"] < 0.8, inc["culprit"]
    assert "6462" in inc["culprit"]["reason"], inc["culprit"]


# --------------------------------------------------------------------------------------------
# 4. srun --label + torchrun --tee 3 + c10/excepthook prefixes stacked, 4 nodes x 8 GPUs.
# A CUDA OOM on global rank 19 (srun task 2, local rank 3). Sources: stacking FORMATS §9.11 and
# §1.4 (` 3: [default7]:[rank31]:[E1003 ...]`, constructed); OOM text lllyasviel/FramePack#369
# (as quoted in patterns/cuda.toml); traceback frames huggingface/accelerate#3413
# (`[rank8]:   File "/home/keshav/fa_llm/src/fast_llm.py", line 196, in <module>`);
# watchdog FORMATS §2.2; agent line FORMATS §3.2 era 3; srun line FORMATS §6.2 (constructed).

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 30.29 GiB. GPU 0 has a total "
    "capacity of 10.74 GiB of which 3.69 GiB is free. Including non-PyTorch memory, this process "
    "has 6.68 GiB memory in use. Of the allocated memory 6.10 GiB is allocated by PyTorch, and "
    "396.58 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is "
    "large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "
    "See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)


def test_stacked_prefixes_oom(tmp_path: Path, analyze_json) -> None:
    def pre(task: int, local: int) -> str:
        return f" {task}: [default{local}]:"

    lines: list[str] = []
    for s, it in ((30, 41), (36, 42), (41, 43)):
        lines.append(pre(3, 7) + _MEGATRON_ITER.format(s=s, it=it))
    p = pre(2, 3) + "[rank19]: "
    tb = [
        "Traceback (most recent call last):",
        '  File "/home/keshav/fa_llm/src/fast_llm.py", line 196, in <module>',
        "    main()",
        OOM,
    ]
    # rank 19's traceback, with a healthy rank's progress tail and another rank's line between
    lines += [p + tb[0], p + tb[1]]
    lines.append(
        pre(0, 0) + "[rank0]:[W1003 18:06:44.965860675 Utils.hpp:137] Warning: "
        "Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use "
        "TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())"
    )
    lines += [p + tb[2], p + tb[3]]
    oom_line = p + tb[3]
    # the 31 others time out in the allreduce rank 19 never reaches
    for task in (0, 1, 3, 2):
        for local in range(8):
            g = task * 8 + local
            if g == 19:
                continue
            lines.append(
                pre(task, local) + f"[rank{g}]:[E1003 18:37:01.832146912 ProcessGroupNCCL.cpp:607]"
                f" [Rank {g}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=6463, "
                "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800017 "
                "milliseconds before timing out."
            )
    lines.append(
        " 2: E1003 18:07:03.980000 1245483 torch/distributed/elastic/multiprocessing/api.py:984] "
        "failed (exitcode: 1) local_rank: 3 (pid: 1246013) of binary: "
        "/home/hychen/min_fa3_demo/.venv/bin/python3"
    )
    lines.append("srun: error: frontier07210: task 2: Exited with exit code 1")
    path = write(tmp_path, "slurm-4242.out", lines)
    code, doc = analyze_json(path)
    assert code == 1
    assert doc["job"]["outcome"] == "crashed", doc["job"]
    assert doc["job"]["world_size"] == 32, doc["job"]
    inc = verdict_incident(doc)
    assert inc["category"] == "oom_gpu", inc
    assert_root(inc, path, lineno(lines, oom_line), oom_line)
    assert inc["root_cause"]["rank"] == 19, inc["root_cause"]
    assert inc["root_cause"]["local_rank"] == 3, inc["root_cause"]
    culprit = inc["culprit"]
    assert culprit is not None and (culprit["rank"], culprit["local_rank"]) == (19, 3), culprit
    assert inc["cascade"]["ranks"] == [r for r in range(32) if r != 19], inc["cascade"]


# --------------------------------------------------------------------------------------------
# 5. SLURM time limit while still progressing, and preemption.
# Sources: banners FORMATS §6.1 (bigscience experiments/gpt2-meg-ds-zero/
# meg_ds_zero_gpt2_perf_n16-1999616.out, observed; the PREEMPTION line is constructed from
# slurmstepd's format string); DeepSpeed log_dist step line FORMATS §5.3 (step number and time
# adapted); `Killing subprocess` / `Main process received SIGTERM, exiting` FORMATS §6.1;
# old-era NCCL line FORMATS §2.3.


def _slurm_end_log(reason: str) -> list[str]:
    lines = []
    for k in range(8):
        lines.append(
            f"[2021-05-27 21:41:{10 + 7 * k:02d},358] [INFO] [logging.py:60:log_dist] [Rank 0] "
            f"step={1200 + 10 * k}, skipped=0, lr=[5e-05], mom=[[0.9, 0.999]]"
        )
    lines += [
        f"slurmstepd: error: *** STEP 1999616.0 ON r6i4n5 CANCELLED AT 2021-05-27T21:42:11 "
        f"DUE TO {reason} ***",
        f"slurmstepd: error: *** JOB 1999616 ON r6i4n5 CANCELLED AT 2021-05-27T21:42:11 "
        f"DUE TO {reason} ***",
        "srun: Job step aborted: Waiting up to 62 seconds for job step to finish.",
        "Killing subprocess 7949",
        "[E ProcessGroupNCCL.cpp:414] Some NCCL operations have failed or timed out. Due to the "
        "asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
        "corrupted/incomplete data. To avoid this inconsistency, we are taking the entire "
        "process down.",
        "Main process received SIGTERM, exiting",
    ]
    return lines


@pytest.mark.parametrize(
    ("reason", "outcome", "category"),
    [("TIME LIMIT", "timelimit", "timelimit"), ("PREEMPTION", "preempted", "preemption")],
)
def test_slurm_end_while_progressing(
    tmp_path: Path, analyze_json, reason: str, outcome: str, category: str
) -> None:
    lines = _slurm_end_log(reason)
    path = write(tmp_path, "slurm-1999616.out", lines)
    code, doc = analyze_json(path)
    assert code == 1
    assert doc["job"]["outcome"] == outcome, doc["job"]
    assert doc["job"]["last_iteration"] == 1270, doc["job"]
    inc = verdict_incident(doc)
    assert inc["category"] == category, inc
    banner = lines[8]
    assert_root(inc, path, 9, banner)
    # what the scheduler's kill caused is its consequence, never a culprit
    assert inc["culprit"] is None or inc["culprit"]["rank"] is None, inc["culprit"]
    assert len(doc["incidents"]) == 1, doc["incidents"]


# --------------------------------------------------------------------------------------------
# 6. Xid 79 in a dmesg excerpt concatenated with the job log.
# Sources: FORMATS §7.1 `NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus`
# (NVIDIA/NVSentinel#155 / leptonai/gpud) with the dmesg prefixes of §7.2 (`[ 1843.308145] `
# default, `[Mon Mar 21 13:34:34 2022] ` for -T; both constructed from util-linux formats).

XID = "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"


@pytest.mark.parametrize("stamp", ["[ 1843.308145] ", "[Mon Mar 21 13:34:34 2022] "])
def test_xid_alone(tmp_path: Path, analyze_json, stamp: str) -> None:
    lines = [
        "[ 1843.301022] mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link INIT",
        stamp + XID,
    ]
    path = write(tmp_path, "dmesg.txt", lines)
    code, doc = analyze_json(path)
    assert code == 1
    inc = verdict_incident(doc)
    assert inc["category"] == "gpu_hardware", inc
    assert_root(inc, path, 2, stamp + XID)
    assert inc["root_cause"]["fields"].get("xid") == "79", inc["root_cause"]
    assert doc["job"]["outcome"] == "crashed", doc["job"]


def test_xid_with_cuda_error(tmp_path: Path, analyze_json) -> None:
    # `cat main_log.txt dmesg.txt`: the job's CUDA error, then the kernel's Xid that explains it
    job = _bloom_log(with_blocks=False)
    lines = [*job, "[Mon Mar 21 13:34:34 2022] " + XID]
    path = write(tmp_path, "job_and_dmesg.txt", lines)
    code, doc = analyze_json(path)
    assert code == 1
    assert len(doc["incidents"]) == 1, doc["incidents"]
    inc = verdict_incident(doc)
    # the GPU fell off the bus: the CUDA `unknown error` is how the job saw it
    assert inc["category"] == "gpu_hardware", inc
    rc = inc["root_cause"]
    assert (rc["line"], rc["text"]) in (
        (lineno(lines, BLOOM_WHAT), BLOOM_WHAT),
        (len(lines), lines[-1]),
    ), rc


# --------------------------------------------------------------------------------------------
# 7. OpenMPI --tag-output and pdsh/DeepSpeed tracebacks.
# OpenMPI: a public file found by find_string (sglang bench_offline_throughput under mpirun,
# `[1,0]<stderr>:Traceback ...` / `[1,0]<stderr>:AssertionError: Please set a dp-size > 1. ...`),
# vpid adapted 0 -> 3. pdsh: NVIDIA/nccl#520 (DeepSpeed over pdsh, host label
# `compute-dy-p4d24xlarge-77: `, lines verbatim, order as in the issue).

_OMPI_TB = [
    "Traceback (most recent call last):",
    '  File "<frozen runpy>", line 198, in _run_module_as_main',
    '  File "<frozen runpy>", line 88, in _run_code',
    '  File "/home/users/industry/ai-hpc/apacsc03/scratch/py312/lib/python3.12/site-packages/'
    'sglang/bench_offline_throughput.py", line 441, in <module>',
    "    server_args = ServerArgs.from_cli_args(args)",
    "                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '  File "<string>", line 188, in __init__',
    '  File "/home/users/industry/ai-hpc/apacsc03/scratch/py312/lib/python3.12/site-packages/'
    'sglang/srt/server_args.py", line 460, in __post_init__',
    "    self.dp_size > 1",
    "AssertionError: Please set a dp-size > 1. You can use 1 < dp-size <= tp-size",
]


def test_openmpi_tagged_traceback(tmp_path: Path, analyze_json) -> None:
    lines = [f"[1,{r}]<stdout>:hello" for r in range(4)]  # constructed (FORMATS §1.5)
    lines += ["[1,3]<stderr>:" + t for t in _OMPI_TB]
    path = write(tmp_path, "mpirun.log", lines)
    code, doc = analyze_json(path)
    assert code == 1
    inc = verdict_incident(doc)
    assert inc["category"] == "python_exception", inc
    assert_root(inc, path, len(lines), lines[-1])
    assert inc["root_cause"]["rank"] == 3, inc["root_cause"]
    assert inc["culprit"] is not None and inc["culprit"]["rank"] == 3, inc["culprit"]
    assert doc["job"]["outcome"] == "crashed", doc["job"]


def test_pdsh_deepspeed_traceback(tmp_path: Path, analyze_json) -> None:
    h = "compute-dy-p4d24xlarge-77: "
    body = [
        "RuntimeError: NCCL error in: ../torch/lib/c10d/ProcessGroupNCCL.cpp:825, internal error, "
        "NCCL version 20.9.9",
        "ncclInternalError: Internal check failed. This is either a bug in NCCL or due to memory "
        "corruption",
        "Traceback (most recent call last):",
        '  File "/opt/conda/lib/python3.6/runpy.py", line 193, in _run_module_as_main',
        '    "__main__", mod_spec)',
        '  File "/opt/conda/lib/python3.6/runpy.py", line 85, in _run_code',
        "    exec(code, run_globals)",
        '  File "/opt/conda/lib/python3.6/site-packages/deepspeed/launcher/launch.py", line 171, '
        "in <module>",
        "    main()",
        '  File "/opt/conda/lib/python3.6/site-packages/deepspeed/launcher/launch.py", line 161, '
        "in main",
        "    sigkill_handler(signal.SIGTERM, None)  # not coming back",
        '  File "/opt/conda/lib/python3.6/site-packages/deepspeed/launcher/launch.py", line 139, '
        "in sigkill_handler",
        "    raise subprocess.CalledProcessError(returncode=last_return_code, cmd=cmd)",
    ]
    lines = [
        # accelerate#1317 launcher lines (pdsh host labels), FORMATS §1.6
        "104.171.201.171: [2023-04-16 02:38:19,527] [INFO] [launch.py:229:main] WORLD INFO DICT: "
        "{'setup@104.171.201.171': [0, 1, 2, 3, 4, 5, 6, 7], "
        "'setup@104.171.201.172': [0, 1, 2, 3, 4, 5, 6, 7]}",
        *[h + b for b in body],
    ]
    path = write(tmp_path, "ds.log", lines)
    code, doc = analyze_json(path)
    assert code == 1
    inc = verdict_incident(doc)
    assert inc["category"] == "comm_error", inc
    assert_root(inc, path, 2, lines[1])
    assert inc["root_cause"]["host"] == "compute-dy-p4d24xlarge-77", inc["root_cause"]
    # pdsh names the host only: no rank may be invented
    assert inc["root_cause"]["rank"] is None, inc["root_cause"]
    assert inc["culprit"] is None or inc["culprit"]["rank"] is None, inc["culprit"]
    if inc["culprit"] is not None:
        assert inc["culprit"]["host"] == "compute-dy-p4d24xlarge-77", inc["culprit"]


# --------------------------------------------------------------------------------------------
# 8. HF Trainer under DeepSpeed: loss dicts, a checkpoint save, then an NCCL error.
# Sources: FORMATS §5.4 (huggingface/accelerate#1837 dict, bigscience hf_ds_gpt2 `Saving model
# checkpoint to` line; loss/epoch values adapted); `internal error` traceback tail from
# junjie18/CMT#124 (torch 1.x, elastic era-1 agent line); `unhandled system error` from
# FORMATS §4 (bigscience tr1-13B, torch 1.8 / NCCL 2.7.8).

_HF_TB = [
    "Traceback (most recent call last):",
    '  File "tools/train.py", line 297, in <module>',
    "    main()",
    '  File "tools/train.py", line 286, in main',
    "    train_model(",
]


@pytest.mark.parametrize(
    "error",
    [
        "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:845, internal "
        "error, NCCL version 2.7.8",
        "RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1616554793803/work/torch/lib/"
        "c10d/ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.7.8",
    ],
    ids=["internal_error", "system_error"],
)
def test_hf_trainer_then_nccl_error(tmp_path: Path, analyze_json, error: str) -> None:
    lines = [
        "{'loss': 1.306, 'learning_rate': 1.2195121951219514e-06, 'epoch': 0.0}",
        "{'loss': 1.254, 'learning_rate': 2.4390243902439027e-06, 'epoch': 0.01}",
        "{'loss': 1.198, 'learning_rate': 3.6585365853658537e-06, 'epoch': 0.01}",
        "[INFO|trainer.py:1884] 2021-05-25 06:53:45,424 >> Saving model checkpoint to output_dir",
        *_HF_TB,
        error,
    ]
    if "internal" in error:
        lines.append(
            "ncclInternalError: Internal check failed. This is either a bug in NCCL or due to "
            "memory corruption"
        )
    lines.append(
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 "
        "(pid: 2750053) of binary: /home/ssj/anaconda3/envs/CMT4/bin/python"
    )
    path = write(tmp_path, "hf.log", lines)
    code, doc = analyze_json(path)
    assert code == 1
    assert doc["job"]["outcome"] == "crashed", doc["job"]
    inc = verdict_incident(doc)
    assert inc["category"] == "comm_error", inc
    assert_root(inc, path, lineno(lines, error), error)
    # nothing in this log names a global rank for the failing process
    assert inc["culprit"] is None or inc["culprit"]["rank"] in (None, 0), inc["culprit"]


# --------------------------------------------------------------------------------------------
# 9. A novel error nobody knows, printed by 64 ranks (constructed text, the point of the test;
# prefixes as FORMATS §1.2 excepthook). Each rank's copy differs in address, port and pointer.


def test_novel_error_is_one_template(tmp_path: Path, analyze_json) -> None:
    lines = [
        f"[rank{r}]: something new happened: FooBar handshake failed on 10.1.{r // 8}.{r}:"
        f"{5000 + r} at 0x7fff{r:04x}"
        for r in range(64)
    ]
    path = write(tmp_path, "novel.log", lines)
    _code, doc = analyze_json(path)
    unknown = [u for u in doc["unrecognized"] if "FooBar" in u["example"]["text"]]
    assert len(unknown) == 1, doc["unrecognized"]
    assert unknown[0]["count"] == 64, unknown
    assert unknown[0]["example"]["line"] == 1, unknown


def test_novel_exception_name_is_visible(tmp_path: Path, analyze_json) -> None:
    # the brief's form: an exception class nobody has a signature for. Whether logscope calls it
    # an uncaught Python exception or an unrecognized template, it must not be lost.
    lines = [
        f"[rank{r}]: FooBarError: something new happened on 10.1.2.3:5000 at 0x7fff"
        for r in range(64)
    ]
    path = write(tmp_path, "novel_exc.log", lines)
    _code, doc = analyze_json(path)
    unknown = [u for u in doc["unrecognized"] if "FooBarError" in u["example"]["text"]]
    if unknown:
        assert len(unknown) == 1 and unknown[0]["count"] == 64, unknown
    else:
        inc = verdict_incident(doc)
        assert_root(inc, path, 1, lines[0])
        assert inc["root_cause"]["rank"] == 0
        assert inc["cascade"]["count"] == 63, inc["cascade"]


# --------------------------------------------------------------------------------------------
# 10. A healthy run with error-looking noise that reaches its last iteration.
# Sources: deprecation warnings FORMATS §1.2 (both eras, observed); Megatron iteration line
# FORMATS §5.1 (bigscience meg_gpt2_base_n4_dp1_tp4_pp4-1809579.out, iteration adapted, last
# one = train_iters); NCCL INFO FORMATS §4 (bigscience all_reduce_bench); torchrun banner §3.2;
# `error_rate: 0.01` and the caught-and-retried line are constructed.


def test_healthy_run_with_noise(tmp_path: Path, analyze_json) -> None:
    it_line = (
        " iteration     {it:4d}/    1000 | consumed samples:         {cs:4d} | elapsed time per "
        "iteration (ms): 1381.9 | learning rate: 1.390E-04 | global batch size:     4 | lm loss: "
        "7.512811E+00 | loss scale: 16384.0 | grad norm: 3.182 | number of skipped iterations:   0"
        " | number of nan iterations:   0 |"
    )
    lines = [
        "[2025-07-29 17:39:02,527] torch.distributed.run: [WARNING] "
        "*****************************************",
        "[2025-07-29 17:39:02,527] torch.distributed.run: [WARNING] Setting OMP_NUM_THREADS "
        "environment variable for each process to be 1 in default, to avoid your system being "
        "overloaded, please further tune the variable for optimal performance in your "
        "application as needed. ",
        "[2025-07-29 17:39:02,527] torch.distributed.run: [WARNING] "
        "*****************************************",
        "[W Utils.hpp:133] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; "
        "use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function getCvarInt)",
        "[W411 23:36:06.965860675 Utils.hpp:137] Warning: Environment variable "
        "NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead "
        "(function operator())",
        "r6i6n4:257714:257714 [0] NCCL INFO Bootstrap : Using ib0:10.148.7.175<0>",
    ]
    for k, it in enumerate((990, 992, 994, 996, 998, 1000)):
        lines.append(it_line.format(it=it, cs=it * 4))
        if k == 1:
            lines.append("eval metrics | error_rate: 0.01 | accuracy: 0.99")
            lines.append(
                "WARNING: failed to reach wandb (ConnectionError), retrying in 5 s (attempt 1/5)"
            )
    path = write(tmp_path, "healthy.out", lines)
    code, doc = analyze_json(path)
    assert doc["job"]["outcome"] == "completed", doc["job"]
    assert doc["job"]["last_iteration"] == 1000, doc["job"]
    assert doc["verdict"] is None, doc["incidents"]
    assert doc["incidents"] == [], doc["incidents"]
    assert code == 0


# --------------------------------------------------------------------------------------------
# Known blocks must not be reported as "unrecognized" error lines.
# Source: the ChildFailedError block observed in FORMATS §3.1 (verbatim, plexus.sky, torch 2.x)
# after the era-3 agent line of FORMATS §3.2 (local_rank/pid adapted to the block).


def test_single_failure_childfailed_block_is_parsed(tmp_path: Path, analyze_json) -> None:
    lines = [
        "E0312 02:29:19.980000 48200 torch/distributed/elastic/multiprocessing/api.py:984] failed "
        "(exitcode: -6) local_rank: 0 (pid: 48240) of binary: /usr/bin/python3",
        "Traceback (most recent call last):",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "/home/jotschi/workspaces/ml/lavis-experiments/mistral-deepspeed/sft_trainer_4bit.py "
        "FAILED",
        "------------------------------------------------------------",
        "Failures:",
        "  <NO_OTHER_FAILURES>",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2024-03-12_02:29:19",
        "  host      : plexus.sky",
        "  rank      : 0 (local_rank: 0)",
        "  exitcode  : -6 (pid: 48240)",
        "  error_file: <N/A>",
        "  traceback : Signal 6 (SIGABRT) received by PID 48240",
        "============================================================",
    ]
    path = write(tmp_path, "sft.log", lines)
    code, doc = analyze_json(path)
    assert code == 1
    assert doc["unrecognized"] == [], doc["unrecognized"]
    inc = verdict_incident(doc)
    assert inc["culprit"] is not None and inc["culprit"]["rank"] == 0, inc["culprit"]


def test_c10_backtrace_is_not_unrecognized(tmp_path: Path, analyze_json) -> None:
    # FORMATS §2.5 observed 2.4.1 sequence (scenario 2's rank block)
    lines = _watchdog_rank(1)
    path = write(tmp_path, "watchdog.log", lines)
    _code, doc = analyze_json(path)
    assert doc["unrecognized"] == [], doc["unrecognized"]
