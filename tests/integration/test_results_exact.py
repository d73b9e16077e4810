"""Exact results against a real PostgreSQL 15: weir's encoder output must equal the server's
bytes, value by value and as whole DataRows, in text and binary, under every combination of
the settings that change output (DateStyle and field order, TimeZone around DST changes,
IntervalStyle, extra_float_digits, bytea_output).

Each value is made by the server from a generated literal; its canonical form is what
``engine.values`` decodes from the server's text under weir's own connection settings (as for
fills and CDC); it is then re-encoded by ``proxy.results`` and compared with what the server
sends a session with the settings under test.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import pq

from engine.values import decode_text
from engine.values.arrays import format_array
from pgwire.backend import encode_data_row
from proxy.results import OutputSettings, column_encoder, encode_rows

CANONICAL = {
    "DateStyle": "ISO, MDY",
    "TimeZone": "UTC",
    "IntervalStyle": "postgres",
    "extra_float_digits": "1",
    "bytea_output": "hex",
}
REPORTED = ("DateStyle", "TimeZone", "IntervalStyle", "extra_float_digits", "bytea_output",
            "client_encoding", "server_encoding", "integer_datetimes")


@dataclass(frozen=True, slots=True)
class Outputs:
    values: list[Any]
    type_oid: int
    typmod: int
    settings: OutputSettings
    text: list[bytes | None]
    binary: list[bytes | None]


class RawServer:
    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.pgconn = self.conn.pgconn

    def close(self) -> None:
        self.conn.close()

    def _exec(self, sql: str, params: Sequence[bytes] = (), fmt: int = 0) -> Any:
        res = self.pgconn.exec_params(sql.encode(), list(params), result_format=fmt)
        if res.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
            raise AssertionError(f"{sql}: {res.error_message.decode(errors='replace')}")
        return res

    def apply(self, params: Mapping[str, str]) -> OutputSettings:
        for name, value in params.items():
            self._exec(f"SET {name} = '{value}'")
        shown = {}
        for name in REPORTED:
            res = self._exec(f"SHOW {name}")
            shown[name] = (res.get_value(0, 0) or b"").decode()
        return OutputSettings.from_parameters(shown)

    def _load(self, type_sql: str, literals: Sequence[str], decode_as: str) -> None:
        """Make the values once, under the canonical settings (input parsing depends on
        DateStyle and IntervalStyle too), into a temporary table."""
        self._exec("DROP TABLE IF EXISTS pg_temp.results_exact")
        array = format_array(tuple(literals), str).encode()
        self._exec(f"CREATE TEMP TABLE results_exact AS SELECT n, v::{decode_as} AS c, "
                   f"v::{type_sql} AS v FROM unnest($1::text[]) WITH ORDINALITY AS u(v, n)",
                   [array])

    def _column(self, name: str, fmt: int) -> Any:
        return self._exec(f"SELECT {name} FROM results_exact ORDER BY n", (), fmt)

    def roundtrip(self, type_sql: str, literals: Sequence[str],
                  params: Mapping[str, str], decode_as: str | None = None) -> Outputs:
        """``decode_as``: the type whose canonical text gives the values (default: the same)."""
        self.apply(CANONICAL)
        self._load(type_sql, literals, decode_as or type_sql)
        canon = self._column("c", 0)
        oid = canon.ftype(0)
        values = [decode_text(oid, raw.decode()) if raw is not None else None
                  for raw in (canon.get_value(i, 0) for i in range(canon.ntuples))]
        settings = self.apply(params)
        text = self._column("v", 0)
        binary = self._column("v", 1)
        return Outputs(
            values, text.ftype(0), text.fmod(0), settings,
            [text.get_value(i, 0) for i in range(text.ntuples)],
            [binary.get_value(i, 0) for i in range(binary.ntuples)],
        )


@pytest.fixture(scope="module")
def server(pg: Any) -> Iterator[RawServer]:
    raw = RawServer(pg.dsn())
    try:
        yield raw
    finally:
        raw.close()


def check(out: Outputs, formats: tuple[int, ...] = (0, 1)) -> None:
    """Every value and the whole DataRow stream equal the server's, in both formats."""
    assert len(out.values) == len(out.text) == len(out.binary)
    for fmt, server_bytes in ((0, out.text), (1, out.binary)):
        if fmt not in formats:
            continue
        enc = column_encoder(out.type_oid, out.typmod, fmt, out.settings)
        for value, want in zip(out.values, server_bytes, strict=True):
            got = None if value is None else enc.encode(value)
            assert got == want, (fmt, out.settings, value, got, want)
        rows = encode_rows([(v,) for v in out.values], [enc])
        assert rows == b"".join(encode_data_row([w]) for w in server_bytes)


