"""Fixtures the tests share; plain helpers are in helpers.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .generators.bloom_run import Truth, generate
from .helpers import analyze_doc, cli


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
