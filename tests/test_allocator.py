"""release_freed_memory: buffers freed below a live block go back to the system (glibc alone
keeps them, once it has raised its mapping limit); a process of its own for each case."""

from __future__ import annotations

import subprocess
import sys

import pytest

from logscope import memory as allocator

PROGRAM = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("allocator", sys.argv[2])
module = importlib.util.module_from_spec(spec)  # alone: the package's imports move the heap
spec.loader.exec_module(module)
def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20
big = bytearray(8 << 20)
del big  # a mapped block freed: glibc raises its limit to 8 MB
buffers, small = [], []
for _ in range(64):
    buffers.append(bytearray(2 << 20))  # what a scan receives
    small.append(bytearray(4096))  # and keeps, above it on the heap (not pymalloc)
held = rss_mb()
del buffers
applied = module.release_freed_memory() if sys.argv[1] == "on" else None
print(applied, round(held - rss_mb()))
"""


def _freed_mb(mode: str) -> tuple[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode, allocator.__file__],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return out[0], int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_freed_buffers_go_back_to_the_system() -> None:
    applied, freed = _freed_mb("on")
    if applied != "True":
        pytest.skip("this C library has no malloc_trim")
    assert freed >= 100  # of the 128 MB of buffers
    _, kept = _freed_mb("off")
    assert kept < 100, "glibc's default keeps them: the test shows the setting's effect"