def run(server: RawServer, type_sql: str, literals: Sequence[str],
        grid: Sequence[Mapping[str, str]], decode_as: str | None = None,
        formats: tuple[int, ...] = (0, 1)) -> None:
    for params in grid:
        out = server.roundtrip(type_sql, literals, params, decode_as)
        assert out.settings.reason() is None, out.settings.reason()
        check(out, formats)


DATESTYLES = [{"DateStyle": f"{s}, {o}"} for s in ("ISO", "SQL", "Postgres", "German")
              for o in ("DMY", "MDY", "YMD")]
ZONES = ("UTC", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "Europe/Dublin")
DEFAULT = [CANONICAL]
EXAMPLES = int(os.environ.get("WEIR_RESULTS_EXAMPLES", "12"))  # raise to hunt for bugs
FEW = settings(max_examples=EXAMPLES, deadline=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def lists(strategy: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    return st.lists(strategy, min_size=1, max_size=25)


def _edges(*values: int) -> st.SearchStrategy[int]:
    return st.sampled_from(values)


@FEW
@given(
    int2=lists(st.integers(-(2**15), 2**15 - 1).map(str)),
    int4=lists((st.integers(-(2**31), 2**31 - 1) | _edges(-(2**31), 2**31 - 1, 0)).map(str)),
    int8=lists((st.integers(-(2**63), 2**63 - 1) | _edges(-(2**63), 2**63 - 1)).map(str)),
    oid=lists(st.integers(0, 2**32 - 1).map(str)),
    boolean=lists(st.sampled_from(["t", "f"])),
)
def test_integers_and_bool(server: RawServer, int2: list[str], int4: list[str], int8: list[str],
                           oid: list[str], boolean: list[str]) -> None:
    run(server, "int2", int2, DEFAULT)
    run(server, "int4", int4, DEFAULT)
    run(server, "int8", int8, DEFAULT)
    run(server, "oid", oid, DEFAULT)
    run(server, "bool", boolean, DEFAULT)


def _float_literal(value: float) -> str:
    text = repr(value)
    return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}.get(text, text)


FLOAT_GRID = [{"extra_float_digits": str(n)} for n in (-15, -4, 0, 1, 2, 3)]


@FEW
@given(
    f8=lists(st.floats().map(_float_literal)
             | st.sampled_from(["5e-324", "2.2250738585072014e-308", "1e22", "1e15", "1e16",
                                "123456789012345678", "0.0001", "-0", "1.7976931348623157e308",
                                "1e23", "2e23", "-9007199254740993"])),
    f4=lists(st.floats(width=32).map(_float_literal)
             | st.sampled_from(["1e-45", "1.17549435e-38", "3.4028235e38", "1e6", "1e7"])),
)
def test_floats_under_extra_float_digits(server: RawServer, f8: list[str], f4: list[str]) -> None:
    run(server, "float8", f8, FLOAT_GRID)
    run(server, "float4", f4, FLOAT_GRID)


def _moderate(d: Decimal) -> bool:
    exponent = d.as_tuple().exponent
    return d.adjusted() < 60 and isinstance(exponent, int) and -exponent < 60


numerics = st.decimals(allow_nan=False, allow_infinity=False).filter(_moderate).map(
    lambda d: f"{d:f}"
) | st.sampled_from(["NaN", "Infinity", "-Infinity", "0", "-0.000", "0.0001", "10000", "1e+5",
                     "-99999999.99999"])
bounded = st.decimals(min_value=-(10**15), max_value=10**15, allow_nan=False,
                      allow_infinity=False).map(lambda d: f"{d:f}")


@FEW
@given(values=lists(numerics), scaled=lists(bounded))
def test_numeric(server: RawServer, values: list[str], scaled: list[str]) -> None:
    run(server, "numeric", values, DEFAULT)
    # typmod scale: the canonical value is unconstrained; the encoder rounds like numeric(20,3)
    run(server, "numeric(20,3)", scaled, DEFAULT, decode_as="numeric")
    run(server, "numeric(18,0)", scaled, DEFAULT, decode_as="numeric")
    run(server, "numeric(20,-2)", scaled, DEFAULT, decode_as="numeric")


texts = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
                max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | texts,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=10,
).map(json.dumps)


