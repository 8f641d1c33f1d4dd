"""PyTorch Flight Recorder traces, read tolerantly into frozen records.

A trace is what `torch._C._distributed_c10d._dump_fr_trace()` (pickle) or `_dump_fr_trace_json()`
writes per rank, and what the NCCL watchdog writes on a timeout to
`$TORCH_FR_DUMP_TEMP_FILE<rank>` (formerly `TORCH_NCCL_DEBUG_INFO_TEMP_FILE`): a dict with
`version` (the dump format, "2.10" in torch 2.13), `pg_config` ({pg name: {name, desc, ranks}}),
`pg_status` ({pg id: last enqueued/started/completed collective}) and `entries`, one per
collective or p2p op: `process_group` (name, desc), `collective_seq_id`, `p2p_seq_id`,
`profiling_name` (`nccl:all_reduce`, `gloo:all_gather`), `input_sizes`, `output_sizes`,
`input_dtypes`, `output_dtypes`, `state` (`scheduled`, `started`, `completed`), `retired`,
`frames` ([{name, filename, line}], pickle only), `time_created_ns`, `is_p2p`. These are the keys
torch's own analyzer (torch/distributed/flight_recorder/components) reads; a key an older
format lacks (dtypes, pg_status, retired, is_p2p, frames) is left None, and `seq_id` (formats
before `collective_seq_id`) is read as the collective sequence.

Pickles are untrusted input: the unpickler builds dicts, lists, tuples, strings, numbers,
booleans and None, and refuses any class or function a pickle names."""

from __future__ import annotations

import io
import json
import pickle
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .names import host_from_name, rank_from_name


@dataclass(frozen=True, slots=True)
class Frame:
    name: str
    file: str
    line: int | None

    def label(self) -> str:
        short = self.file.rsplit("/", 1)[-1]
        return f"{short}:{self.line} in {self.name}" if self.line is not None else short


@dataclass(frozen=True, slots=True)
class Collective:
    """One Flight Recorder entry."""

    index: int
    """Its position in the dump's `entries` (0-based)."""
    group: str
    """The process group's name (`0`, or a hash for split groups)."""
    group_desc: str
    seq: int | None
    """`collective_seq_id`: the n-th collective of this rank in this group; 0 for p2p ops."""
    p2p_seq: int | None
    backend: str
    op: str
    """`all_reduce`, `send 1->2`: the profiling name without its backend."""
    input_sizes: tuple[tuple[int, ...], ...]
    output_sizes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    output_dtypes: tuple[str, ...]
    state: str | None
    retired: bool | None
    is_p2p: bool
    frames: tuple[Frame, ...]
    time_created_ns: int | None

    @property
    def group_label(self) -> str:
        desc = self.group_desc
        return f"{self.group}:{desc}" if desc and desc != "undefined" else self.group

    def sizes_text(self) -> str:
        out = _sizes(self.input_sizes)
        if self.output_sizes != self.input_sizes:
            out += f" -> {_sizes(self.output_sizes)}"
        dtypes = sorted(set(self.input_dtypes) | set(self.output_dtypes))
        return f"{out} {'/'.join(dtypes)}" if dtypes else out


def _sizes(sizes: tuple[tuple[int, ...], ...]) -> str:
    return "[" + ", ".join("[" + ", ".join(map(str, s)) + "]" for s in sizes) + "]"


@dataclass(frozen=True, slots=True)
class RankTrace:
    path: str
    rank: int | None
    """From the file name (`<prefix><rank>`, `...rank<N>`): a trace does not say its rank."""
    host: str | None
    version: str | None
    entries: tuple[Collective, ...]
    groups: Mapping[str, tuple[int, ...]]
    """Process group name -> its global ranks (`pg_config`)."""
    completed: Mapping[str, int]
    """Process group id -> `last_completed_collective` (`pg_status`), where the dump has it."""


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused to load {module}.{name}: not a plain-data pickle")


def _load(data: bytes) -> Any:
    if data.lstrip()[:1] == b"{":
        return json.loads(data)
    return _SafeUnpickler(io.BytesIO(data)).load()


