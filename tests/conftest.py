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
