"""Output settings weir follows itself (extra_float_digits, bytea_output: PostgreSQL reports
neither with ParameterStatus) keep the scope PostgreSQL gives them: a change a rollback undoes,
a SET LOCAL that ends with its block, a SET LOCAL outside a block (which PostgreSQL ignores)
must not go on shaping cached answers afterwards. Differential against PostgreSQL directly,
the text of the values compared byte for byte."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg.types.string import TextLoader

from tests.support import InProcessWeir

READ = "SELECT x, b FROM f WHERE id = %s"
CASES = {
    "set local, committed": ["BEGIN", "SET LOCAL extra_float_digits = 0", "COMMIT"],
    "set, rolled back": ["BEGIN", "SET extra_float_digits = 0", "ROLLBACK"],
    "set, rolled back to a savepoint": ["BEGIN", "SAVEPOINT a", "SET bytea_output = 'escape'",
                                        "ROLLBACK TO SAVEPOINT a", "COMMIT"],
    "set local outside a block": ["SET LOCAL extra_float_digits = 0"],
    "set, kept": ["SET extra_float_digits = 0", "SET bytea_output = 'escape'"],
}


def _answers(dsn: str, statements: list[str]) -> list[Any]:
    """Three reads after ``statements``, the values in their text form (and where weir
    answered from, through weir)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.adapters.register_loader("float8", TextLoader)
        conn.adapters.register_loader("bytea", TextLoader)
        cur = psycopg.ClientCursor(conn)  # simple protocol: SET as the client wrote it
        for _ in range(2):
            cur.execute(READ, (1,))
        for statement in statements:
            cur.execute(statement)
        return [cur.execute(READ, (1,)).fetchall() for _ in range(3)]


@pytest.mark.parametrize("case", list(CASES))
def test_an_output_setting_is_followed_only_as_long_as_it_lasts(pg: Any, dbname: str,
                                                                 case: str) -> None:
    pg.psql("CREATE TABLE f (id int PRIMARY KEY, x float8, b bytea);"
            "INSERT INTO f VALUES (1, 0.1::float8 + 0.2::float8, '\\x00ff')", dbname)
    weir = InProcessWeir.start(pg.dsn(dbname=dbname), caching="explicit")
    try:
        with psycopg.connect(weir.dsn(dbname=dbname), autocommit=True) as conn:
            conn.execute("CREATE CACHE fx FROM SELECT x, b FROM f WHERE id = $1")
        direct = _answers(pg.dsn(dbname=dbname), CASES[case])
        assert _answers(weir.dsn(dbname=dbname), CASES[case]) == direct
        if case == "set, kept":  # (the case where weir follows the settings itself)
            assert direct[0] == [("0.3", "\\000\\377")]
            with psycopg.connect(weir.dsn(dbname=dbname), autocommit=True) as conn:
                hits = int(dict(conn.execute("SHOW WEIR STATUS").fetchall())["hits"])
            assert hits > 0
    finally:
        weir.stop()
