"""Deterministic large training logs for benchmarks: a BLOOM-like merged main_log.txt.

Many nodes x 8 ranks with `[defaultN]:` headers (no srun label, as BLOOM ran), NCCL INFO chatter,
per-rank prints and warnings, Megatron iteration lines from the last rank, checkpoint saves, and
a failure cascade near the end: one rank's CUDA error, then watchdog timeouts on the others.

    python bench/generate.py --size 100M --out bench/data/main_log_100M.txt
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    text = text.strip().upper()
    if text[-1] in _UNITS:
        return int(float(text[:-1]) * _UNITS[text[-1]])
    return int(text)


def _chatter(rng: random.Random, nodes: int, it: int) -> str:
    node = rng.randrange(nodes)
    host = f"r{node // 16}i{node % 16}n{node % 9}"
    lr = rng.randrange(8)
    pid = 250_000 + node * 10 + lr
    kind = rng.randrange(6)  # only the chosen line is formatted: 5 GB take minutes, not an hour
    if kind == 0:
        return f"{host}:{pid}:{pid + 48} [{lr}] NCCL INFO Channel {rng.randrange(32):02d}/32 :    0   1   2   3   4   5   6   7"
    if kind == 1:
        return f"{host}:{pid}:{pid + 48} [{lr}] NCCL INFO Ring {rng.randrange(32):02d} : {lr} -> {(lr + 1) % 8} via P2P/IPC"
    if kind == 2:
        return f"{host}:{pid}:{pid} [{lr}] NCCL INFO Bootstrap : Using ib0:10.148.{node}.{lr}<0>"
    if kind == 3:
        return f"[default{lr}]:[rank{node * 8 + lr}]: batch {it} tokens {rng.randrange(1 << 20)} dataloader ok"
    if kind == 4:
        return f"[default{lr}]:  warnings.warn(  # deprecated argument at step {it}"
    return f"[default{lr}]:time (ms) | forward-compute: {rng.uniform(1000, 9000):.2f} | backward-compute: {rng.uniform(1000, 9000):.2f}"


PROFILES = ("sparse", "dense", "hf", "mmengine")
"""sparse: 200 chatter lines per Megatron iteration line (0.5% of lines are candidates); dense:
30 per iteration line (log interval 1, ~3% of lines); hf: an HF Trainer run logging every step
(`logging_steps=1`): a tqdm bar and a loss dict per step among 20 chatter lines; mmengine: an
OpenMMLab runner logging every step (`LoggerHook(interval=1)`) among 4 chatter lines (~20% of lines
are candidates), its step line holding words other signatures trigger on (`eta: `, `  time: `)."""
_CHATTER = {"sparse": 200, "dense": 30, "hf": 20, "mmengine": 4}


def _hf_step(rng: random.Random, it: int, total: int = 200_000) -> str:
    """One step of an HF Trainer run with logging_steps=1, stdout and stderr in one file: tqdm
    redraws its bar (`\r` states), and tqdm.write clears it (`\r`, blanks, `\r`) before the
    Trainer's loss dict."""
    pct = it * 100 // total
    bar = "█" * (pct // 10) + " " * (10 - pct // 10)
    state = (
        f"{pct:3d}%|{bar}| {it}/{total} [1:{it % 60:02d}:{it % 60:02d}<40:00:00,  "
        f"{rng.uniform(1.3, 1.5):.2f}it/s]"
    )
    return (
        f"\r{state}\r{' ' * len(state)}\r{{'loss': {rng.uniform(1, 3):.4f}, "
        f"'grad_norm': {rng.uniform(0.5, 2):.6f}, 'learning_rate': 4.9e-05, "
        f"'epoch': {it / 10_000:.2f}}}"
    )


def _mmengine_step(rng: random.Random, it: int, per_epoch: int = 5000) -> str:
    """One step line of mmengine's LoggerHook (mmengine/runner/log_processor.py): the local time,
    the logger's name and level, then `Epoch(train) [epoch][iter/iters]` and its tags."""
    epoch, step = it // per_epoch + 1, it % per_epoch + 1
    stamp = f"2023/06/{12 + it // 86_400 % 18:02d} {it // 3600 % 24:02d}:{it // 60 % 60:02d}:{it % 60:02d}"
    return (
        f"{stamp} - mmengine - INFO - Epoch(train) [{epoch}][{step:4d}/{per_epoch}]  "
        f"lr: 4.0000e-04  eta: 1 day, 2:13:{it % 60:02d}  time: {rng.uniform(0.3, 0.5):.4f}  "
        f"data_time: 0.0034  memory: 9870  loss: {rng.uniform(0.5, 2):.4f}"
    )


def generate(
    out: Path, size: int, nodes: int = 48, seed: int = 1, profile: str = "sparse"
) -> dict[str, int]:
    """Write about `size` bytes; return the truth the benchmark can check."""
    chatter = _CHATTER[profile]
    rng = random.Random(seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    it = 0
    lines: list[str] = []
    fail_at = int(size * 0.97)
    culprit = 8 * 17 + 3
    with out.open("w") as f:
        f.write("START TIME: Mon Mar 21 08:00:00 CET 2022\n")
        while written < fail_at:
            it += 1
            lines.extend(_chatter(rng, nodes, it) for _ in range(chatter))
            if profile == "hf":
                lines.append(_hf_step(rng, it))
            elif profile == "mmengine":
                lines.append(_mmengine_step(rng, it))
            else:
                lines.append(
                    f"[default7]: iteration {it:8d}/  115311 | consumed samples: {it * 2048:12d} | "
                    f"consumed tokens: {it * 2048 * 2048:12d} | elapsed time per iteration (s): "
                    f"{rng.uniform(104, 107):.2f} | learning rate: 5.969E-05 | global batch size:  2048 "
                    f"| lm loss: {rng.uniform(2, 3):.6E} | grad norm: 0.174 | num zeros: 0.0 | number of "
                    "skipped iterations:   0 | number of nan iterations:   0 | samples per second: "
                    "19.463 | TFLOPs: 149.02 |"
                )
            if it % 100 == 0 and profile == "hf":
                lines.append(f"Saving model checkpoint to /ckpt/checkpoint-{it}")
            elif it % 100 == 0:
                lines.append(f"[default0]:saving checkpoint at iteration {it:7d} to /ckpt/main")
                lines.append(
                    f"[default0]:  successfully saved checkpoint at iteration {it:7d} to /ckpt/main"
                )
                lines.append(
                    f"[default7]:time (ms) | save-checkpoint: {rng.uniform(39000, 41000):.2f}"
                )
            chunk = "\n".join(lines) + "\n"
            f.write(chunk)
            written += len(chunk)
            lines.clear()
        lr = culprit % 8
        f.write(
            f"[default{lr}]:terminate called after throwing an instance of 'c10::CUDAError'\n"
            f"[default{lr}]:  what():  CUDA error: unknown error\n"
            f"[default{lr}]:frame #1: c10d::ProcessGroupNCCL::WorkNCCL::finishedGPUExecutionInternal() const + 0x11a (0x15190c6c29ea in /lib/libtorch_cuda_cpp.so)\n"
        )
        for r in range(nodes * 8):
            if r == culprit:
                continue
            f.write(
                f"[default{r % 8}]:[E ProcessGroupNCCL.cpp:458] [Rank {r}] Watchdog caught collective "
                f"operation timeout: WorkNCCL(SeqNum={it * 7}, OpType=ALLREDUCE, Timeout(ms)=1800000) "
                "ran for 1800648 milliseconds before timing out.\n"
            )
    return {"iterations": it, "culprit_local_rank": culprit % 8}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="100M")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--nodes", type=int, default=48)
    ap.add_argument("--profile", choices=PROFILES, default="sparse")
    args = ap.parse_args()
    truth = generate(args.out, parse_size(args.size), args.nodes, profile=args.profile)
    print(truth)


if __name__ == "__main__":
    main()
