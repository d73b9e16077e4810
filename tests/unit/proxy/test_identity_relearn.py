"""``proxy.identity``: a session whose identity became unknown learns it again when a reset
(RESET ROLE, RESET SESSION AUTHORIZATION, RESET search_path, RESET ALL, DISCARD ALL) runs
alone and commits, with nothing that may change it seen since (sans-I/O: the real session
ledger fed scripted backend messages)."""

from __future__ import annotations

import pytest

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.errors import ErrorResponse
from proxy import identity
from proxy.router import SessionContext
from proxy.session import SessionState


class _Session:
    """What ``identity.forwarded``/``executed`` need of a relayed session."""

    def __init__(self, state: SessionState, ctx: SessionContext) -> None:
        self.state, self.ctx = state, ctx
        self.extended = self  # (its ``adopt``)

    def adopt(self) -> None:
        pass


def _session() -> tuple[SessionState, SessionContext]:
    return SessionState(), SessionContext(database="d", user="app", search_path=("public",))


def _send(state: SessionState, ctx: SessionContext, text: str) -> None:
    """A simple Query on its way upstream, as the relay observes and forwards it."""
    msg = fe.Query(text)
    identity.observe(ctx, msg, ())
    state.frontend(msg)
    identity.forwarded(_Session(state, ctx), msg)


def _ok(state: SessionState, tag: str = "SET", status: str = "I") -> None:
    state.backend(be.CommandComplete(tag))
    state.backend(be.ReadyForQuery(status))


def _failed(state: SessionState, status: str = "I") -> None:
    state.backend(ErrorResponse((("S", "ERROR"), ("C", "25P02"), ("M", "aborted"))))
    state.backend(be.ReadyForQuery(status))


@pytest.mark.parametrize(("change", "reset"), [
    ("SET ROLE bob", "RESET ROLE"), ("SET ROLE bob", "set role none;"),
    ("SET ROLE bob", "SET ROLE TO DEFAULT"), ("SET ROLE bob", "RESET SESSION AUTHORIZATION"),
    ("SET SESSION AUTHORIZATION bob", "SET SESSION AUTHORIZATION DEFAULT"),
    ("SET search_path = other", "RESET search_path"),
    ("SET search_path = other", "SET search_path = DEFAULT"),
    ("SET search_path = other", "RESET ALL"),
    ("DO $$ BEGIN EXECUTE 'SET ROLE bob'; END $$", "DISCARD ALL"),
    ("SELECT set_config('role', 'bob', false)", "discard all"),
])
def test_a_reset_that_commits_gives_the_identity_back(change: str, reset: str) -> None:
    state, ctx = _session()
    _send(state, ctx, change)
    _ok(state)
    assert ctx.tainted is not None
    _send(state, ctx, reset)
    assert ctx.tainted is not None  # not before it succeeded
    _ok(state, "RESET")
    assert ctx.tainted is None and not ctx.role_unknown


def test_a_reset_answered_in_one_run_gives_it_back_too() -> None:
    state, ctx = _session()
    _send(state, ctx, "SET ROLE bob")
    state.ready(b"I")  # (the relay core's one-step observation of a quiet run)
    _send(state, ctx, "RESET ROLE")
    state.ready(b"I")
    assert ctx.tainted is None


@pytest.mark.parametrize(("change", "reset"), [
    ("SET ROLE bob", "RESET search_path"), ("SET search_path = x", "RESET ROLE"),
    ("SET SESSION AUTHORIZATION bob", "RESET ROLE"), ("DO $$ BEGIN END $$", "RESET ROLE"),
    ("SET ROLE bob", "RESET ALL"),
    ("SET ROLE bob", "RESET ROLE; SET ROLE bob"), ("SET ROLE bob", "RESET ROLE /* x */"),
    ("SET ROLE bob", "SET LOCAL ROLE NONE"), ("SET ROLE bob", 'RESET "role"'),
])
def test_a_reset_of_another_part_or_form_does_not(change: str, reset: str) -> None:
    state, ctx = _session()
    _send(state, ctx, change)
    _ok(state)
    _send(state, ctx, reset)
    _ok(state, "RESET")
    assert ctx.tainted is not None


