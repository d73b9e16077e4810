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


SLICE_BOUNDS = [(1, 2), (0, 1), (2, 9), (3, 2), (-5, 0), (2, None), (None, 1), (None, None),
                (None, 0), (9, None), (1, 1)]


@pytest.mark.parametrize("type_oid,arrays", [(T.INT4, INTS), (T.TEXT, TEXTS)])
def test_slices_and_constructors_as_postgres(conn: Any, type_oid: int,
                                             arrays: list[str | None]) -> None:
    """``a[lo:hi]`` (bounds omitted or NULL) of one-dimensional arrays, and ``ARRAY[...]`` with
    NULL elements, against PostgreSQL; a multidimensional array's slice is refused."""
    name = "int4" if type_oid == T.INT4 else "text"
    for a in arrays:
        av = _value(type_oid, a)
        multi = a is not None and a.startswith("{{")
        for lo, hi in [*SLICE_BOUNDS, (None, "null")]:
            sql = (f"SELECT (%s::{name}[])[{'' if lo is None else lo}:"
                   f"{'' if hi is None else 'NULL' if hi == 'null' else hi}]")
            want = conn.execute(sql, (a,)).fetchone()[0]
            kernel = {(True, True): "array_slice", (True, False): "array_slice_from",
                      (False, True): "array_slice_to", (False, False): "array_slice_all"}[
                (lo is not None, hi is not None)]
            args = (av, *(v for v in (lo, None if hi == "null" else hi)
                          if v is not None or hi == "null"))
            if av is None or hi == "null":
                assert want is None, (a, lo, hi)  # the strict wrapper: NULL in, NULL out
                continue
            if multi:
                with pytest.raises(EvalError):
                    pgarrays.FUNCTIONS[kernel](args, ())
                continue
            got = pgarrays.FUNCTIONS[kernel](args, ())
            assert list(got) == (want or []), (a, lo, hi, got, want)
        for x in VALUES[type_oid]:
            want = conn.execute(f"SELECT ARRAY[%s::{name}, NULL, %s::{name}]", (x, x)).fetchone()
            assert list(pgarrays.array_construct((x, None, x), ())) == want[0]
