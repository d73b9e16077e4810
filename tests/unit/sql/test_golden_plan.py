"""Golden tests: SQL in, EXPLAIN text (or the Unsupported reason) out.

Each file tests/golden/plan/<case>.txt holds a comment, the SQL, a line ``----`` and the
expected rendering; a comment line ``-- timezone: Area/City`` plans it in a session of that
TimeZone (the rendering then ends with the zone the plan computes in, if it reads it).
``WEIR_UPDATE_GOLDEN=1`` rewrites the expected part (review the diff).
The catalog is fixed here: a news schema plus tables that exercise the unsupported reasons.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.plan.queries import QueryPlanner
from engine.sql.cacheable import Unsupported
from engine.sql.catalog import Catalog, Column, Relation
from engine.values import oids as T
from engine.values.collation import CollationInfo, local_glibc

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "plan"
SEP = "----\n"


def _c(name: str, oid: int, coll: str | None = None, not_null: bool = False) -> Column:
    if coll is None and oid in (T.TEXT, T.VARCHAR):
        coll = "C"
    return Column(name, oid, collation=coll, not_null=not_null)


CATALOG = Catalog((
    Relation(16401, "public", "users", (
        _c("id", T.INT4, not_null=True), _c("username", T.TEXT), _c("email", T.VARCHAR),
        _c("karma", T.INT4), _c("is_admin", T.BOOL), _c("created_at", T.TIMESTAMP)), ("id",)),
    Relation(16402, "public", "stories", (
        _c("id", T.INT8, not_null=True), _c("author_id", T.INT4), _c("title", T.TEXT),
        _c("url", T.TEXT), _c("score", T.INT4), _c("published", T.BOOL),
        _c("created_at", T.TIMESTAMP)), ("id",)),
    Relation(16403, "public", "votes", (
        _c("id", T.INT8), _c("story_id", T.INT8), _c("user_id", T.INT4), _c("value", T.INT2)),
        ("id",)),
    Relation(16404, "public", "comments", (
        _c("id", T.INT8), _c("story_id", T.INT8), _c("author_id", T.INT4),
        _c("body", T.TEXT), _c("score", T.INT4), _c("price", T.NUMERIC),
        _c("rating", T.FLOAT8)), ("id",)),
    Relation(16405, "public", "secure_notes", (_c("id", T.INT4), _c("note", T.TEXT)), ("id",),
             row_security=True),
    Relation(16406, "public", "people", (
        _c("id", T.INT4), _c("name", T.TEXT, "en_US.utf8"), _c("nick", T.TEXT, "und_ci"),
        _c("icu_name", T.TEXT, "en-x-icu"), _c("far_name", T.TEXT, "xx_XX.utf8"),
        _c("initials", T.BPCHAR, "en_US.utf8")), ("id",)),
    Relation(16407, "public", "v_users", (_c("id", T.INT4),), (), kind="v"),
    Relation(16408, "public", "events", (
        _c("id", T.INT4), _c("at", T.TIMESTAMPTZ), _c("payload", T.JSONB), _c("tags", 1009),
        _c("code", T.BPCHAR)), ("id",)),
    Relation(16409, "app", "users", (_c("id", T.INT4), _c("handle", T.TEXT)), ("id",)),
    Relation(16410, "public", "top_stories", (
        _c("id", T.INT8), _c("title", T.TEXT), _c("author", T.TEXT)), kind="v",
        view_sql=" SELECT s.id,\n    s.title,\n    u.username AS author\n   FROM stories s\n"
                 "     JOIN users u ON u.id = s.author_id\n  WHERE s.score > 50;"),
    Relation(16411, "public", "v_now", (_c("id", T.INT8),), kind="v",
             view_sql=" SELECT stories.id FROM stories WHERE stories.created_at > now();"),
    Relation(16412, "public", "feeds", (_c("id", T.INT4), _c("doc", T.JSON)), ("id",)),
), default_collation="C", nondeterministic=frozenset({"und_ci"}), collations=(
    # en_US.utf8 as weir can order it (same glibc, locale installed: Makefile locales-all);
    # xx_XX.utf8 is a locale weir does not have; en-x-icu is ICU (never proven)
    CollationInfo("en_US.utf8", "c", "en_US.utf8", local_glibc()),
    CollationInfo("xx_XX.utf8", "c", "xx_XX.utf8", local_glibc()),
    CollationInfo("en-x-icu", "i", "en-US", "153.120"),
    CollationInfo("und_ci", "i", "und-u-ks-level2", "153.120", deterministic=False)))


def _cases() -> list[Path]:
    return sorted(GOLDEN.glob("*.txt"))


ZONE_LINE = "-- timezone:"


def render(sql: str, timezone: str | None = None) -> str:
    planner = QueryPlanner(CATALOG)
    answer = planner.classify(sql, ("public",), timezone)
    if isinstance(answer.query, Unsupported):
        return f"UNSUPPORTED: {answer.query.reason}\n"
    zone = answer.query.identity.timezone
    return answer.query.explain + ("" if zone is None else f"\n(in TimeZone {zone})") + "\n"


@pytest.mark.parametrize("path", _cases(), ids=lambda p: p.stem)
def test_golden(path: Path) -> None:
    text = path.read_text()
    head, _, expected = text.partition(SEP)
    sql = "\n".join(line for line in head.splitlines() if not line.startswith("--")).strip()
    zones = [line.removeprefix(ZONE_LINE).strip() for line in head.splitlines()
             if line.startswith(ZONE_LINE)]
    got = render(sql, zones[0] if zones else None)
    if os.environ.get("WEIR_UPDATE_GOLDEN") == "1":
        path.write_text(head + SEP + got)
        return
    assert got == expected, f"{path.name}:\n{got}"


def test_there_are_golden_cases() -> None:
    assert len(_cases()) >= 60
