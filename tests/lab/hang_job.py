"""A 4-rank gloo job that hangs one way, with PyTorch's Flight Recorder on, for the hang
fixtures (tests/lab/run_hangs.py runs it under torchrun).

Each iteration all-reduces a gradient-like tensor (what DDP does) and rank 0 prints a
Megatron-style line. At HANG_ITER, rank HANG_RANK does HANG_KIND:

    skip       skips the all-reduce (its batch was empty) and waits for the next batch on a
               queue that never fills
    different  calls all_gather where its peers call all_reduce
    sizes      all-reduces a tensor twice the size (gloo's ring then aborts its right-hand
               neighbour, which receives more than it expects: the log blames that one)
    compute    sleeps in its compute step (HANG_HOW=sleep) or blocks on a lock (HANG_HOW=lock)
    sigstop    stops itself with SIGSTOP

Flight Recorder dumps: torch 2.13 dumps on a watchdog timeout for NCCL only
(TORCH_NCCL_DUMP_ON_TIMEOUT; gloo has no watchdog). So this script does what NCCL's does:
a rank whose collective times out (or fails) dumps its trace and writes a flag in the job's
TCPStore, and a daemon thread on every rank that sees it writes that rank's trace with the public
`torch._C._distributed_c10d._dump_fr_trace()` (pickle) or `_dump_fr_trace_json()` (JSON,
HANG_FR_JSON=1) to `$TORCH_FR_DUMP_TEMP_FILE<rank>` (HANG_FR_NAME may put the host in the
name: `{prefix}{host}-rank{rank}`). A rank that is stopped writes nothing.

Every rank writes its pid to $HANG_OUT/pids/<rank> for the runner's py-spy.
"""

# fmt: off
import os
import queue
import signal
import socket
import threading
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _dump_fr_trace, _dump_fr_trace_json
from torch.distributed import distributed_c10d

KIND = os.environ.get("HANG_KIND", "none")
HOW = os.environ.get("HANG_HOW", "sleep")
HANG_RANK = int(os.environ.get("HANG_RANK", "2"))
HANG_ITER = int(os.environ.get("HANG_ITER", "6"))
ITERS = int(os.environ.get("HANG_ITERS", "20"))
TIMEOUT_S = float(os.environ.get("HANG_PG_TIMEOUT", "20"))
OUT = Path(os.environ.get("HANG_OUT", "."))
FLAG = "fr_dump_on_timeout"


def dump_path(rank):
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE", str(OUT / "nccl_trace_rank_"))
    if os.environ.get("HANG_FR_NAME") == "host":
        return f"{prefix}{socket.gethostname()}-rank{rank}"
    return f"{prefix}{rank}"


DUMPED = threading.Event()


def write_dump(rank):
    if DUMPED.is_set():
        return
    DUMPED.set()
    data = _dump_fr_trace_json() if os.environ.get("HANG_FR_JSON") == "1" else _dump_fr_trace()
    path = Path(dump_path(rank))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.rename(path)
    print(f"[rank{rank}]: Flight Recorder trace written to {path}", flush=True)


def dump_when_flagged(store, rank):
    while True:
        try:
            if store.check([FLAG]):
                write_dump(rank)
                return
        except Exception as err:  # the store went away
            print(f"[rank{rank}]: Flight Recorder dump thread: {err}", flush=True)
            return
        time.sleep(0.2)


def step(rank, it, grad, batches, lock):
    """One iteration's communication; HANG_RANK misbehaves at HANG_ITER."""
    if rank == HANG_RANK and it == HANG_ITER:
        print(f"[rank{rank}]: hang fault {KIND} at iteration {it}", flush=True)
        if KIND == "skip":
            batch = batches.get()  # the empty batch's successor never comes
            del batch
        elif KIND == "different":
            out = [torch.zeros_like(grad) for _ in range(dist.get_world_size())]
            dist.all_gather(out, grad)
            return
        elif KIND == "sizes":
            dist.all_reduce(torch.ones(grad.numel() * 2))
            return
        elif KIND == "compute" and HOW == "lock":
            lock.acquire()  # held by the checkpoint thread, which never lets go
        elif KIND == "compute":
            time.sleep(10**6)
        elif KIND == "sigstop":
            os.kill(os.getpid(), signal.SIGSTOP)
    dist.all_reduce(grad)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=TIMEOUT_S))
    rank = dist.get_rank()
    (OUT / "pids").mkdir(parents=True, exist_ok=True)
    (OUT / "pids" / str(rank)).write_text(str(os.getpid()))
    store = distributed_c10d._get_default_store()
    threading.Thread(target=dump_when_flagged, args=(store, rank), daemon=True).start()
    lock = threading.Lock()
    lock.acquire()  # a lock another thread would hold
    batches = queue.Queue()
    model = torch.nn.Linear(64, 64)
    t0 = time.time()
    try:
        for it in range(1, ITERS + 1):
            loss = model(torch.randn(8, 64)).pow(2).mean()
            loss.backward()
            grad = torch.cat([p.grad.flatten() for p in model.parameters()])
            step(rank, it, grad, batches, lock)
            model.zero_grad()
            time.sleep(0.1)
            if rank == 0:
                ms = (time.time() - t0) * 1000
                t0 = time.time()
                print(
                    f" iteration {it:8d}/{ITERS:8d} | consumed samples: {it * 32:12d} |"
                    f" elapsed time per iteration (ms): {ms:.1f} | lm loss: {loss.item():.6E} |",
                    flush=True,
                )
    except Exception:
        write_dump(rank)  # what NCCL's watchdog does on a timeout: dump, and tell the others
        store.set(FLAG, str(rank))
        time.sleep(3)  # the others' dump threads see the flag
        raise
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
