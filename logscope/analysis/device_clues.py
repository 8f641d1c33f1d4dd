"""The culprit from the GPU an out-of-memory error names, where no prefix names the process.

The launchers that start one process per GPU (torchrun, torch.distributed.launch, DeepSpeed's and
accelerate's launchers, Paddle's) give each process its local rank, and by convention the process
binds the device of that index (`torch.cuda.set_device(local_rank)`, Paddle's
`FLAGS_selected_gpus`). An OOM report states the device it could not allocate on: PyTorch's
caching allocator `CUDA out of memory. Tried to allocate X (GPU N; ...)`, Paddle's `Out of memory
error on GPU N`. So in a job of several processes, device N is local rank N. Device 0 says
nothing: a process that sees only its own GPU (Slurm's per-task binding, a container) calls it 0
whatever its rank. Nor does one process: a DataParallel or `device_map` model spans several
devices from a single rank.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Culprit, Event, Stream, World, field_int
from .clues import prefixed, with_rank
from .launcher_clues import kill_list_ranks

DEVICE_FIELDS = ("gpu", "device")
"""The fields an OOM signature captures its device index in."""


def oom_device(e: Event) -> int | None:
    """The device index a GPU out-of-memory report names."""
    if e.category != "oom_gpu":
        return None
    return next((d for f in DEVICE_FIELDS if (d := field_int(e, f)) is not None), None)


def _several_processes(events: Sequence[Event], world: World) -> str | None:
    """What says the job ran several processes, or None: the world's size or ranks, a launcher's
    kill list of two workers or more, OOM reports naming two devices (one process's exception
    ends it: a second device's report is another process's)."""
    if (world.size or 0) > 1 or (world.declared_size or 0) > 1 or len(world.ranks) > 1:
        return "the job runs several ranks"
    if len(kill_list_ranks(events)) > 1:
        return "the launcher's kill list names several workers"
    devices = {d for e in events if (d := oom_device(e)) is not None}
    if len(devices) > 1:
        return "OOM reports name several devices, one process each"
    return None


def device_culprit(culprit: Culprit, root: Event, events: Sequence[Event], world: World) -> Culprit:
    """Local rank N for an OOM on device N > 0 with no prefix, in a job of several processes;
    its rank where the job runs on one node."""
    device = oom_device(root)
    if device is None or device == 0:
        return culprit
    if prefixed(root.line):
        return culprit
    several = _several_processes(events, world)
    if several is None:
        return culprit
    rank = world.rank_of_stream(Stream(None, root.line.host, device, None))
    why = (
        f"the OOM names GPU {device} and {several}: a launcher's process binds the device of its"
        f" local rank, so it is local rank {device}"
        + (f", rank {rank} on one node" if rank is not None else "")
    )
    return with_rank(culprit, rank, device, why, 0.6)
