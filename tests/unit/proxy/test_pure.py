"""Unit tests of the proxy's pure modules: admin grammar, session state, settings, params,
routing helpers."""

from __future__ import annotations

import os
import struct
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.errors import error_response
from proxy.admin import CreateCache, DropCache, Show, parse_admin
from proxy.config import resolve
from proxy.lane_plan import cpu_quota, lane_plan
from proxy.params import ParamError, decode_param, formats_for
from proxy.router import SessionContext, observe_set, route_query, setting_taint
from proxy.session import SessionState
from proxy.settings import Settings, SettingsError, UpstreamAddress, parse_listen


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("CREATE CACHE FROM SELECT 1", CreateCache(None, "SELECT 1")),
        (
            "create cache Foo from select a from t where b = 1;",
            CreateCache("foo", "select a from t where b = 1"),
        ),
        (
            'CREATE CACHE "My Cache" FROM q_0123456789abcdef',
            CreateCache("My Cache", "q_0123456789abcdef"),
        ),
        ("EXPLAIN CREATE CACHE FROM SELECT 2", CreateCache(None, "SELECT 2", explain_only=True)),
        ("DROP CACHE foo", DropCache("foo")),
        ("drop all caches", DropCache(None)),
        ("SHOW CACHES", Show("caches")),
        ("SHOW PROXIED QUERIES", Show("proxied")),
        ("show caches with  literals", Show("caches", literals=True)),
        ("SHOW PROXIED SUPPORTED QUERIES WITH LITERALS;", Show("supported", literals=True)),
        ("show proxied supported queries", Show("supported")),
        ("SHOW WEIR STATUS", Show("status")),
        ("SHOW WEIR TABLES", Show("tables")),
        ("EXPLAIN LAST STATEMENT", Show("last")),
        ("SHOW search_path", None),
        ("EXPLAIN SELECT 1", None),
        ("CREATE TABLE cache (a int)", None),
        ("SELECT 1", None),
    ],
)
def test_admin_grammar(text: str, expected: object) -> None:
    assert parse_admin(text) == expected


def test_query_id_source() -> None:
    cmd = parse_admin("CREATE CACHE FROM q_0123456789abcdef")
    assert isinstance(cmd, CreateCache) and cmd.is_query_id


def _feed(state: SessionState, *msgs: object) -> None:
    for m in msgs:
        if isinstance(
            m,
            (
                be.ParseComplete,
                be.BindComplete,
                be.CloseComplete,
                be.NoData,
                be.CommandComplete,
                be.RowDescription,
            ),
        ):
            state.answer(m.encode()[0])
        elif isinstance(
            m, (fe.Parse, fe.Bind, fe.Close, fe.Query, fe.Describe, fe.Execute, fe.Sync)
        ):
            state.frontend(m)
        else:
            state.backend(m)


def test_session_state_tracks_statements_and_portals() -> None:
    s = SessionState()
    _feed(s, fe.Parse("s1", "SELECT 1"), fe.Bind("p1", "s1"), fe.Execute("p1"), fe.Sync())
    assert not s.idle and s.statements == {}
    _feed(
        s,
        be.ParseComplete(),
        be.BindComplete(),
        be.CommandComplete("SELECT 1"),
        be.ReadyForQuery("T"),
    )
    assert s.idle and "s1" in s.statements and "p1" in s.portals
    assert s.in_transaction
    _feed(s, be.ReadyForQuery("I"))
    assert s.portals == {}


def test_error_cancels_rest_of_batch() -> None:
    s = SessionState()
    _feed(s, fe.Parse("bad", "SELEC"), fe.Parse("good", "SELECT 1"), fe.Sync())
    _feed(s, error_response("42601", "syntax error"), be.ReadyForQuery("I"))
    assert s.statements == {} and s.idle


def test_injected_answers_are_swallowed() -> None:
    s = SessionState()
    s.injected(fe.Parse("", "SELECT 1"))
    s.frontend(fe.Bind("", ""))
    assert s.answer(ord("1")) is True  # the ParseComplete weir caused
    assert s.answer(ord("2")) is False  # the client's own BindComplete


def test_answers_weir_discards_do_not_hold_local_answers_back() -> None:
    """weir's own Close of the unnamed statement (sent after answering a query itself) is
    outstanding: the session is not idle, but caught up — nothing the client waits for is
    upstream, so routing may answer the next read locally."""
    s = SessionState()
    s.statements[""] = object()  # type: ignore[assignment]
    s.injected(fe.Close("S", ""))
    assert not s.idle and s.caught_up and s.discarded == 1
    ctx = SessionContext(database="d", user="u", search_path=("public",))
    assert route_query("SELECT 1", s, ctx, _NoCaches(), "d").reason == "no cache for this query"
    s.frontend(fe.Query("SELECT 2"))  # the client's own request: its answer is awaited
    assert not s.caught_up
    assert route_query("SELECT 1", s, ctx, _NoCaches(), "d").reason \
        == "earlier statements are still running upstream"
    assert s.answer(ord("3")) is True  # weir's CloseComplete, swallowed
    assert s.discarded == 0 and not s.caught_up
    _feed(s, be.CommandComplete("SELECT 1"), be.ReadyForQuery("I"))
    assert s.idle and s.caught_up and s.statements == {}


