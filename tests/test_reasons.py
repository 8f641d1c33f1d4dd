# ruff: noqa: E501  (log lines are kept whole)
"""A result code's stated reason gives the incident its category (logscope/analysis/reasons.py).
Lines are built from PyTorch's `NCCL error in: <file>:<line>, <ncclGetErrorString>, NCCL version
<v>` exception, the result's hint line, and NCCL >= 2.19's `Last error:` tail (ncclGetLastError:
the text of the WARN that set the result)."""

from __future__ import annotations

from .helpers import fed, incidents_of

HEAD = "[rank{r}]: torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, {result} (run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5"
HINT = {
    "invalid usage": "[rank{r}]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
    "unhandled cuda error": "[rank{r}]: ncclUnhandledCudaError: Call to CUDA function failed.",
}


def _failure(result: str, reason: str, r: int = 5) -> list[str]:
    return [
        HEAD.format(r=r, result=result),
        HINT[result].format(r=r),
        f"[rank{r}]: Last error:",
        f"[rank{r}]: {reason}",
    ]


def test_the_stated_reason_gives_the_category_and_the_exception_stays_the_root() -> None:
    (inc,) = incidents_of(fed(_failure("invalid usage", "Failed to initialize any NET plugin")))
    assert inc.category == "comm_error"
    assert inc.root_cause.line.lineno == 1


def test_a_reason_that_is_itself_the_usual_one_keeps_the_result_codes_category() -> None:
    reason = "Duplicate GPU detected : rank 5 and rank 4 both on CUDA device 1d000"
    (inc,) = incidents_of(fed(_failure("invalid usage", reason)))
    assert inc.category == "launcher_error"


def test_another_process_reason_is_not_this_ones() -> None:
    # counter-case: the line after is another rank's, so it explains nothing about rank 5
    lines = [*_failure("invalid usage", "Failed to initialize any NET plugin")[:3]]
    lines.append("[rank6]: Failed to initialize any NET plugin")
    (inc,) = incidents_of(fed(lines))
    assert inc.category == "launcher_error"


def test_a_traceback_after_the_result_code_is_no_reason() -> None:
    # counter-case: torch <= 1.x printed no `Last error:`; the next lines are a traceback
    lines = [
        "RuntimeError: NCCL error in: ../torch/lib/c10d/ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.7.8",
        "ncclSystemError: System call (socket, malloc, munmap, etc) failed.",
        "Traceback (most recent call last):",
        '  File "train.py", line 40, in <module>',
    ]
    (inc,) = incidents_of(fed(lines))
    assert inc.category == "comm_error"


def test_an_exception_whose_message_goes_on_to_a_result_code_takes_the_codes_category() -> None:
    # constructed: Python prints an exception whose message holds a newline as `<Type>: <first
    # line>` and the rest bare; here the rest is PyTorch's result-code text
    lines = [
        "[rank3]: RuntimeError: all_gather_into_tensor failed: ",
        "[rank3]: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error, NCCL version 2.18.1",
        "[rank3]: ncclUnhandledCudaError: Call to CUDA function failed.",
    ]
    (inc,) = incidents_of(fed(lines))
    assert (inc.category, inc.root_cause.line.lineno) == ("cuda_error", 1)
    # counter-case: an exception of its own kind before the result code keeps its category
    lines[0] = "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    (inc,) = incidents_of(fed(lines))
    assert inc.category == "oom_gpu"
