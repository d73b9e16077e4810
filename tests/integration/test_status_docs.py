"""Every figure ``SHOW WEIR STATUS`` shows is explained in docs/admin-commands.md.

Asked of a running weir (with a cache, so the fill and lane figures are there): the figures
are built from dicts (fill phases, lane counters) whose keys only the running code knows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg

from tests.support import WeirProcess

DOC = Path(__file__).resolve().parents[2] / "docs" / "admin-commands.md"


def test_every_status_figure_is_documented(pg: Any, dbname: str) -> None:
    text = DOC.read_text()
    section = text[text.index("## SHOW WEIR STATUS"):]
    weir = WeirProcess.start(pg, ["--hit-lanes", "1"], upstream=pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(weir.dsn(dbname=dbname), autocommit=True) as conn:
            conn.execute("CREATE TABLE status_t (id int PRIMARY KEY, v int)")
            conn.execute("CREATE CACHE FROM SELECT v FROM status_t WHERE id = $1")
            names = [str(row[0]) for row in conn.execute("SHOW WEIR STATUS")]
    finally:
        weir.stop()
    assert {"hits", "fill_ms_avg", "fill_fetch_ms_avg"} <= set(names), names  # lanes: cython
    missing = [n for n in names if f"`{n}`" not in section]
    assert not missing, f"explain these in docs/admin-commands.md (SHOW WEIR STATUS): {missing}"
