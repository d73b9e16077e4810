"""proxy.wire is sans-I/O: no asyncio, socket, ssl or clock; nothing from outside proxy.wire."""

from __future__ import annotations

import ast
from pathlib import Path

import proxy.wire

FORBIDDEN = {"asyncio", "socket", "ssl", "time", "datetime", "selectors", "uvloop", "threading"}
ALLOWED_PROJECT = ("proxy.wire", "cython_ext")


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


def test_wire_modules_import_no_io_and_nothing_outside_the_package() -> None:
    files = sorted(Path(proxy.wire.__file__).parent.glob("*.py"))
    assert len(files) > 10
    for path in files:
        for name in _imports(path):
            root = name.split(".")[0]
            assert root not in FORBIDDEN, f"{path.name} imports {name}"
            if root in ("proxy", "engine", "cdc", "cython_ext"):
                assert name.startswith(ALLOWED_PROJECT), f"{path.name} imports {name}"