def test_both_parts_given_back_one_by_one() -> None:
    state, ctx = _session()
    for text in ("SET ROLE bob", "SET search_path = x", "RESET ROLE"):
        _send(state, ctx, text)
        _ok(state)
    assert ctx.tainted is not None and not ctx.role_unknown  # the role is known again
    _send(state, ctx, "RESET search_path")
    _ok(state)
    assert ctx.tainted is None


def test_a_failed_reset_gives_nothing_back() -> None:
    state, ctx = _session()
    _send(state, ctx, "SET ROLE bob")
    _ok(state)
    _send(state, ctx, "RESET ROLE")
    _failed(state)
    assert ctx.tainted is not None and ctx.role_unknown


def test_a_reset_inside_a_transaction_block_gives_nothing_back() -> None:
    state, ctx = _session()
    _send(state, ctx, "SET ROLE bob")
    _ok(state)
    _send(state, ctx, "BEGIN")
    _ok(state, "BEGIN", "T")
    _send(state, ctx, "RESET ROLE")  # ROLLBACK would undo it: not learnt, even at COMMIT
    _ok(state, "RESET", "T")
    _send(state, ctx, "COMMIT")
    _ok(state, "COMMIT", "I")
    assert ctx.tainted is not None


def test_a_reset_behind_outstanding_requests_gives_nothing_back() -> None:
    state, ctx = _session()
    _send(state, ctx, "SET ROLE bob")
    _send(state, ctx, "RESET ROLE")  # pipelined: the status it runs in is not known yet
    _ok(state)
    _ok(state, "RESET")
    assert ctx.tainted is not None


def test_a_change_sent_after_the_reset_keeps_the_identity_unknown() -> None:
    state, ctx = _session()
    _send(state, ctx, "SET ROLE bob")
    _ok(state)
    _send(state, ctx, "RESET ROLE")
    _send(state, ctx, "SET ROLE bob")  # pipelined behind it, seen before its answer
    _ok(state, "RESET")
    _ok(state)
    assert ctx.tainted is not None and ctx.role_unknown


@pytest.mark.parametrize("startup", [{"options": "-c role=bob"}, {"role": "bob"},
                                     {"search_path": "other"}])
def test_a_login_identity_set_at_startup_is_never_learnt(startup: dict[str, str]) -> None:
    state, ctx = _session()
    identity.taint_for_life(ctx, identity.startup_taint({"user": "app", **startup}))
    _send(state, ctx, "DISCARD ALL")  # resets to the startup values, which weir does not know
    _ok(state, "DISCARD ALL")
    assert ctx.tainted is not None


def test_a_non_identity_taint_is_kept() -> None:
    state, ctx = _session()
    _send(state, ctx, "SET ROLE bob")
    _ok(state)
    ctx.tainted = "the session changed setting geqo, which weir does not follow yet"
    _send(state, ctx, "RESET ROLE")
    _ok(state, "RESET")
    assert ctx.tainted is not None and not ctx.role_unknown


def test_discard_all_keeps_its_effect_on_the_statements() -> None:
    state, ctx = _session()
    state.statements["s"] = object()
    _send(state, ctx, "SET ROLE bob")
    _ok(state)
    _send(state, ctx, "DISCARD ALL")
    _ok(state, "DISCARD ALL")
    assert ctx.tainted is None and not state.statements


def test_statement_reset_forms() -> None:
    assert identity.statement_reset("RESET ROLE") == {identity.ROLE}
    assert identity.statement_reset(" reset session authorization ;") == {
        identity.ROLE, identity.AUTH}
    assert identity.statement_reset("DISCARD ALL") == identity.EVERYTHING
    for text in ("RESET ROLE; RESET ROLE", "SET ROLE bob", "RESET work_mem", "DISCARD PLANS",
                 "SET ROLE 'none'", "RESET ROLE -- x", ""):
        assert identity.statement_reset(text) == frozenset()


# -- the extended protocol ---------------------------------------------------------------------

def _extended(state: SessionState, ctx: SessionContext, text: str, name: str = "",
              parse: bool = True, sync: bool = True, raw_execute: bool = False) -> None:
    """Parse/Bind/Execute[/Sync] as the relay observes them (the Execute decoded, or, with
    ``raw_execute``, undecoded as on the quiet path)."""
    msgs: list[object] = [fe.Parse(name, text)] if parse else []
    msgs.append(fe.Bind("", name))
    for msg in msgs:
        identity.observe(ctx, msg, ())
        state.frontend(msg)
        identity.forwarded(_Session(state, ctx), msg)
    if raw_execute:
        raw = fe.Execute("").encode()
        state.expect("execute")
        identity.executed(_Session(state, ctx), raw[0], raw, 5, len(raw))
    else:
        execute = fe.Execute("")
        state.frontend(execute)
        identity.forwarded(_Session(state, ctx), execute)
    if sync:
        state.frontend(fe.Sync())


