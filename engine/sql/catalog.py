"""The planner's view of the upstream catalog: relations, columns, keys, collations, RLS.

Owns: the frozen dataclasses describing user relations (``Relation``, ``Column``), the SQL text
that loads them from PostgreSQL (``CATALOG_QUERY``), the constructor from its result rows
(``Catalog.from_rows``), and name resolution under a search_path (``Catalog.resolve``).

Invariants: everything here is pure data; no driver, no I/O. The proxy (or a test) runs
``CATALOG_QUERY`` over any driver and hands the rows to ``from_rows``. Rows are plain tuples in
the column order of the query (columns 13 onwards - the database's collation, whether the
column's collation is nondeterministic, a view's definition, the search_path and user the
catalog was read under, the provider / locale / actual version of the column's collation and
the database's provider / actual version, read into ``collations`` - are optional). A
column's ``collation`` is the *effective* collation name
(``"default"`` is replaced by the database's own collation), or None for non-collatable types.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.values.collation import CollationInfo

#: Collations whose ordering is plain byte order (what Python's str comparison gives for UTF-8).
BYTE_ORDER_COLLATIONS = frozenset({"C", "POSIX", "ucs_basic", "C.UTF-8", "C.utf8"})

#: Loads every user relation (tables, views, matviews, partitioned and foreign tables) with its
#: columns. One row per column, ordered by relation oid then attribute number.
CATALOG_QUERY = """\
SELECT c.oid::int8, n.nspname::text, c.relname::text, c.relkind::text, c.relrowsecurity,
       a.attnum::int4, a.attname::text, a.atttypid::int8, a.atttypmod::int4,
       CASE WHEN a.attcollation = 0 THEN NULL
            WHEN co.collname = 'default' THEN
                 CASE WHEN d.datlocprovider = 'i' THEN d.daticulocale ELSE d.datcollate END
            WHEN co.collprovider = 'c' AND co.collcollate IN ('C', 'POSIX') THEN 'C'
            ELSE co.collname END::text,
       a.attnotnull,
       array_position(pk.indkey::int2[], a.attnum)::int4,
       CASE WHEN d.datlocprovider = 'i' THEN d.daticulocale
            WHEN d.datcollate IN ('C', 'POSIX') THEN 'C' ELSE d.datcollate END::text,
       NOT coalesce(co.collisdeterministic, true),
       CASE WHEN c.relkind = 'v' AND a.attnum = 1 THEN pg_catalog.pg_get_viewdef(c.oid) END,
       pg_catalog.current_setting('search_path'), current_user::text,
       CASE WHEN a.attcollation = 0 THEN NULL WHEN co.collname = 'default' THEN d.datlocprovider
            ELSE co.collprovider END::text,
       CASE WHEN a.attcollation = 0 THEN NULL WHEN co.collname = 'default' THEN d.datcollate
            ELSE co.collcollate END::text,
       CASE WHEN a.attcollation = 0 THEN NULL WHEN co.collname = 'default'
            THEN pg_catalog.pg_database_collation_actual_version(d.oid)
            ELSE pg_catalog.pg_collation_actual_version(co.oid) END::text,
       d.datlocprovider::text, pg_catalog.pg_database_collation_actual_version(d.oid)::text
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
JOIN pg_catalog.pg_database d ON d.datname = pg_catalog.current_database()
LEFT JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation
LEFT JOIN pg_catalog.pg_index pk ON pk.indrelid = c.oid AND pk.indisprimary
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\\_toast%'
ORDER BY c.oid, a.attnum"""

def _note_collations(row: Sequence[Any], found: dict[str, CollationInfo]) -> None:
    """Record the column's collation (columns 17-19) and the database's (20-21)."""
    if len(row) <= 21:
        return
    if row[9] is not None and row[17] is not None and str(row[9]) not in BYTE_ORDER_COLLATIONS:
        name = str(row[9])
        found.setdefault(name, CollationInfo(name, str(row[17]), _opt(row[18]), _opt(row[19]),
                                             not row[13]))
    if row[12] is not None and str(row[12]) not in BYTE_ORDER_COLLATIONS:
        name = str(row[12])
        found.setdefault(name, CollationInfo(name, str(row[20]), name, _opt(row[21])))


def _opt(value: Any) -> str | None:
    return None if value is None else str(value)


RELKIND_NAMES = {"r": "table", "p": "partitioned table", "v": "view", "m": "materialized view",
                 "f": "foreign table"}


@dataclass(frozen=True, slots=True)
class Column:
    """One attribute of a relation."""

    name: str
    type_oid: int
    typmod: int = -1
    collation: str | None = None
    not_null: bool = False

    @property
    def byte_order(self) -> bool:
        """True when comparisons on this column agree with Python's (code point) order."""
        return self.collation is None or self.collation in BYTE_ORDER_COLLATIONS


