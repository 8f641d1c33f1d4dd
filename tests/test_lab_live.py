"""Regenerate real torchrun fault scenarios (torch CPU wheel, gloo) and check what logscope says.

Skipped only where torch is not installed; CI installs it (the `lab` extra), and there a missing
torch fails the run instead of skipping.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "lab"))

LAB_PYTHON = os.environ.get("LAB_PYTHON") or sys.executable
HAVE_TORCH = (
    subprocess.run([LAB_PYTHON, "-c", "import torch"], capture_output=True, check=False).returncode
    == 0
)

if not HAVE_TORCH and os.environ.get("CI"):
    pytest.fail("torch is not installed in CI: the live lab tests must run", pytrace=False)

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(not HAVE_TORCH, reason="torch not installed (pip install -e '.[lab]')"),
]


def _line_of(path: Path, pattern: str) -> tuple[int, str]:
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if re.search(pattern, line):
            return n, line
    raise AssertionError(f"{pattern!r} not in {path}")


def test_raise_on_rank1_is_the_root_cause(tmp_path: Path, analyze_json) -> None:
    from run_faults import run_scenario

    log = run_scenario("raise_rank1", tmp_path, timeout_s=120)
    code, doc = analyze_json(log)
    assert code == 1
    inc = doc["incidents"][-1]
    lineno, text = _line_of(log, r"\[rank1\]: ValueError: injected fault")
    assert inc["category"] == "python_exception", inc
    assert (inc["root_cause"]["line"], inc["root_cause"]["text"]) == (lineno, text)
    assert inc["culprit"]["rank"] == 1
    assert doc["job"]["outcome"] == "crashed"


def test_hung_rank_is_named_although_torchrun_blames_a_victim(tmp_path: Path, analyze_json) -> None:
    from run_faults import run_scenario

    log = run_scenario("hang_rank1", tmp_path, timeout_s=150)
    text = log.read_text()
    root_block = text[text.index("Root Cause (first observed failure)") :]
    blamed = int(re.search(r"rank\s+: (\d+)", root_block).group(1))
    assert blamed != 1, "torchrun named the hung rank itself: the scenario proves nothing"
    code, doc = analyze_json(log)
    assert code == 1
    inc = doc["incidents"][-1]
    assert inc["category"] == "collective_timeout", inc
    assert inc["culprit"]["rank"] == 1, inc["culprit"]
    assert 1 not in inc["cascade"]["ranks"]