def _answered(state: SessionState, tag: str, parse: bool = True) -> None:
    if parse:
        state.backend(be.ParseComplete())
    state.backend(be.BindComplete())
    _ok(state, tag)


@pytest.mark.parametrize("raw_execute", [False, True])
def test_an_extended_reset_gives_the_identity_back(raw_execute: bool) -> None:
    state, ctx = _session()
    _extended(state, ctx, "SET ROLE bob")
    _answered(state, "SET")
    assert ctx.role_unknown
    _extended(state, ctx, "RESET ROLE", raw_execute=raw_execute)
    _answered(state, "RESET")
    assert ctx.tainted is None and not ctx.role_unknown


def test_a_named_reset_statement_run_later() -> None:
    state, ctx = _session()
    _extended(state, ctx, "SET ROLE bob")
    _answered(state, "SET")
    msg = fe.Parse("r", "RESET ROLE")  # prepared first (asyncpg), executed in a later batch
    identity.observe(ctx, msg, ())
    state.frontend(msg)
    state.frontend(fe.Sync())
    state.backend(be.ParseComplete())
    state.backend(be.ReadyForQuery("I"))
    _extended(state, ctx, "", name="r", parse=False)
    _answered(state, "RESET", parse=False)
    assert ctx.tainted is None


def test_an_extended_reset_not_alone_in_its_batch_does_not() -> None:
    state, ctx = _session()
    _extended(state, ctx, "SET ROLE bob")
    _answered(state, "SET")
    _extended(state, ctx, "SELECT 1", sync=False)  # the same implicit transaction
    _extended(state, ctx, "RESET ROLE")
    state.ready(b"I")
    assert ctx.tainted is not None
    _extended(state, ctx, "RESET ROLE", sync=False)  # something follows it before the Sync
    _extended(state, ctx, "SELECT 1")
    state.ready(b"I")
    assert ctx.tainted is not None


def test_an_extended_reset_that_fails_or_runs_in_a_block_does_not() -> None:
    state, ctx = _session()
    _extended(state, ctx, "SET ROLE bob")
    _answered(state, "SET")
    _extended(state, ctx, "RESET ROLE")
    state.backend(be.ParseComplete())
    state.backend(be.BindComplete())
    _failed(state)
    assert ctx.tainted is not None
    _send(state, ctx, "BEGIN")
    _ok(state, "BEGIN", "T")
    _extended(state, ctx, "RESET ROLE")
    _answered(state, "RESET")
    assert ctx.tainted is not None


def test_a_reset_behind_weirs_own_close_gives_it_back() -> None:
    """weir's own Close of a statement it no longer needs may still be unanswered when the
    client's reset goes upstream (it executes nothing): the reset still runs alone, so it
    gives the identity back (a race the security tests met under load: the reset was
    ignored and the session read upstream for the rest of its life)."""
    state, ctx = _session()
    _send(state, ctx, "SELECT set_config('role', 'bob', false)")
    _ok(state, "SELECT 1")
    state.injected(fe.Close("S", ""))
    _send(state, ctx, "DISCARD ALL")
    state.backend(be.CloseComplete())
    assert ctx.tainted is not None
    _ok(state, "DISCARD ALL")
    assert ctx.tainted is None and not ctx.role_unknown


def test_a_reset_behind_a_statement_that_executes_is_not_alone() -> None:
    """A request before the reset that executes something (an Execute) may change the
    identity in the same implicit transaction: the reset gives nothing back."""
    state, ctx = _session()
    _send(state, ctx, "SELECT set_config('role', 'bob', false)")
    _ok(state, "SELECT 1")
    for msg in (fe.Bind("", "", (), (), ()), fe.Execute("", 0)):
        state.frontend(msg)
    _send(state, ctx, "DISCARD ALL")
    state.backend(be.BindComplete())
    state.backend(be.CommandComplete("SELECT 1"))
    _ok(state, "DISCARD ALL")
    assert ctx.tainted is not None
