"""The rank a hung job waits for, from constructed Flight Recorder traces, py-spy stacks and
process states: one test per rule (each seen failing under a break of its rule)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from logscope.analysis.hung_rank import name_hung_rank
from logscope.dumps import DumpSet, read_dumps
from logscope.dumps.recognize import sniff

USER = "/home/u/proj/train.py"
TORCH = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def entry(
    seq: int,
    op: str = "all_reduce",
    size: int = 1024,
    dtype: str = "Float",
    line: int = 40,
    group: tuple[str, str] = ("0", "default_pg"),
    backend: str = "nccl",
) -> dict[str, Any]:
    """A Flight Recorder entry with the keys torch 2.13's dump (format 2.10) writes."""
    out_sizes = [[4, size]] if op == "all_gather" else [[size]]
    return {
        "frames": [
            {"name": op, "filename": TORCH, "line": 3245},
            {"name": "step", "filename": USER, "line": line},
        ],
        "record_id": seq - 1,
        "pg_id": 0,
        "process_group": group,
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": f"{backend}:{op}",
        "time_created_ns": 1_700_000_000_000_000_000 + seq,
        "input_sizes": [[size]],
        "input_dtypes": [dtype],
        "output_sizes": out_sizes,
        "output_dtypes": [dtype],
        "state": "completed",
        "retired": True,
        "timeout_ms": 600000,
        "is_p2p": False,
    }


def dump(entries: list[dict[str, Any]], world: int = 4) -> dict[str, Any]:
    return {
        "version": "2.10",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}},
        "pg_status": {"0": {"last_completed_collective": len(entries)}},
        "entries": entries,
    }


def write(tmp: Path, name: str, content: dict[str, Any], as_json: bool = False) -> Path:
    p = tmp / name
    if as_json:
        p.write_text(json.dumps(content))
    else:
        p.write_bytes(pickle.dumps(content, protocol=2))
    return p


def read(paths: list[Path]) -> DumpSet:
    files = [(str(p), k) for p in paths if (k := sniff(str(p))) is not None]
    assert len(files) == len(paths), "every dump recognized by content"
    return read_dumps(files)


def healthy(n: int) -> list[dict[str, Any]]:
    return [entry(s) for s in range(1, n + 1)]


def test_a_rank_in_another_collective_is_the_desync(tmp_path: Path) -> None:
    paths = [write(tmp_path, f"nccl_trace_rank_{r}", dump(healthy(6))) for r in (0, 1, 3)]
    paths.append(
        write(tmp_path, "nccl_trace_rank_2", dump([*healthy(5), entry(6, "all_gather", line=55)]))
    )
    hang = name_hung_rank(read(paths))
    assert hang is not None and hang.culprit_rank == 2 and hang.kind == "desync_op"
    assert "collective 6 of process group 0:default_pg" in hang.reason
    assert "all_gather" in hang.reason and "train.py:55 in step" in hang.reason
    assert [r.rank for r in hang.rows if r.odd] == [2]


def test_a_rank_with_other_sizes_is_the_desync(tmp_path: Path) -> None:
    paths = [write(tmp_path, f"nccl_trace_rank_{r}", dump(healthy(6))) for r in (0, 2, 3)]
    paths.append(write(tmp_path, "nccl_trace_rank_1", dump([*healthy(5), entry(6, size=2048)])))
    hang = name_hung_rank(read(paths))
    assert hang is not None and hang.culprit_rank == 1 and hang.kind == "desync_sizes"
    assert "[[2048]]" in hang.reason and "[[1024]]" in hang.reason


def test_a_rank_with_other_dtypes_is_the_desync(tmp_path: Path) -> None:
    paths = [write(tmp_path, f"nccl_trace_rank_{r}", dump(healthy(4))) for r in (0, 1, 2)]
    paths.append(
        write(tmp_path, "nccl_trace_rank_3", dump([*healthy(3), entry(4, dtype="BFloat16")]))
    )
    hang = name_hung_rank(read(paths))
    assert hang is not None and hang.culprit_rank == 3 and hang.kind == "desync_dtypes"


def test_a_rank_one_collective_behind_never_entered_it(tmp_path: Path) -> None:
    paths = [write(tmp_path, f"nccl_trace_rank_{r}", dump(healthy(9))) for r in (0, 1, 2)]
    paths.append(write(tmp_path, "nccl_trace_rank_3", dump(healthy(8))))
    hang = name_hung_rank(read(paths))
    assert hang is not None and hang.culprit_rank == 3 and hang.kind == "missing"
    assert "never entered collective 9" in hang.reason and "its last is collective 8" in hang.reason


def test_a_rank_without_a_dump_is_named_when_the_others_agree(tmp_path: Path) -> None:
    paths = [write(tmp_path, f"nccl_trace_rank_{r}", dump(healthy(7))) for r in (0, 2, 3)]
    hang = name_hung_rank(read(paths))
    assert hang is not None and hang.culprit_rank == 1
    assert "left no dump" in hang.reason
    assert next(r for r in hang.rows if r.rank == 1).source == "no dump"