def test_swallowed_answers_with_a_replacement_or_an_outcome_are_awaited() -> None:
    s = SessionState()
    s.injected(fe.Close("P", "p"), replace=be.CloseComplete().encode())
    assert not s.caught_up  # the client gets its replacement in that answer's place
    s.injected(fe.Parse("x", "SELECT 1"), skipped=lambda: None)
    assert not s.caught_up and s.discarded == 0
    _feed(s, error_response("42601", "syntax error"))
    assert s.skipping and not s.caught_up


class _NoCaches:
    def classify(self, text: str, search_path: Any, timezone: Any = None) -> Any:
        return _Classified()

    def cache_for(self, classified: Any) -> None:
        return None


class _Classified:
    query = SimpleNamespace(identity=SimpleNamespace(timezone=None))  # a plan, no cache


def test_deallocate_and_discard() -> None:
    s = SessionState()
    _feed(
        s,
        fe.Parse("a", "SELECT 1"),
        fe.Parse("b", "SELECT 2"),
        fe.Sync(),
        be.ParseComplete(),
        be.ParseComplete(),
        be.ReadyForQuery("I"),
    )
    _feed(s, fe.Query("DEALLOCATE a"), be.CommandComplete("DEALLOCATE"), be.ReadyForQuery("I"))
    assert set(s.statements) == {"b"}
    _feed(s, fe.Query("DISCARD ALL"), be.CommandComplete("DISCARD ALL"), be.ReadyForQuery("I"))
    assert s.statements == {}


def test_settings_sources_and_errors() -> None:
    env = {
        "WEIR_UPSTREAM": "postgresql://u:p@db:6432/app?sslmode=require",
        "WEIR_MAX_MESSAGE_BYTES": "2048",
    }
    s = resolve({"listen": "0.0.0.0:7000"}, env, {})[0]
    assert s.listen_address == ("0.0.0.0", 7000) and s.max_message_bytes == 2048
    addr = s.upstream_address
    assert (addr.host, addr.port, addr.user, addr.dbname, addr.sslmode) == (
        "db",
        6432,
        "u",
        "app",
        "require",
    )
    with pytest.raises(SettingsError, match="upstream is required"):
        resolve({}, {}, {})
    with pytest.raises(SettingsError, match="not a number"):
        resolve({"upstream": "postgresql://x@h/d", "connect_timeout": "soon"}, {}, {})
    with pytest.raises(SettingsError, match="sslmode"):
        UpstreamAddress.parse("postgresql://h/d?sslmode=maybe")
    with pytest.raises(SettingsError, match="HOST:PORT"):
        parse_listen("nowhere")
    with pytest.raises(SettingsError, match="go together"):
        Settings(upstream="postgresql://h/d", tls_cert="c")


def test_lane_settings_and_plan() -> None:
    """One pinned lane per CPU weir may run on by default; a count of lanes other than that
    is not pinned; named CPUs pin one lane each; bad values are errors that name the flag."""
    allowed = tuple(sorted(os.sched_getaffinity(0)))
    n = len(allowed)
    url = "postgresql://x@h/d"

    def plan(built: bool = True, quota: float | None = None, **given: Any) -> object:
        return lane_plan(Settings(upstream=url, **given), built, quota)

    assert plan() == (n, allowed)
    assert plan(built=False) == (0, ())
    assert plan(hit_lanes=n) == (n, allowed)
    assert plan(hit_lanes=n + 1) == (n + 1, ())
    assert plan(lane_cpus="none") == (n, ())
    assert plan(lane_cpus="NONE", hit_lanes=1) == (1, ())
    assert plan(hit_lanes=0) == (0, ())
    # under a cgroup CPU quota below the CPUs weir sees: one unpinned lane per CPU of quota
    assert plan(quota=0.5) == (1, ())
    assert plan(quota=n - 0.5) == (n, allowed)
    assert plan(quota=n + 8.0) == (n, allowed)
    assert plan(quota=0.5, hit_lanes=n) == (n, allowed)  # as told
    assert plan(lane_cpus=str(allowed[0])) == (1, (allowed[0],))
    assert plan(lane_cpus=f" {allowed[0]} ", hit_lanes=1) == (1, (allowed[0],))
    with pytest.raises(SettingsError, match="--lane-cpus must be auto, none or"):
        Settings(upstream=url, lane_cpus="0-1")
    with pytest.raises(SettingsError, match="each CPU once"):
        Settings(upstream=url, lane_cpus=f"{allowed[0]},{allowed[0]}")
    with pytest.raises(SettingsError, match="among those weir may run on"):
        Settings(upstream=url, lane_cpus="4095")
    with pytest.raises(SettingsError, match=r"names 1 CPU\(s\) but --hit-lanes is 3"):
        Settings(upstream=url, lane_cpus=str(allowed[0]), hit_lanes=3)


