"""Command line: a thin shell over the library (`logscope.analyze`, `logscope.load_library`), one
module a command group; `app` is the entry point."""

from __future__ import annotations

from . import analyze, fleet, live, patterns
from .app import app

__all__ = ["analyze", "app", "fleet", "live", "main", "patterns"]


def main() -> None:
    app()
