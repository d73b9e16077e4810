"""Which collations weir orders text in (``engine.values.collation.refusal``), what the catalog
reads of them (``Catalog.from_rows`` columns 17-21), and the reason a statement goes upstream
with when weir cannot: ICU, a nondeterministic collation, another glibc release on the server,
a locale weir does not have."""

from __future__ import annotations

from engine.plan.queries import QueryPlanner
from engine.sql.cacheable import Unsupported
from engine.sql.catalog import Catalog, Column, Relation
from engine.values import oids as T
from engine.values.collation import CollationInfo, collated, local_glibc, refusal

MINE = local_glibc()


def _row(attnum: int, name: str, coll: str | None, provider: str | None, locale: str | None,
         version: str | None) -> tuple[object, ...]:
    return (16500, "public", "w", "r", False, attnum, name, T.TEXT if coll else T.INT4, -1, coll,
            False, 1 if attnum == 1 else None, "en_US.UTF-8", False, None, "public", "postgres",
            provider, locale, version, "c", MINE)


def test_the_catalog_reads_each_collation_and_the_databases() -> None:
    cat = Catalog.from_rows([
        _row(1, "id", None, None, None, None),
        _row(2, "a", "en_US.UTF-8", "c", "en_US.UTF-8", MINE),
        _row(3, "b", "de-x-icu", "i", "de", "153.120"),
        _row(4, "c", "C", "c", "C", None)])
    assert cat.collation_info("en_US.UTF-8") == CollationInfo(
        "en_US.UTF-8", "c", "en_US.UTF-8", MINE)
    assert cat.collation_info("de-x-icu") == CollationInfo("de-x-icu", "i", "de", "153.120")
    assert cat.collation_info("C") is None  # byte order needs no description


def test_refusals_name_what_differs() -> None:
    ok = CollationInfo("en_US.utf8", "c", "en_US.utf8", MINE)
    assert refusal(ok, "en_US.utf8") is None
    assert refusal(None, "x") == "collation x (not described by the catalog)"
    old = CollationInfo("en_US.utf8", "c", "en_US.utf8", "2.17")
    assert refusal(old, "en_US.utf8") == (
        f"collation en_US.utf8: the server's glibc is 2.17, weir's is {MINE}")
    icu = CollationInfo("en-x-icu", "i", "en-US", "153.120")
    assert "ICU collation en-x-icu" in str(refusal(icu, "en-x-icu"))
    ci = CollationInfo("ci", "i", "und-u-ks-level2", "153.120", deterministic=False)
    assert refusal(ci, "ci") == "nondeterministic collation ci"
    gone = CollationInfo("zz_ZZ.utf8", "c", "zz_ZZ.utf8", MINE)
    assert refusal(gone, "zz_ZZ.utf8") == (
        "collation zz_ZZ.utf8: locale zz_ZZ.utf8 is not installed where weir runs")


def test_a_server_on_another_glibc_sends_ordering_upstream_with_the_versions() -> None:
    cat = Catalog((Relation(16600, "public", "w", (
        Column("id", T.INT4), Column("name", T.TEXT, collation="en_US.utf8")), ("id",)),),
        collations=(CollationInfo("en_US.utf8", "c", "en_US.utf8", "2.17"),))
    got = QueryPlanner(cat).classify("SELECT id FROM w ORDER BY name", ("public",)).query
    assert isinstance(got, Unsupported)
    assert got.reason == (f"text ORDER BY under collation en_US.utf8: the server's glibc is "
                          f"2.17, weir's is {MINE}")


def test_keys_order_by_strcoll_then_by_bytes() -> None:
    words = ["b", "B", "a", "A", "é", "e", "co-op", "coop", "Co op", "ss", "ß"]
    got = sorted(words, key=lambda w: collated(w, "en_US.utf8"))
    assert got.index("a") < got.index("B") < got.index("e")  # case is a later level
    assert sorted(words) != got
    assert collated("x", "en_US.utf8") == collated("x", "en_US.utf8")
    assert collated("e\u0301", "en_US.utf8") != collated("é", "en_US.utf8")  # bytes differ
