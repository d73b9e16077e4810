"""The json (not jsonb) operator kernels against real PostgreSQL: ``->``, ``->>``, ``#>``,
``#>>`` over documents as written (whitespace inside and around, duplicate keys, numbers as
written, escapes and surrogate pairs, raw scalars, empty containers) must give exactly what
PostgreSQL gives; a document with ``\\u0000`` must fail in the kernel as it fails upstream."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg.types.string import TextLoader

from engine.dataflow import pgjsontext
from engine.dataflow.pgmath import EvalError
from engine.plan.literals import literal_value
from engine.values import oids as T

DOCS = [
    '{"a": 1, "a" : [1,  2 ] , "b":{"c" :[ 5 , "x" ]}}',
    '  [1, "x\\u00e9\\n", null,  {"b" :  2}, 1.50, 1e3, true, [ ] ]  ',
    '{"k\\"q": "tab\\tnew\\nline\\\\ \\u00e9 é \\u20ac \\ud83d\\ude00 \\/", "": {"": []}}',
    '"a\\"b"', ' 1.50 ', ' null ', ' "s" ', 'null', 'true', '[]', '{}',
    '{"a\\u0062": {"x": null}, "n": -0}',
    '[[1, 2], [3, [4, 5]], {"a": [1, 2]}]',
    '{"tags": ["x", "y"],\n "n": 1,\t"o": {"p": 1, "q": [1, 2]}}',
]
FIELDS = ["a", "b", "ab", "", "k\"q", "n", "tags", "zz", "o"]
INDEXES = [0, 1, 2, -1, -2, -9, 7, 8]
PATHS = ["{}", "{a}", "{b,c,1}", "{b,c,-1}", "{0}", "{-1}", "{1,1,0}", "{2,a,1}", "{b,x}",
         "{o,q,-2}", "{NULL}", "{+1}", "{1x}", "{tags,0}", "{{o,p}}", "{ab,x}", "{3,b}"]


@pytest.fixture(scope="module")
def conn(pg: Any) -> Any:
    with psycopg.connect(pg.dsn(), autocommit=True) as c:
        c.adapters.register_loader("json", TextLoader)
        yield c


def _pg(conn: psycopg.Connection[Any], sql: str, *args: Any) -> Any:
    row = conn.execute(sql, args).fetchone()
    assert row is not None
    return row[0]


@pytest.mark.parametrize("doc", DOCS)
def test_operators_as_postgres(conn: Any, doc: str) -> None:
    checked = 0
    for key in FIELDS:
        for op, kernel in (("->", pgjsontext.json_field), ("->>", pgjsontext.json_field_text)):
            want = _pg(conn, f"SELECT %s::json {op} %s::text", doc, key)
            assert kernel((doc, key), ()) == want, (doc, op, key)
            checked += 1
    for index in INDEXES:
        for op, kernel in (("->", pgjsontext.json_index), ("->>", pgjsontext.json_index_text)):
            want = _pg(conn, f"SELECT %s::json {op} %s::int4", doc, index)
            assert kernel((doc, index), ()) == want, (doc, op, index)
    for path in PATHS:
        value = literal_value(T.ARRAY_OF[T.TEXT], path)
        for op, kernel in (("#>", pgjsontext.json_path), ("#>>", pgjsontext.json_path_text)):
            want = _pg(conn, f"SELECT %s::json {op} %s::text[]", doc, path)
            assert kernel((doc, value), ()) == want, (doc, op, path)
    assert checked


@pytest.mark.parametrize("doc", ['["\\u0000"]', '{"a": 1, "b": "x\\u0000"}'])
def test_nul_escape_fails_as_upstream(conn: Any, doc: str) -> None:
    with pytest.raises(psycopg.Error):
        _pg(conn, "SELECT %s::json -> 0", doc)
    with pytest.raises(EvalError):
        pgjsontext.json_index((doc, 0), ())
