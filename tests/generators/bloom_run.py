# ruff: noqa: E501  (log lines are written out whole)
"""A deterministic BLOOM tr11-176B-ml-like run over three SLURM jobs, with the truth it was built from.

Writes `main_log.txt` (merged srun output of all 48 nodes x 8 GPUs, `--tee 3` headers `[defaultN]:`,
no srun label, appended across restarts like `tee -a`, hourly PULSE status lines appended by the
monitor) and one `tr11-176B-ml-<jobid>.out` per job (`set -x` trace, `START TIME:` / `END TIME:` in
`date` format, slurmstepd banners). Formats follow shared/FORMATS.md §3.1, §5.2, §6.1 and §8.

The story (times vary with the seed, the structure does not):

1. job 1528763 trains from scratch; a GPU dies 248 iterations after the last checkpoint (2 before
   the next save); the BLOOM `c10::CUDAError` block on `[default3]:`, 30 min of silence (NCCL
   timeout), watchdog timeouts, one ChildFailedError block in the main log; srun's task errors,
   the STEP cancel banner and `END TIME:` in the job's `.out`.
2. after a queue wait, job 1528874_1 resumes from that checkpoint and, 37 iterations after its last
   save, silently hangs: nothing but PULSE lines for hours, then a manual `scancel`
   (`*** STEP … CANCELLED AT … ***` and `*** JOB … CANCELLED AT … ***` in its `.out`, no END TIME).
3. after another wait, job 1528874_2 resumes; someone creates the kill-switch file, so it saves a
   checkpoint at its last iteration and exits (`Detected kill switch at …`, `END TIME:`).

srun's and slurmstepd's own messages go to the job's `.out` (the batch script pipes only srun's
stdout through `tee -a main_log.txt`); the `.out` files hold nothing else but the `set -x` trace.

All times are naive local datetimes. Internally the clock counts ticks of 10 µs, so every printed
quantity (elapsed 0.01 s, save ms with 2 decimals, whole-second anchors) is exact.

    python -m tests.generators.bloom_run /tmp/bloom [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import random
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

TICK = 100_000  # ticks per second
T0 = datetime(2022, 3, 21, 8, 0, 0)

NODES = 48
GPUS_PER_NODE = 8
WORLD = NODES * GPUS_PER_NODE
TRAIN_ITERS = 115311
GLOBAL_BATCH = 2048
SEQ_LEN = 2048
SAVE_INTERVAL = 250
SAVE_S = 40.0
NCCL_TIMEOUT_MS = 1_800_000
JOB_NAME = "tr11-176B-ml"
PARTITION = "gpu_p5"
NODELIST = "jean-zay-iam[01-34,36-49]"
HOSTS = [f"jean-zay-iam{n:02d}" for n in [*range(1, 35), *range(36, 50)]]
CKPT_DIR = "/gpfsscratch/rech/six/commun/checkpoints/tr11-176B-ml/checkpoints/main"
CONDA = "/gpfswork/rech/six/commun/conda/tr11-176B-ml"
SITE = f"{CONDA}/lib/python3.8/site-packages"
REPO = "/gpfswork/rech/six/commun/code/tr11-176B-ml/Megatron-DeepSpeed-tr11-176B-ml"
RULER = "*****************************************"
HANG_OUTS = ("trace", "end_time", "no_trace", "job_banner")


# --------------------------------------------------------------------------------------------
# truth


@dataclass(frozen=True)
class IncidentTruth:
    kind: str  # "crash" | "hang"
    attempt: int  # 1-based index of the attempt it ended
    failure_time: datetime  # F: GPU death (crash) / last progress line (hang)
    wasted_progress_s: float  # F - U
    hang_s: float  # E - F
    restart_s: float | None  # L(next) - E; None when no attempt follows
    last_checkpoint_iteration: int
    local_rank: int | None  # crash: 3
    rank: int | None  # global rank of the dead GPU (crash only)
    host: str | None


@dataclass(frozen=True)
class AttemptTruth:
    index: int  # 1-based
    job_id: str  # as squeue / PULSE show it: "1528763", "1528874_1"
    slurm_job_id: int  # %j of the .out file name
    out_file: str
    start: datetime  # S: START TIME of the .out
    loop_start: datetime  # L: `[before the start of training step] datetime:`
    end: datetime  # E
    useful_end: datetime  # U: completion of the last save before F (last attempt: last line)
    first_iteration: int
    last_iteration: int  # last iteration line printed
    resumed_from_iteration: int | None
    last_checkpoint_iteration: int | None  # last save completed in this attempt
    checkpointing_s: float  # saves completed by U
    productive_s: float  # (U - L) - checkpointing_s
    iterations: int


@dataclass(frozen=True)
class Truth:
    gpus: int
    wall_s: float
    productive_s: float
    checkpointing_s: float
    startup_s: float
    disruption_recovery_s: float
    wasted_progress_s: float
    hang_s: float
    other_s: float
    ettr: float
    incidents: list[IncidentTruth]
    attempts: list[AttemptTruth]
    iter_s_mean: float
    save_s: float
    save_interval_iterations: int
    run_start: datetime = T0
    run_end: datetime = T0
    files: list[str] = field(default_factory=list)
    slowdown_s: float = 0.0  # seconds the injected slowdown added


# --------------------------------------------------------------------------------------------
# formatting helpers


def _dt(t: int) -> datetime:
    return T0 + timedelta(microseconds=t * 10)


def _s(t: int) -> float:
    return t / TICK


def _sec(t: int) -> str:
    """`%Y-%m-%d %H:%M:%S` of a whole-second tick time."""
    return _dt(t).strftime("%Y-%m-%d %H:%M:%S")


def _date_cmd(t: int) -> str:
    """`date` default output (C locale): `Mon Mar 21 08:00:00 CET 2022` (day space-padded)."""
    d = _dt(t)
    return f"{d:%a %b} {d.day:2d} {d:%H:%M:%S} CET {d.year}"


_DATE = re.compile(r"(\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d) CET (\d{4})")
_BANNER = re.compile(r"(?<=CANCELLED AT )(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)")


def _reclock(line: str, hours: int) -> str:
    """A `.out` line with its stamps on a clock `hours` ahead (and `date`'s zone name to match)."""
    if not hours:
        return line
    shift = timedelta(hours=hours)
    zone = {-1: "UTC", 1: "EET", 2: "MSK"}.get(hours, f"{hours + 1:+03d}")

    def date(m: re.Match[str]) -> str:
        d = datetime.strptime(f"{m.group(1)} {m.group(2)}", "%a %b %d %H:%M:%S %Y") + shift
        return f"{d:%a %b} {d.day:2d} {d:%H:%M:%S} {zone} {d.year}"

    line = _DATE.sub(date, line)
    return _BANNER.sub(
        lambda m: f"{datetime.fromisoformat(m.group(1)) + shift:%Y-%m-%dT%H:%M:%S}", line
    )


def _squeue_time(seconds: int) -> str:
    """Slurm secs2time_str: `M:SS`, `H:MM:SS`, `D-HH:MM:SS`."""
    days, rem = divmod(seconds, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, secs = divmod(rem, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def _whole(seconds: float) -> int:
    return round(seconds) * TICK


class _Log:
    """Lines with the time they were written; sorted by (time, order written) at the end."""

    def __init__(self) -> None:
        self.events: list[tuple[int, int, str]] = []

    def add(self, t: int, *lines: str) -> None:
        for line in lines:
            self.events.append((t, len(self.events), line))

    def text(self) -> str:
        return "".join(line + "\n" for _, _, line in sorted(self.events))

    def last_time(self) -> int:
        return max(t for t, _, _ in self.events)


@dataclass
class _Job:
    job_id: str
    slurm_job_id: int
    array_pending: str  # what PULSE shows while the array waits before this job


# --------------------------------------------------------------------------------------------
# line builders


def _iteration_line(it: int, elapsed: float, rng: random.Random) -> str:
    samples = it * GLOBAL_BATCH
    lr = 6e-5 * min(1.0, it / 300) * (0.9 + 0.1 * math.cos(math.pi * it / TRAIN_ITERS))
    loss = 2.35 + 9.0 * math.exp(-it / 90) + rng.uniform(-0.02, 0.02)
    grad = rng.uniform(0.15, 0.35) if it > 50 else rng.uniform(1.0, 12.0)
    return (
        f"[default7]: iteration {it:8d}/{TRAIN_ITERS:8d} | consumed samples: {samples:12d} | "
        f"consumed tokens: {samples * SEQ_LEN:12d} | elapsed time per iteration (s): {elapsed:.2f} | "
        f"learning rate: {lr:.3E} | global batch size: {GLOBAL_BATCH:5d} | lm loss: {loss:.6E} | "
        f"grad norm: {grad:.3f} | num zeros: 0.0 | number of skipped iterations: {0:3d} | "
        f"number of nan iterations: {0:3d} | samples per second: {GLOBAL_BATCH / elapsed:.3f} | "
        f"TFLOPs: {149.02 * 105.22 / elapsed:.2f} |"
    )


def _noise(rng: random.Random) -> list[str]:
    k = rng.randrange(GPUS_PER_NODE)
    choices = [
        [
            f"[default{k}]:{SITE}/torch/utils/checkpoint.py:25: UserWarning: None of the inputs have requires_grad=True. Gradients will be None",
            f"[default{k}]:  warnings.warn(",
        ],
        [
            f"[default{k}]:{REPO}/megatron/model/fused_softmax.py:189: UserWarning: masked_fill_ received a mask with dtype torch.uint8, this behavior is now deprecated",
        ],
    ]
    return rng.choice(choices)


def _nccl_startup(rng: random.Random, n: int) -> list[str]:
    lines = []
    for _ in range(n):
        node = rng.randrange(NODES)
        lr = rng.randrange(GPUS_PER_NODE)
        host = HOSTS[node]
        pid = 257_700 + node * 31 + lr
        rank = node * GPUS_PER_NODE + lr
        msg = rng.choice(
            [
                f"{host}:{pid}:{pid} [{lr}] NCCL INFO Bootstrap : Using ib0:10.148.{node}.{lr + 10}<0>",
                f"{host}:{pid}:{pid} [{lr}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB ; OOB ib0:10.148.{node}.{lr + 10}<0>",
                f"{host}:{pid}:{pid + 48} [{lr}] NCCL INFO Channel {rng.randrange(32):02d}/32 :    0   1   2   3   4   5   6   7",
                f"{host}:{pid}:{pid + 48} [{lr}] NCCL INFO Ring {rng.randrange(32):02d} : {lr} -> {(lr + 1) % 8} via P2P/IPC/read",
                f"{host}:{pid}:{pid + 48} [{lr}] NCCL INFO Connected all rings",
                f"{host}:{pid}:{pid + 48} [{lr}] NCCL INFO comm 0x{rng.getrandbits(44):x} rank {rank} nranks {WORLD} cudaDev {lr} busId {lr * 16 + 7:x}000 - Init COMPLETE",
            ]
        )
        lines.append(f"[default{lr}]:{msg}")
    return lines


def _pulse(t: int, text: str) -> str:
    return f"[{_sec(t)}] PULSE: {JOB_NAME} {text}"


# --------------------------------------------------------------------------------------------
# the run


@dataclass
class _AttemptPlan:
    job: _Job
    resume_from: int | None  # checkpoint iteration loaded; None = from scratch
    last_ckpt: int  # last checkpoint this attempt completes
    after_ckpt: int  # iterations printed after it
    end: str  # "crash" | "hang" | "kill_switch"


def _startup(
    log: _Log, rng: random.Random, s: int, plan: _AttemptPlan, print_config: bool = True
) -> int:
    """Write the start-up lines of an attempt that started at S=s; return L."""
    d = rng.randint(720, 900)  # 12-15 min

    def at(frac: float) -> int:
        return s + _whole(d * frac)

    t = s + _whole(rng.randint(8, 15))
    for _ in range(NODES):
        log.add(t, "WARNING:torch.distributed.run:", RULER)
        log.add(
            t,
            "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ",
            RULER,
        )
    log.add(
        at(0.05),
        "[default0]:using world size: 384, data-parallel-size: 8, tensor-model-parallel size: 4, pipeline-model-parallel size: 12 ",
        "[default0]:using torch.bfloat16 for parameters ...",
        "[default0]:------------------------ arguments ------------------------",
        "[default0]:  global_batch_size ............................... 2048",
        "[default0]:  log_interval .................................... 1",
        f"[default0]:  save_interval ................................... {SAVE_INTERVAL}",
        f"[default0]:  train_iters ..................................... {TRAIN_ITERS}",
        "[default0]:-------------------- end of arguments ---------------------",
        "[default0]:> building PretrainedFromHF tokenizer ...",
        "[default0]:> initializing torch distributed ...",
    )
    nccl_t = at(0.08)
    host0, pid0 = HOSTS[0], 257_700
    log.add(nccl_t, f"[default0]:{host0}:{pid0}:{pid0} [0] NCCL INFO NCCL version 2.10.3+cuda11.3")
    # torch 1.11's ProcessGroupNCCL logs its options, one per line; async error handling was
    # off by default then (FORMATS-style: BLOOM's first jobs ran so, and hung for hours)
    options = (
        "[default0]:[I ProcessGroupNCCL.cpp:587] [Rank 0] ProcessGroupNCCL initialized with following options:",
        "[default0]:NCCL_ASYNC_ERROR_HANDLING: 0",
        "[default0]:NCCL_DESYNC_DEBUG: 0",
        "[default0]:NCCL_BLOCKING_WAIT: 0",
        "[default0]:TIMEOUT(ms): 1800000",
        "[default0]:USE_HIGH_PRIORITY_STREAM: 0",
    )
    log.add(nccl_t, *(options if print_config else ()))
    for line in _nccl_startup(rng, 240):
        log.add(nccl_t + rng.randrange(_whole(d * 0.1)), line)
    for _ in range(16):
        r = rng.randrange(WORLD)
        log.add(
            nccl_t + rng.randrange(_whole(d * 0.1)),
            f"[default{r % 8}]:[W ProcessGroupNCCL.cpp:1569] Rank {r} using best-guess GPU {r % 8} to perform barrier as devices used by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect.Specify device_ids in barrier() to force use of a particular device.",
        )
    init = at(0.2)
    log.add(
        init,
        "[default0]:> initialized tensor model parallel with size 4",
        "[default0]:> initialized pipeline model parallel with size 12",
        "[default0]:> setting random seeds to 42 ...",
        "[default0]:> compiling and loading fused kernels ...",
        f"[default0]:>>> done with compiling and loading fused kernels. Compilation time: {rng.uniform(15, 30):.3f} seconds",
        f"[default0]:time to initialize megatron (seconds): {_s(init - s) - rng.uniform(5, 20):.3f}",
        f"[default0]:[after megatron is initialized] datetime: {_sec(init)} ",
        "[default0]:building GPT model ...",
    )
    for _ in range(12):
        lr = rng.randrange(GPUS_PER_NODE)
        log.add(
            at(0.22) + rng.randrange(TICK * 10),
            f"[default{lr}]: > number of parameters on (tensor, pipeline) model parallel rank ({lr % 4}, {rng.randrange(12)}): {rng.choice([4108140544, 3942297600, 4304343040])}",
        )
    if plan.resume_from is None:
        log.add(
            at(0.35),
            f"[default0]:WARNING: could not find the metadata file {CKPT_DIR}/latest_checkpointed_iteration.txt ",
            "[default0]:    will not load any checkpoints and will start from random",
        )
    else:
        log.add(
            at(0.35),
            f"[default0]: loading checkpoint from {CKPT_DIR} at iteration {plan.resume_from}",
        )
        log.add(
            at(0.7),
            f"[default0]:  successfully loaded checkpoint from {CKPT_DIR} at iteration {plan.resume_from}",
        )
    built = at(0.72)
    log.add(
        built,
        f"[default0]:[after model, optimizer, and learning rate scheduler are built] datetime: {_sec(built)} ",
        "[default0]:> building train, validation, and test datasets ...",
        "[default0]: > datasets target sizes (minimum size):",
        f"[default0]:    train:      {TRAIN_ITERS * GLOBAL_BATCH}",
        "[default0]:> building train, validation, and test datasets for GPT ...",
    )
    loaders = at(0.95)
    log.add(
        loaders,
        f"[default0]:[after dataloaders are built] datetime: {_sec(loaders)} ",
        "[default0]:done with setup ...",
        f"[default0]:time (ms) | model-and-optimizer-setup: {_s(built - init) * 1000:.2f} | train/valid/test-data-iterators-setup: {_s(loaders - built) * 1000:.2f}",
        "[default0]:training ...",
    )
    loop = s + _whole(d)
    log.add(loop, f"[default0]:[before the start of training step] datetime: {_sec(loop)} ")
    return loop


def generate(
    out_dir: Path,
    seed: int = 0,
    dead_host: str | None = None,
    slowdown: tuple[int, int, float] | None = None,
    hang_out: str = "trace",
    print_config: bool = True,
    out_clock_h: int = 0,
    pulse: bool = True,
) -> Truth:
    """Write main_log.txt and the .out files into out_dir; return the truth. The GPU that dies
    is on a random node, or on `dead_host`. `slowdown` = (attempt, iteration, fraction): every
    step of that attempt (1-based) from that iteration on takes `fraction` longer (BLOOM's
    chronicles record a sudden 5% drop in throughput); its extra seconds are `Truth.slowdown_s`
    (the ledger truth does not take them out of productive time: leave it None to check that).
    `hang_out`: what the hung job's `.out` holds: `trace` (the `set -x` trace, srun's abort and
    the JOB and STEP banners), `end_time` (as `trace`, then `END TIME:` when the script goes on
    after srun returns), `no_trace` (no `set -x`: START TIME, the abort, the JOB banner, END
    TIME), `job_banner` (the JOB banner alone). `print_config`: whether rank 0 prints
    ProcessGroupNCCL's options (torch does only at some log levels). `out_clock_h`: hours the
    batch host's clock (the `.out` stamps: `date`, the scheduler's banners) is ahead of the
    training log's (its zone: -1 prints UTC); the truth stays on the training log's clock.
    `pulse`: whether the monitor's hourly PULSE lines are in the log."""
    if hang_out not in HANG_OUTS:
        raise ValueError(f"hang_out: one of {', '.join(HANG_OUTS)}")
    rng = random.Random(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    log = _Log()
    plans = [
        _AttemptPlan(_Job("1528763", 1528763, ""), None, 500, 248, "crash"),
        _AttemptPlan(_Job("1528874_1", 1528874, "1528874_[1-3%1]"), 500, 1000, 37, "hang"),
        _AttemptPlan(_Job("1528874_2", 1528875, "1528874_[2-3%1]"), 1000, 1250, 30, "kill_switch"),
    ]
    dead_node = rng.randrange(NODES)
    if dead_host is not None:
        dead_node = HOSTS.index(dead_host)
    dead_local = 3
    dead_rank = dead_node * GPUS_PER_NODE + dead_local

    attempts: list[AttemptTruth] = []
    incidents: list[IncidentTruth] = []
    elapsed_all: list[float] = []
    slowdown_s = 0.0
    outs: dict[str, list[str]] = {}
    windows: list[tuple[int, int, _Job]] = []  # (S, E, job) for PULSE
    acc = dict.fromkeys(
        ("productive", "checkpointing", "startup", "recovery", "wasted", "hang", "other"), 0
    )  # ticks, summed exactly
    loops: list[int] = []
    ends: list[int] = []
    s = 0
    for idx, plan in enumerate(plans, start=1):
        job = plan.job
        out: list[str] = [
            f"+ source {CONDA}/../start-tr11-176B-ml",
            "+ export GPUS_PER_NODE=8",
            "+ GPUS_PER_NODE=8",
            "+ NNODES=48",
            f"+ SAVE_INTERVAL={SAVE_INTERVAL}",
            "++ date",
            f"+ echo 'START TIME: {_date_cmd(s)}'",
            f"START TIME: {_date_cmd(s)}",
            "+ export CUDA_LAUNCH_BLOCKING=1",
            "+ CUDA_LAUNCH_BLOCKING=1",
            "+ clear",
            f"+ srun --wait=60 --kill-on-bad-exit=1 --jobid {job.slurm_job_id} bash -c 'python -u -m torch.distributed.run --nproc_per_node 8 --nnodes 48 --rdzv_endpoint {HOSTS[0]}:6000 --rdzv_backend c10d --max_restarts 0 --tee 3  --node_rank $SLURM_PROCID {REPO}/pretrain_gpt.py ...'",
            f"+ tee -a /gpfsscratch/rech/six/commun/checkpoints/{JOB_NAME}/{JOB_NAME}-logs/logs/main/main_log.txt",
        ]
        loop = _startup(log, rng, s, plan, print_config)
        first = 1 if plan.resume_from is None else plan.resume_from + 1
        last = plan.last_ckpt + plan.after_ckpt
        t = loop
        saves: list[tuple[int, int]] = []  # (start, end)
        for it in range(first, last + 1):
            elapsed = round(rng.uniform(104, 107), 2)
            if slowdown is not None and slowdown[0] == idx and it >= slowdown[1]:
                slow = round(elapsed * (1 + slowdown[2]), 2)
                slowdown_s += slow - elapsed
                elapsed = slow
            elapsed_all.append(elapsed)
            dt = round(elapsed * 100) * (TICK // 100)
            if rng.random() < 0.35:
                log.add(t + 1 + rng.randrange(dt - 2), *_noise(rng))
            t += dt
            log.add(t, _iteration_line(it, elapsed, rng))
            if it == first:
                for _ in range(12):
                    r = rng.randrange(WORLD)
                    log.add(
                        t,
                        f"[default{r % 8}]:[Rank {r}] (after {it} iterations) memory (MB) | allocated: {rng.uniform(20000, 30000):.2f} | max allocated: {rng.uniform(45000, 52000):.2f} | reserved: 55060.00 | max reserved: 55060.00",
                    )
            if it % SAVE_INTERVAL == 0:
                ms = round(rng.uniform(39000, 41000), 2)
                d_save = round(ms * 100)  # ticks: ms * 1e-3 s * 1e5
                start_dt = _dt(t)
                log.add(
                    t,
                    f"[default0]:saving checkpoint at iteration {it:7d} to {CKPT_DIR}",
                    f"[default0]:[{start_dt:%Y-%m-%d %H:%M:%S},{start_dt.microsecond // 1000:03d}] [INFO] [logging.py:69:log_dist] [Rank 0] Saving model checkpoint: {CKPT_DIR}/global_step{it}/mp_rank_00_model_states.pt",
                )
                saves.append((t, t + d_save))
                t += d_save
                log.add(
                    t,
                    f"[default0]:  successfully saved checkpoint at iteration {it:7d} to {CKPT_DIR}",
                    f"[default7]:time (ms) | save-checkpoint: {ms:.2f}",
                )
        last_line = t
        assert saves and saves[-1][0] <= last_line
        ckpt_end = saves[-1][1]

        if plan.end == "crash":
            # The GPU dies inside iteration `last + 1` (a whole second strictly inside it).
            elapsed_k = round(rng.uniform(104, 107), 2)
            lo = math.ceil(_s(t)) + 1
            fail = _whole(rng.randint(lo, math.floor(_s(t) + elapsed_k) - 1))
            useful = ckpt_end
            host = HOSTS[dead_node]
            lib = f"{SITE}/torch/lib"
            log.add(
                fail,
                "[default3]:terminate called after throwing an instance of 'c10::CUDAError'",
                "[default3]:  what():  CUDA error: unknown error",
                "[default3]:Exception raised from query at ../aten/src/ATen/cuda/CUDAEvent.h:95 (most recent call first):",
                f"[default3]:frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x42 (0x1518a06137d2 in {lib}/libc10.so)",
                f"[default3]:frame #1: c10d::ProcessGroupNCCL::WorkNCCL::finishedGPUExecutionInternal() const + 0x11a (0x15190c6c29ea in {lib}/libtorch_cuda_cpp.so)",
                f"[default3]:frame #2: c10d::ProcessGroupNCCL::WorkNCCL::isCompleted() + 0x50 (0x15190c6c4fd0 in {lib}/libtorch_cuda_cpp.so)",
                f"[default3]:frame #3: c10d::ProcessGroupNCCL::workCleanupLoop() + 0x145 (0x15190c6c6265 in {lib}/libtorch_cuda_cpp.so)",
                "[default3]:frame #4: <unknown function> + 0xc2ba3 (0x15191b339ba3 in /lib64/libstdc++.so.6)",
                "[default3]:frame #5: <unknown function> + 0x814a (0x15191c77d14a in /lib64/libpthread.so.0)",
                "[default3]:frame #6: clone + 0x43 (0x15191c4acdc3 in /lib64/libc.so.6)",
            )
            seq = last * 7 + 3
            timed_out = rng.sample([r for r in range(WORLD) if r != dead_rank], 64)
            for r in timed_out:
                ran = NCCL_TIMEOUT_MS + rng.randint(200, 2900)
                wt = fail + ran * (TICK // 1000) - rng.randrange(TICK // 2)
                log.add(
                    wt,
                    f"[default{r % 8}]:[E ProcessGroupNCCL.cpp:458] [Rank {r % 96}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, Timeout(ms)={NCCL_TIMEOUT_MS}) ran for {ran} milliseconds before timing out.",
                    f"[default{r % 8}]:[E ProcessGroupNCCL.cpp:414] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. To avoid this inconsistency, we are taking the entire process down.",
                )
            cf = fail + _whole(NCCL_TIMEOUT_MS / 1000 + rng.randint(4, 9))
            pids = [257_700 + dead_node * 31 + lr for lr in range(GPUS_PER_NODE)]
            log.add(
                cf,
                *(
                    f"WARNING:torch.distributed.elastic.multiprocessing.api:Sending process {p} closing signal SIGTERM"
                    for lr, p in enumerate(pids)
                    if lr != dead_local
                ),
                f"ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: {dead_local} (pid: {pids[dead_local]}) of binary: {CONDA}/bin/python",
                "Traceback (most recent call last):",
                f'  File "{CONDA}/lib/python3.8/runpy.py", line 194, in _run_module_as_main',
                "    return _run_code(code, main_globals, None,",
                f'  File "{CONDA}/lib/python3.8/runpy.py", line 87, in _run_code',
                "    exec(code, run_globals)",
                f'  File "{SITE}/torch/distributed/run.py", line 728, in <module>',
                "    main()",
                f'  File "{SITE}/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 345, in wrapper',
                "    return f(*args, **kwargs)",
                f'  File "{SITE}/torch/distributed/run.py", line 724, in main',
                "    run(args)",
                f'  File "{SITE}/torch/distributed/run.py", line 715, in run',
                "    elastic_launch(",
                f'  File "{SITE}/torch/distributed/launcher/api.py", line 131, in __call__',
                "    return launch_agent(self._config, self._entrypoint, list(args))",
                f'  File "{SITE}/torch/distributed/launcher/api.py", line 245, in launch_agent',
                "    raise ChildFailedError(",
                "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
                "=" * 60,
                f"{REPO}/pretrain_gpt.py FAILED",
                "-" * 60,
                "Failures:",
                "  <NO_OTHER_FAILURES>",
                "-" * 60,
                "Root Cause (first observed failure):",
                "[0]:",
                f"  time      : {_dt(cf):%Y-%m-%d_%H:%M:%S}",
                f"  host      : {host}.idris.fr",
                f"  rank      : {dead_rank} (local_rank: {dead_local})",
                f"  exitcode  : -6 (pid: {pids[dead_local]})",
                "  error_file: <N/A>",
                f"  traceback : Signal 6 (SIGABRT) received by PID {pids[dead_local]}",
                "=" * 60,
            )
            kill = cf + _whole(2)
            # srun --kill-on-bad-exit: the task that failed, then every other node's task killed
            # (one line per node: one task per node here)
            out += [
                f"srun: error: {host}: task {dead_node}: Exited with exit code 1",
                f"srun: Terminating job step {job.slurm_job_id}.0",
                f"slurmstepd: error: *** STEP {job.slurm_job_id}.0 ON {HOSTS[0]} CANCELLED AT {_dt(kill + _whole(3)):%Y-%m-%dT%H:%M:%S} ***",
            ]
            for n in rng.sample([n for n in range(NODES) if n != dead_node], 5):
                log.add(
                    kill + _whole(1),
                    "WARNING:torch.distributed.elastic.agent.server.api:Received 15 death signal, shutting down workers",
                    f"WARNING:torch.distributed.elastic.multiprocessing.api:Sending process {257_700 + n * 31} closing signal SIGTERM",
                )
            out += [
                f"srun: error: {HOSTS[n]}: task {n}: Killed" for n in range(NODES) if n != dead_node
            ]
            end = cf + _whole(rng.randint(15, 25))
            out.append(f"END TIME: {_date_cmd(end)}")
            kind: str | None = "crash"
        elif plan.end == "hang":
            fail = last_line
            useful = ckpt_end
            end = _whole(math.ceil(_s(fail)) + rng.randint(6 * 3600, 8 * 3600))
            banner_time = f"{_dt(end):%Y-%m-%dT%H:%M:%S}"
            aborted = "srun: Job step aborted: Waiting up to 62 seconds for job step to finish."
            job_banner = f"slurmstepd: error: *** JOB {job.slurm_job_id} ON {HOSTS[0]} CANCELLED AT {banner_time} ***"
            step_banner = f"slurmstepd: error: *** STEP {job.slurm_job_id}.0 ON {HOSTS[0]} CANCELLED AT {banner_time} ***"
            end_time = f"END TIME: {_date_cmd(end)}"
            if hang_out == "no_trace":
                out = [line for line in out if not line.startswith("+")]
                out += [aborted, job_banner, end_time]
            elif hang_out == "job_banner":
                out = [job_banner]
            else:
                out += [aborted, job_banner, step_banner]
                out += [end_time] if hang_out == "end_time" else []
            kind = "hang"
        else:
            # the kill switch is found at the top of the next iteration: save, say so, exit 0
            fail = last_line
            useful = last_line  # the exit's own save is not an interval's: not productive time
            ms = round(rng.uniform(39000, 41000), 2)
            start_dt = _dt(t)
            log.add(
                t,
                f"[default0]:saving checkpoint at iteration {last:7d} to {CKPT_DIR}",
                f"[default0]:[{start_dt:%Y-%m-%d %H:%M:%S},{start_dt.microsecond // 1000:03d}] [INFO] [logging.py:69:log_dist] [Rank 0] Saving model checkpoint: {CKPT_DIR}/global_step{last}/mp_rank_00_model_states.pt",
            )
            t += round(ms * 100)
            log.add(
                t,
                f"[default0]:  successfully saved checkpoint at iteration {last:7d} to {CKPT_DIR}",
                f"[default7]:time (ms) | save-checkpoint: {ms:.2f}",
            )
            quit_t = _whole(math.ceil(_s(t)))
            log.add(
                quit_t,
                f"[default0]:[Detected kill switch at {REPO}/kill-switch-{JOB_NAME}. Exiting] datetime: {_sec(quit_t)} ",
            )
            end = quit_t + _whole(rng.randint(5, 15))
            out.append(f"END TIME: {_date_cmd(end)}")
            kind = None

        ckpt = sum(b - a for a, b in saves if b <= useful)
        acc["checkpointing"] += ckpt
        acc["productive"] += useful - loop - ckpt
        if idx == 1:
            acc["startup"] += loop - s
        if kind is not None:
            acc["wasted"] += fail - useful
            acc["hang"] += end - fail
        else:
            acc["other"] += end - useful
        loops.append(loop)
        ends.append(end)
        attempts.append(
            AttemptTruth(
                index=idx,
                job_id=job.job_id,
                slurm_job_id=job.slurm_job_id,
                out_file=f"{JOB_NAME}-{job.slurm_job_id}.out",
                start=_dt(s),
                loop_start=_dt(loop),
                end=_dt(end),
                useful_end=_dt(useful),
                first_iteration=first,
                last_iteration=last,
                resumed_from_iteration=plan.resume_from,
                last_checkpoint_iteration=plan.last_ckpt,
                checkpointing_s=_s(ckpt),
                productive_s=_s(useful - loop - ckpt),
                iterations=last - first + 1,
            )
        )
        if kind is not None:
            incidents.append(
                IncidentTruth(
                    kind=kind,
                    attempt=idx,
                    failure_time=_dt(fail),
                    wasted_progress_s=_s(fail - useful),
                    hang_s=_s(end - fail),
                    restart_s=None,  # filled in below once the next L is known
                    last_checkpoint_iteration=plan.last_ckpt,
                    local_rank=dead_local if kind == "crash" else None,
                    rank=dead_rank if kind == "crash" else None,
                    host=HOSTS[dead_node] if kind == "crash" else None,
                )
            )
        outs[out_file_name(job)] = out
        windows.append((s, end, job))
        # queue wait before the next job
        wait = rng.randint(3600, 7200) if idx == 1 else rng.randint(1800, 3600)
        s = _whole(math.ceil(_s(end)) + wait)

    # restart_s = L(next) - E
    for i, inc in enumerate(incidents):
        if inc.attempt < len(loops):
            restart = loops[inc.attempt] - ends[inc.attempt - 1]
            acc["recovery"] += restart
            incidents[i] = replace(inc, restart_s=_s(restart))

    # PULSE lines at every whole hour up to (not including) the last line
    run_end = windows[-1][1]
    h = 3600
    while pulse and _whole(h) < run_end:
        ht = _whole(h)
        for i, (ws, we, job) in enumerate(windows):
            if ws <= ht < we or (i == len(windows) - 1 and ws <= ht):
                log.add(
                    ht,
                    _pulse(
                        ht,
                        f"is running for {_squeue_time(round(_s(ht - ws)))} since {_dt(ws):%Y-%m-%dT%H:%M:%S} ({job.job_id} on '{PARTITION}' partition ({NODELIST})",
                    ),
                )
                break
            nxt_job = windows[i + 1] if i + 1 < len(windows) else None
            if nxt_job is not None and we <= ht < nxt_job[0]:
                log.add(
                    ht,
                    _pulse(
                        ht,
                        f"is waiting to be scheduled ({nxt_job[2].array_pending} on '{PARTITION}' partition)",
                    ),
                )
                break
        h += 3600

    assert log.last_time() <= run_end
    (out_dir / "main_log.txt").write_text(log.text(), encoding="utf-8")
    for name, lines in outs.items():
        lines = [_reclock(line, out_clock_h) for line in lines]
        (out_dir / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")

    # totals
    first_a, last_a = attempts[0], attempts[-1]
    wall = ends[-1] - windows[0][0]
    assert sum(acc.values()) == wall, (acc, wall)  # exact, in ticks
    assert abs(sum(_s(v) for v in acc.values()) - _s(wall)) < 1e-6
    return Truth(
        gpus=WORLD,
        wall_s=_s(wall),
        productive_s=_s(acc["productive"]),
        checkpointing_s=_s(acc["checkpointing"]),
        startup_s=_s(acc["startup"]),
        disruption_recovery_s=_s(acc["recovery"]),
        wasted_progress_s=_s(acc["wasted"]),
        hang_s=_s(acc["hang"]),
        other_s=_s(acc["other"]),
        ettr=acc["productive"] / wall,
        incidents=incidents,
        attempts=attempts,
        iter_s_mean=sum(elapsed_all) / len(elapsed_all),
        slowdown_s=slowdown_s,
        save_s=SAVE_S,
        save_interval_iterations=SAVE_INTERVAL,
        run_start=first_a.start,
        run_end=last_a.end,
        files=["main_log.txt", *outs],
    )


def out_file_name(job: _Job) -> str:
    return f"{JOB_NAME}-{job.slurm_job_id}.out"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--slowdown",
        nargs=3,
        metavar=("ATTEMPT", "ITERATION", "FRACTION"),
        help="e.g. 3 1100 0.05: attempt 3 is 5%% slower from iteration 1100",
    )
    ap.add_argument(
        "--no-config", action="store_true", help="rank 0 does not print the process-group options"
    )
    ap.add_argument("--hang-out", choices=HANG_OUTS, default="trace", help="the hung job's .out")
    ap.add_argument(
        "--out-clock", type=int, default=0, metavar="HOURS", help="the .out clock's offset"
    )
    ap.add_argument("--no-pulse", action="store_true", help="no hourly PULSE status lines")
    args = ap.parse_args()
    slow = args.slowdown
    truth = generate(
        args.out_dir,
        args.seed,
        slowdown=(int(slow[0]), int(slow[1]), float(slow[2])) if slow else None,
        hang_out=args.hang_out,
        print_config=not args.no_config,
        out_clock_h=args.out_clock,
        pulse=not args.no_pulse,
    )
    for k, v in truth.__dict__.items():
        if isinstance(v, list):
            print(f"{k}:")
            for item in v:
                print(f"  {item}")
        else:
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()
