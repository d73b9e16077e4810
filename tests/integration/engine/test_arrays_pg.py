"""The array kernels against real PostgreSQL: ``= ANY``, ``@>``, ``<@``, ``&&``,
``cardinality`` and ``array_length`` over arrays with NULL elements, empty arrays, two
dimensions and NULL operands, for integer and text elements, must give PostgreSQL's value;
an array kept as text (explicit bounds) must make the kernel fail (the read goes upstream)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from engine.dataflow import pgarrays
from engine.dataflow.pgmath import EvalError
from engine.plan.literals import literal_value
from engine.values import oids as T

INTS = ["{}", "{1}", "{1,2,3}", "{3,NULL}", "{NULL}", "{{1,2},{3,4}}", "{{1,NULL}}", "{2,2}",
        None]
TEXTS = ["{}", "{a}", "{a,b}", "{b,NULL}", "{{a,b},{c,d}}", '{"a,b",A}', None]
VALUES: dict[int, list[Any]] = {T.INT4: [1, 2, 5, None], T.TEXT: ["a", "A", "a,b", "z", None]}


def _value(type_oid: int, text: str | None) -> Any:
    return None if text is None else literal_value(T.ARRAY_OF[type_oid], text)


@pytest.fixture(scope="module")
def conn(pg: Any) -> Any:
    with psycopg.connect(pg.dsn(), autocommit=True) as c:
        yield c


@pytest.mark.parametrize("type_oid,arrays", [(T.INT4, INTS), (T.TEXT, TEXTS)])
def test_array_kernels_as_postgres(conn: Any, type_oid: int, arrays: list[str | None]) -> None:
    name = "int4" if type_oid == T.INT4 else "text"
    for a in arrays:
        av = _value(type_oid, a)
        for x in VALUES[type_oid]:
            want = conn.execute(f"SELECT %s::{name} = ANY(%s::{name}[])", (x, a)).fetchone()[0]
            assert pgarrays.array_any_eq((x, av), ()) == want, (x, a)
        if a is not None:
            got = pgarrays.cardinality((av,), ())
            assert got == conn.execute(f"SELECT cardinality(%s::{name}[])", (a,)).fetchone()[0]
            for dim in (0, 1, 2, 3):
                want = conn.execute(f"SELECT array_length(%s::{name}[], %s)", (a, dim)).fetchone()
                assert pgarrays.array_length((av, dim), ()) == want[0], (a, dim)
        for b in arrays:
            if a is None or b is None:
                continue
            bv = _value(type_oid, b)
            row = conn.execute(f"SELECT %s::{name}[] @> %s::{name}[], %s::{name}[] <@ "
                               f"%s::{name}[], %s::{name}[] && %s::{name}[]",
                               (a, b, a, b, a, b)).fetchone()
            ours = (pgarrays.array_contains((av, bv), ()),
                    pgarrays.array_contained((av, bv), ()), pgarrays.array_overlap((av, bv), ()))
            assert ours == tuple(row), (a, b)


def test_array_kept_as_text_goes_upstream() -> None:
    with pytest.raises(EvalError):
        pgarrays.cardinality(("[0:1]={1,2}",), ())
    with pytest.raises(EvalError):
        pgarrays.array_contains(("[0:1]={1,2}", (1,)), ())
