"""The catalog of caches and of the queries weir has seen (the state behind the admin SQL).

Owns: the upstream catalog snapshot and the ``QueryPlanner`` built on it (reloaded before
every CREATE CACHE and whenever a relation a cache reads changed), checking those relations
against the upstream (:meth:`Registry.changed_relations`; the service runs it with every
heartbeat) and planning the affected caches again — or dropping them, with the reason, when
their query no longer plans — the caches by name and by query identity
with the RowDescription the upstream gave for each at creation, persistence of the cache
list to a JSON file (caches survive restarts), the proxied-query statistics behind
``SHOW PROXIED QUERIES``, and auto mode (a supported shape seen N times becomes a cache).

Routing decisions are made in ``proxy.router``; this module answers "which cache, if any".
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import select
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import psycopg

from engine import CATALOG_QUERY, CachedQuery, Catalog, Classified, QueryPlanner, Unsupported
from pgwire.backend import FieldDescription
from proxy.caching import EngineHost
from proxy.publication import NotPublishable
from proxy.router import query_zone

#: how long describing a query waits for a lock of a relation it reads: less than
#: PostgreSQL's default deadlock_timeout (1s), so in a lock cycle with a client (its
#: transaction dropping two tables, this parse holding one of them and waiting for the
#: other) weir gives up before the client's deadlock check runs, and the client never
#: gets "deadlock detected" (a compat run did once)
DESCRIBE_LOCK_TIMEOUT = "200ms"

log = logging.getLogger("weir.registry")

#: ``CATALOG_QUERY`` for the relations with the given OIDs only.
RELATIONS_QUERY = CATALOG_QUERY.replace(
    "\nORDER BY c.oid", "\n  AND c.oid = ANY($1::oid[])\nORDER BY c.oid")
assert RELATIONS_QUERY != CATALOG_QUERY
#: One row: a digest of everything ``CATALOG_QUERY`` returns (a heartbeat compares it).
CATALOG_DIGEST_QUERY = f"SELECT md5(string_agg(t::text, ';')) FROM ({CATALOG_QUERY}) t"


class AdminError(Exception):
    """An admin command cannot be done; the message is shown to the client (SQLSTATE 42000)."""


@dataclass(frozen=True, slots=True)
class CacheEntry:
    name: str
    query_id: str
    text: str
    search_path: tuple[str, ...]
    fields: tuple[FieldDescription, ...]
    query: CachedQuery

    @property
    def timezone(self) -> str | None:
        """The session TimeZone the cache computes in (None: its plan reads none)."""
        return self.query.identity.timezone

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "text": self.text, "search_path": list(self.search_path),
                "timezone": self.timezone}


HIDDEN = "(query text hidden: it does not parse)"
#: how many login roles a proxied statement remembers as its senders
SENDERS = 64


def masked(classified: Classified) -> str:
    """The statement's text with ``$n`` in place of its literals (SHOW shows this unless
    asked WITH LITERALS: another role's password in a WHERE clause stays hidden)."""
    parsed = classified.parsed
    return parsed.shape if parsed.fingerprint else HIDDEN


@dataclass(slots=True)
class ProxiedQuery:
    query_id: str
    text: str
    supported: str  # "yes", "cached" or "unsupported: <reason>"
    count: int = 0
    shape: str = ""  # the text with $n in place of its literals (what SHOW shows by default)
    #: the login roles that sent it (a non-admin's SHOW lists only its own statements;
    #: at most ``SENDERS`` are kept)
    roles: set[str] = field(default_factory=set)


