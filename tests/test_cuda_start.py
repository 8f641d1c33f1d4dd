# ruff: noqa: E501  (log lines are kept whole)
"""Whole-log behaviour of torch failing to start CUDA (patterns/cuda.toml): its warning that it
could not count the GPUs (`cuda.init_warning`, from c10/cuda/CUDAFunctions.cpp's texts), the failure
of a job that then finds no GPU, no failure of a run that trains on after it; and a call queued
before CUDA started that failed when it started (`cuda.deferred_call_failed`, torch/cuda/__init__.py
`_lazy_init`)."""

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


def test_a_queued_call_that_failed_as_cuda_started_is_a_cuda_error_of_its_rank(run: Run) -> None:
    # torchrun's excepthook prefix; _lazy_init's message, then the queued call's stack
    lines = [
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "/opt/venv/lib/python3.11/site-packages/torch/cuda/__init__.py", line 478, in set_device',
        "[rank1]:     torch._C._cuda_setDevice(device)",
        '[rank1]:   File "/opt/venv/lib/python3.11/site-packages/torch/cuda/__init__.py", line 340, in _lazy_init',
        "[rank1]:     raise DeferredCudaCallError(msg) from e",
        '[rank1]: torch.cuda.DeferredCudaCallError: CUDA call failed lazily at initialization with error: device >= 0 && device < num_gpus INTERNAL ASSERT FAILED at "/pytorch/aten/src/ATen/cuda/CUDAContext.cpp":50, please report a bug to PyTorch. device=1, num_gpus=1',
        "[rank1]: CUDA call was originally invoked at:",
        '[rank1]:   File "train.py", line 3, in <module>',
        "[rank1]:     import torch",
    ]
    assert told(run, lines, 5) == ("cuda_error", 1)


def test_a_gpu_the_torch_build_has_no_kernels_for_is_the_cause_of_the_kernel_error(
    run: Run,
) -> None:
    # torch/cuda/__init__.py _check_cubins's warning (its message starts on the next line), then
    # the first kernel's failure
    lines = [
        "/opt/venv/lib/python3.10/site-packages/torch/cuda/__init__.py:235: UserWarning: ",
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
        "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.",
        "Traceback (most recent call last):",
        '  File "train.py", line 12, in <module>',
        "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    ]
    assert told(run, lines, 1) == ("cuda_error", None)
    # a run that trained on after it (a PTX its driver could compile) outlived it
    steps = [
        f" iteration {i:8d}/{100:8d} | consumed samples: {i * 64:12d} | elapsed time per "
        f"iteration (ms): 812.4 | learning rate: 1.000E-04 | lm loss: {7.0 - i * 0.01:.6E} |"
        for i in range(1, 8)
    ]
    code, doc, _path = run([*lines[:3], *steps])
    assert (code, doc["incidents"]) == (0, []), doc["incidents"]
