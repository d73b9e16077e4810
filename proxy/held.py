"""Statements weir holds and the portals bound from them, with what follows from them alone.

Owns: :class:`HeldStatement` (a client's Parse weir answered itself: a cached SELECT or an
admin command) and :class:`LocalPortal` (a Bind of one), the result columns of the admin
commands, weir's placeholder names, the statements a new cache lets weir hold
(:func:`adopt`), and the pure answers derived from a held statement and a
Bind: the cache keys and parameters of a Bind (:func:`bind_keys`), the parameter types
(:func:`param_types`), the RowDescription (:func:`row_description`) and the next rows of an
Execute (:func:`next_rows`). ``proxy.extended.Extended`` drives them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine import Unsupported
from pgwire import backend as be
from pgwire import frontend as fe
from proxy import logparams
from proxy.admin import CreateCache, Show, parse_admin
from proxy.hitpath import Hit
from proxy.params import ParamError, decode_param, formats_for
from proxy.router import Route

log = logging.getLogger("weir.extended")

#: Result columns of the admin commands (all text), for Describe.
ADMIN_COLUMNS: dict[str, tuple[str, ...]] = {
    "caches": ("name", "query_id", "query", "memory_bytes"),
    "proxied": ("query_id", "query", "supported", "count"),
    "supported": ("query_id", "query", "supported", "count"),
    "status": ("name", "value"),
    "tables": ("table", "oid", "caches"),
    "last": ("destination", "reason"),
    "explain": ("query_id", "query", "supported"),
}


#: the portal weir closes upstream to place its own answers in order (no client's portal:
#: the name is not one a driver makes, and closing a portal that does not exist is no error)
PLACEHOLDER_PORTAL = "\x7fweir placeholder"
#: the statement weir binds a portal from when the client's statement is gone
PLACEHOLDER_STATEMENT = "\x7fweir statement"


@dataclass(slots=True)
class HeldStatement:
    parse: fe.Parse
    route: Route  # destination "cache" (with a cache entry) or "admin"
    upstream: bool = False  # recreated upstream already
    #: the hit path's memo for this statement and the output settings it was taken for
    memo: dict[bytes, Hit] | None = None
    memo_sid: int = -1
    #: what :func:`bind_keys` derives from the statement and its route alone, for that
    #: route (None: not derived yet; see :func:`_typing`)
    typing: Typing | None = None

    @property
    def columns(self) -> tuple[str, ...] | None:
        """Admin result columns (None when the command returns no rows)."""
        cmd = self.route.admin
        if isinstance(cmd, Show):
            return ADMIN_COLUMNS[cmd.what]
        if isinstance(cmd, CreateCache) and cmd.explain_only:
            return ADMIN_COLUMNS["explain"]
        return None


@dataclass(slots=True)
class LocalPortal:
    statement: HeldStatement
    bind: fe.Bind
    keys: list[tuple[Any, ...]] | None
    params: tuple[Any, ...]
    result: bytes | None = None  # admin: the whole answer, computed at first Execute
    rows: list[bytes] | None = None  # cache: encoded DataRows, computed at first Execute
    sent: int = 0
    #: for the hit path's memo: the Bind after the statement name (unnamed portal only),
    #: and the engine answers the rows were encoded from
    rest: bytes | None = None
    reads: list[tuple[str, tuple[Any, ...], object]] | None = None


def adopt(held: dict[str, HeldStatement], statements: Mapping[str, Any], registry: Any,
          search_path: tuple[str, ...], timezone: str | None) -> None:
    """Hold too (``upstream=True``: both have them) the named statements prepared upstream
    (``statements``: name -> its Parse's ``query`` and ``param_types``) whose text a cache of
    ``registry`` now serves."""
    for name, stmt in statements.items():
        # (the unnamed statement is not adopted: a simple Query drops it upstream, and
        # clients parse it again for each run anyway)
        if not name or name in held or parse_admin(stmt.query) is not None:
            continue
        classified = registry.classify(stmt.query, search_path, timezone)
        entry = registry.cache_for(classified)
        if entry is not None:
            route = Route("cache", f"served by cache {entry.name}", classified=classified,
                          cache=entry)
            held[name] = HeldStatement(fe.Parse(name, stmt.query, stmt.param_types), route,
                                       upstream=True)


@dataclass(frozen=True, slots=True)
class Typing:
    """What decoding a held statement's Bind needs from the statement and its ``route``
    alone: its parameter types (None: one is unknown, go upstream), the declared ones, the
    column type each parameter is compared with, and the number of result columns."""

    route: Route
    types: tuple[int, ...] | None
    declared: tuple[int, ...]
    column_types: Mapping[int, int]
    fields: int


def _typing(held: HeldStatement) -> Typing | None:
    """:class:`Typing` of ``held`` for its current route (kept on it; None: not a cached
    read weir can key)."""
    route = held.route
    known = held.typing
    if known is not None and known.route is route:
        return known
    classified = route.classified
    if route.cache is None or classified is None or isinstance(classified.query, Unsupported):
        return None
    plan = classified.query.plan  # this text's plan: its key sources are its own $n
    known = held.typing = Typing(
        route, param_types(held), tuple(held.parse.param_types),
        {number - 1: t for number, t in plan.param_types.items()}, len(route.cache.fields))
    return known


def bind_keys(
    held: HeldStatement, msg: fe.Bind
) -> tuple[list[tuple[Any, ...]], tuple[Any, ...]] | None:
    """The reader lookups and decoded parameters of a Bind, or None (go upstream)."""
    typing = _typing(held)
    if typing is None:
        return None
    types = typing.types
    if types is None or len(types) != len(msg.params) \
            or any(code not in (0, 1) for code in msg.result_formats):
        return None  # PostgreSQL tells the client what is wrong with the Bind
    declared, column_types = typing.declared, typing.column_types
    try:
        formats_for(typing.fields, msg.result_formats)
        formats = formats_for(len(msg.params), msg.param_formats)
        values: list[Any] = []
        for i, value in enumerate(msg.params):
            kind = declared[i] if i < len(declared) else 0
            # parameters that are not keys are LIMIT/OFFSET counts
            values.append(decode_param(value, formats[i], kind, column_types.get(i, 20)))
    except ParamError as exc:
        if logparams.enabled():
            log.debug("parameter not usable as a cache key: %s %s", exc, logparams.shown(
                [bytes(p) if p is not None else None for p in msg.params]))
        else:
            log.debug("a parameter is not usable as a cache key (--log-parameters on shows "
                      "which and why)")
        return None
    keys = typing.route.classified.keys(values)  # type: ignore[union-attr]
    return None if keys is None else (keys, tuple(values))


def param_types(held: HeldStatement) -> tuple[int, ...] | None:
    classified = held.route.classified
    if (
        held.route.cache is None
        or classified is None
        or isinstance(classified.query, Unsupported)
    ):
        return ()
    plan = classified.query.plan
    known: dict[int, int] = dict(enumerate(held.parse.param_types, 1))
    for number, type_oid in plan.param_types.items():
        if not known.get(number):
            known[number] = type_oid
    count = max(known, default=0)
    types = tuple(known.get(i, 0) for i in range(1, count + 1))
    return None if 0 in types else types


def row_description(held: HeldStatement, formats: tuple[int, ...]) -> bytes:
    entry = held.route.cache
    if entry is None:
        columns = held.columns
        if columns is None:
            return be.NO_DATA.encode()
        fields = tuple(be.FieldDescription(name=c, type_oid=25) for c in columns)
        return be.RowDescription(fields).encode()
    fmts = formats_for(len(entry.fields), formats)
    fields = tuple(
        be.FieldDescription(
            f.name, f.table_oid, f.column_attr, f.type_oid, f.type_size, f.type_modifier, fmt
        )
        for f, fmt in zip(entry.fields, fmts, strict=True)
    )
    return be.RowDescription(fields).encode()


def next_rows(local: LocalPortal, msg: fe.Execute) -> bytes:
    """The answer to an Execute of a local portal whose rows are known: the next rows up
    to the row limit, then PortalSuspended when the limit was reached (as PostgreSQL,
    which does not look past it: a portal with exactly that many rows left is
    suspended, and the next Execute completes with none), else CommandComplete."""
    rows = local.rows
    assert rows is not None
    limit = msg.max_rows if msg.max_rows > 0 else len(rows)
    chunk = rows[local.sent : local.sent + limit]
    local.sent += len(chunk)
    tail = (
        be.PORTAL_SUSPENDED.encode()
        if 0 < msg.max_rows == len(chunk)
        else be.CommandComplete(f"SELECT {len(chunk)}").encode()
    )
    return b"".join(chunk) + tail


_BEGIN_WORDS = ("begin", "start")


def opens_block(text: str) -> bool:
    """Whether a statement's first word opens a transaction block (BEGIN, START)."""
    words = text.lstrip(" \t\r\n(").split(None, 1)
    return bool(words) and words[0].lower().rstrip(";") in _BEGIN_WORDS
