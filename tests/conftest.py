from __future__ import annotations

import bz2
import gzip
import json
import lzma
from pathlib import Path
from typing import Any

import lz4.frame
import pytest
import zstandard
from typer.testing import CliRunner

from logscope.cli import app

from .generators.bloom_run import Truth, generate

FIXTURES = Path(__file__).parent / "fixtures"

COMPRESSORS = {
    "gzip": gzip.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
    "zstd": zstandard.ZstdCompressor().compress,
    "lz4": lz4.frame.compress,
}
"""Each compression logscope reads, by name: bytes in, a whole compressed file out."""


def cli(*args: str, input: bytes | str | None = None) -> tuple[int, str, str]:
    """Invoke the real CLI; returns (exit_code, stdout, stderr)."""
    result = CliRunner().invoke(app, list(args), input=input)
    # a traceback in the library surfaces here, not as an exit code (1 means "incidents")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"CLI crashed: {result.exception!r}\nstderr:\n{result.stderr}")
    return result.exit_code, result.stdout, result.stderr


def analyze_doc(*args: str, input: bytes | str | None = None) -> tuple[int, dict[str, Any], str]:
    """`logscope analyze ARGS --format json`: exit code, parsed document, stderr."""
    code, out, err = cli("analyze", *args, "--format", "json", input=input)
    assert code in (0, 1), f"exit {code}\nstdout:\n{out}\nstderr:\n{err}"
    return code, json.loads(out), err


@pytest.fixture(scope="session")
def bloom_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Truth]:
    """The BLOOM-like generated run (seed 0) and its truth, written once: tests only read it."""
    out = tmp_path_factory.mktemp("bloom")
    return out, generate(out, seed=0)


@pytest.fixture
def run_cli():
    return cli


@pytest.fixture
def analyze_json():
    """`logscope analyze PATHS --format json` parsed, with its exit code."""

    def go(*paths: str | Path) -> tuple[int, dict[str, Any]]:
        code, doc, _ = analyze_doc(*map(str, paths))
        return code, doc

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
