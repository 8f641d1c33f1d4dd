"""What hang dumps show: each rank's last collective as its Flight Recorder trace or its
py-spy stack says, and the rank that the dumps name as the one the others wait for."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RankState:
    """One rank's row of the per-rank table of last collectives."""

    rank: int
    host: str | None
    group: str | None
    """The process group of the last collective (`0:default_pg`), None without a trace."""
    seq: int | None
    """Its `collective_seq_id`."""
    op: str | None
    """`all_reduce`, `all_gather`... (the profiling name without its backend)."""
    sizes: str | None
    """Input sizes, then output sizes when they differ, with dtypes: `[[4160]] Float`."""
    state: str | None
    """The entry's state (`scheduled`, `started`, `completed`), `retired` when so marked."""
    where: str | None
    """The user-code frame of the collective, or of the rank's stack when it is outside one."""
    process: str | None
    """What the process was doing as py-spy or /proc saw it: `in all_reduce`, `stopped (T)`."""
    source: str
    """The dump file(s) the row comes from, or `no dump`."""
    odd: bool
    """The row of the rank the dumps name."""


@dataclass(frozen=True, slots=True)
class HangDumps:
    """The dumps given beside the logs, what they say per rank, and the rank they name."""

    files: tuple[str, ...]
    rows: tuple[RankState, ...]
    culprit_rank: int | None
    confidence: float
    reason: str
    """How the dumps show it: quotes the collective (op, group, sequence, sizes) and frame."""
    kind: str | None
    """`missing` (never entered the collective or no dump), `desync_op`, `desync_sizes`,
    `desync_dtypes`, `outside` (stuck outside communication, from stacks), `stopped`."""
    evidence: tuple[tuple[str, int, str], ...] = ()
    """(file, line, text): each rank's last collective (the line is the entry's number in the
    dump, from 1) and each stack or process state that shows where a rank is."""
    warnings: tuple[str, ...] = ()
