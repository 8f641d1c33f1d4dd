"""The signature library: samples match and win, counter-samples miss, bad libraries fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from logscope.errors import PatternError
from logscope.lines.decode import parse_line
from logscope.match.events import Extractor
from logscope.match.loader import builtin_dirs, load_library
from logscope.match.samples import check_samples
from logscope.match.signatures import Signature
from logscope.model import CATEGORIES

LIBRARY = load_library(builtin_dirs())
BAD = Path(__file__).parent / "bad_patterns"


def _winners(sample: str) -> list[str]:
    return [
        hit[0].id
        for line in parse_line(sample)
        if (hit := LIBRARY.match(sample, line.text)) is not None
    ]


@pytest.mark.parametrize("sig", LIBRARY.signatures, ids=lambda s: s.id)
def test_samples(sig: Signature) -> None:
    for sample in sig.samples:
        assert sig.id in _winners(sample), f"{sig.id}: sample not won: {sample!r}"
    for sample in sig.counter_samples:
        assert not any(sig.match(line.text) for line in parse_line(sample)), (
            f"{sig.id}: counter-sample matches: {sample!r}"
        )


def test_library_check_is_clean() -> None:
    assert [str(p) for p in check_samples(LIBRARY)] == []


def test_library_covers_every_category() -> None:
    used = {s.category for s in LIBRARY.signatures if s.category}
    # hang is decided from silence, not from a line; unknown is what no signature knows
    assert set(CATEGORIES) - used <= {"hang", "unknown"}, set(CATEGORIES) - used


@pytest.mark.parametrize(
    "required",
    [
        "cuda.terminate_cuda_error",
        "nccl.watchdog_timeout",
        "torchrun.child_failed",
        "python.traceback_start",
        "python.exception",
    ],
)
def test_ids_the_engine_relies_on(required: str) -> None:
    assert LIBRARY.by_id(required) is not None


@pytest.mark.parametrize("case", sorted(p.name for p in BAD.iterdir()), ids=str)
def test_bad_library_is_reported(case: str) -> None:
    expected = (BAD / case / "expected.txt").read_text().strip()
    try:
        library = load_library([*builtin_dirs(), BAD / case])
    except PatternError as err:
        message = str(err)
    else:
        only = [s for s in library.sources if Path(s).parent == BAD / case]
        message = "\n".join(str(p) for p in check_samples(library, only))
    message = message.replace(str(BAD / case) + "/", "")
    assert message.startswith(expected), message


def test_user_library_overrides_by_id(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text(
        """
[[signature]]
id = "nccl.watchdog_timeout"
category = "collective_timeout"
severity = "error"
role = "symptom"
title = "my own title"
explanation = "mine"
trigger = ["Watchdog caught collective operation timeout"]
regex = 'Watchdog caught collective operation timeout'
samples = ["[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: x"]
"""
    )
    lib = load_library([*builtin_dirs(), tmp_path])
    sig = lib.by_id("nccl.watchdog_timeout")
    assert sig is not None and sig.title == "my own title"
    assert sum(s.id == "nccl.watchdog_timeout" for s in lib.signatures) == 1


def test_patterns_cli(run_cli) -> None:
    code, out, _ = run_cli("patterns", "list")
    assert code == 0
    assert "nccl.watchdog_timeout" in out
    code, out, _ = run_cli("patterns", "test")
    assert code == 0, out
    code, out, _ = run_cli("patterns", "test", str(BAD / "sample_misses"))
    assert code == 1
    assert "bad.sample_misses: samples[0]: does not match" in out
    code, _, err = run_cli("patterns", "test", str(BAD / "bad_regex"))
    assert code == 2
    assert "bad.regex: regex: does not compile" in err


@pytest.mark.parametrize(
    ("fields", "title"),
    [
        ({"exception": "ValueError", "message": "boom"}, "Python exception: ValueError: boom"),
        ({"exception": "KeyboardInterrupt"}, "Python exception: KeyboardInterrupt"),
        ({}, "Python exception"),
        ({"exception": "E", "message": "x" * 500}, "Python exception: E: " + "x" * 120),
    ],
)
def test_title_placeholders_are_filled_from_the_match(fields: dict, title: str) -> None:
    from logscope.analysis.incident_text import fill_title

    assert fill_title("Python exception: {exception}: {message}", fields) == title


def test_builtin_regexes_compile_and_their_columns_name_a_field() -> None:
    """Built-in regexes are compiled when first used (logscope.match.regexes), not when loaded: this
    is the check a user's library gets at load."""
    for sig in LIBRARY.signatures:
        assert sig.regex.compiled.pattern == sig.regex.pattern
        for column in sig.columns:
            assert column.groupindex, f"{sig.id}: column {column.pattern!r} names no field"


@pytest.mark.parametrize(
    ("code", "category", "severity"),
    [
        # NVIDIA's catalog: restart the application (a copy-engine exception, corrupted push data)
        (41, "cuda_error", "error"),
        (80, "cuda_error", "error"),
        # reset the GPU / reboot the node
        (140, "gpu_hardware", "fatal"),
        (158, "gpu_hardware", "fatal"),
        # nothing to do by itself
        (63, "gpu_hardware", "warning"),
        (92, "gpu_hardware", "warning"),
    ],
)
@pytest.mark.parametrize(
    "form",
    [
        # the kernel driver's line (kernel_rc.c) and DCGM's health report (DCGM_FR_XID_ERROR_MSG)
        "[ 9911.120334] NVRM: Xid (PCI:0000:b3:00): {code}, pid=40211, name=python, Ch 00000008",
        "GPU ID: 4 | Failure | Detected XID {code} for GPU 4",
    ],
)
def test_xid_code_decides_category(form: str, code: int, category: str, severity: str) -> None:
    """The per-code table overrides the generic Xid signature's category and severity."""
    sample = form.format(code=code)
    extractor = Extractor(LIBRARY)
    events = [
        event
        for line in parse_line(sample)
        if (hit := LIBRARY.match(sample, line.text)) is not None
        for event in extractor.feed(line, hit)
    ]
    assert [(e.fields.get("xid"), e.category, e.severity) for e in events] == [
        (str(code), category, severity)
    ]
