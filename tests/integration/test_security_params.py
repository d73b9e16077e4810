"""Parameters of cached prepared reads are decoded as PostgreSQL's input functions decode
them (issue 20, repro 9): property tests against the real cluster's own ``$1::type``, and the
reproductions through weir with psycopg and asyncpg."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import asyncpg
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.types.numeric import Int2, Int4

from engine import TextValue, oids
from proxy.params import ParamError, decode_param
from tests.support import InProcessWeir

_DIGITS = "0123456789"
_ODD = ["_", "\uff11", "\u0661", "\u0966", " ", "\t", "\n", "\v", "+", "-", "e", "x", ".",
        "\xa0", "\u2007", "0x", "1_0", "\x00"]
int_texts = st.one_of(
    st.integers(-(2**64), 2**64).map(str),
    st.lists(st.sampled_from(list(_DIGITS) + _ODD), max_size=12).map("".join),
)
_HEX = "0123456789abcdefABCDEF"
uuid_texts = st.one_of(
    st.uuids().map(str),
    st.uuids().map(lambda u: "{" + str(u) + "}"),
    st.uuids().map(lambda u: u.hex),
    st.uuids().map(lambda u: "urn:uuid:" + str(u)),
    st.lists(st.sampled_from([*list(_HEX), "-", "{", "}", " "]), max_size=40).map("".join),
)


@pytest.fixture(scope="module")
def direct(pg: Any) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        yield conn


def _postgres(conn: Any, text: str, typ: str) -> Any:
    """PostgreSQL's own reading of ``text`` as ``typ``: the value, or the SQLSTATE."""
    try:
        return conn.execute(f"SELECT %s::{typ}", (text,)).fetchone()[0]
    except psycopg.Error as exc:
        return exc.sqlstate


def _weir(text: str, declared: int, column: int) -> Any:
    try:
        return decode_param(text.encode(), 0, declared, column)
    except ParamError:
        return "refused"
    except UnicodeEncodeError:
        return "refused"


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(int_texts, st.sampled_from([(oids.INT2, "int2"), (oids.INT4, "int4"), (oids.INT8, "int8")]),
       st.sampled_from([0, oids.INT2, oids.INT4, oids.INT8]))
def test_integer_parameters_read_as_postgres_reads_them(direct: Any, text: str,
                                                        column: tuple[int, str],
                                                        declared: int) -> None:
    """Whatever weir decodes, PostgreSQL reads the same under the parameter's type (the
    declared one, else the column's); whatever PostgreSQL refuses, weir refuses."""
    if "\x00" in text:
        return  # not a possible text parameter (a NUL ends it on the wire)
    names = {oids.INT2: "int2", oids.INT4: "int4", oids.INT8: "int8"}
    typ = names[declared] if declared else column[1]
    got = _weir(text, declared, column[0])
    pg_value = _postgres(direct, text, typ)
    if got != "refused":
        assert pg_value == got, (text, typ, got, pg_value)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(uuid_texts)
def test_uuid_parameters_read_as_postgres_reads_them(direct: Any, text: str) -> None:
    got = _weir(text, 0, oids.UUID)
    pg_value = _postgres(direct, text, "uuid")
    if got != "refused":
        assert pg_value == got, (text, got, pg_value)
    if isinstance(pg_value, str):  # an SQLSTATE: PostgreSQL refused it
        assert got == "refused"


