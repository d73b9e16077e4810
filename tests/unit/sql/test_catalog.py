"""engine.sql.catalog: rows -> relations, name resolution under a search_path."""

from __future__ import annotations

from engine.sql.catalog import Catalog, effective_search_path

ROWS = [
    # oid, schema, name, kind, rls, attnum, attname, type, typmod, collation, notnull, pkpos
    (100, "public", "users", "r", False, 1, "id", 23, -1, None, True, 1),
    (100, "public", "users", "r", False, 2, "name", 25, -1, "C", False, None),
    (200, "app", "users", "r", True, 1, "id", 20, -1, None, True, 1),
    (300, "pg_temp_3", "scratch", "r", False, 1, "x", 23, -1, None, False, None),
    (400, "public", "pairs", "r", False, 2, "b", 23, -1, None, True, 1),
    (400, "public", "pairs", "r", False, 1, "a", 23, -1, None, True, 2),
]


def test_from_rows_builds_relations_in_attribute_order() -> None:
    cat = Catalog.from_rows(ROWS)
    users = cat.get("public", "users")
    assert users is not None and users.oid == 100
    assert [c.name for c in users.columns] == ["id", "name"]
    assert users.primary_key == ("id",)
    name = users.column("name")
    assert name is not None and name.collation == "C" and name.byte_order
    pairs = cat.get("public", "pairs")
    assert pairs is not None and [c.name for c in pairs.columns] == ["a", "b"]
    assert pairs.primary_key == ("b", "a")
    app_users = cat.get("app", "users")
    assert app_users is not None and app_users.row_security


def test_resolution_follows_the_search_path() -> None:
    cat = Catalog.from_rows(ROWS)
    assert cat.resolve("users", None, ("app", "public")).oid == 200  # type: ignore[union-attr]
    assert cat.resolve("users", None, ("public", "app")).oid == 100  # type: ignore[union-attr]
    assert cat.resolve("users", "app", ("public",)).oid == 200  # type: ignore[union-attr]
    assert cat.resolve("users", None, ("nowhere",)) is None


def test_shadowing_names_resolve_to_nothing() -> None:
    cat = Catalog.from_rows(ROWS)
    assert cat.resolve("scratch", None, ("public",)) is None
    assert cat.resolve("pg_class", None, ("public",)) is None


def test_effective_search_path() -> None:
    assert effective_search_path('"$user", public', "alice") == ("alice", "public")
    assert effective_search_path('App, "Mixed"', "bob") == ("app", "Mixed")
