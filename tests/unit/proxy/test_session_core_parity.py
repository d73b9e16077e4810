"""Parity of the session core's twins: ``cython_ext/session_core.pxd`` (the compiled
``SessionCore``, typed fields the relay core and the hit path read as C members) and
``proxy.session_core.SessionCore_python`` (``__slots__``): the same fields, the same
defaults, and the request ledger (``proxy.session.SessionState``'s rules) leaves the same
state on either base for random sequences of requests and answers."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import cython_ext
from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.errors import error_response
from pgwire.events import Phase
from proxy import session_core
from proxy.session import SessionState
from proxy.session_core import FIELDS, SessionCore_python

FAST = cython_ext.load_pair("session_core")


def test_twin_is_built() -> None:
    assert FAST is not None, "cython_ext.session_core is not built: run `make compile`"


def test_the_loader_picks_the_twin_by_weir_impl() -> None:
    assert FAST is not None
    expected = SessionCore_python if cython_ext.impl() == "python" else FAST.SessionCore
    assert session_core.SessionCore is expected
    assert issubclass(SessionState, expected)


def test_same_fields() -> None:
    assert FAST is not None
    assert SessionCore_python.__slots__ == FIELDS
    assert len(set(FIELDS)) == len(FIELDS)
    compiled = {name for name, value in vars(FAST.SessionCore).items()
                if hasattr(value, "__set__") and not name.startswith("__")}
    assert compiled == set(FIELDS)
    pure = SessionCore_python()
    assert not hasattr(pure, "__dict__")  # nothing but the declared fields
    assert not hasattr(FAST.SessionCore(), "__dict__")


def test_same_defaults() -> None:
    assert FAST is not None
    for phase in (None, Phase.STARTUP):
        fast, pure = FAST.SessionCore(phase), SessionCore_python(phase)
        assert _fields(fast) == _fields(pure)
        assert fast.phase is pure.phase is phase


def _fields(core: Any) -> dict[str, Any]:
    out = {}
    for name in FIELDS:
        value = getattr(core, name)
        if name == "pending":
            value = [(item.kind, item.swallow, item.replace, item.watched) for item in value]
        elif name in ("last_parse", "last_bind"):
            value = None if value is None else value[0]
        elif name == "statements":
            value = {k: (v.query, v.param_types) for k, v in value.items()}
        elif callable(value):
            value = "callable"
        out[name] = (type(value).__name__, value)
    return out


def ledger_on(base: type) -> Any:
    """A ``SessionState`` whose fields are ``base``'s (the rules are the same functions)."""
    rules = {k: v for k, v in vars(SessionState).items()
             if k not in ("__slots__", "__dict__", "__weakref__", "__module__", "__qualname__")}
    return type("Ledger", (base,), {"__slots__": (), **rules})()


_PARSE = fe.Parse("s", "SELECT 1", ())
_BIND = fe.Bind("p", "s", (), (), ())
FRONTEND = [_PARSE, _BIND, fe.Parse("", "SELECT 2", (23,)), fe.Bind("", "", (), (), ()),
            fe.Close("S", "s"), fe.Close("P", "p"), fe.Describe("S", "s"), fe.Execute("p", 0),
            fe.Sync(), fe.Query("SELECT 1"), fe.Query("DEALLOCATE ALL"), fe.Query("DISCARD ALL"),
            fe.Query("DEALLOCATE s")]
BACKEND = [be.ParseComplete(), be.BindComplete(), be.CloseComplete(), be.NoData(),
           be.CommandComplete("SELECT 1"), be.ReadyForQuery("I"), be.ReadyForQuery("T"),
           be.ParameterStatus("TimeZone", "UTC"),
           error_response("42P01", "no")]
OPS = st.lists(st.one_of(
    st.tuples(st.just("frontend"), st.sampled_from(FRONTEND)),
    st.tuples(st.just("backend"), st.sampled_from(BACKEND)),
    st.tuples(st.just("answer"), st.sampled_from(b"123nTCIsZ")),
    st.tuples(st.just("ready"), st.sampled_from([b"I", b"IT", b"E", b""])),
    st.tuples(st.just("expect"), st.sampled_from(["", "describe", "execute", "sync"])),
    st.tuples(st.just("injected"), st.sampled_from([
        (fe.Close("S", ""), b"", False), (_PARSE, b"", True), (_BIND, b"3\0\0\0\4", False)])),
    st.tuples(st.just("attach"), st.booleans()),
), max_size=40)


def _apply(state: Any, op: str, arg: Any, calls: list[str]) -> str:
    try:
        if op == "frontend":
            state.frontend(arg)
        elif op == "backend":
            state.backend(arg)
        elif op == "answer":
            return f"answer {state.answer(arg)} {state.replacement!r}"
        elif op == "ready":
            if state.swallowing:  # (its contract: only with nothing swallowed)
                return "skipped"
            state.ready(arg)
        elif op == "expect":
            state.expect(arg)
        elif op == "injected":
            msg, replace, watched = arg
            state.injected(msg, replace, (lambda: calls.append("skipped")) if watched else None)
        else:
            state.attach(lambda: calls.append("attached skipped"),
                         (lambda: calls.append("attached failed")) if arg else None)
    except Exception as exc:  # (e.g. attach with nothing outstanding): the same on both
        return type(exc).__name__
    return "ok"


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_the_ledger_is_the_same_on_both_cores(ops: list[tuple[str, Any]]) -> None:
    assert FAST is not None
    fast, pure = ledger_on(FAST.SessionCore), ledger_on(SessionCore_python)
    fast_calls: list[str] = []
    pure_calls: list[str] = []
    for i, (op, arg) in enumerate(ops):
        assert _apply(fast, op, arg, fast_calls) == _apply(pure, op, arg, pure_calls), i
        assert _fields(fast) == _fields(pure), (i, op, arg)
        assert fast.idle == pure.idle and fast.caught_up == pure.caught_up
        assert fast_calls == pure_calls