@dataclass
class Registry:
    host: EngineHost
    upstream_url: str
    state_file: Path | None = None
    auto_after: int | None = None
    planner: QueryPlanner = field(init=False)
    caches: dict[str, CacheEntry] = field(default_factory=dict)
    by_id: dict[str, CacheEntry] = field(default_factory=dict)
    proxied: OrderedDict[str, ProxiedQuery] = field(default_factory=OrderedDict)
    _texts: dict[str, tuple[str, tuple[str, ...], str | None]] = field(default_factory=dict)
    #: queries whose cache could not be created for a reason the query keeps (a table weir
    #: cannot publish), until a CREATE CACHE of it succeeds
    _refused: dict[str, str] = field(default_factory=dict)
    _creating: asyncio.Lock = field(default_factory=asyncio.Lock)
    _catalog_digest: str | None = None

    async def start(self) -> None:
        await self.reload_catalog()
        for item in self._load_state():
            try:
                await self.create(item["text"], tuple(item["search_path"]), item["name"],
                                  persist=False, timezone=item.get("timezone"))
            except AdminError as exc:
                log.warning("cache %s could not be restored: %s", item.get("name"), exc)

    async def reload_catalog(self) -> None:
        rows = await self.host.pool.fetch(CATALOG_QUERY)
        self.planner = QueryPlanner(Catalog.from_rows([tuple(r) for r in rows]))

    # -- classification ---------------------------------------------------------------------

    def classify(self, text: str, search_path: tuple[str, ...],
                 timezone: str | None = None) -> Classified:
        """``timezone``: the session's TimeZone (forms that read it are planned in it and
        the zone joins the identity; None: they are refused)."""
        # the planner's shape is the normalized *text*: a trailing semicolon or surrounding
        # white space (pgbench, psql scripts) must not make a different query
        return self.planner.classify(_trim(text), search_path, timezone)

    def cache_for(self, classified: Classified) -> CacheEntry | None:
        query = classified.query
        if isinstance(query, Unsupported):
            return None
        return self.by_id.get(query.identity.query_id)

    def note_proxied(self, classified: Classified, search_path: tuple[str, ...],
                     times: int = 1, role: str | None = None) -> str | None:
        """Count a query that went upstream (``times`` runs of it; ``role``: the login role
        that sent it); return a query text to auto-cache, if due."""
        query = classified.query
        if isinstance(query, Unsupported):
            qid = "u_" + (classified.parsed.fingerprint or "unparsed")
            supported = f"unsupported: {query.reason}"
        else:
            qid = query.identity.query_id
            refused = self._refused.get(qid)
            supported = ("cached" if qid in self.by_id else
                         "yes" if refused is None else f"unsupported: {refused}")
        entry = self.proxied.get(qid)
        if entry is None:
            entry = self.proxied[qid] = ProxiedQuery(qid, classified.parsed.text, supported,
                                                     shape=masked(classified))
            self._texts[qid] = (classified.parsed.text, search_path, query_zone(classified))
            if len(self.proxied) > 10_000:
                old, _ = self.proxied.popitem(last=False)
                self._texts.pop(old, None)
        entry.supported = supported
        entry.count += times
        if role is not None and role not in entry.roles and len(entry.roles) < SENDERS:
            entry.roles.add(role)
        if self.auto_after is not None and supported == "yes" and entry.count >= self.auto_after:
            return classified.parsed.text
        return None

    # -- admin --------------------------------------------------------------------------------

    async def create(self, source: str, search_path: tuple[str, ...], name: str | None = None,
                     persist: bool = True, timezone: str | None = None) -> CacheEntry:
        """Create a cache (one creation at a time: two of the same query, e.g. auto mode and
        an admin command, make one cache); ``timezone``: the creating session's."""
        async with self._creating:
            return await self._create(source, search_path, name, persist, timezone)

    async def _create(self, source: str, search_path: tuple[str, ...], name: str | None,
                      persist: bool, timezone: str | None) -> CacheEntry:
        if source.startswith("q_") and source in self._texts:
            source, search_path, timezone = self._texts[source]
        await self.reload_catalog()
        classified = self.classify(source, search_path, timezone)
        query = classified.query
        if isinstance(query, Unsupported):
            raise AdminError(f"query cannot be cached: {query.reason}")
        qid = query.identity.query_id
        if qid in self.by_id:
            existing = self.by_id[qid]
            if name is None or name == existing.name:
                return existing
            raise AdminError(f"query is already cached as {existing.name}")
        name = name or qid
        if name in self.caches:
            raise AdminError(f"a cache named {name} already exists")
        fields = await asyncio.to_thread(_describe, self.upstream_url, source, search_path)
        entry = CacheEntry(name, qid, source, search_path, fields, query)
        try:
            await self.host.add_cache(name, query.plan.reader, query.plan.relations)
        except NotPublishable as exc:
            self._refused[qid] = str(exc)
            if qid in self.proxied:
                self.proxied[qid].supported = f"unsupported: {exc}"
            raise AdminError(f"query cannot be cached: {exc}") from exc
        except asyncpg.PostgresError as exc:
            raise AdminError(f"query cannot be cached now: {exc}") from exc
        self._refused.pop(qid, None)
        self.caches[name] = entry
        self.by_id[qid] = entry
        if qid in self.proxied:
            self.proxied[qid].supported = "cached"
        if persist:
            self._save_state()
        log.info("cache %s created (%s)", name, qid)
        return entry

    def explain(self, source: str, search_path: tuple[str, ...],
                timezone: str | None = None) -> tuple[str, str, str]:
        """``(query_id, query, supported)`` for EXPLAIN CREATE CACHE."""
        classified = self.classify(source, search_path, timezone)
        query = classified.query
        if isinstance(query, Unsupported):
            return ("u_" + (classified.parsed.fingerprint or "unparsed"), source,
                    f"unsupported: {query.reason}")
        qid = query.identity.query_id
        refused = self._refused.get(qid)
        if refused is not None:
            return qid, source, f"unsupported: {refused}"
        return qid, source, "yes" if query.state is None else f"yes ({query.state})"

    def drop(self, name: str | None) -> int:
        names = list(self.caches) if name is None else [name]
        for n in names:
            entry = self.caches.pop(n, None)
            if entry is None:
                raise AdminError(f"cache {n} does not exist")
            self.by_id.pop(entry.query_id, None)
            self.host.drop_cache(n)
            if entry.query_id in self.proxied:
                self.proxied[entry.query_id].supported = "yes"
        self._save_state()
        return len(names)

    # -- schema changes -----------------------------------------------------------------------

    def relations(self, entry: CacheEntry) -> frozenset[int]:
        """The relations a cache depends on: those its names resolve to and those it reads."""
        return frozenset(entry.query.identity.relations) | frozenset(entry.query.plan.relations)

    async def changed_relations(self) -> set[int]:
        """The relations of caches whose definition upstream (name, schema, columns and their
        types, primary key, view text, row security) differs from the planner's catalog."""
        oids = sorted(set().union(*(self.relations(e) for e in self.caches.values())))
        if not oids:
            return set()
        rows = await self.host.pool.fetch(RELATIONS_QUERY, oids)
        now = {r.oid: r for r in Catalog.from_rows([tuple(r) for r in rows]).relations}
        known = {r.oid: r for r in self.planner.catalog.relations}
        return {oid for oid in oids if now.get(oid) != known.get(oid)}

    async def follow_catalog(self) -> bool:
        """Run by every heartbeat after :meth:`changed_relations` found nothing: when the
        upstream catalog changed (a table created, altered or dropped, through weir or
        directly), the planner takes the new one, so classification (auto mode, EXPLAIN,
        SHOW PROXIED QUERIES) knows it. A changed relation a cache reads is left to
        :meth:`replan` (taking the catalog here would hide the change from it)."""
        digest = await self.host.pool.fetchval(CATALOG_DIGEST_QUERY)
        if digest == self._catalog_digest:
            return False
        rows = await self.host.pool.fetch(CATALOG_QUERY)
        catalog = Catalog.from_rows([tuple(r) for r in rows])
        read = set().union(*(self.relations(e) for e in self.caches.values()))
        old = {r.oid: r for r in self.planner.catalog.relations}
        new = {r.oid: r for r in catalog.relations}
        if any(old.get(oid) != new.get(oid) for oid in read):
            return False
        self.planner = QueryPlanner(catalog)
        self._catalog_digest = digest
        return True

    async def replan(self, changed: set[int]) -> list[str]:
        """Plan the caches over ``changed`` relations again under the current catalog; those
        whose query no longer plans are dropped. Returns what happened, one line a cache."""
        affected = [e for e in self.caches.values() if self.relations(e) & changed]
        for entry in affected:
            self.drop(entry.name)
        outcome = []
        for entry in affected:
            try:
                await self.create(entry.text, entry.search_path, entry.name,
                                  timezone=entry.timezone)
                outcome.append(f"cache {entry.name} planned again after a schema change")
            except Exception as exc:  # AdminError, an upstream error: the cache is gone
                reason = str(exc).splitlines()[0]
                outcome.append(f"cache {entry.name} dropped after a schema change: {reason}")
        if not affected:
            await self.reload_catalog()
        return outcome

    # -- persistence --------------------------------------------------------------------------

    def _load_state(self) -> list[dict[str, Any]]:
        if self.state_file is None or not self.state_file.exists():
            return []
        try:
            data = json.loads(self.state_file.read_text())
        except (OSError, ValueError) as exc:
            log.error("cannot read the cache catalog %s: %s", self.state_file, exc)
            return []
        return [item for item in data.get("caches", []) if isinstance(item, dict)]

    def _save_state(self) -> None:
        if self.state_file is None:
            return
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"caches": [e.to_json() for e in self.caches.values()]},
                                  indent=2))
        os.replace(tmp, self.state_file)


