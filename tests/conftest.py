"""Fixtures the tests share; plain helpers are in helpers.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .generators.bloom_run import Truth, generate
from .helpers import Run, analyze_doc, cli, write


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


@pytest.fixture
def run(tmp_path: Path, analyze_json) -> Run:
    """`logscope analyze` of a log made of `lines`: exit code, JSON document, path."""

    def go(lines: list[str]) -> tuple[int, dict[str, Any], Path]:
        path = write(tmp_path, "job.log", lines)
        code, doc = analyze_json(path)
        return code, doc, path

    return go
