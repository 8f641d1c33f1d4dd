"""Culprit clues from NCCL's own lines: the `host:pid:tid [dev]` head of each line names a process
(and a CUDA device, not a rank); what the same process says elsewhere gives its rank: its proxy
thread's `[Proxy Service N]`, its INFO lines in the world communicator (World.nccl_ranks), the
one rank that raised the error NCCL returned to its caller."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ..lines.decode import nccl_head
from ..match.events import TRACEBACK_START
from ..model import Culprit, Event, World
from .clues import with_rank

_PROXY_SERVICE = re.compile(r"\[Proxy Service (?P<rank>\d+)\]")
"""NCCL proxy.cc: `[Proxy Service %d] Failed to execute operation ...` with the process's own
rank (comm->rank, tpRank from 2.19: its rank in the top-level communicator)."""


def nccl_process(e: Event) -> tuple[str, str] | None:
    """The (host, pid) of the process that printed an NCCL line (`host:pid:tid [dev] `)."""
    return nccl_head(e.line.raw)


def world_ranks_of(world: World, pid: str, host: str | None) -> set[int]:
    """The ranks NCCL's INFO lines give process `pid` in the world communicator
    (World.nccl_ranks), on `host` where it is known."""
    return {r for h, p, r in world.nccl_ranks if p == pid and (host is None or h == host)}


def nccl_process_rank(root: Event, events: Sequence[Event], world: World) -> Culprit | None:
    """A root printed by NCCL (`host:pid:tid [dev]`): the rank the same process gives itself,
    in its proxy thread's `[Proxy Service N]` or in its NCCL INFO lines of the job's world
    communicator (World.nccl_ranks), where what it says names one rank."""
    process = nccl_process(root)
    if process is None:
        return None
    ranks: dict[int, str] = {}
    for e in events:
        said = _PROXY_SERVICE.search(e.line.text)
        if said and nccl_process(e) == process:
            r = int(said["rank"])
            ranks.setdefault(r, f"its proxy thread names it: [Proxy Service {r}]")
    for r in world_ranks_of(world, process[1], process[0]):
        ranks.setdefault(r, f"its NCCL INFO lines give it rank {r} of the world communicator")
    if len(ranks) != 1:
        return None
    rank, how = ranks.popitem()
    return Culprit(
        rank=rank,
        local_rank=None,
        host=process[0],
        confidence=0.75,
        reason=f"NCCL's lines of the same process ({process[0]}:{process[1]}) give its rank: {how}",
    )


NCCL_RAISED = "nccl.system_error"
"""ProcessGroupNCCL's exception for ncclSystemError (`NCCL Error 2: unhandled system error`): what
the caller of an NCCL call that failed in a system or verbs call raises."""


def raised_nccl_culprit(
    culprit: Culprit, root: Event, events: Sequence[Event], world: World
) -> Culprit:
    """An NCCL WARN of a process whose rank no line gives (`host:pid:tid [dev]` names a device)
    of its own failed call, and NCCL's system error raised by one rank only: NCCL returns the
    failed call's error to its caller, whose collective raises it, so that rank's process printed
    the WARN. Where no line shows the raise (a window cut inside the traceback), the one rank
    that says anything after the WARN, opening a traceback, is that caller."""
    if not root.signature.startswith("nccl.") or root.category not in _OWN_NCCL_FAILURES:
        return culprit
    if nccl_process(root) is None:
        return culprit
    ranks = {
        r for e in events if e.signature == NCCL_RAISED if (r := world.rank_of(e.line)) is not None
    }
    why = "alone raised the system error NCCL returned to its caller"
    if not ranks:
        after = [
            (r, e.signature)
            for e in events
            if e.seq > root.seq and (r := world.rank_of(e.line)) is not None
        ]
        if all(sig != TRACEBACK_START for _, sig in after):
            return culprit
        ranks = {r for r, _ in after}
        why = "alone failed after it (a traceback: the caller NCCL returned the error to)"
    if len(ranks) != 1:
        return culprit
    r = ranks.pop()
    return with_rank(culprit, r, None, f"rank {r} {why}", 0.6)


_OWN_NCCL_FAILURES = frozenset({"comm_error", "oom_gpu", "cuda_error"})
"""Categories of an NCCL WARN of the process's own failed call (a socket, an allocation, a
CUDA call), whose error NCCL returns to that process's caller."""


def nccl_process_culprit(
    culprit: Culprit, root: Event, events: Sequence[Event], world: World
) -> Culprit:
    """A culprit with no rank yet, named by its own process's NCCL lines (nccl_process_rank)."""
    found = nccl_process_rank(root, events, world)
    if found is None:
        return culprit
    return with_rank(culprit, found.rank, None, found.reason, found.confidence)


def nccl_pid_culprit(culprit: Culprit, root: Event, world: World) -> Culprit:
    """A launcher's report of a process by its pid (`failed (exitcode: -7) local_rank: 1 (pid:
    730)`), where no line states its global rank: the rank NCCL's own lines give the process of
    that pid (`host:730:767 [1] NCCL INFO Trees [0] 2/-1/-1->5->4`: rank 5), when they give one.
    NCCL's word is the rank's own; a local rank is the global one on a single node only."""
    pid = root.fields.get("pid")
    if not pid:
        return culprit
    ranks = world_ranks_of(world, pid, root.fields.get("host") or root.line.host)
    if len(ranks) != 1:
        return culprit
    rank = ranks.pop()
    if rank == culprit.rank:
        return culprit
    why = f"NCCL's lines of process {pid} give it rank {rank} of the world communicator"
    return replace(
        culprit,
        rank=rank,
        confidence=max(culprit.confidence, 0.8),
        reason=f"{culprit.reason}; {why}",
    )
