"""Configuration findings: each pitfall from constructed variants of the lines real
tools print, nothing without evidence, and the hang exposure of a BLOOM-like run in its own
numbers."""

from __future__ import annotations

from pathlib import Path

from logscope.engine.analyze import analyze
from logscope.model import EvidenceDetail, Finding

from .generators.bloom_run import generate as generate_bloom


def _findings(tmp_path: Path, lines: list[str], name: str = "job.log") -> list[Finding]:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines))
    return list(analyze([str(path)]).findings)


def _evidence(f: Finding) -> tuple[tuple[str, int, str], ...]:
    """The (file, line, text) lines that show a configuration finding."""
    assert isinstance(f.detail, EvidenceDetail), f
    return f.detail.lines


LIGHTNING_GLOO = [
    "GPU available: True (cuda), used: True",
    "TPU available: False, using: 0 TPU cores",
    "LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1]",
    "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2",
    "----------------------------------------------------------------------------------------------------",
    "distributed_backend=gloo",
    "All distributed processes registered. Starting with 2 processes",
    "----------------------------------------------------------------------------------------------------",
]


def test_gloo_while_cuda_is_in_use(tmp_path: Path) -> None:
    (f,) = _findings(tmp_path, LIGHTNING_GLOO)
    assert (f.kind, f.severity) == ("gloo_on_gpu", "warning")
    assert [line for _, line, _ in _evidence(f)] == [6, 1]
    assert "NCCL" in f.explanation and any("nccl" in r for r in f.remedies)


def test_gloo_on_cpus_is_what_gloo_is_for(tmp_path: Path) -> None:
    lines = [
        line.replace("True (cuda), used: True", "False, used: False") for line in LIGHTNING_GLOO
    ]
    lines = [line for line in lines if "CUDA_VISIBLE_DEVICES" not in line]
    assert _findings(tmp_path, lines) == []


def test_ranks_sharing_a_gpu_are_named(tmp_path: Path) -> None:
    lines = [
        f"gpu-a07:{pid}:{pid} [0] init.cc:1148 NCCL WARN Duplicate GPU detected : rank {r} and "
        "rank 0 both on CUDA device 3b000"
        for pid, r in ((4412, 2), (4413, 5))
    ]
    lines.append(
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, invalid usage, NCCL version 2.18.1"
    )
    (f,) = [f for f in _findings(tmp_path, lines) if f.kind == "duplicate_gpu"]
    assert "ranks 0, 2, 5 all use CUDA device 3b000" in f.title
    assert len(_evidence(f)) == 2 and "set_device(local_rank)" in f.remedies[0]


def test_out_of_memory_on_the_smaller_card_of_a_mixed_job(tmp_path: Path) -> None:
    smi = [
        "|   0  NVIDIA A100 80GB PCIe          Off | 00000000:17:00.0 Off |                    0 |",
        "| N/A   35C    P0    64W / 300W |      4MiB / 81920MiB |      0%      Default |",
        "|   1  NVIDIA RTX A6000               Off | 00000000:65:00.0 Off |                  Off |",
        "| 30%   40C    P8    21W / 300W |      1MiB / 49140MiB |      0%      Default |",
    ]
    oom = (
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 "
        "has a total capacity of 47.43 GiB of which 1.06 GiB is free. Including non-PyTorch "
        "memory, this process has 46.36 GiB memory in use."
    )
    (f,) = [f for f in _findings(tmp_path, [*smi, oom]) if f.kind == "mixed_gpu_memory"]
    assert "rank 1 (47.4 GiB) ran out of memory while the job also has 80.0 GiB cards" in f.title
    assert [line for _, line, _ in _evidence(f)] == [5, 2]
    # the same OOM on a job of equal cards is just an OOM
    same = [line.replace("81920MiB", "49140MiB") for line in smi]
    assert [f for f in _findings(tmp_path, [*same, oom]) if f.kind == "mixed_gpu_memory"] == []


def test_srun_without_kill_on_bad_exit_is_exposure_without_a_cost(tmp_path: Path) -> None:
    lines = ["+ srun --jobid 88123 bash -c 'torchrun --nproc_per_node 8 train.py'", "training ..."]
    (f,) = _findings(tmp_path, lines, "slurm-88123.out")
    assert (f.kind, f.severity, f.lost_s) == ("hang_exposure", "info", None)
    assert "srun runs without --kill-on-bad-exit" in f.title
    # with it, and nothing else said: no finding
    assert _findings(tmp_path, ["+ srun --kill-on-bad-exit=1 --jobid 88123 train.py"]) == []


def test_a_long_timeout_seen_in_a_watchdog_line(tmp_path: Path) -> None:
    line = (
        "[rank3]:[E1105 02:11:09.183 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=412, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=7200000) ran for 7200094 milliseconds before timing out."
    )
    (f,) = [f for f in _findings(tmp_path, [line]) if f.kind == "hang_exposure"]
    assert "the process-group timeout is 2.00 h" in f.title


def test_bloom_like_run_hang_exposure_in_its_own_numbers(tmp_path: Path) -> None:
    truth = generate_bloom(tmp_path)
    a = analyze([str(tmp_path)])
    (f,) = [f for f in a.findings if f.kind == "hang_exposure"]
    waited = [i.hang_s for i in truth.incidents if i.hang_s > 600]
    saved = sum(h - 600 for h in waited)
    assert f.severity == "warning"
    assert abs(f.lost_s - saved) <= 0.02 * saved
    assert abs(f.lost_gpu_hours - saved * truth.gpus / 3600) <= 0.02 * f.lost_gpu_hours
    assert "NCCL_ASYNC_ERROR_HANDLING: 0" in f.title and "30.0 min" in f.title
    assert [t for _, _, t in _evidence(f)][:2] == [
        "[default0]:NCCL_ASYNC_ERROR_HANDLING: 0",
        "[default0]:TIMEOUT(ms): 1800000",
    ]
    # and the hang that outlasted that timeout, by its last progress line
    assert f" iteration {truth.attempts[1].last_iteration:8d}/" in _evidence(f)[2][2]


def test_cuda_visible_devices_counting_otherwise_than_nvidia_smi(tmp_path: Path) -> None:
    """NCCL reports each rank's card by its CUDA index and its nvidia-smi (NVML) index: when the
    GPU CUDA_VISIBLE_DEVICES names for that CUDA index is another nvidia-smi GPU, the orders
    differ (CUDA_DEVICE_ORDER is not PCI_BUS_ID)."""
    nccl = (
        "gpu-b12:{pid}:{pid} [{d}] NCCL INFO comm 0x55d2a8c1f0a0 rank {d} nranks 2 cudaDev {d} "
        "nvmlDev {n} busId {b} commId 0x5e0c1d7a90b2f311 - Init START"
    )
    lines = [
        "+ export CUDA_VISIBLE_DEVICES=2,3",
        nccl.format(pid=90211, d=0, n=1, b="1e000"),
        nccl.format(pid=90212, d=1, n=3, b="9a000"),
    ]
    (f,) = _findings(tmp_path, lines)
    assert f.kind == "device_order"
    assert "rank 0 was given GPU 2 and runs on nvidia-smi GPU 1 (bus 1e000)" in f.title
    assert [line for _, line, _ in _evidence(f)] == [1, 2]
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in f.remedies[0]
    # CUDA_DEVICE_ORDER=PCI_BUS_ID: the indices agree, nothing to say
    agree = [
        lines[0],
        nccl.format(pid=1, d=0, n=2, b="1e000"),
        nccl.format(pid=2, d=1, n=3, b="9a000"),
    ]
    assert _findings(tmp_path, agree) == []
