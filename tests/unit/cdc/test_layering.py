"""Layering of the CDC packages (DESIGN §2), checked by walking imports with ast."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
IO_MODULES = {"asyncio", "socket", "ssl", "time", "selectors", "uvloop"}


def _imports(package: str) -> list[tuple[str, str]]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found += [(str(path.relative_to(ROOT)), a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.append((str(path.relative_to(ROOT)), node.module))
    return found


@pytest.mark.parametrize("package", ["cdc/pgoutput", "engine/values"])
def test_sans_io_packages_import_no_io(package: str) -> None:
    bad = [(f, m) for f, m in _imports(package) if m.split(".")[0] in IO_MODULES]
    assert bad == []


def test_engine_values_imports_nothing_from_proxy_or_cdc() -> None:
    bad = [(f, m) for f, m in _imports("engine/values") if m.split(".")[0] in {"proxy", "cdc"}]
    assert bad == []


def test_cdc_uses_only_the_wire_core_from_proxy() -> None:
    bad = [(f, m) for f, m in _imports("cdc") if m.split(".")[0] == "proxy"
           and not m.startswith("proxy.wire")]
    assert bad == []
