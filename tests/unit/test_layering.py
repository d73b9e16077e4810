"""The layering of every package (DESIGN section 2), checked by walking imports with ast;
and no module of them over 600 lines.

- ``pgwire`` (the protocol library) is sans-I/O: no asyncio, socket, ssl or clock, and it
  imports nothing of the project but itself and ``cython_ext``.
- ``engine`` (``engine.dataflow`` included) is pure: no I/O, nothing from ``proxy``, ``cdc`` or
  ``pgwire``; ``engine.dataflow`` takes from ``engine.plan`` only its IR (``engine.plan.ir``);
  ``engine.sql`` and ``engine.plan`` use no clock either.
- ``cdc`` imports ``engine`` only through its public face (``from engine import <name in
  __all__>``), ``pgwire`` and nothing of ``proxy``; ``cdc.pgoutput`` and ``cdc.applier`` do no I/O.
- ``proxy`` imports ``engine`` and ``cdc`` only through their public faces.
- ``cython_ext`` imports nothing of the project but itself (its ``.py`` loader and every
  ``.pyx``/``.pxd``).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("pgwire", "proxy", "engine", "cdc", "cython_ext")
IO = {"asyncio", "socket", "ssl", "selectors", "uvloop", "threading", "time"}
CLOCK = {"time", "datetime"}
_CIMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+c?import\b|c?import\s+([\w.]+))", re.M)


def _imports(folder: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """(file, module, imported names) for every absolute import under ``folder``."""
    found: list[tuple[str, str, tuple[str, ...]]] = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found += [(rel, a.name, ()) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.append((rel, node.module, tuple(a.name for a in node.names)))
    return found


def _root(module: str) -> str:
    return module.split(".")[0]


def test_every_package_is_walked() -> None:
    for folder, least in (("pgwire", 10), ("proxy", 20), ("engine/dataflow", 15),
                          ("engine/plan", 15), ("cdc", 10)):
        assert len(list((ROOT / folder).rglob("*.py"))) >= least, folder
    assert len(list((ROOT / "cython_ext").glob("*.pyx"))) >= 10


def test_pgwire_is_sans_io_and_self_contained() -> None:
    for path, module, _ in _imports("pgwire"):
        assert _root(module) not in IO | CLOCK, f"{path} imports {module}"
        if _root(module) in PROJECT:
            assert _root(module) in ("pgwire", "cython_ext"), f"{path} imports {module}"


@pytest.mark.parametrize("folder", ["engine", "engine/dataflow", "engine/values", "cdc/pgoutput"])
def test_pure_packages_do_no_io(folder: str) -> None:
    bad = [(p, m) for p, m, _ in _imports(folder) if _root(m) in IO]
    assert bad == []


@pytest.mark.parametrize("folder", ["engine/sql", "engine/plan"])
def test_planner_uses_no_clock(folder: str) -> None:
    bad = [(p, m) for p, m, _ in _imports(folder) if _root(m) == "time"]
    assert bad == []


def test_applier_does_no_io() -> None:
    bad = [(p, m) for p, m, _ in _imports("cdc") if p == "cdc/applier.py" and _root(m) in IO]
    assert bad == []


def test_engine_imports_no_other_package() -> None:
    bad = [(p, m) for p, m, _ in _imports("engine")
           if _root(m) in PROJECT and _root(m) not in ("engine", "cython_ext")]
    assert bad == []


def test_dataflow_takes_only_the_ir_from_the_planner() -> None:
    bad = [(p, m, n) for p, m, n in _imports("engine/dataflow")
           if m.startswith("engine.plan") and m != "engine.plan.ir" and n != ("ir",)]
    assert bad == []


@pytest.mark.parametrize(("folder", "faces", "forbidden"), [
    ("cdc", ("engine",), ("proxy",)),
    ("proxy", ("engine", "cdc"), ()),
    ("pgwire", ("engine", "cdc"), ("proxy",)),
])
def test_packages_meet_only_at_public_faces(
    folder: str, faces: tuple[str, ...], forbidden: tuple[str, ...]
) -> None:
    for path, module, names in _imports(folder):
        root = _root(module)
        assert root not in forbidden, f"{path} imports {module}"
        if root in faces and root != folder:
            public = set(importlib.import_module(root).__all__)
            assert module == root, f"{path} imports {module}, not the face of {root}"
            assert set(names) <= public, f"{path} imports {set(names) - public} from {root}"


def test_public_faces_export_what_they_name() -> None:
    for package in ("engine", "cdc"):
        face = importlib.import_module(package)
        assert face.__all__, package
        for name in face.__all__:
            assert hasattr(face, name), f"{package}.__all__ names missing {name}"


def test_cython_ext_imports_nothing_of_the_project_but_itself() -> None:
    bad: list[tuple[str, str]] = []
    for path, module, _ in _imports("cython_ext"):
        if _root(module) in PROJECT and _root(module) != "cython_ext":
            bad.append((path, module))
    kernels = (ROOT / "cython_ext").glob("*.p[xy][xdi]")
    for path in sorted(kernels):
        for match in _CIMPORT.finditer(path.read_text()):
            module = match.group(1) or match.group(2)
            if _root(module) in PROJECT and _root(module) != "cython_ext":
                bad.append((path.name, module))
    assert bad == []


def test_no_module_is_over_600_lines() -> None:
    """Small modules (the style guide): every source file of the packages above."""
    long = []
    for package in PROJECT:
        for path in sorted((ROOT / package).rglob("*")):
            if path.suffix in (".py", ".pyx", ".pxd", ".pxi"):
                lines = path.read_text().count("\n")
                if lines > 600:
                    long.append((str(path.relative_to(ROOT)), lines))
    assert long == []


def _module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def test_proxy_keeps_no_import_circle_alive_by_tricks() -> None:
    """proxy/ imports its own modules at module level, never under ``TYPE_CHECKING`` nor
    inside a function (helpers take small Protocols instead: ``proxy.roles``, the hit path's
    and the lanes' own), and those imports form no circle."""
    tricks: list[tuple[str, int, str]] = []
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / "proxy").rglob("*.py")):
        rel, module = str(path.relative_to(ROOT)), _module_of(path)
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
                tricks.append((rel, node.lineno, "TYPE_CHECKING"))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):  # (optional packages may load late: uvloop, cdc)
                    names = ([inner.module or ""] if isinstance(inner, ast.ImportFrom)
                             else [a.name for a in inner.names]
                             if isinstance(inner, ast.Import) else [])
                    if any(_root(name) == "proxy" for name in names):
                        tricks.append((rel, inner.lineno, "import inside a function"))
        edges = graph.setdefault(module, set())
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            edges.update(t for t in targets if t.startswith("proxy."))
    assert tricks == []
    known = set(graph)
    graph = {m: {t for t in ts if t in known and t != m} for m, ts in graph.items()}
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                raise AssertionError(" -> ".join([*path, module, target]))
            if target not in state:
                visit(target, [*path, module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
