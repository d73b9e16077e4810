"""engine.sql and engine.plan stay sans-I/O: no asyncio/socket/ssl/time, nothing from proxy
or cdc (DESIGN section 2), checked by walking their imports."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FORBIDDEN = ("asyncio", "socket", "ssl", "time", "proxy", "cdc", "selectors", "threading")


def test_planner_modules_import_nothing_with_io() -> None:
    files = [*(ROOT / "engine" / "sql").glob("*.py"), *(ROOT / "engine" / "plan").rglob("*.py")]
    assert len(files) > 15
    for path in files:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"