def test_most_ranks_without_a_dump_single_none_out(tmp_path: Path) -> None:
    paths = [write(tmp_path, "nccl_trace_rank_0", dump(healthy(7)))]
    hang = name_hung_rank(read(paths))
    assert hang is not None and hang.culprit_rank is None


def test_ranks_in_step_name_no_one(tmp_path: Path) -> None:
    paths = [write(tmp_path, f"nccl_trace_rank_{r}", dump(healthy(5))) for r in range(4)]
    hang = name_hung_rank(read(paths))
    assert hang is not None and hang.culprit_rank is None and len(hang.rows) == 4


def test_a_desync_in_a_subgroup_is_found(tmp_path: Path) -> None:
    tp = ("1", "tp")
    base = healthy(3)
    paths = [
        write(
            tmp_path, f"nccl_trace_rank_{r}", dump([*base, entry(1, group=tp), entry(2, group=tp)])
        )
        for r in (0, 1, 2)
    ]
    odd = [*base, entry(1, group=tp), entry(2, "all_gather", group=tp)]
    paths.append(write(tmp_path, "nccl_trace_rank_3", dump(odd)))
    hang = name_hung_rank(read(paths))
    assert hang is not None and hang.culprit_rank == 3 and "process group 1:tp" in hang.reason


PYSPY = """Process {pid}: /usr/bin/python -u train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread {pid} (idle): "MainThread"
{frames}
Thread {tid} (idle): "Thread-1 (loader)"
    run (threading.py:982)
"""
IN_ALL_REDUCE = (
    "    all_reduce (torch/distributed/distributed_c10d.py:3252)\n"
    "    wrapper (torch/distributed/c10d_logger.py:83)\n"
    "    step (train.py:40)\n"
    "    main (train.py:80)"
)
IN_COMPUTE = "    forward (model.py:120)\n    step (train.py:33)\n    main (train.py:80)"


def test_concatenated_py_spy_dumps_take_ranks_from_headers(tmp_path: Path) -> None:
    text = ""
    for r in range(4):
        frames = IN_COMPUTE if r == 3 else IN_ALL_REDUCE
        text += f"==> rank{r} <==\n" + PYSPY.format(pid=100 + r, tid=200 + r, frames=frames)
    p = tmp_path / "stacks.txt"
    p.write_text(text)
    hang = name_hung_rank(read([p]))
    assert hang is not None and hang.culprit_rank == 3


# deepspeed 0.16.4 (its lines): a ZeRO-3 parameter gather under a module's forward hook
IN_ZERO_GATHER = (
    "    all_gather_coalesced (deepspeed/runtime/zero/partition_parameters.py:1261)\n"
    "    fetch_sub_module (deepspeed/runtime/zero/partitioned_param_coordinator.py:314)\n"
    "    _pre_forward_module_hook (deepspeed/runtime/zero/parameter_offload.py:292)\n"
    "    forward (model.py:120)\n"
    "    main (train.py:80)"
)


@pytest.mark.parametrize(
    ("waiting", "odd", "call"),
    [(IN_ALL_REDUCE, 1, "all_reduce"), (IN_ZERO_GATHER, 2, "all_gather_coalesced")],
    ids=["c10d", "zero-3-gather"],
)
def test_py_spy_names_the_rank_outside_communication(
    tmp_path: Path, waiting: str, odd: int, call: str
) -> None:
    paths = []
    for r in range(4):
        frames = IN_COMPUTE if r == odd else waiting
        p = tmp_path / f"rank{r}.txt"
        p.write_text(PYSPY.format(pid=100 + r, tid=200 + r, frames=frames))
        paths.append(p)
    hang = name_hung_rank(read(paths))
    assert hang is not None and hang.culprit_rank == odd and hang.kind == "outside", hang
    assert "model.py:120 in forward" in hang.reason and f"in {call}" in hang.reason


STATUS = "Name:\tpython\nUmask:\t0022\nState:\t{state}\nTgid:\t{pid}\nPid:\t{pid}\nPPid:\t1\n"


def test_a_stopped_process_is_named_from_its_state(tmp_path: Path) -> None:
    paths = [write(tmp_path, f"nccl_trace_rank_{r}", dump(healthy(7))) for r in (0, 1, 3)]
    for r in range(4):
        state = "T (stopped)" if r == 2 else "S (sleeping)"
        p = tmp_path / f"rank{r}.status"
        p.write_text(STATUS.format(state=state, pid=100 + r))
        paths.append(p)
    stopped = tmp_path / "rank2.txt"
    stopped.write_text(
        "Process 102: /usr/bin/python -u train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
        "Error: Failed to suspend process\nReason: unexpected waitpid result\n"
    )
    paths.append(stopped)
    hang = name_hung_rank(read(paths))
    assert hang is not None and hang.culprit_rank == 2 and hang.kind == "stopped"
    assert "State: T (stopped)" in hang.reason and "Failed to suspend process" in hang.reason
    assert hang.confidence >= 0.9
