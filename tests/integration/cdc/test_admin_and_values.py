"""Slot admin CLI, system-identifier continuity, and the codecs against PostgreSQL's output."""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest

from cdc import admin
from cdc.slots import SystemInfo
from engine.values import decode_text, encode_text
from tests.integration.cdc.harness import changes_of, execute, persistent_stream, run
from tests.support import unique_name
from tests.unit.cdc.recording import RecordingSink


def test_admin_lists_and_drops_only_inactive_persistent_slots(
        pg: Any, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = unique_name("weir_adm")
    pg.psql(f"SELECT pg_create_logical_replication_slot('{prefix}_a', 'pgoutput')")
    url = pg.dsn()
    assert admin.main(["list", url, "--prefix", prefix]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 1 and listed[0].startswith(f"{prefix}_a\tpersistent\tinactive")
    assert admin.main(["drop", url, "--prefix", prefix]) == 0
    assert capsys.readouterr().out.strip() == f"dropped {prefix}_a"
    assert pg.psql(f"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE '{prefix}%'"
                   ).strip() == "0"


def test_changed_system_identifier_resets_everything(pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE t (id int PRIMARY KEY)", dbname)
    slot = unique_name("weir_sysid")

    async def body() -> None:
        sink = RecordingSink()
        stream = persistent_stream(pg, dbname, slot, sink)
        await stream.start()
        await execute(pg, dbname, "INSERT INTO t VALUES (1)")
        await stream.barrier()
        await stream.stop()
        stream.system = SystemInfo("another-cluster", 1, 0, dbname)
        await stream.start()
        try:
            assert len(sink.reset_alls) == 1 and "system identifier" in sink.reset_alls[0]
            await execute(pg, dbname, "INSERT INTO t VALUES (2)")
            await stream.barrier()
            assert [c.new for c in changes_of(sink, "t")][-1] == (2,)
        finally:
            await stream.stop()
            pg.psql(f"SELECT pg_drop_replication_slot('{slot}')")

    run(body)


VALUE_SQL = [
    ("float8", "SELECT x::float8::text FROM unnest(%s::float8[]) x", 701),
    ("float4", "SELECT x::float4::text FROM unnest(%s::float8[]) x", 700),
]


def test_codecs_print_exactly_what_postgres_prints(pg: Any, dbname: str) -> None:
    rng = random.Random(5)
    floats = [rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(300)]
    floats += [0.1, 1e15, 1e16, 123456789012345.0, 1e-5, 0.0001, 100.0, -0.0, 1e-40, 1.4e-45,
               3.4028234e38, 1.1754944e-38]
    doubles = [*floats, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308]
    exprs = [
        ("'1 year 2 mons -3 days 04:05:06.5'::interval", 1186),
        ("'-1 days +00:00:01'::interval", 1186), ("'-00:00:01.25'::interval", 1186),
        ("'1 mon'::interval - '1 day'::interval", 1186), ("interval '0'", 1186),
        ("'2020-02-29 12:00:00.5+05:30'::timestamptz", 1184),
        ("'0099-01-01 00:00:00'::timestamp", 1114), ("'13:14:15.000001'::time", 1083),
        ("'13:14:15+05:45'::timetz", 1266), ("'1.500'::numeric", 1700),
        ("'NaN'::numeric", 1700), ("'\\x00ff'::bytea", 17),
        ("ARRAY['a b', NULL, '', 'x\"y', 'NULL']::text[]", 1009),
        ("ARRAY[[1,2],[3,NULL]]::int4[]", 1007), ("'{\"a\": 1}'::jsonb", 3802),
        ("'infinity'::date", 1082), ("gen_random_uuid()", 2950),
    ]
    with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'; SET IntervalStyle = 'postgres'; SET DateStyle = ISO")
        for name, sql, oid in VALUE_SQL:
            values = doubles if name == "float8" else floats
            for (text,) in conn.execute(sql, (values,)).fetchall():  # type: ignore[arg-type]
                assert encode_text(oid, decode_text(oid, text)) == text
        for expr, oid in exprs:
            row = conn.execute(f"SELECT ({expr})::text").fetchone()  # type: ignore[arg-type]
            assert row is not None
            assert encode_text(oid, decode_text(oid, row[0])) == row[0], expr
