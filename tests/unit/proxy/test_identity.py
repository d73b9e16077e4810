"""``proxy.identity``: which statements and startup parameters make a session's role or
search_path unknown, and who is an admin (pure)."""

from __future__ import annotations

import pytest

from proxy import identity, rules
from proxy.router import SessionContext


@pytest.mark.parametrize(("text", "role"), [
    ("SET ROLE bob", True), ("set local role bob", True), ("RESET ROLE", True),
    ("SET SESSION AUTHORIZATION bob", True), ("set session session authorization bob", True),
    ("RESET SESSION AUTHORIZATION", True), ('SET "role" = bob', True),
    ("SET search_path = other", False), ("set search_path to other, public", False),
    ("RESET search_path", False), ("RESET ALL", False), ("DISCARD ALL", True),
    ("SELECT set_config('role', 'bob', false)", True),
    ("select pg_catalog.SET_CONFIG('search_path', 'x', false)", True),
    ("DO $$ BEGIN EXECUTE 'SET ROLE bob'; END $$", True), ("CALL p()", True),
    ("EXECUTE stmt(1)", True), ("SELECT myfn(1)", True),
])
def test_statements_that_make_the_identity_unknown(text: str, role: bool) -> None:
    reason, in_doubt = identity.statement_taint(text, ("myfn",))
    assert reason is not None
    assert in_doubt is role


@pytest.mark.parametrize("text", [
    "SELECT v FROM secret WHERE id = $1", "SET statement_timeout = 5", "RESET work_mem",
    "SHOW role", "SELECT myfn_other(1)", "DISCARD PLANS", "INSERT INTO t VALUES (1)", "",
])
def test_statements_that_do_not(text: str) -> None:
    assert identity.statement_taint(text, ("myfn",)) == (None, False)


def test_startup_parameters() -> None:
    assert identity.startup_taint({"user": "a", "database": "d"}) == (None, False)
    assert identity.startup_taint({"user": "a", "options": "--role=bob"})[1]
    assert identity.startup_taint({"user": "a", "options": "-c statement_timeout=1"})[1]
    assert identity.startup_taint({"user": "a", "role": "bob"})[1]
    assert identity.startup_taint({"user": "a", "search_path": "x"}) == (
        "the session set search_path at startup, which weir does not follow yet", False)
    assert identity.default_taint({"role": "bob"})[1]
    assert identity.default_taint({"role": "none", "search_path": "x"}) == (None, False)


def test_admins() -> None:
    roles = identity.admin_roles(None, "weir")
    assert roles == frozenset({"weir"})
    assert identity.admin_roles(" ops, dba ,", "weir") == frozenset({"ops", "dba"})
    ctx = SessionContext(database="d", user="weir", search_path=("public",))
    ctx.parameters = {"is_superuser": "off"}
    assert identity.is_admin(ctx, roles)
    identity.taint(ctx, identity.statement_taint("SET ROLE bob"))
    assert not identity.is_admin(ctx, roles)
    ctx.parameters["is_superuser"] = "on"  # PostgreSQL reports the current role's
    assert identity.is_admin(ctx, roles)
    other = SessionContext(database="d", user="bob", search_path=("public",))
    assert not identity.is_admin(other, roles)


def test_set_config_is_never_plain() -> None:
    for text in (b"SELECT set_config('role', 'b', false)\0", b"select SeT_CoNfIg('x')\0"):
        assert rules.query_head(text, 0, len(text), rules.WATCHED_WORDS) == 0
    for text in (b"DO $$ BEGIN END $$\0", b"call p()\0", b"EXECUTE s\0"):
        assert rules.query_head(text, 0, len(text), rules.WATCHED_WORDS) == 0
    assert rules.query_head(b"SELECT set_confi\0", 0, 17, rules.WATCHED_WORDS) == 1
