"""The statements of a fill batch: one per request shape, the keys of all its fills in one array.

Owns: :func:`fetch_batch` (inside the batch's REPEATABLE READ transaction, the base rows of
every request of every fill, decoded exactly as the CDC applier decodes pgoutput text), with
requests of one shape — same table, one key column, no semi-join — across the batch fetched
by one ``... WHERE "k" = ANY($1)`` statement whose rows are handed back per key, semi-join
prefetches of one shape (one via key column of an integer type) by one ``LATERAL`` statement
over the distinct via keys (:func:`via_any_sql`), and the text form of fetched columns
(:func:`as_output_text`).

Also :func:`fetch_all`, the whole upstream side of a batch: its snapshot, its *position*
(the upstream's WAL insert position read after that snapshot was taken), the WAL flush
position read right after the position (below it, the stream cannot reach the position
before the next flush: ``proxy.fillrun`` then hurries its fallback) and its rows. When every
request of the batch has one shape whose key is an integer (whose SQL equality is Python's),
they come from ONE autocommit statement (one round trip; :func:`one_sql`), and so do they
when every request has such a shape, plain or semi-join (:func:`mixed_sql`); otherwise a
REPEATABLE READ READ ONLY transaction runs those steps. Neither writes anything: no
transaction ID, no WAL, no commit record. Both give the same guarantee (DESIGN §6,
docs/architecture.md "Fills at a position"): one snapshot for every table, the one
``pg_current_snapshot()`` returns, and a position at or after the end of the commit record
of every transaction visible in it.

Invariant: each request gets exactly the rows its own statement (``engine.fill_query``) would
have returned under the same snapshot. A merged statement's row whose key value equals none
of the requested keys in Python's equality (a collation or type whose SQL equality is looser)
makes that shape fall back to one statement per request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cdc import parse_lsn
from engine import Column, FillRequest, fill_query, parser_for, span_of

Row = tuple[Any, ...]
#: key types whose SQL equality is Python's equality of the decoded values (int2, int4, int8)
EXACT_KEYS = frozenset({20, 21, 23})


def as_output_text(column: Column) -> str:
    """SQL giving a column's value in its type's output form (what pgoutput sends)."""
    ref = 'q."' + column.name.replace('"', '""') + '"'
    if column.type_oid == 16:  # bool::text is 'true'/'false'; the output form is 't'/'f'
        return f"CASE WHEN {ref} THEN 't' WHEN NOT {ref} THEN 'f' END"
    return f"{ref}::text"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _shape(req: FillRequest) -> tuple[Any, int] | None:
    """What requests must share to be fetched together (None: fetched alone)."""
    if req.via is not None or len(req.columns) != 1 or span_of(req.key) is not None:
        return None
    return (req.table, req.columns[0])


def any_sql(req: FillRequest, param: int = 1) -> str:
    """The merged statement of ``req``'s shape: every column, the key column
    ``= ANY($param)``."""
    columns = ", ".join(as_output_text(c) for c in req.table.columns)
    return f"SELECT {columns} FROM {_any_from(req, param)}"


def _any_from(req: FillRequest, param: int) -> str:
    """:func:`any_sql`'s FROM clause: its rows as ``q``."""
    table = req.table
    inner = (f"SELECT {', '.join(_quote(c.name) for c in table.columns)} FROM "
             f"{_quote(table.schema)}.{_quote(table.name)} "
             f"WHERE {_quote(table.columns[req.columns[0]].name)} = ANY(${param})")
    return f"({inner}) AS q"


#: the alias of a merged prefetch's keys (a batch whose tables bear that name is not merged)
_KEYS = "weir_k"


def _via_shape(req: FillRequest) -> tuple[Any, ...] | None:
    """What prefetches (``req.via``) must share to be fetched together: the same tables and
    columns, one via key column of an exact type (None: fetched alone)."""
    via = req.via
    if via is None or len(via.columns) != 1 or not req.columns \
            or via.table.columns[via.columns[0]].type_oid not in EXACT_KEYS \
            or _KEYS in (req.table.name, via.table.name):
        return None
    return (req.table, req.columns, via.table, via.columns, via.join_columns)


