"""What the tests share: paths, the CLI through typer's runner, logs written from lines, and the
rule for what lies beside a clone only in CI."""

from __future__ import annotations

import bz2
import functools
import gzip
import importlib.util
import json
import lzma
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import lz4.frame
import pytest
import zstandard
from typer.testing import CliRunner

from logscope.analysis.culprits import World
from logscope.analysis.incidents import build_incidents
from logscope.cli import app
from logscope.engine.feed import Engine, default_library
from logscope.match.signatures import Library
from logscope.model import Incident, InputInfo
from logscope.read.sources import Block

SHARED = Path(__file__).resolve().parents[2] / "shared"
"""The project's shared folder: beside CI's clone, never beside a user's."""
CORPUS_CASES = SHARED / "corpus" / "cases"


def in_ci() -> bool:
    """CI runs `.ci/run` with CI=true: there a missing component fails instead of skipping."""
    return os.environ.get("CI", "").lower() in ("true", "1")


def skip_or_fail(reason: str) -> None:
    """Skip saying why; in CI, fail: what CI must run cannot pass by being absent."""
    if in_ci():
        pytest.fail(f"{reason} (required in CI)", pytrace=False)
    pytest.skip(reason)


LAB_PYTHON = os.environ.get("LAB_PYTHON") or sys.executable
"""The interpreter the lab's real torchrun jobs run with."""


