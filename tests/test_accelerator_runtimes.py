# ruff: noqa: E501  (log lines are kept whole)
"""Whole-log behaviour of the signatures read from accelerator stacks other than CUDA/NCCL
(patterns/ascend.toml: torch_npu and HCCL; patterns/xla.toml: torch_xla's XRT mesh service).
Lines are constructed from the emitters' format strings (see each pattern file's header)."""

from __future__ import annotations

from .helpers import Run, assert_root, failed_verdict, verdict_incident

STEP = "2025-03-02 08:13:{s:02d} | INFO | step {n} | loss 2.{n:02d}"


def test_torch_npus_error_trailer_names_the_rank_whose_hccl_call_failed(run: Run) -> None:
    # HCCLUtils.hpp's C10D_HCCL_CHECK, then NPUException.cpp's formatErrorCode trailer: no rank
    # prefix on the lines, the trailer's RankID is the process's own rank
    lines = [STEP.format(s=n, n=n) for n in range(1, 4)] + [
        "Traceback (most recent call last):",
        '  File "/work/train.py", line 91, in <module>',
        "    dist.all_reduce(grad)",
        "RuntimeError: HCCL error in: /usr1/workspace/torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:2150, ",
        "[ERROR] 2025-03-02-08:14:11 (PID:51234, Device:6, RankID:14). ERR02200 DIST call hccl api failed.",
        "EI0006: 2025-03-02-08:14:11.337.120 Getting socket times out. Reason: 1. The remote does not initiate a connect request.",
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "comm_error", inc
    assert_root(inc, path, 8, lines[7])
    assert inc["culprit"]["rank"] == 14, inc["culprit"]
    # a process that does not know its rank yet says -1: no culprit from it
    lines[7] = lines[7].replace("RankID:14", "RankID:-1")
    _code, doc, _path = run(lines)
    assert (verdict_incident(doc)["culprit"] or {}).get("rank") is None, doc["incidents"]


def test_tpu_cores_failing_the_mesh_rendezvous_are_victims(run: Run) -> None:
    # xla_multiprocessing.py's `Exception in device=` print around mesh_service.cc's XLA_ERROR
    err = "Exception in device=TPU:{d}: tensorflow/compiler/xla/xla_client/mesh_service.cc:364 : Failed to meet rendezvous 'epoch_end': Socket closed (14)"
    lines = [STEP.format(s=n, n=n) for n in range(1, 5)] + [
        err.format(d=2),
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.8/dist-packages/torch_xla/distributed/xla_multiprocessing.py", line 329, in _mp_start_fn',
        err.format(d=1),
    ]
    _doc, inc, path = failed_verdict(run, lines)
    assert inc["category"] == "comm_error", inc
    assert_root(inc, path, 5, lines[4])