def via_any_sql(req: FillRequest, param: int = 1) -> str:
    """The merged statement of a prefetch shape: per distinct via key of ``$1`` present in
    the via table, that key and the rows of the request's own semi-join for it (``LATERAL``:
    the statement of ``fill_query`` with the key bound, evaluated once per key)."""
    columns = ", ".join(as_output_text(c) for c in req.table.columns)
    return f"SELECT {_KEYS}.v, {columns} FROM {_via_from(req, param)}"


def _via_from(req: FillRequest, param: int) -> str:
    """:func:`via_any_sql`'s FROM clause: the keys as ``weir_k(v)``, the rows as ``q``."""
    via = req.via
    assert via is not None
    src, table = via.table, req.table
    key = _quote(src.columns[via.columns[0]].name)
    source = f"{_quote(src.schema)}.{_quote(src.name)}"
    on = ", ".join(_quote(table.columns[c].name) for c in req.columns)
    join = ", ".join(_quote(src.columns[c].name) for c in via.join_columns)
    inner = (f"SELECT {', '.join(_quote(c.name) for c in table.columns)} FROM "
             f"{_quote(table.schema)}.{_quote(table.name)} WHERE ({on}) IN "
             f"(SELECT {join} FROM {source} WHERE {key} = {_KEYS}.v)")
    return (f"(SELECT DISTINCT {key} AS v FROM {source} WHERE {key} = ANY(${param})) "
            f"AS {_KEYS}, LATERAL ({inner}) AS q")


def decode_rows(columns: Sequence[Column], records: Sequence[Any]) -> list[Row]:
    """``records`` (each the text form of ``columns``' values, None for NULL) as rows of
    canonical values, each value as ``engine.decode_text`` decodes it: the parser of each
    column chosen once per call (``engine.parser_for``), not once per value."""
    parsers = [parser_for(c.type_oid) for c in columns]
    return [tuple([None if v is None else parse(v) for parse, v in zip(parsers, rec, strict=True)])
            for rec in records]


async def fetch_rows(conn: Any, req: FillRequest) -> list[Row]:
    """The base rows of one fill request (its own statement)."""
    sql, params = fill_query(req)
    columns = req.table.columns
    casts = ", ".join(as_output_text(c) for c in columns)
    records = await conn.fetch(f"SELECT {casts} FROM ({sql}) AS q", *params)
    return decode_rows(columns, records)


async def fetch_batch(conn: Any, fills: Sequence[Sequence[FillRequest]]
                      ) -> list[list[list[Row]]]:
    """Rows per fill, per request of that fill (in the order given)."""
    out: list[list[list[Row] | None]] = [[None] * len(reqs) for reqs in fills]
    groups: dict[tuple[Any, int], list[tuple[int, int]]] = {}
    for i, reqs in enumerate(fills):
        for j, req in enumerate(reqs):
            shape = _shape(req)
            if shape is not None:
                groups.setdefault(shape, []).append((i, j))
    for (_, col), places in groups.items():
        if len(places) < 2:
            continue
        first = fills[places[0][0]][places[0][1]]
        keys = list(dict.fromkeys(fills[i][j].key[0] for i, j in places))
        records = await conn.fetch(any_sql(first), keys)
        by_key: dict[Any, list[Row]] = {k: [] for k in keys}
        loose = False
        for row in decode_rows(first.table.columns, records):
            bucket = by_key.get(row[col])
            if bucket is None:
                loose = True
                break
            bucket.append(row)
        if loose:
            continue  # each request of the shape runs its own statement below
        for i, j in places:
            out[i][j] = list(by_key[fills[i][j].key[0]])
    vias: dict[tuple[Any, ...], list[tuple[int, int]]] = {}
    for i, reqs in enumerate(fills):
        for j, req in enumerate(reqs):
            shape = _via_shape(req)
            if shape is not None:
                vias.setdefault(shape, []).append((i, j))
    for places in vias.values():
        if len(places) >= 2:
            await _fetch_vias(conn, fills, places, out)
    for i, reqs in enumerate(fills):
        for j, req in enumerate(reqs):
            if out[i][j] is None:
                out[i][j] = await fetch_rows(conn, req)
    return [[rows or [] for rows in per_fill] for per_fill in out]


