"""The house: stage packages in data-flow order, imports one way, no cycles, printing only at the
edges, no module-level state."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).parent.parent / "logscope"
STAGES = [
    "errors",
    "memory",
    "compact_column",
    "model",
    "read",
    "dumps",
    "lines",
    "match",
    "scan",
    "analysis",
    "findings",
    "engine",
    "live",
    "fleet",
    "render",
    "cli",
]
"""Flat modules and stage packages in the order data flows: each imports only those above it and
the modules of its own package."""
PRINTERS = {"cli", "render"}
MAX_FLAT = 10
IMMUTABLE_WRAPPERS = {"MappingProxyType", "frozenset", "tuple"}


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if p.name != "__main__.py")


def _dotted(path: Path) -> str:
    parts = path.relative_to(PKG).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _stage(path: Path) -> str:
    return _dotted(path).split(".")[0] or "__init__"


def _imports(path: Path) -> set[str]:
    """The logscope modules (dotted, below `logscope`) a module imports, relative ones resolved."""
    here = _dotted(path).split(".") if _dotted(path) else []
    package = here if path.name == "__init__.py" else here[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name[9:] for a in node.names if a.name.startswith("logscope."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
            elif (node.module or "").split(".")[0] == "logscope":
                base = []
            else:
                continue
            module = [p for p in (node.module or "").split(".") if p]
            if not node.level:
                module = module[1:]
            target = [*base, *module]
            if node.level and not module:  # from . import x: the package's module x
                out.update(".".join([*base, a.name]) for a in node.names)
            elif target:
                out.add(".".join(target))
    return out


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_imports_flow_one_way(path: Path) -> None:
    stage = _stage(path)
    if stage == "__init__":  # the public API re-exports from every stage
        return
    mine = STAGES.index(stage)
    for imported in _imports(path):
        other = imported.split(".")[0]
        assert other in STAGES, f"{path.name} imports unknown module {imported}"
        assert STAGES.index(other) <= mine, f"{stage} must not import {imported} (later stage)"


def test_no_import_cycles_within_a_package() -> None:
    graph = {_dotted(p): _imports(p) for p in _modules() if _dotted(p)}
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph or nxt.split(".")[0] != node.split(".")[0]:
                continue  # across stages the order above rules
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*path, node, nxt]))
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])


def test_stages_are_packages_and_few_modules_stay_flat() -> None:
    flat = sorted(p.stem for p in PKG.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(flat) <= MAX_FLAT, flat
    on_disk = {*flat, *(p.name for p in PKG.iterdir() if (p / "__init__.py").exists())}
    assert on_disk == set(STAGES), on_disk ^ set(STAGES)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_imports_another_ones_private_names(path: Path) -> None:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (
            node.level or (node.module or "").startswith("logscope")
        ):
            private = [a.name for a in node.names if a.name.startswith("_")]
            assert not private, f"{path.name}:{node.lineno} imports {private} from {node.module}"


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


def _mutable(value: ast.expr) -> bool:
    """A container display, comprehension or constructor that can be changed after import."""
    if isinstance(value, ast.List | ast.Set | ast.Dict | ast.ListComp | ast.SetComp | ast.DictComp):
        return True
    if isinstance(value, ast.Call):
        name = getattr(value.func, "id", getattr(value.func, "attr", ""))
        if name in IMMUTABLE_WRAPPERS:
            return False
        return name in ("dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter")
    return False


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_level_mutable_state(path: Path) -> None:
    """Tables are read-only (MappingProxyType, frozenset, tuple); nothing is kept between calls
    at module level, caches included. `__all__` is the one list Python asks for."""
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if [getattr(t, "id", None) for t in targets] == ["__all__"]:
                continue
            assert not _mutable(node.value), f"{path.name}:{node.lineno} module-level container"
    for node in ast.walk(tree):
        assert not isinstance(node, ast.Global), f"{path.name}:{node.lineno} global state"


def test_the_state_check_sees_a_cache() -> None:
    """The rule above is not vacuous: the shapes of cache it exists to refuse are caught."""
    for text in ("_PLANS: dict[int, str] = {}", "_SEEN = set()", "T = {k: 1 for k in 'ab'}"):
        stmt = ast.parse(text).body[0]
        assert isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None
        assert _mutable(stmt.value), text
    ok = ast.parse("T = MappingProxyType({'a': 1})").body[0]
    assert isinstance(ok, ast.Assign) and not _mutable(ok.value)


def test_an_analysis_with_findings_does_not_import_pandas(tmp_path: Path) -> None:
    """pandas costs ~40 MB of memory and 0.4 s to import: `analyze` and `tail` (findings and
    their charts included) do without it; only the fleet store needs it."""
    from .generators.health_run import Plan, generate

    generate(tmp_path, Plan(seed=1, slowdown=0.05, spikes=1, nan=True))
    code = (
        "import sys; from logscope import analyze, document; "
        f"a = analyze([{str(tmp_path / 'train.log')!r}]); document(a); "
        "assert a.findings; print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
