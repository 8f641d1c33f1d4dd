"""Run tests/lab/train.py as a rank that serves torch's control plane and can stop itself,
for `tail --on-hang collect`'s lab tests.  Launch e.g.:

    TORCH_WORKER_SERVER_SOCKET=/tmp/ws- TORCH_FR_BUFFER_SIZE=2000 \
        torchrun --nproc_per_node 4 --tee 3 tests/lab/served.py

- TORCH_WORKER_SERVER_SOCKET, if set, is a prefix: each rank serves
  torch.distributed.elastic.control_plane.worker_main() on <prefix><LOCAL_RANK> (one variable
  for all ranks of a node would have them bind one path);
- LAB_FAULT=stop: at LAB_FAULT_ITER the rank SIGSTOPs itself (a frozen process);
- LAB_FAULT=skip: at LAB_FAULT_ITER the rank skips its loss all-reduce. On gloo that is a crash
  when the rank's next collective has another size (`op.preamble.length <= op.nbytes`); at the
  last iteration (LAB_FAULT_ITER = LAB_ITERS) a hang: the others wait in the all-reduce, the
  rank in the final barrier;
- LAB_FAULT=other: at LAB_FAULT_ITER the rank calls all_gather where its peers call the loss
  all-reduce (a desync: each side waits for the other's collective);
- any other LAB_FAULT is train.py's own.
"""

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch.distributed as dist
import train
from torch.distributed.elastic.control_plane import worker_main

_own_fault = train.inject_fault
_all_reduce = dist.all_reduce
_skip = {"next": False}
_other = {"next": False}


def inject_fault(kind, it):
    if kind == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif kind == "skip":
        _skip["next"] = True
    elif kind == "other":
        _other["next"] = True
    else:
        _own_fault(kind, it)


def all_reduce(tensor, *args, **kwargs):
    if _skip["next"]:
        _skip["next"] = False
        return None
    if _other["next"]:
        _other["next"] = False
        parts = [tensor.clone() for _ in range(dist.get_world_size())]
        return dist.all_gather(parts, tensor)
    return _all_reduce(tensor, *args, **kwargs)


train.inject_fault = inject_fault
dist.all_reduce = all_reduce

if __name__ == "__main__":
    prefix = os.environ.get("TORCH_WORKER_SERVER_SOCKET")
    if prefix:
        os.environ["TORCH_WORKER_SERVER_SOCKET"] = prefix + os.environ.get("LOCAL_RANK", "0")
    with worker_main():
        code = train.main()
    sys.exit(code)