def _describe(url: str, text: str, search_path: tuple[str, ...],
              parsed: Callable[[], None] | None = None) -> tuple[FieldDescription, ...]:
    """The RowDescription PostgreSQL gives for ``text`` (run on weir's own connection, in a
    worker thread). Its parse waits for the locks of the relations ``text`` reads at most
    :data:`DESCRIBE_LOCK_TIMEOUT` (then fails): a client's open transaction holding one
    (DDL, LOCK TABLE) may be waiting on weir. And the waits go through :func:`_answer`, never
    libpq's blocking calls (``describe_prepared`` keeps the GIL: waiting for such a lock it
    froze all of weir, the client's session with it; compat.md). ``parsed`` is called
    between the parse and the describe (a test takes a lock there)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', %s, false), "
                     "set_config('lock_timeout', %s, false)",
                     (", ".join(_quote(s) for s in search_path), DESCRIBE_LOCK_TIMEOUT))
        pgconn = conn.pgconn
        pgconn.send_prepare(b"", text.encode())
        res = _answer(pgconn)
        if res.status != psycopg.pq.ExecStatus.COMMAND_OK:
            raise AdminError((res.error_message or b"describe failed").decode().strip())
        if parsed is not None:
            parsed()
        pgconn.send_describe_prepared(b"")
        res = _answer(pgconn)
        if res.status != psycopg.pq.ExecStatus.COMMAND_OK:
            raise AdminError((res.error_message or b"describe failed").decode().strip())
        return tuple(
            FieldDescription(
                name=(res.fname(i) or b"").decode(), table_oid=res.ftable(i),
                column_attr=res.ftablecol(i), type_oid=res.ftype(i), type_size=res.fsize(i),
                type_modifier=res.fmod(i), format=0)
            for i in range(res.nfields))


def _answer(pgconn: Any) -> Any:
    """The result of the request just sent on ``pgconn`` (the first, when it returns more),
    waiting in ``select`` (which lets the GIL go) rather than in libpq."""
    while True:
        pgconn.consume_input()
        if not pgconn.is_busy():
            break
        select.select([pgconn.socket], [], [])
    results = []
    while (res := pgconn.get_result()) is not None:
        results.append(res)
    if not results:
        raise AdminError("describe failed: no result")
    return results[0]


def _trim(text: str) -> str:
    text = text.strip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    return text


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