@functools.cache
def _has_torch() -> bool:
    """torch is installed beside LAB_PYTHON: found by this interpreter's import system when it is
    LAB_PYTHON (no import: collecting the tests of `make check` pays nothing for it), else
    imported by LAB_PYTHON once."""
    if sys.executable == LAB_PYTHON:
        return importlib.util.find_spec("torch") is not None
    probe = [LAB_PYTHON, "-c", "import torch"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def lab_marks(*, pyspy: bool = False) -> list[pytest.MarkDecorator]:
    """The marks of a module of lab tests: `lab`, and a skip saying why where torch (and
    py-spy, with `pyspy`) is not installed beside LAB_PYTHON; in CI their absence fails."""
    have = _has_torch()
    what = "torch"
    if pyspy:
        have = have and (Path(LAB_PYTHON).parent / "py-spy").exists()
        what = "torch or py-spy"
    if not have and in_ci():
        pytest.fail(f"{what} is not installed in CI: the lab tests must run", pytrace=False)
    reason = f"{what} not installed (pip install -e '.[lab]')"
    return [pytest.mark.lab, pytest.mark.skipif(not have, reason=reason)]


Run = Callable[[list[str]], tuple[int, dict[str, Any], Path]]
"""`logscope analyze` of a log made of lines: exit code, JSON document, path (fixture `run`)."""


def corpus_logs() -> list[Path]:
    """The shared real-log corpus' logs; skips (fails in CI) where it is not beside the clone."""
    if not CORPUS_CASES.is_dir():
        skip_or_fail(f"no real-log corpus at {CORPUS_CASES} (it lies beside the clone in CI)")
    return sorted(CORPUS_CASES.glob("*/log.txt"))


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


_SIGNALS = {4: "SIGILL", 6: "SIGABRT", 8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}


@dataclass(frozen=True)
class Failure:
    """One entry of torchrun's failure block: when, where, which worker, how it ended."""

    time: str
    host: str
    rank: int
    local_rank: int
    exitcode: int
    pid: int

    def lines(self, n: int) -> list[str]:
        if self.exitcode < 0:
            sig = -self.exitcode
            traceback = f"Signal {sig} ({_SIGNALS[sig]}) received by PID {self.pid}"
        else:
            traceback = (
                "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
            )
        return [
            f"[{n}]:",
            f"  time      : {self.time}",
            f"  host      : {self.host}",
            f"  rank      : {self.rank} (local_rank: {self.local_rank})",
            f"  exitcode  : {self.exitcode} (pid: {self.pid})",
            "  error_file: <N/A>",
            f"  traceback : {traceback}",
        ]


def failure_block(script: str, root: Failure, others: Sequence[Failure] = ()) -> list[str]:
    """torchrun's ChildFailedError block in its 2.x template (FORMATS.md §3.1, as printed in the
    observed plexus.sky excerpt): the other failures, then the Root Cause entry."""
    listed = [line for n, f in enumerate(others, 1) for line in f.lines(n)]
    return [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        f"{script} FAILED",
        "------------------------------------------------------------",
        "Failures:",
        *(listed or ["  <NO_OTHER_FAILURES>"]),
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        *root.lines(0),
        "============================================================",
    ]


def child_failed_block(
    script: str, *, time: str, host: str, rank: int, local_rank: int, exitcode: int, pid: int
) -> list[str]:
    """torchrun's ChildFailedError block with one failure (failure_block)."""
    return failure_block(script, Failure(time, host, rank, local_rank, exitcode, pid))


@functools.cache
def library() -> Library:
    """The built-in signature library, loaded once for the whole session (tests only read it)."""
    return default_library()


def fed(lines: list[str], path: str = "job.log", year: int | None = 2024) -> Engine:
    """An Engine fed `lines` as one input in one block, the way `analyze` feeds a small file
    (its rank prefixes discovered first); nothing is concluded yet. A torchrun failure block
    closes at the next line a signature knows (or when the Engine concludes): end a log with one."""
    engine = Engine(library())
    block = Block(("\n".join(lines) + "\n").encode(), 1)
    engine.feed_block(block, path, year, events=False, offset=0)
    return engine


def input_of(lines: list[str], path: str = "job.log") -> InputInfo:
    """What `analyze` reports of an input holding `lines`."""
    return InputInfo(path, len(("\n".join(lines) + "\n").encode()), len(lines))


def incidents_of(engine: Engine, world: World | None = None) -> list[Incident]:
    """The incident engine's own output for what `engine` was fed: build_incidents of its
    failure events, progress and world (as conclude calls it for a log of one attempt)."""
    return build_incidents(
        engine.failures, engine.progress, world or engine.world(), engine.library
    )


MEGATRON_ITERATION = (
    " [{time:%Y-%m-%d %H:%M:%S}] iteration {it:8d}/{total:8d} | consumed samples: {samples:12d} | "
    "elapsed time per iteration (ms): {ms:.1f} | learning rate: 8.600000E-06 | global batch size: "
    "  128 | lm loss: 1.825991E+00 | loss scale: 1.0 | grad norm: 1.426 | num zeros: 0.0 | "
    "number of skipped iterations:   0 | number of nan iterations:   0 |"
)
"""Megatron-LM's training_log line with its datetime (core_r0.5.0 on, FORMATS.md §5.1)."""


def megatron_iterations(
    first: int, last: int, start: datetime, every_s: float = 10.0, total: int = 100
) -> list[str]:
    """Megatron's lines for iterations first..last, iteration i stamped start + i x every_s."""
    return [
        MEGATRON_ITERATION.format(
            time=start + timedelta(seconds=every_s * it),
            it=it,
            total=total,
            samples=128 * it,
            ms=every_s * 1000,
        )
        for it in range(first, last + 1)
    ]


def write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def lineno(lines: list[str], text: str, nth: int = 0) -> int:
    """1-based physical line number of the nth line equal to text."""
    hits = [i + 1 for i, line in enumerate(lines) if line == text]
    assert len(hits) > nth, f"not in log: {text!r}"
    return hits[nth]


def verdict_incident(doc: dict[str, Any]) -> dict[str, Any]:
    verdict = doc["verdict"]
    assert verdict is not None, doc["job"]
    return next(i for i in doc["incidents"] if i["id"] == verdict["incident"])


def failed_verdict(run: Run, lines: list[str]) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """`logscope analyze` of `lines`, which must fail (exit code 1): the document, the incident
    its verdict names, the log's path."""
    code, doc, path = run(lines)
    assert code == 1, doc["job"]
    return doc, verdict_incident(doc), path


def assert_root(inc: dict[str, Any], path: Path, line: int, text: str) -> None:
    rc = inc["root_cause"]
    assert (rc["line"], rc["text"]) == (line, text), rc
    assert Path(rc["file"]).name == path.name, rc


def told(run: Run, lines: list[str], root: int) -> tuple[str, int | None]:
    """The category and the culprit's rank of a failed log of `lines` whose root cause must be
    `lines[root]`."""
    _doc, inc, path = failed_verdict(run, lines)
    assert_root(inc, path, root + 1, lines[root])
    return inc["category"], (inc["culprit"] or {}).get("rank")


# --------------------------------------------------------------------------------------------
# 1. BLOOM tr11-176B-ml, 2022-03-21: one GPU dies, 48 nodes of identical `[defaultN]:` headers.
# Source: bigscience-workshop/bigscience train/tr11-176B-ml/chronicles.md (FORMATS §8.2, §1.1);
# agent lines FORMATS §3.2 era 1 (pid/local_rank adapted); ChildFailedError template FORMATS §3.1
# (fields adapted: BLOOM's node 3 = srun task 3, local rank 3 -> global rank 27); watchdog lines
# FORMATS §2.2/§2.3 (torch ~1.11 forms, [Rank N] adapted); `using world size:` line: Megatron-
# DeepSpeed log found in a public repo (numbers set to tr11's 384 GPUs = DP 8 x TP 4 x PP 12).