@FEW
@given(strings=lists(texts), blobs=lists(st.binary(max_size=40).map(lambda b: "\\x" + b.hex())),
       uuids=lists(st.uuids().map(str)), docs=lists(json_values))
def test_strings_bytea_uuid_json(server: RawServer, strings: list[str], blobs: list[str],
                                 uuids: list[str], docs: list[str]) -> None:
    run(server, "text", strings, DEFAULT)
    run(server, "varchar(30)", strings, DEFAULT)
    run(server, "char(25)", strings, DEFAULT)
    run(server, "char(25)", strings, DEFAULT, decode_as="text")  # the encoder pads
    run(server, "name", [s.encode()[:63].decode(errors="ignore") for s in strings], DEFAULT)
    run(server, "bytea", blobs, [{"bytea_output": "hex"}, {"bytea_output": "escape"}])
    run(server, "uuid", uuids, DEFAULT)
    run(server, "json", docs, DEFAULT)
    run(server, "jsonb", docs, DEFAULT)


def _bc(year: int, month: int, day: int) -> str:
    return f"{year:04d}-{month:02d}-{day:02d} BC"


dates = (
    st.dates().map(lambda d: d.isoformat())
    | st.builds(_bc, st.integers(1, 4713), st.integers(1, 12), st.integers(1, 28))
    | st.builds(lambda y, m, d: f"{y}-{m:02d}-{d:02d}", st.integers(10000, 5874897),
                st.integers(1, 12), st.integers(1, 28))
    | st.sampled_from(["infinity", "-infinity", "0001-01-01", "9999-12-31", "4713-11-24 BC"])
)


@FEW
@given(values=lists(dates))
def test_dates_in_every_datestyle(server: RawServer, values: list[str]) -> None:
    run(server, "date", values, DATESTYLES)


def _clock(t: timedelta) -> str:
    usec = t // timedelta(microseconds=1)
    sec, frac = divmod(usec, 1_000_000)
    return f"{sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}.{frac:06d}"


clock = st.integers(0, 86_400_000_000 - 1).map(lambda u: _clock(timedelta(microseconds=u)))
stamps = (
    st.datetimes().map(lambda d: d.isoformat(sep=" "))
    | st.builds(lambda d, c: f"{d} {c}".replace(" BC", "") + " BC",
                st.builds(_bc, st.integers(1, 4713), st.integers(1, 12), st.integers(1, 28)), clock)
    | st.builds(lambda y, c: f"{y}-06-15 {c}", st.integers(10000, 294275), clock)
    | st.sampled_from(["infinity", "-infinity"])
)

# UTC instants around DST changes of the zones under test
TRANSITIONS = [datetime(2021, 3, 14, 7, tzinfo=UTC), datetime(2021, 11, 7, 6, tzinfo=UTC),
               datetime(2021, 4, 3, 15, tzinfo=UTC), datetime(2021, 10, 2, 15, 30, tzinfo=UTC),
               datetime(1883, 11, 18, 17, tzinfo=UTC), datetime(2038, 3, 14, 7, tzinfo=UTC),
               datetime(1916, 10, 1, 2, 25, 21, tzinfo=UTC)]
near_dst = st.builds(
    lambda base, minutes, usec: (base + timedelta(minutes=minutes, microseconds=usec)).isoformat(
        sep=" "),
    st.sampled_from(TRANSITIONS), st.integers(-180, 180), st.integers(0, 999_999),
)
instants = (stamps.map(lambda s: s if s.endswith("infinity") else
                       (s.replace(" BC", "+00 BC") if s.endswith(" BC") else s + "+00"))
            | near_dst)


