"""The jsonb kernels against real PostgreSQL: every operator over a set of awkward documents
(nesting, raw scalars, numbers of several scales, escapes, duplicate keys, non-ASCII) must
give the value PostgreSQL gives, starting from the text PostgreSQL printed for the document;
jsonb literals must be typed to the text PostgreSQL prints."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg.types.string import TextLoader

from engine.dataflow import pgjson
from engine.plan.literals import LiteralError, literal_value
from engine.values import oids as T

DOCS = [
    '{"a": 1, "b": [1, 2.50, {"c": "x"}], "bb": null, "a\\u0001": true}',
    '{"b": 1, "a": 2, "b": 3}',
    '[1, "1", 1.0, [1], {"a": 1}, null, true, false, "a"]',
    '"a"', '1.50', '-0', '0.0', '1e2', '1E-3', 'null', 'true', '[]', '{}',
    '{"k\\"q": "tab\\tnew\\nline\\\\ \\u00e9 é \\u20ac", "": {"": []}}',
    '{"a": {"b": {"c": [10, 20, {"d": 1.0}]}}, "n": -12.3400}',
    '[[1, 2], [3, [4, 5]], {"a": [1, 2]}]',
    '{"tags": ["x", "y"], "n": 1, "o": {"p": 1, "q": [1, 2]}}',
]
FIELDS = ["a", "b", "bb", "c", "", "k\"q", "n", "tags", "zz"]
INDEXES = [0, 1, 2, -1, -2, -9, 8, 9]
PATHS = ["{}", "{a}", "{b,2,c}", "{a,b,c,2,d}", "{0}", "{-1}", "{1,1,0}", "{2,a,1}", "{b,x}",
         "{o,q,-2}", "{NULL}", "{+1}", "{1x}", "{tags,0}", "{{o,p}}"]
SPACED = {'{" 1"}': (" 1",), '{"1 "}': ("1 ",)}  # whitespace: not typed as a literal
CONTAINED = ['{"a": 1}', '{"a": 1.00}', '{"b": [2.5]}', '{"b": [{}]}', '{"b": [[]]}', '[1]',
             '[[1]]', '1', '"a"', '[]', '{}', '{"tags": ["y"]}', '{"o": {"q": [2]}}',
             '[{"a": [2]}]', '[1.0, "1"]', 'null', '[null]', '{"bb": null}']
KEYS = ["a", "b", "1", "x", "tags", ""]


def _pg(conn: psycopg.Connection[Any], sql: str, *args: Any) -> Any:
    row = conn.execute(sql, args).fetchone()
    assert row is not None
    return row[0]


@pytest.fixture(scope="module")
def conn(pg: Any) -> Any:
    with psycopg.connect(pg.dsn(), autocommit=True) as c:
        yield c


@pytest.mark.parametrize("doc", DOCS)
def test_literal_typed_as_postgres_prints(conn: Any, doc: str) -> None:
    assert literal_value(T.JSONB, doc) == _pg(conn, "SELECT %s::jsonb::text", doc)


@pytest.mark.parametrize("bad", ['{"a": NaN}', "Infinity", '"\\u0000"', "[1,]", "1e100000",
                                 '"\\ud800"'])
def test_literals_refused(bad: str) -> None:
    with pytest.raises(LiteralError):
        literal_value(T.JSONB, bad)


@pytest.mark.parametrize("doc", DOCS)
def test_operators_match_postgres(conn: Any, doc: str) -> None:
    text = _pg(conn, "SELECT %s::jsonb::text", doc)
    cases: list[tuple[str, str, Any, Any]] = []
    for key in FIELDS:
        cases += [("jsonb_field", "SELECT (%s::jsonb -> %s::text)::text", key, key),
                  ("jsonb_field_text", "SELECT %s::jsonb ->> %s::text", key, key)]
    for index in INDEXES:
        cases += [("jsonb_index", "SELECT (%s::jsonb -> %s::int4)::text", index, index),
                  ("jsonb_index_text", "SELECT %s::jsonb ->> %s::int4", index, index)]
    for path in [*PATHS, *SPACED]:
        value = SPACED.get(path) or literal_value(T.ARRAY_OF[T.TEXT], path)
        cases += [("jsonb_path", "SELECT (%s::jsonb #> %s::text[])::text", path, value),
                  ("jsonb_path_text", "SELECT %s::jsonb #>> %s::text[]", path, value)]
    for other in CONTAINED:
        canon = literal_value(T.JSONB, other)
        cases += [("jsonb_contains", "SELECT %s::jsonb @> %s::jsonb", other, canon),
                  ("jsonb_contained", "SELECT %s::jsonb <@ %s::jsonb", other, canon)]
    for key in KEYS:
        cases.append(("jsonb_exists", "SELECT jsonb_exists(%s::jsonb, %s::text)", key, key))
    wrong = []
    for fn, sql, pg_arg, our_arg in cases:
        want = _pg(conn, sql, text, pg_arg)
        got = pgjson.FUNCTIONS[fn]((text, our_arg), (T.JSONB, T.TEXT))
        if got != want:
            wrong.append((fn, pg_arg, got, want))
    assert wrong == []
    assert len(cases) > 80


AGG_VALUES = {
    "int2": "{1,-2,NULL}", "int4": "{2147483647,0}", "int8": "{-9223372036854775808,NULL}",
    "numeric": "{1.50,0.000,-12e3,1e-7,NULL}", "text": '{"a \\"q\\"","é\\\\",NULL,""}',
    "varchar": "{x,y}", "bool": "{t,f,NULL}", "date": "{2024-02-29,0001-01-01,NULL}",
    "timestamp": '{"2024-01-01 10:00:00.5","2024-01-01 00:00:00","9999-12-31 23:59:59.999999"}',
    "uuid": "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}",
    "jsonb": '{"{\\"b\\": 1.0, \\"a\\": [1, \\"x\\"]}","null","\\"s\\"",NULL}',
}


@pytest.mark.parametrize("type_name", sorted(AGG_VALUES))
def test_json_aggregates_match_postgres(conn: Any, type_name: str) -> None:
    conn.adapters.register_loader("jsonb", TextLoader)
    sql = (f"SELECT json_agg(x ORDER BY n)::text, jsonb_agg(x ORDER BY n)::text, "
           f"array_agg(x ORDER BY n) FROM unnest(%s::{type_name}[]) WITH ORDINALITY u(x, n)")
    json_text, jsonb_text, values = _pg_row(conn, sql, AGG_VALUES[type_name])
    oid = {"int2": T.INT2, "int4": T.INT4, "int8": T.INT8, "numeric": T.NUMERIC,
           "text": T.TEXT, "varchar": T.VARCHAR, "bool": T.BOOL, "date": T.DATE,
           "timestamp": T.TIMESTAMP, "uuid": T.UUID, "jsonb": T.JSONB}[type_name]
    assert oid in pgjson.JSON_ELEMENT_TYPES
    ours = pgjson.json_array(values, oid)
    assert (ours, ours) == (json_text, jsonb_text)


def _pg_row(conn: Any, sql: str, *args: Any) -> Any:
    row = conn.execute(sql, args).fetchone()
    assert row is not None
    return row
