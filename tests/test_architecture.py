"""Data flows one way: modules import only earlier stages; only the CLI and renderers print."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).parent.parent / "logscope"
ORDER = [
    "errors",
    "allocator",
    "packed",
    "model",
    "hostlist",
    "compression",
    "newlines",
    "sources",
    "spool",
    "follow",
    "lines",
    "wrap",
    "clusters",
    "regexes",
    "patterns",
    "scan",
    "events",
    "shapes",
    "arrow",
    "grids",
    "progress_columns",
    "columns",
    "runs",
    "ranges",
    "culprits",
    "incidents",
    "outcome",
    "timeline",
    "jobs",
    "changepoints",
    "slowdowns",
    "health",
    "findings",
    "accounting",
    "configs",
    "endings",
    "context",
    "engine",
    "pipeline",
    "watch",
    "actions",
    "fleet",
    "render",
    "cli",
]
PRINTERS = {"cli", "render"}


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if p.name not in ("__init__.py", "__main__.py"))


def _stage(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    return rel.parts[0]


def _imports(path: Path) -> set[str]:
    """The logscope stages a module imports, relative imports resolved."""
    package = ["logscope", *path.relative_to(PKG).parts[:-1]]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):  # import logscope.engine
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("logscope."))
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.module == "logscope":  # from logscope import cli
            out.update(a.name for a in node.names)
            continue
        if node.level:
            base = package[: len(package) - (node.level - 1)]
            full = [*base, *(node.module or "").split(".")] if node.module else base
            names = [full] if node.module else [[*full, a.name] for a in node.names]
        elif (node.module or "").startswith("logscope."):
            names = [(node.module or "").split(".")]
        else:
            continue
        out.update(n[1] for n in names if len(n) > 1)
    return out


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_imports_flow_one_way(path: Path) -> None:
    stage = _stage(path)
    mine = ORDER.index(stage)
    for imported in _imports(path):
        if imported == stage:
            continue
        assert imported in ORDER, f"{path.name} imports unknown module {imported}"
        assert ORDER.index(imported) < mine, f"{stage} must not import {imported} (later stage)"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_only_cli_and_renderers_print(path: Path) -> None:
    if _stage(path) in PRINTERS:
        return
    text = path.read_text()
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
            raise AssertionError(f"{path.name}:{node.lineno} prints")
    assert "sys.stdout" not in text and "sys.stderr" not in text, path.name


def test_no_module_level_mutable_state() -> None:
    for path in _modules():
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Assign | ast.AnnAssign):
                # constant lookup tables are dicts by convention; lists and sets are state
                assert not isinstance(node.value, ast.List | ast.Set | ast.ListComp), (
                    f"{path.name}:{node.lineno} module-level mutable container"
                )


def test_an_analysis_with_findings_does_not_import_pandas(tmp_path: Path) -> None:
    """pandas costs ~40 MB of memory and 0.4 s to import: `analyze` and `tail` (findings and
    their charts included) do without it; only the fleet store needs it."""
    from .generators.health_run import Plan, generate

    generate(tmp_path, Plan(seed=1, slowdown=0.05, spikes=1, nan=True))
    code = (
        "import sys; from logscope.pipeline import analyze; from logscope.render.document import "
        f"document; a = analyze([{str(tmp_path / 'train.log')!r}]); document(a); "
        "assert a.findings; print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