@FEW
@given(values=lists(stamps))
def test_timestamps_in_every_datestyle(server: RawServer, values: list[str]) -> None:
    run(server, "timestamp", values, DATESTYLES)
    run(server, "timestamp(3)", values, DATESTYLES[:1])


@settings(max_examples=max(1, EXAMPLES * 2 // 3), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(values=lists(instants))
def test_timestamptz_in_every_zone_and_datestyle(server: RawServer, values: list[str]) -> None:
    grid = [{**style, "TimeZone": zone} for zone in ZONES for style in DATESTYLES]
    run(server, "timestamptz", values, grid)


offsets = st.integers(-15 * 3600 - 59 * 60, 15 * 3600 + 59 * 60).map(
    lambda s: f"{'-' if s < 0 else '+'}{abs(s) // 3600:02d}:{abs(s) // 60 % 60:02d}"
    f":{abs(s) % 60:02d}")


@FEW
@given(times=lists(clock | st.just("24:00:00")),
       timetzs=lists(st.builds(lambda c, o: c + o, clock | st.just("24:00:00"), offsets)))
def test_time_and_timetz(server: RawServer, times: list[str], timetzs: list[str]) -> None:
    run(server, "time", times, DATESTYLES[:1])
    run(server, "timetz", timetzs, DATESTYLES[:1])


def _interval(months: int, days: int, usec: int) -> str:
    sign = "-" if usec < 0 else ""
    return f"{months} mons {days} days {sign}{_clock(timedelta(microseconds=abs(usec)))}"


intervals = st.builds(
    _interval,
    st.integers(-(10**5), 10**5) | st.just(0),
    st.integers(-(10**5), 10**5) | st.just(0),
    st.integers(-(10**13), 10**13) | st.sampled_from([0, 1, -1, 1_000_000, -1_000_000, 500_000]),
)
INTERVAL_GRID = [{"IntervalStyle": s}
                 for s in ("postgres", "postgres_verbose", "sql_standard", "iso_8601")]


@FEW
@given(values=lists(intervals))
def test_intervals_in_every_intervalstyle(server: RawServer, values: list[str]) -> None:
    run(server, "interval", values, INTERVAL_GRID)


def _array_literal(items: list[str | None]) -> str:
    return format_array(tuple(items), str)


def arrays(element: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    one = st.lists(st.none() | element, max_size=5)
    flat = one.map(_array_literal)
    square = st.integers(1, 3).flatmap(
        lambda width: st.lists(st.lists(st.none() | element, min_size=width, max_size=width),
                               min_size=1, max_size=3)
    ).map(lambda rows: "{" + ",".join(_array_literal(r) for r in rows) + "}")
    return flat | square


@settings(max_examples=max(1, EXAMPLES // 2), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(ints=lists(arrays(st.integers(-(2**31), 2**31 - 1).map(str))),
       words=lists(arrays(texts)),
       nums=lists(arrays(numerics)),
       floats=lists(arrays(st.floats().map(_float_literal))),
       blobs=lists(arrays(st.binary(max_size=6).map(lambda b: "\\x" + b.hex()))),
       moments=lists(arrays(instants)),
       days=lists(arrays(dates)),
       spans=lists(arrays(intervals)))
def test_arrays_in_text_and_binary(server: RawServer, ints: list[str], words: list[str],
                                   nums: list[str], floats: list[str], blobs: list[str],
                                   moments: list[str], days: list[str], spans: list[str]) -> None:
    run(server, "int4[]", ints, DEFAULT)
    run(server, "text[]", words, DEFAULT)
    run(server, "numeric[]", nums, DEFAULT)
    run(server, "float8[]", floats, [{"extra_float_digits": "0"}, {"extra_float_digits": "1"}])
    run(server, "bytea[]", blobs, [{"bytea_output": "escape"}, {"bytea_output": "hex"}])
    run(server, "timestamptz[]", moments,
        [{"DateStyle": "SQL, DMY", "TimeZone": "Australia/Lord_Howe"},
         {"DateStyle": "Postgres, MDY", "TimeZone": "America/New_York"}])
    run(server, "date[]", days, [{"DateStyle": "German"}])
    run(server, "interval[]", spans, [{"IntervalStyle": "postgres_verbose"}])


SETTING_FREE = [
    ("inet", st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 32)).map(
        lambda t: f"10.{t[0]}.{t[1]}.0/{t[2] if t[2] >= 24 else 24}") | st.ip_addresses().map(str)
     | st.tuples(st.ip_addresses(v=6), st.integers(0, 128)).map(lambda t: f"{t[0]}/{t[1]}")),
    ("cidr", st.ip_addresses(v=4).map(lambda a: f"{a}/32")
     | st.tuples(st.ip_addresses(v=6), st.integers(0, 128)).map(
         lambda t: str(ipaddress.ip_interface(f"{t[0]}/{t[1]}").network))),
    ("macaddr", st.binary(min_size=6, max_size=6).map(lambda b: b.hex(":"))),
    ("macaddr8", st.binary(min_size=8, max_size=8).map(lambda b: b.hex(":"))),
    ("varbit", st.text("01", max_size=20)),
    ("bit(11)", st.text("01", min_size=11, max_size=11)),
]
TEXT_ONLY = [
    ("int4range", st.tuples(st.integers(-100, 100), st.integers(-100, 100)).map(
        lambda t: f"[{min(t)},{max(t)})")),
    ("numrange", st.tuples(bounded, bounded).map(lambda t: f"({t[0]},{t[1]}]")
     .filter(lambda r: Decimal(r[1:].split(",")[0]) <= Decimal(r[:-1].split(",")[1]))),
    ("xml", st.text(st.characters(min_codepoint=32, max_codepoint=0xD7FF), max_size=12).map(
        lambda t: "<a>" + t.replace("&", "&amp;").replace("<", "&lt;") + "</a>")),
]


@FEW
@given(data=st.data())
def test_setting_free_types_pass_through(server: RawServer, data: st.DataObject) -> None:
    grid = [{"DateStyle": "German", "TimeZone": "Asia/Kolkata", "extra_float_digits": "0",
             "IntervalStyle": "iso_8601", "bytea_output": "escape"}]
    for type_sql, strategy in SETTING_FREE:
        run(server, type_sql, data.draw(lists(strategy)), grid)
    for type_sql, strategy in TEXT_ONLY:
        run(server, type_sql, data.draw(lists(strategy)), grid, formats=(0,))


@FEW
@given(chars=lists(st.text(st.characters(min_codepoint=1, max_codepoint=127), max_size=3)))
def test_internal_char_type(server: RawServer, chars: list[str]) -> None:
    run(server, '"char"', chars, DEFAULT)


@pytest.mark.parametrize(("statement", "supported"), [
    ("SET TimeZone = 'america/new_york'", True),
    ("SET TimeZone = 'Etc/UTC'", True),
    ("SET TimeZone = 'Australia/Lord_Howe'", True),
    ("SET TIME ZONE INTERVAL '+05:30' HOUR TO MINUTE", False),
    ("SET TimeZone = 'UTC+3'", False),
    ("SET TimeZone = 3", False),
    ("SET DateStyle = 'sql, european'", True),
    ("SET DateStyle = 'german'", True),
    ("SET client_encoding = 'LATIN1'", False),
])
def test_reported_settings_are_understood(server: RawServer, statement: str,
                                          supported: bool) -> None:
    """What the server reports after a SET parses into settings that are either reproduced
    exactly (and then really are: a timestamptz and a date compare equal) or refused."""
    server._exec("RESET ALL")
    server._exec(statement)
    out_settings = server.apply({})
    assert (out_settings.reason() is None) == supported, out_settings
    if supported:
        out = server.roundtrip("timestamptz", ["2021-03-14 07:30:00.25+00", "1850-01-01 12:00+00"],
                               {k: v for k, v in _shown(server).items()})
        check(out)
    server._exec("RESET ALL")


def _shown(server: RawServer) -> dict[str, str]:
    return {name: (server._exec(f"SHOW {name}").get_value(0, 0) or b"").decode()
            for name in ("DateStyle", "TimeZone")}