other_texts = st.one_of(
    st.sampled_from(["t", "true", "TRUE", " yes ", "on", "1", "0", "off", "of", "n", "tr",
                     "2024-01-05", "2024-1-5", " 2024-01-05 ", "05/01/2024", "20240105",
                     "epoch", "infinity", "-infinity", "2024-02-30", "0001-01-01 BC",
                     "1.5", "1e3", " 12.50 ", "NaN", "nan", "-0", "1_000", "+.5", "Infinity",
                     "2024-01-05 10:00:00", "2024-01-05T10:00:00", "2024-01-05 10:00:00+02",
                     "\uff11", "abc", ""]),
    st.text(alphabet="0123456789-:. +eEtTfFnN", max_size=12),
)
OTHER_TYPES = [(oids.BOOL, "bool"), (oids.NUMERIC, "numeric"), (oids.FLOAT8, "float8"),
               (oids.DATE, "date"), (oids.TIMESTAMP, "timestamp"), (oids.TEXT, "text")]


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(other_texts, st.sampled_from(OTHER_TYPES))
def test_other_parameters_never_accept_what_postgres_refuses(direct: Any, text: str,
                                                             column: tuple[int, str]) -> None:
    """For the other key types: whatever PostgreSQL refuses, weir refuses (the read goes
    upstream for PostgreSQL's error); whatever weir accepts, PostgreSQL's value prints the
    same as weir's."""
    got = _weir(text, 0, column[0])
    pg_value = _postgres(direct, text, column[1])
    if isinstance(pg_value, str) and len(pg_value) == 5 and pg_value[:2] in ("22", "0A"):
        if column[0] != oids.TEXT:
            assert got == "refused", (text, column, got, pg_value)
        return
    if got != "refused":
        printed = direct.execute(f"SELECT %s::{column[1]}::text", (text,)).fetchone()[0]
        shown = (got.text if isinstance(got, TextValue) else str(got).lower()
                 if isinstance(got, bool) else str(got))
        mine = direct.execute(f"SELECT %s::{column[1]}::text", (shown,)).fetchone()[0]
        assert printed == mine, (text, column, got, printed, mine)


# -- the reproductions through weir ------------------------------------------------------------

@pytest.fixture
def cached(pg: Any, dbname: str) -> Iterator[tuple[Any, str]]:
    pg.psql("CREATE TABLE n4 (k int4 PRIMARY KEY, v text); INSERT INTO n4 VALUES (1, 'one');"
            "CREATE TABLE n8 (k int8 PRIMARY KEY, v text); INSERT INTO n8 VALUES (1, 'one');"
            "CREATE TABLE u (k uuid PRIMARY KEY, v text);"
            "INSERT INTO u VALUES ('6ba7b810-9dad-11d1-80b4-00c04fd430c8', 'u')", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            for t in ("n4", "n8", "u"):
                conn.execute(f"CREATE CACHE {t}_v FROM SELECT v FROM {t} WHERE k = $1")
        yield server, dbname
    finally:
        server.stop()


def test_malformed_parameters_get_postgres_errors(cached: tuple[Any, str]) -> None:
    server, dbname = cached
    with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
        assert conn.execute("SELECT v FROM n4 WHERE k = %s", (1,)).fetchall() == [("one",)]
        for text in ("0_1", "1_0", "\uff11", "\u0661"):  # str: no declared type
            with pytest.raises(psycopg.errors.InvalidTextRepresentation):
                conn.execute("SELECT v FROM n4 WHERE k = %s", (text,))
        # a declared type narrower than the column: PostgreSQL reads the value as that type
        with pytest.raises(psycopg.errors.NumericValueOutOfRange):
            conn.execute("SELECT v FROM n4 WHERE k = %t", (Int2(40000),))  # text
        with pytest.raises(psycopg.errors.NumericValueOutOfRange):
            conn.execute("SELECT v FROM n8 WHERE k = %t", (Int4(3000000000),))
        for text in ("urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8",
                     "6ba7b81-09dad-11d1-80b4-00c04fd430c8"):
            with pytest.raises(psycopg.errors.InvalidTextRepresentation):
                conn.execute("SELECT v FROM u WHERE k = %s", (text,))
        assert conn.execute("SELECT v FROM u WHERE k = %s",
                            ("{6ba7b8109dad11d180b400c04fd430c8}",)).fetchall() == [("u",)]

    async def run() -> None:  # asyncpg declares no type: the column's
        through = await asyncpg.connect(server.dsn(dbname=dbname))
        try:
            stmt = await through.prepare("SELECT v FROM n4 WHERE k = $1")
            assert await stmt.fetch(1) == [("one",)]
        finally:
            await through.close()

    asyncio.run(run())
