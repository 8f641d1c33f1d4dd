"""Tiny DDP job (gloo, CPU): Megatron-style log lines + a fault injected on one rank,
for the real-log fixtures in tests/fixtures/ (keep line numbers stable!).  Launch e.g.:

    torchrun --nproc_per_node 4 --tee 3 tests/lab/train.py
Environment knobs (all optional):
    LAB_ITERS           number of iterations (default 40)
    LAB_ITER_SLEEP      extra sleep per iteration in seconds (default 0.25)
    LAB_SAVE_INTERVAL   checkpoint every N iterations (default 10, 0 = never)
    LAB_CKPT_DIR        checkpoint directory (default ./checkpoints)
    LAB_RESUME          if set (non-empty, not "0"), resume from the latest checkpoint
    LAB_PG_TIMEOUT      process-group timeout in seconds (default 15)
    LAB_FAULT           none | raise | sigkill | segv | hang | hang_all | slow | nan (default none)
                        slow: from LAB_FAULT_ITER the rank sleeps LAB_SLOW_S more per iteration
                        (a degraded GPU: every rank waits for it in the all-reduce);
                        nan: at LAB_FAULT_ITER the rank's weights become NaN (the all-reduce
                        spreads them: every later loss is NaN, training goes on)
    LAB_FAULT_RANK      global rank that gets the fault (default 1)
    LAB_FAULT_ITER      iteration at which the fault fires (default 17)
    LAB_GBS             global batch size printed in the log (default 32)
    LAB_SAVE_SLEEP      extra seconds rank 0 spends saving each checkpoint (default 0)
    LAB_SLOW_S          extra seconds per iteration of the slow fault (default 0.03)
"""

# fmt: off
import ctypes
import math
import os
import signal
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def env_int(name, default):
    return int(os.environ.get(name, str(default)))


def print_datetime(string):
    # Megatron's print_datetime (v2.5): print_rank_0(f'[{string}] datetime: {time_str} ')
    time_str = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    if dist.get_rank() == 0:
        print(f"[{string}] datetime: {time_str} ", flush=True)


def latest_checkpoint(ckpt_dir):
    tracker = Path(ckpt_dir) / "latest_checkpointed_iteration.txt"
    if not tracker.exists():
        return None
    text = tracker.read_text()
    it = int(text.strip())
    path = Path(ckpt_dir) / f"iter_{it:07d}.pt"
    return (it, path) if path.exists() else None


def inject_fault(kind, it):
    if kind == "raise":
        raise ValueError(f"injected fault at iteration {it}")
    if kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
        ctypes.string_at(0)  # fallback: null dereference
    if kind in ("hang", "hang_all"):
        time.sleep(10**6)


def main():
    total = env_int("LAB_ITERS", 40)
    iter_sleep = float(os.environ.get("LAB_ITER_SLEEP", "0.25"))
    save_interval = env_int("LAB_SAVE_INTERVAL", 10)
    ckpt_dir = os.environ.get("LAB_CKPT_DIR", str(Path.cwd() / "checkpoints"))
    resume = os.environ.get("LAB_RESUME", "") not in ("", "0")
    pg_timeout = env_int("LAB_PG_TIMEOUT", 15)
    fault = os.environ.get("LAB_FAULT", "none")
    fault_rank = env_int("LAB_FAULT_RANK", 1)
    fault_iter = env_int("LAB_FAULT_ITER", 17)
    gbs = env_int("LAB_GBS", 32)

    dist.init_process_group("gloo", timeout=timedelta(seconds=pg_timeout))
    rank = dist.get_rank()
    world = dist.get_world_size()
    torch.manual_seed(1234 + rank)

    print_datetime("after torch distributed init")
    model = DDP(torch.nn.Linear(64, 64))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    print(f"rank {rank}: data loader ready (world size {world})", flush=True)

    start_it = 0
    if resume:
        found = latest_checkpoint(ckpt_dir)
        if found is not None:
            start_it, path = found
            if rank == 0:
                print(f" loading checkpoint from {ckpt_dir} at iteration {start_it}", flush=True)
            state = torch.load(path, weights_only=True)
            model.module.load_state_dict(state["model"])
            dist.barrier()
            if rank == 0:
                print(f"  successfully loaded checkpoint from {ckpt_dir} at iteration {start_it}",
                      flush=True)
        elif rank == 0:
            print(f"WARNING: could not find the metadata file {ckpt_dir}/"
                  "latest_checkpointed_iteration.txt", flush=True)
            print("    will not load any checkpoints and will start from random", flush=True)

    print_datetime("before the start of training step")
    lr_max = 1.5e-4
    for it in range(start_it + 1, total + 1):
        t0 = time.time()
        if fault != "none" and rank == fault_rank and it == fault_iter:
            if fault == "nan":
                with torch.no_grad():
                    for p in model.parameters():
                        p.fill_(float("nan"))
            elif fault != "slow":
                inject_fault(fault, it)
        if fault == "slow" and rank == fault_rank and it >= fault_iter:
            time.sleep(float(os.environ.get("LAB_SLOW_S", "0.03")))
        x = torch.randn(gbs // world, 64)
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # DDP all-reduce over gloo
        opt.step()
        lt = loss.detach().clone()
        dist.all_reduce(lt)
        time.sleep(iter_sleep)
        if rank == 0:
            ms = (time.time() - t0) * 1000.0
            lr = lr_max * 0.5 * (1 + math.cos(math.pi * it / max(total, 1)))
            gn = sum(p.grad.norm().item() ** 2 for p in model.parameters()) ** 0.5
            print(f" iteration {it:8d}/{total:8d} | consumed samples: {it * gbs:12d} | "
                  f"elapsed time per iteration (ms): {ms:.1f} | learning rate: {lr:.3E} | "
                  f"global batch size: {gbs:5d} | lm loss: {lt.item() / world:.6E} | "
                  f"loss scale: 1.0 | grad norm: {gn:.3f} | number of skipped iterations:   0 | "
                  f"number of nan iterations:   0 |", flush=True)
        if rank != 0 and it % 15 == 0:
            print(f"rank {rank}: prefetched {4} batches for iteration {it + 1}", flush=True)
        if save_interval and it % save_interval == 0:
            if rank == 0:
                print(f"saving checkpoint at iteration {it:7d} to {ckpt_dir}", flush=True)
            dist.barrier()
            if rank == 0:
                Path(ckpt_dir).mkdir(parents=True, exist_ok=True)
                torch.save({"model": model.module.state_dict(), "iteration": it},
                           Path(ckpt_dir) / f"iter_{it:07d}.pt")
                tracker = Path(ckpt_dir) / "latest_checkpointed_iteration.txt"
                tracker.write_text(str(it))
                time.sleep(float(os.environ.get("LAB_SAVE_SLEEP", "0")))  # slow save
            dist.barrier()
            if rank == 0:
                print(f"  successfully saved checkpoint at iteration {it:7d} to {ckpt_dir}",
                      flush=True)

    print_datetime("after training is done")
    dist.barrier()
    dist.destroy_process_group()
    return 0

if __name__ == "__main__":
    sys.exit(main())