def test_cpu_quota_reads_cgroup_v2(tmp_path: Path) -> None:
    cpu_max = tmp_path / "cpu.max"
    assert cpu_quota(cpu_max) is None  # no file: no limit known
    cpu_max.write_text("max 100000\n")
    assert cpu_quota(cpu_max) is None
    cpu_max.write_text("150000 100000\n")
    assert cpu_quota(cpu_max) == 1.5
    cpu_max.write_text("garbage\n")
    assert cpu_quota(cpu_max) is None


def test_params() -> None:
    assert decode_param(b"42", 0, 0, 23) == 42
    assert decode_param(struct.pack("!q", -5), 1, 20, 23) == -5
    assert decode_param(b"abc", 1, 25, 1043) == "abc"
    u = uuid.uuid4()
    assert decode_param(u.bytes, 1, 2950, 2950) == u
    assert decode_param(None, 0, 0, 23) is None
    with pytest.raises(ParamError):
        decode_param(b"4.5", 0, 0, 23)
    with pytest.raises(ParamError):
        decode_param(b"1", 0, 701, 1700)  # float8 declared against numeric
    with pytest.raises(ParamError):
        decode_param(b"\x00\x01", 1, 23, 23)
    assert formats_for(3, ()) == (0, 0, 0)
    assert formats_for(2, (1,)) == (1, 1)
    with pytest.raises(ParamError):
        formats_for(3, (0, 1))


def test_set_tracking() -> None:
    ctx = SessionContext("db", "u", ("u", "public"))
    observe_set("SET application_name = 'x'", ctx)
    assert ctx.tainted is None
    observe_set("SET extra_float_digits = 0", ctx)
    assert ctx.settings == {"extra_float_digits": "0"} and ctx.tainted is None
    observe_set("RESET extra_float_digits", ctx)
    assert ctx.settings == {}
    for text in ("SET search_path TO other", "SET ROLE bob", "SET SESSION AUTHORIZATION b"):
        observe_set(text, ctx)  # (followed by proxy.identity, which a reset may undo)
        assert ctx.tainted is None
    observe_set("SET geqo = off", ctx)
    assert ctx.tainted is not None and "geqo" in ctx.tainted
    other = SessionContext("db", "u", ("u", "public"))
    observe_set("/* c */ SET extra_float_digits = 0; -- c", other)  # followed behind comments
    assert other.settings == {"extra_float_digits": "0"} and other.tainted is None
    observe_set("SELECT 1; /* c */ RESET extra_float_digits", other)  # among others: may not last
    assert other.tainted is not None and "extra_float_digits" in other.tainted
    assert setting_taint("SELECT 1") is None
    assert setting_taint("SET TIME ZONE 'UTC'") is None


def _error(sqlstate: str = "42601") -> object:
    return be.decode_backend(ord("E"), error_response(sqlstate, "boom").encode()[5:])


def test_session_state_skips_what_follows_an_error_up_to_the_sync() -> None:
    """An error before the batch's Sync was sent: PostgreSQL skips every later message up
    to that Sync, so their effects never happen and their callbacks say so."""
    s = SessionState()
    _feed(s, fe.Parse("s1", "SELECT 1"), fe.Sync(), be.ParseComplete(), be.ReadyForQuery("I"))
    seen: list[str] = []
    _feed(s, fe.Parse("", "SELEC"))
    s.attach(failed=lambda: seen.append("failed"))
    _feed(s, _error())  # answered at a Flush: no Sync sent yet
    assert seen == ["failed"] and s.skipping and not s.idle and s.swallowing == 1
    _feed(s, fe.Close("S", "s1"))
    s.attach(skipped=lambda: seen.append("close skipped"))
    _feed(s, fe.Bind("p", "s1"), fe.Sync())
    assert s.uncertain == 1
    _feed(s, be.ReadyForQuery("I"))
    assert seen == ["failed", "close skipped"]
    assert "s1" in s.statements and s.idle and not s.skipping
    assert s.swallowing == 0 and s.uncertain == 0


def test_session_state_settles_when_uncertain_requests_are_answered() -> None:
    s = SessionState()
    settled: list[int] = []
    s.on_settled = lambda: settled.append(s.uncertain)
    s.injected(fe.Parse("s2", "SELECT 2"), skipped=lambda: settled.append(-1))
    _feed(s, fe.Close("S", "s9"))
    s.attach(skipped=lambda: settled.append(-2))
    _feed(s, fe.Sync())
    assert s.uncertain == 2 and s.swallowing == 2
    assert s.answer(ord("1"))  # the injected Parse's answer is swallowed
    assert not s.answer(ord("3"))  # the client's Close is relayed
    assert settled == [0] and s.statements == {"s2": s.statements["s2"]}
    _feed(s, be.ReadyForQuery("I"))
    assert s.idle and s.swallowing == 0


def test_session_state_replaces_a_placeholder_answer() -> None:
    s = SessionState()
    s.injected(fe.Close("P", "\x7fweir placeholder"), b"answer")
    assert s.answer(ord("3")) and s.replacement == b"answer"
