# ruff: noqa: E501  (log lines are kept whole)
"""Whole-log behaviour of torch's warning that it could not start CUDA (patterns/cuda.toml
`cuda.init_warning`, from c10/cuda/CUDAFunctions.cpp's texts): the failure of a job that then
finds no GPU, no failure of a run that trains on after it."""

from __future__ import annotations

from .helpers import Run, told

_TOO_OLD = "/opt/conda/lib/python3.10/site-packages/torch/cuda/__init__.py:138: UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver. (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)"


def test_a_driver_torch_cannot_use_is_the_cause_of_what_fails_after_it(run: Run) -> None:
    lines = [
        "[2024-02-01 10:00:00,000] [INFO] [real_accelerator.py:161:get_accelerator] Setting ds_accelerator to cuda (auto detect)",
        _TOO_OLD,
        "  return torch._C._cuda_getDeviceCount() > 0",
        "Traceback (most recent call last):",
        '  File "train.py", line 40, in <module>',
        "RuntimeError: No CUDA GPUs are available",
    ]
    assert told(run, lines, 1) == ("cuda_error", None)
    # the log cut right after it: still the failure
    assert told(run, lines[:3], 1) == ("cuda_error", None)


def test_a_run_that_trains_on_after_the_warning_outlived_it(run: Run) -> None:
    steps = [
        f" iteration {i:8d}/{100:8d} | consumed samples: {i * 64:12d} | elapsed time per "
        f"iteration (ms): 812.4 | learning rate: 1.000E-04 | lm loss: {7.0 - i * 0.01:.6E} |"
        for i in range(1, 8)
    ]
    code, doc, _path = run([_TOO_OLD, *steps])
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    [note] = doc["survived"]
    assert note["first"]["line"] == 1, note
