"""Dumps taken of a hung job beside its logs: PyTorch Flight Recorder traces (pickle or JSON),
`py-spy dump` stacks and /proc status files, each recognized by its content and read
tolerantly (a damaged or unknown file is a warning naming it, never a traceback)."""

from __future__ import annotations

from .flight_recorder import Collective, Frame, RankTrace, read_trace
from .names import rank_from_name
from .pyspy import ProcessStack, ProcStatus, Thread, read_proc_status, read_pyspy
from .recognize import DumpKind, DumpSet, kind_of, read_dumps

__all__ = [
    "Collective",
    "DumpKind",
    "DumpSet",
    "Frame",
    "ProcStatus",
    "ProcessStack",
    "RankTrace",
    "Thread",
    "kind_of",
    "rank_from_name",
    "read_dumps",
    "read_proc_status",
    "read_pyspy",
    "read_trace",
]