def read_trace(path: str, data: bytes) -> tuple[RankTrace | None, list[str]]:
    """A trace from a file's bytes, or None and a warning naming the file."""
    try:
        dump = _load(data)
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError) as err:
        what = "truncated" if isinstance(err, EOFError) or "truncated" in str(err) else "unreadable"
        return None, [f"{path}: Flight Recorder dump {what}, left out: {_short(err)}"]
    except (MemoryError, RecursionError):
        return None, [f"{path}: Flight Recorder dump too large or too deep to read, left out"]
    if not isinstance(dump, dict) or not isinstance(dump.get("entries"), list):
        return None, [f"{path}: not a Flight Recorder dump (no list of entries), left out"]
    warnings: list[str] = []
    entries: list[Collective] = []
    for i, raw in enumerate(dump["entries"]):
        entry = _entry(i, raw)
        if entry is None:
            warnings.append(f"{path}: Flight Recorder entry {i} unreadable, left out")
        else:
            entries.append(entry)
    rank = rank_from_name(path)
    if rank is None:
        warnings.append(f"{path}: no rank in the file name (`<prefix><rank>`): its rank is unknown")
    trace = RankTrace(
        path,
        rank,
        host_from_name(path),
        _str(dump.get("version")),
        tuple(entries),
        MappingProxyType(_groups(dump.get("pg_config"))),
        MappingProxyType(_completed(dump.get("pg_status"))),
    )
    return trace, warnings


def _short(err: BaseException) -> str:
    text = str(err) or type(err).__name__
    return text if len(text) < 160 else text[:157] + "..."


def _entry(index: int, raw: object) -> Collective | None:
    if not isinstance(raw, dict):
        return None
    name = _str(raw.get("profiling_name")) or ""
    backend, _, op = name.partition(":")
    if not op:
        backend, op = "", name
    pg = raw.get("process_group")
    group, desc = ("", "")
    if isinstance(pg, list | tuple) and len(pg) >= 2:
        group, desc = str(pg[0]), str(pg[1])
    elif "pg_id" in raw:
        group = str(raw["pg_id"])
    seq = _int(raw.get("collective_seq_id", raw.get("seq_id")))
    return Collective(
        index=index,
        group=group,
        group_desc=desc,
        seq=seq,
        p2p_seq=_int(raw.get("p2p_seq_id")),
        backend=backend,
        op=op,
        input_sizes=_shapes(raw.get("input_sizes")),
        output_sizes=_shapes(raw.get("output_sizes")),
        input_dtypes=_strs(raw.get("input_dtypes")),
        output_dtypes=_strs(raw.get("output_dtypes")),
        state=_str(raw.get("state")),
        retired=raw["retired"] if isinstance(raw.get("retired"), bool) else None,
        is_p2p=bool(raw.get("is_p2p", op.split(" ")[0] in ("send", "recv"))),
        frames=_frames(raw.get("frames")),
        time_created_ns=_int(raw.get("time_created_ns")),
    )


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return None


def _strs(value: object) -> tuple[str, ...]:
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return ()


def _shapes(value: object) -> tuple[tuple[int, ...], ...]:
    if not isinstance(value, list | tuple):
        return ()
    return tuple(
        tuple(d for d in (_int(x) for x in shape) if d is not None)
        for shape in value
        if isinstance(shape, list | tuple)
    )


def _frames(value: object) -> tuple[Frame, ...]:
    if not isinstance(value, list | tuple):
        return ()
    return tuple(
        Frame(str(f.get("name", "?")), str(f.get("filename", "?")), _int(f.get("line")))
        for f in value
        if isinstance(f, dict)
    )


def _groups(value: object) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    if not isinstance(value, dict):
        return out
    for key, cfg in value.items():
        if not isinstance(cfg, dict):
            continue
        ranks = cfg.get("ranks")
        if isinstance(ranks, str):  # `'[0, 1, 2, 3]'`, as torch writes it
            ranks = [
                r for r in (_int(x.strip()) for x in ranks.strip("[] ").split(",")) if r is not None
            ]
        if isinstance(ranks, list | tuple):
            out[str(cfg.get("name", key)) or str(key)] = tuple(
                r for r in ranks if isinstance(r, int)
            )
    return out


def _completed(value: object) -> dict[str, int]:
    out: dict[str, int] = {}
    if isinstance(value, dict):
        for key, status in value.items():
            if (
                isinstance(status, dict)
                and (n := _int(status.get("last_completed_collective"))) is not None
            ):
                out[str(key)] = n
    return out


def user_frame(frames: Sequence[Frame]) -> Frame | None:
    """The innermost frame of the program's own code: not in an installed package or the
    standard library (a full path under site-packages, dist-packages or lib/pythonX.Y, as
    Flight Recorder writes them), nor, for the paths py-spy shortens to a module's
    (`torch/distributed/distributed_c10d.py`, `threading.py`), in torch or a standard module."""
    for f in frames:  # innermost first, as torch and py-spy list them
        path = f.file
        if "site-packages/" in path or "dist-packages/" in path or "/lib/python3" in path:
            continue
        top = path.split("/", 1)[0].removesuffix(".py")
        if not path.startswith("/") and (top == "torch" or top in sys.stdlib_module_names):
            continue
        if path.startswith("<"):
            continue
        return f
    return frames[0] if frames else None