async def _fetch_vias(conn: Any, fills: Sequence[Sequence[FillRequest]],
                      places: list[tuple[int, int]], out: list[list[list[Row] | None]]
                      ) -> None:
    """The prefetches of one shape at ``places`` by one statement (``via_any_sql``)."""
    first = fills[places[0][0]][places[0][1]]
    asked = [_via_key(fills[i][j]) for i, j in places]
    keys = list(dict.fromkeys(asked))
    records = await conn.fetch(via_any_sql(first), keys)
    by_key: dict[Any, list[Row]] = {k: [] for k in keys}
    for key, row in zip((rec[0] for rec in records),
                        decode_rows(first.table.columns, [rec[1:] for rec in records]),
                        strict=True):
        bucket = by_key.get(key)
        if bucket is None:  # (an exact key type: cannot happen) each runs its own statement
            return
        bucket.append(row)
    for (i, j), key in zip(places, asked, strict=True):
        out[i][j] = list(by_key[key])


def _via_key(req: FillRequest) -> Any:
    assert req.via is not None
    return req.via.key[0]


#: the snapshot, then the position: the insert position is read while the statement runs,
#: after its snapshot was taken (the transaction's, in the REPEATABLE READ form)
HEAD = ("SELECT pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text, "
        "pg_current_wal_flush_lsn()::text")


def one_shape(fills: Sequence[Sequence[FillRequest]]) -> FillRequest | None:
    """The request every request of ``fills`` shares its shape with, when that shape's key
    is exact (:data:`EXACT_KEYS`); None otherwise."""
    first = fills[0][0] if fills and fills[0] else None
    if first is None or _shape(first) is None \
            or first.table.columns[first.columns[0]].type_oid not in EXACT_KEYS:
        return None
    shape = _shape(first)
    return first if all(_shape(r) == shape for reqs in fills for r in reqs) else None


def one_sql(req: FillRequest) -> str:
    """Snapshot, position, flushed position and the rows of ``req``'s shape for the keys $1
    in one statement: the first three columns are the snapshot, the position and the WAL
    flush position on the head row, NULL on the rows (a CTE with a volatile function is
    evaluated once, while the statement runs: after its snapshot was taken)."""
    nulls = ", ".join("NULL" for _ in req.table.columns)
    return ("WITH h AS (SELECT pg_current_snapshot()::text AS s, "
            "pg_current_wal_insert_lsn()::text AS l, pg_current_wal_flush_lsn()::text AS f) "
            f"SELECT h.s, h.l, h.f, {nulls} FROM h UNION ALL "
            f"SELECT NULL, NULL, NULL, {any_sql(req, 1)[len('SELECT '):]}")


Part = tuple[FillRequest, list[tuple[int, int]]]


def _exact(req: FillRequest) -> tuple[Any, ...] | None:
    """The shape of a request the one-statement forms merge (an exact key), else None."""
    if req.via is not None:
        return _via_shape(req)
    shape = _shape(req)
    if shape is None or req.table.columns[req.columns[0]].type_oid not in EXACT_KEYS:
        return None
    return shape


def mixed_parts(fills: Sequence[Sequence[FillRequest]]) -> list[Part] | None:
    """Per shape, its first request and the places of its requests, when every request of
    ``fills`` has an exact shape (:func:`_exact`); None otherwise."""
    parts: dict[tuple[Any, ...], Part] = {}
    for i, reqs in enumerate(fills):
        for j, req in enumerate(reqs):
            shape = _exact(req)
            if shape is None:
                return None
            parts.setdefault(shape, (req, []))[1].append((i, j))
    return list(parts.values()) or None


