"""`logscope patterns`: list the signatures and check their samples."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..engine.feed import default_library
from ..errors import LogscopeError
from ..match.loader import builtin_dirs, load_library
from ..match.samples import check_samples
from .app import (
    PatternDirs,
    fail,
    patterns_app,
)


@patterns_app.command("list")
def patterns_list(patterns: PatternDirs = None) -> None:
    """List every signature: id, kind, category, severity, role and title.

    Example: logscope patterns list --patterns ./my-patterns
    """
    try:
        library = default_library(patterns or [])
    except LogscopeError as err:
        fail(err)
    for s in library.signatures:
        typer.echo(
            f"{s.id:<40} {s.kind:<16} {s.category or '-':<18} {s.severity or '-':<8} "
            f"{s.role or '-':<8} {s.title}"
        )


@patterns_app.command("test")
def patterns_test(
    dirs: Annotated[list[Path] | None, typer.Argument(help="Directories to check.")] = None,
) -> None:
    """Check that every sample matches its signature and no counter-sample does, and that
    every classification rule decides its own samples.

    User libraries are checked together with the built-in one, so a sample that a built-in
    signature wins over is reported. Exit status 1 when a check fails.

    Example: logscope patterns test ./my-patterns
    """
    try:
        library = load_library([*builtin_dirs(), *(dirs or [])])
    except LogscopeError as err:
        fail(err)
    only = None
    if dirs:
        only = [s for s in library.sources if any(Path(s).parent == Path(d) for d in dirs)]
    problems = check_samples(library, only)
    for p in problems:
        typer.echo(str(p))
    checked = [s for s in library.signatures if only is None or s.source in only]
    rules = [r for r in library.rules if only is None or r.source in only]
    typer.echo(
        f"{len(checked)} signatures and {len(rules)} classification rules checked, "
        f"{len(problems)} problems"
    )
    raise typer.Exit(1 if problems else 0)
