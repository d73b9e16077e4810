"""docs/quickstart.md does what it says: its tables and statements, run through a weir with
the default settings (a miss answered upstream, a key filled on its second read).

Each ``EXPLAIN LAST STATEMENT`` in the guide carries its expected answer as a comment
(``-- destination | reason``); every read through weir must equal the same read made directly
on PostgreSQL at that moment (right after the guide's INSERT, that is read-your-writes). Only a
read the guide marks "once the fill is done" may be repeated until it is a hit.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg

from tests.support import WeirProcess, eventually

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "quickstart.md"
#: the guide's defaults; the read timeout (how long a cached read may wait for replication to
#: pass what the session saw upstream) is raised so that a loaded machine does not turn the
#: guide's hits into reads forwarded upstream
DEFAULTS = ["--misses", "upstream", "--admission", "second", "--read-timeout", "10"]


def _block(text: str, lang: str, containing: str) -> str:
    blocks: list[str] = re.findall(rf"```{lang}\n(.*?)```", text, re.DOTALL)
    return next(b for b in blocks if containing in b)


def statements(block: str) -> list[tuple[str, str]]:
    """(statement, the comment on its last line) in order."""
    out, lines = [], []
    for line in block.splitlines():
        code, _, comment = line.partition("--")
        if code.strip():
            lines.append(code.strip())
        if code.rstrip().endswith(";"):
            out.append((" ".join(lines).rstrip(";"), comment.strip()))
            lines = []
    return out


def _explain(conn: psycopg.Connection[Any]) -> tuple[str, str]:
    row = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
    assert row is not None
    return str(row[0]), str(row[1])


def test_the_quick_start_does_what_it_says(pg: Any, dbname: str) -> None:
    text = GUIDE.read_text()
    setup = re.findall(r'^psql -c "(.+)"', _block(text, "sh", "CREATE TABLE"), re.MULTILINE)
    assert any("CREATE TABLE stories" in s for s in setup), setup
    for sql in setup:
        if not sql.startswith("ALTER SYSTEM"):  # the harness's cluster has wal_level=logical
            pg.psql(sql, dbname)
    steps = statements(_block(text, "sql", "CREATE CACHE story_votes"))
    assert sum(s.startswith("EXPLAIN LAST STATEMENT") for s, _ in steps) >= 3, steps
    weir = WeirProcess.start(pg, DEFAULTS, upstream=pg.dsn(dbname=dbname))
    try:
        with (psycopg.connect(weir.dsn(dbname=dbname), autocommit=True) as through,
              psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct):
            previous, previous_note = "", ""
            for sql, note in steps:
                if sql == "EXPLAIN LAST STATEMENT":
                    want = tuple(part.strip() for part in note.split("|"))
                    got = _explain(through)
                    if got[0] != want[0] and "once the fill is done" in previous_note:
                        def hit(read: str = previous, dest: str = want[0]
                                ) -> tuple[str, str] | None:
                            through.execute(read).fetchall()
                            answer = _explain(through)
                            return answer if answer[0] == dest else None

                        answered = eventually(hit, timeout=10)
                        assert answered is not None
                        got = answered
                    assert got[0] == want[0] and got[1].startswith(want[1]), (previous, got)
                    continue
                cur = through.execute(sql)
                if sql.startswith("SELECT"):
                    assert cur.fetchall() == direct.execute(sql).fetchall(), sql
                previous, previous_note = sql, note
            status = {str(k): str(v) for k, v in through.execute("SHOW WEIR STATUS")}
            assert int(status["hits"]) >= 2 and int(status["misses"]) >= 2, status
    finally:
        weir.stop()