def mixed_sql(parts: Sequence[Part]) -> str:
    """:func:`one_sql` for several shapes: after the head row, per part ``n`` (parameter
    ``$n+1``, its keys) its rows tagged ``n`` with their key (``::int8``) and its columns'
    text, padded with NULLs to the widest part."""
    width = max(len(req.table.columns) for req, _ in parts)
    head = ", ".join("NULL::text" for _ in range(width))
    out = ["WITH h AS (SELECT pg_current_snapshot()::text AS s, "
           "pg_current_wal_insert_lsn()::text AS l, pg_current_wal_flush_lsn()::text AS f) "
           f"SELECT -1 AS p, h.s, h.l, h.f, NULL::int8, {head} FROM h"]
    for n, (req, _) in enumerate(parts):
        columns = req.table.columns
        texts = ", ".join([as_output_text(c) for c in columns]
                          + ["NULL"] * (width - len(columns)))
        if req.via is None:
            key = 'q."' + columns[req.columns[0]].name.replace('"', '""') + '"'
            source = _any_from(req, n + 1)
        else:
            key, source = f"{_KEYS}.v", _via_from(req, n + 1)
        out.append(f"SELECT {n}, NULL, NULL, NULL, {key}::int8, {texts} FROM {source}")
    return " UNION ALL ".join(out)


def _key_of(req: FillRequest) -> Any:
    return _via_key(req) if req.via is not None else req.key[0]


async def fetch_mixed(conn: Any, fills: Sequence[Sequence[FillRequest]],
                      parts: Sequence[Part]) -> tuple[str, int, int, list[list[list[Row]]]]:
    """The one-statement form of a batch of several exact shapes (:func:`mixed_sql`)."""
    keys = [list(dict.fromkeys(_key_of(fills[i][j]) for i, j in places))
            for _, places in parts]
    records = await conn.fetch(mixed_sql(parts), *keys)
    head = next(rec for rec in records if rec[0] == -1)
    by_key: list[dict[Any, list[Row]]] = [{k: [] for k in ks} for ks in keys]
    for n, (req, _) in enumerate(parts):
        columns = req.table.columns
        mine = [rec for rec in records if rec[0] == n]
        for rec, row in zip(mine, decode_rows(columns, [rec[5:5 + len(columns)] for rec in mine]),
                            strict=True):
            bucket = by_key[n].get(rec[4])
            if bucket is None:  # (cannot happen for integer keys: the batch fails)
                raise LookupError(f"fill row with a key not asked for: {rec[4]!r}")
            bucket.append(row)
    out: list[list[list[Row]]] = [[[] for _ in reqs] for reqs in fills]
    for n, (_, places) in enumerate(parts):
        for i, j in places:
            out[i][j] = list(by_key[n][_key_of(fills[i][j])])
    return head[1], parse_lsn(head[2]), parse_lsn(head[3]), out


async def fetch_all(conn: Any, fills: Sequence[Sequence[FillRequest]]
                    ) -> tuple[str, int, int, list[list[list[Row]]]]:
    """(the snapshot's text, the position, the WAL flush position read just after it, rows
    per fill per request) of one batch (module docstring); nothing is written upstream."""
    first = one_shape(fills)
    parts = mixed_parts(fills) if first is None else None
    if parts is not None:
        return await fetch_mixed(conn, fills, parts)
    if first is None:
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            # the first statement takes the transaction's snapshot, then reads the position
            head = await conn.fetchrow(HEAD)
            return (head[0], parse_lsn(head[1]), parse_lsn(head[2]),
                    await fetch_batch(conn, fills))
    col = first.columns[0]
    keys = list(dict.fromkeys(r.key[0] for reqs in fills for r in reqs))
    records = await conn.fetch(one_sql(first), keys)
    snapshot, position, flushed = next((rec[0], rec[1], rec[2]) for rec in records
                                       if rec[0] is not None)
    by_key: dict[Any, list[Row]] = {k: [] for k in keys}
    for row in decode_rows(first.table.columns, [rec[3:] for rec in records if rec[0] is None]):
        bucket = by_key.get(row[col])
        if bucket is None:  # (cannot happen for integer keys: the batch fails, its keys miss)
            raise LookupError(f"fill row with a key not asked for: {row[col]!r}")
        bucket.append(row)
    return snapshot, parse_lsn(position), parse_lsn(flushed), [
        [list(by_key[r.key[0]]) for r in reqs] for reqs in fills]
