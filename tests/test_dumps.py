"""Dumps told apart from logs by content, and read tolerantly: truncated, hostile, JSON or
pickle, named with a host, a custom prefix or an extension."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from logscope.dumps import kind_of, rank_from_name, read_dumps, read_trace
from logscope.dumps.names import host_from_name
from logscope.dumps.recognize import sniff
from tests.test_hung_rank import dump, entry, healthy


def test_pickle_and_json_dumps_read_alike() -> None:
    content = dump([*healthy(3), entry(4, "all_gather")])
    p, _ = read_trace("a/nccl_trace_rank_2", pickle.dumps(content, protocol=2))
    j, _ = read_trace("a/fr_rank2.json", json.dumps(content).encode())
    assert p is not None and j is not None
    assert p.entries == j.entries and p.rank == j.rank == 2
    assert p.entries[-1].op == "all_gather" and p.entries[-1].seq == 4
    assert dict(p.groups) == {"0": (0, 1, 2, 3)}


def test_recognized_by_content_not_by_name() -> None:
    content = dump(healthy(2))
    assert kind_of(pickle.dumps(content, protocol=2)[:65536]) == "flight_recorder"
    assert kind_of(json.dumps(content).encode()) == "flight_recorder"
    assert kind_of(b"Process 12: python train.py\nPython v3.11.7 (/usr/bin/python3)\n") == "pyspy"
    assert kind_of(b"Name:\tpython\nState:\tT (stopped)\nPid:\t12\n") == "proc_status"
    # a log that mentions entries or py-spy is a log
    assert kind_of(b'[rank0]: {"entries": 3}\n') is None
    assert kind_of(b"[default0]: Process 12: started\n iteration 1/ 10 |\n") is None
    assert kind_of(pickle.dumps({"weights": [1, 2]}, protocol=2)) is None


def test_a_truncated_dump_is_a_warning_naming_the_file(tmp_path: Path) -> None:
    data = pickle.dumps(dump(healthy(5)), protocol=2)
    p = tmp_path / "nccl_trace_rank_1"
    p.write_bytes(data[: len(data) // 2])
    j = tmp_path / "nccl_trace_rank_2.json"
    j.write_text(json.dumps(dump(healthy(5)))[:200])
    got = read_dumps([(str(p), "flight_recorder"), (str(j), "flight_recorder")])
    assert got.traces == ()
    assert len(got.warnings) == 2
    assert str(p) in got.warnings[0] and "truncated" in got.warnings[0]
    assert str(j) in got.warnings[1]


def test_stdin_is_never_sniffed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`-` is stdin even where a file of that name exists: reading its head would take the
    bytes the log reader needs."""
    text = "Process 12: python train.py\nPython v3.11.7 (/usr/bin/python3)\n"
    (tmp_path / "-").write_text(text)
    (tmp_path / "stack.txt").write_text(text)
    monkeypatch.chdir(tmp_path)
    assert sniff("stack.txt") == "pyspy"
    assert sniff("-") is None


class _Boom:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("echo pwned",))


def test_a_pickle_naming_a_class_or_function_is_refused() -> None:
    hostile = dump(healthy(1))
    hostile["entries"].append(_Boom())
    trace, warnings = read_trace("x/nccl_trace_rank_0", pickle.dumps(hostile, protocol=2))
    assert trace is None
    assert "refused to load" in warnings[0] and "system" in warnings[0]


@pytest.mark.parametrize(
    ("name", "rank", "host"),
    [
        ("nccl_trace_rank_3", 3, None),
        ("myjob_fr_12", 12, None),
        ("trace-node07-rank5", 5, "node07"),
        ("fr.gpu12.rank_4.json", 4, "gpu12"),
        ("rank7.txt", 7, None),
        ("rank2.status", 2, None),
    ],
)
def test_rank_and_host_from_the_name(name: str, rank: int, host: str | None) -> None:
    assert rank_from_name(name) == rank
    assert host_from_name(name) == host


def test_a_dump_without_a_rank_in_its_name_is_said() -> None:
    trace, warnings = read_trace("x/flight.pkl", pickle.dumps(dump(healthy(1)), protocol=2))
    assert trace is not None and trace.rank is None
    assert "no rank in the file name" in warnings[0]


def test_an_entry_missing_keys_of_an_older_format_is_read() -> None:
    old = {"seq_id": 4, "profiling_name": "nccl:all_reduce", "process_group": ["0", "default_pg"],
           "input_sizes": [[8]], "output_sizes": [[8]], "state": "started"}  # fmt: skip
    trace, warnings = read_trace(
        "x/nccl_trace_rank_0", pickle.dumps({"version": "2.0", "entries": [old]})
    )
    assert trace is not None and not warnings
    e = trace.entries[0]
    assert (e.seq, e.op, e.input_dtypes, e.retired, e.frames) == (4, "all_reduce", (), None, ())
