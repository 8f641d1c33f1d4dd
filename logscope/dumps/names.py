"""Rank and host from a dump's file name: torch names a Flight Recorder dump `<prefix><rank>`
(`TORCH_FR_DUMP_TEMP_FILE`, default `nccl_trace_rank_`); collectors add the host
(`trace-node01-rank3`) or an extension (`.json`, `.txt`, `.status`)."""

from __future__ import annotations

import re
from pathlib import PurePath

_EXTENSIONS = re.compile(r"(?:\.(?:json|pkl|pickle|txt|status|log|out|dump|trace))+$", re.I)
_RANK_WORD = re.compile(r"rank[-_.]?(?P<rank>\d+)$", re.I)
_TRAILING = re.compile(r"(?P<rank>\d+)$")
_HOST_BEFORE = re.compile(
    r"(?:^|[-_.])(?P<host>[A-Za-z0-9]*\d[A-Za-z0-9]*(?:-[A-Za-z0-9]*\d[A-Za-z0-9]*)*)"
    r"[-_.]rank[-_.]?\d+$"
)
"""`<prefix>-node01-rank3`, `<prefix>.gpu12.rank_3`: the dash-joined tokens that hold a digit
just before the `rank<N>` word (the default prefix's words, `nccl_trace_`, hold none; a host
whose name starts with a word without a digit, `ip-10-0-3-7`, keeps only its numbered part)."""


def stem(path: str) -> str:
    return _EXTENSIONS.sub("", PurePath(path).name)


def rank_from_name(path: str) -> int | None:
    """`rank<N>` at the end of the name, else the number the name ends with (`<prefix><rank>`)."""
    name = stem(path)
    m = _RANK_WORD.search(name) or _TRAILING.search(name)
    return int(m.group("rank")) if m else None


def host_from_name(path: str) -> str | None:
    m = _HOST_BEFORE.search(stem(path))
    return m.group("host") if m else None