@dataclass(frozen=True, slots=True)
class Relation:
    """A user relation with its columns in attribute order and its primary key column names."""

    oid: int
    schema: str
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    kind: str = "r"
    row_security: bool = False
    #: A view's defining SELECT (``pg_get_viewdef``): its names resolve under the catalog's
    #: ``load_search_path``, the search_path in effect when the catalog was read.
    view_sql: str | None = None

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    def column(self, name: str) -> Column | None:
        for col in self.columns:
            if col.name == name:
                return col
        return None


@dataclass(frozen=True, slots=True)
class Catalog:
    """All user relations, indexed by (schema, name)."""

    relations: tuple[Relation, ...] = ()
    default_collation: str = "C"
    nondeterministic: frozenset[str] = frozenset()
    load_search_path: tuple[str, ...] = ("public",)
    #: the non-byte-order collations in use (columns' and the database's), by effective name
    collations: tuple[CollationInfo, ...] = ()
    _by_name: dict[tuple[str, str], Relation] = field(default_factory=dict, compare=False,
                                                      repr=False)

    _temp_names: set[str] = field(default_factory=set, compare=False, repr=False)

    def __post_init__(self) -> None:
        for rel in self.relations:
            self._by_name[(rel.schema, rel.name)] = rel
            if rel.schema.startswith("pg_temp"):
                self._temp_names.add(rel.name)

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[Any]]) -> Catalog:
        """Build from the rows of ``CATALOG_QUERY`` (any driver's tuples)."""
        grouped: dict[int, list[Sequence[Any]]] = {}
        default_collation = "C"
        nondeterministic: set[str] = set()
        load_path: tuple[str, ...] = ("public",)
        collations: dict[str, CollationInfo] = {}
        for row in rows:
            grouped.setdefault(int(row[0]), []).append(row)
            if len(row) > 16 and row[15] is not None:
                load_path = effective_search_path(str(row[15]), str(row[16]))
            if len(row) > 12 and row[12] is not None:
                default_collation = str(row[12])
            if len(row) > 13 and row[13] and row[9] is not None:
                nondeterministic.add(str(row[9]))
            _note_collations(row, collations)
        relations = []
        for oid, cols in grouped.items():
            cols = sorted(cols, key=lambda r: int(r[5]))
            head = cols[0]
            pk = sorted((int(r[11]), str(r[6])) for r in cols if r[11] is not None)
            relations.append(Relation(
                oid=oid, schema=str(head[1]), name=str(head[2]),
                columns=tuple(Column(str(r[6]), int(r[7]), int(r[8]),
                                     None if r[9] is None else str(r[9]), bool(r[10]))
                              for r in cols),
                primary_key=tuple(name for _, name in pk), kind=str(head[3]),
                row_security=bool(head[4]),
                view_sql=next((str(r[14]) for r in cols if len(r) > 14 and r[14]), None)))
        return cls(tuple(relations), default_collation, frozenset(nondeterministic),
                   load_search_path=load_path, collations=tuple(collations.values()))

    def collation_info(self, name: str) -> CollationInfo | None:
        """What the catalog says of collation ``name`` (None: not read)."""
        return next((c for c in self.collations if c.name == name), None)

    def get(self, schema: str, name: str) -> Relation | None:
        return self._by_name.get((schema, name))

    def by_oid(self, oid: int) -> Relation | None:
        for rel in self.relations:
            if rel.oid == oid:
                return rel
        return None

    def resolve(self, name: str, schema: str | None,
                search_path: Sequence[str] = ("public",)) -> Relation | None:
        """The relation ``[schema.]name`` denotes; unqualified names search ``search_path``.

        ``search_path`` is the effective list (``$user`` already expanded, missing schemas
        harmless). Like PostgreSQL, ``pg_catalog`` is searched first unless listed explicitly;
        system relations are not in this catalog, so such names resolve to None. A name that
        some temporary table carries resolves to None too (the temp schema is searched first
        and is per session).
        """
        if schema is not None:
            if schema.startswith("pg_temp"):
                return None
            return self._by_name.get((schema, name))
        if name.startswith("pg_") and "pg_catalog" not in search_path:
            return None  # pg_catalog is searched first and holds the pg_* system relations
        if name in self._temp_names:
            return None  # some session's temporary table may shadow it: cannot tell whose
        for nsp in search_path:
            rel = self._by_name.get((nsp, name))
            if rel is not None:
                return rel
        return None


def effective_search_path(setting: str, user: str) -> tuple[str, ...]:
    """Parse a ``search_path`` setting (e.g. ``'"$user", public'``) into schema names."""
    out: list[str] = []
    for part in setting.split(","):
        item = part.strip()
        if not item:
            continue
        if item.startswith('"') and item.endswith('"') and len(item) >= 2:
            item = item[1:-1].replace('""', '"')
        else:
            item = item.lower()
        out.append(user if item == "$user" else item)
    return tuple(out)
