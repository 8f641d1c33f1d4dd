from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from logscope.cli import app

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def run_cli():
    """Invoke the real CLI; returns (exit_code, stdout, stderr)."""

    def invoke(*args: str, input: str | bytes | None = None) -> tuple[int, str, str]:
        result = CliRunner().invoke(app, list(args), input=input)
        return result.exit_code, result.stdout, result.stderr

    return invoke


@pytest.fixture
def analyze_json(run_cli):
    """`logscope analyze PATHS --format json` parsed, with its exit code."""

    def go(*paths: str | Path) -> tuple[int, dict[str, Any]]:
        code, out, err = run_cli("analyze", *map(str, paths), "--format", "json")
        assert code in (0, 1), f"exit {code}\nstdout:\n{out}\nstderr:\n{err}"
        return code, json.loads(out)

    return go


_SIGNALS = {6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}


def child_failed_block(
    script: str, *, time: str, host: str, rank: int, local_rank: int, exitcode: int, pid: int
) -> list[str]:
    """torchrun's ChildFailedError block with one failure, in its 2.x template (FORMATS.md §3.1,
    as printed in the observed plexus.sky excerpt)."""
    if exitcode < 0:
        traceback = f"Signal {-exitcode} ({_SIGNALS[-exitcode]}) received by PID {pid}"
    else:
        traceback = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
    return [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        f"{script} FAILED",
        "------------------------------------------------------------",
        "Failures:",
        "  <NO_OTHER_FAILURES>",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        f"  time      : {time}",
        f"  host      : {host}",
        f"  rank      : {rank} (local_rank: {local_rank})",
        f"  exitcode  : {exitcode} (pid: {pid})",
        "  error_file: <N/A>",
        f"  traceback : {traceback}",
        "============================================================",
    ]
