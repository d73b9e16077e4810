"""Where one statement goes: the cache, the upstream or weir's admin commands (pure).

Owns: ``Route`` (the decision with its human-readable reason, shown by EXPLAIN LAST STATEMENT
and SHOW PROXIED QUERIES), ``SessionContext`` (what routing needs to know about a session
beyond the protocol state: database, user, search_path, and whether it changed settings weir
does not follow), and ``route_query``: a function of the statement text, the session and the
registry's answer. Nothing here performs I/O.

Order of the rules (DESIGN §4):
1. weir's own commands -> admin;
2. inside a transaction block weir may not serve (``proxy.transactions``), a session whose
   settings weir cannot honour, another database than the replicated one, or requests still
   pending upstream -> upstream;
3. a SELECT whose identity matches a cache and whose literals form a valid key -> cache;
4. everything else -> upstream, byte for byte.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from engine import Classified, Unsupported
from proxy.admin import AdminCommand, parse_admin
from proxy.results import OutputSettings, supports
from proxy.seen import Seen
from proxy.session import SessionState
from proxy.transactions import Block, Isolation, note_write, refusal

#: Settings a client may SET without changing what a cached SELECT returns.
HARMLESS_SETTINGS = frozenset({
    "application_name", "statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout",
    "client_min_messages", "work_mem", "maintenance_work_mem", "jit", "log_statement",
    "synchronous_commit", "datestyle", "timezone", "intervalstyle",
    "default_transaction_isolation", "enable_seqscan",
    "random_page_cost", "temp_buffers", "idle_session_timeout", "tcp_keepalives_idle",
})



#: settings ``proxy.identity`` follows (role, session authorization, search_path): a change
#: makes the session's identity unknown there, until a reset gives it back
IDENTITY_FOLLOWED = frozenset({"role", "authorization", "session_authorization",
                               "search_path"})


@dataclass(slots=True)
class SessionContext:
    database: str
    user: str
    search_path: tuple[str, ...]
    tainted: str | None = None  # why this session's reads must go upstream
    #: the session's role may not be its login role any more (``proxy.identity``)
    role_unknown: bool = False
    who: Any = None  # which parts of the identity may have changed (``proxy.identity.Who``)
    #: seen(s): when the session last got an answer from the upstream (``proxy.seen``;
    #: read-your-writes and monotonic reads)
    seen: Seen = field(default_factory=Seen)
    last: tuple[str, str] = ("upstream", "no statement yet")
    #: output settings PostgreSQL does not report with ParameterStatus, as the client set them
    settings: dict[str, str] = field(default_factory=dict)
    settings_version: int = 0  # bumped whenever ``settings`` changes
    output: Any = None  # (versions, (OutputSettings, id)) memo kept by CacheService
    defaults_applied: bool = False  # role/database defaults read (CacheService)
    #: ``Gates.defaults_version`` when the session logged in (None: not recorded)
    defaults_version: int | None = None
    #: the session logged in before caching ran, when weir did not yet know which user
    #: functions may change a session's identity (``Gates.apply_defaults``)
    before_caching: bool = False
    #: (cache, keys, how many of them were read) of the last read that missed without
    #: waiting (``ReadPath.read_rows_now``): the waiting read that follows does not
    #: count those keys again
    tried: tuple[str, list[Any], int] | None = None
    parameters: dict[str, str] | None = None  # the session's ParameterStatus values
    #: prepared statements whose text may write behind a read-only CommandComplete tag
    #: (``Routing.hides_write``): running one counts as a write
    hiding: set[str] = field(default_factory=set)
    #: the current transaction block and the session's default isolation
    #: (``proxy.transactions``)
    block: Block = field(default_factory=Block)
    isolation: Isolation = field(default_factory=Isolation)


@dataclass(frozen=True, slots=True)
class Route:
    destination: str  # "cache", "upstream" or "admin"
    reason: str
    admin: AdminCommand | None = None
    classified: Classified | None = None
    cache: Any = None  # registry.CacheEntry
    keys: list[tuple[Any, ...]] | None = None  # reader lookups (several for IN lists)
    params: tuple[Any, ...] = ()  # decoded $n values (LIMIT/OFFSET parameters)


def route_query(text: str, state: SessionState, ctx: SessionContext, registry: Any,
                replicated_db: str) -> Route:
    """Decide for one simple-protocol Query."""
    admin = parse_admin(text)
    if admin is not None:
        return Route("admin", "weir command", admin=admin)
    why = refusal(state.transaction_status, ctx.block, ctx.isolation)
    if why is not None:
        return Route("upstream", why)
    if ctx.database != replicated_db:
        return Route("upstream", f"database {ctx.database} is not the one weir replicates")
    if not state.caught_up:
        return Route("upstream", "earlier statements are still running upstream")
    classified: Classified = registry.classify(text, ctx.search_path,
                                               session_zone(state.parameters))
    query = classified.query
    if isinstance(query, Unsupported):
        return Route("upstream", f"unsupported: {query.reason}", classified=classified)
    entry = registry.cache_for(classified)
    if entry is None:
        zone = query.identity.timezone
        return Route("upstream", "no cache for this query" if zone is None else
                     f"no cache for this query in TimeZone {zone!r} (the zone is part of the "
                     "cache's identity)", classified=classified)
    if ctx.tainted is not None:
        return Route("upstream", ctx.tainted, classified=classified)
    unsupported = output_unsupported(entry.fields, {**state.parameters, **ctx.settings}) \
        or zone_unsupported(entry, state.parameters)
    if unsupported is not None:
        return Route("upstream", unsupported, classified=classified)
    keys = classified.keys()
    if keys is None:
        # a $n parameter (extended protocol: the Bind supplies it), a literal that is not a
        # valid value of its column's type, or too many IN-list lookups
        return Route("upstream", "a literal is not a valid key value (or too many lookups)",
                     classified=classified, cache=entry)
    return Route("cache", f"served by cache {entry.name}", classified=classified, cache=entry,
                 keys=keys)


def query_zone(classified: Classified) -> str | None:
    """The session TimeZone a classified text's plan computes in (None: none, or no plan)."""
    query = classified.query
    return None if isinstance(query, Unsupported) else query.identity.timezone


def session_zone(parameters: dict[str, str]) -> str | None:
    """The session's TimeZone as PostgreSQL reports it (ParameterStatus), if known."""
    return parameters.get("TimeZone")


def zone_unsupported(entry: Any, parameters: dict[str, str]) -> str | None:
    """Why a cache computed in one session TimeZone cannot answer a session in another (a
    statement held since before a SET TimeZone), or None."""
    return zone_mismatch(entry, session_zone(parameters))


def zone_mismatch(entry: Any, now: str | None) -> str | None:
    """:func:`zone_unsupported` for a session whose TimeZone is ``now``."""
    made_for = entry.timezone  # registry.CacheEntry.timezone
    if made_for is None or now == made_for:
        return None
    return (f"cache {entry.name} computes in TimeZone {made_for!r}; the session's TimeZone "
            f"is {now!r}")


def output_unsupported(fields: Any, parameters: dict[str, str]) -> str | None:
    """Why weir cannot encode these columns exactly in text under these session settings."""
    settings = OutputSettings.from_parameters(parameters)
    reason = settings.reason()
    if reason is not None:
        return reason
    for f in fields:
        reason = supports(f.type_oid, f.type_modifier, 0, settings)
        if reason is not None:
            return reason
    return None


def observe_set(text: str, ctx: SessionContext, in_block: bool = False) -> None:
    """Follow a SET/RESET statement: record output settings, taint for the others.
    A change of an output setting that may not outlast its statement — inside a transaction
    block (``in_block``; a rollback undoes it, a SET LOCAL ends with the block), SET LOCAL
    (outside a block PostgreSQL ignores it), or among other statements in one Query — is
    not followed: the session's reads go upstream from then on (``ctx.tainted``). Every
    statement of a multi-statement Query is looked at, each after its comments."""
    if ";" in text.rstrip().rstrip(";") or "--" in text or "/*" in text:
        pieces = [SQL_COMMENTS.sub(" ", piece) for piece in text.split(";")]
        several = sum(1 for piece in pieces if piece.strip()) > 1
        for piece in pieces:
            _observe_set(piece, ctx, in_block or several)
        return
    _observe_set(text, ctx, in_block)


#: SQL comments, cut naively (a block comment left open runs to the end of the text; also
#: used by ``proxy.identity``)
SQL_COMMENTS = re.compile(r"/\*.*?\*/|/\*.*|--[^\n]*", re.S)


def _observe_set(text: str, ctx: SessionContext, in_block: bool) -> None:
    head = text.lstrip()[:5].upper()
    if not (head.startswith("SET") or head.startswith("RESET")):
        return
    words = text.strip().rstrip(";").replace("=", " = ").split()
    rest = words[1:]
    local = bool(rest) and rest[0].upper() == "LOCAL"
    if rest and rest[0].upper() in ("SESSION", "LOCAL"):
        rest = rest[1:]
    if rest and rest[0].lower() in ("extra_float_digits", "bytea_output"):
        name = rest[0].lower()
        if in_block or local or ";" in text.strip().rstrip(";"):
            ctx.tainted = f"the session changed setting {name} where it may not last"
            return
        if words[0].upper() == "RESET" or len(rest) < 3:
            ctx.settings.pop(name, None)
        else:
            ctx.settings[name] = rest[2].strip("'")
        ctx.settings_version += 1
        return
    taint = setting_taint(text)
    if taint is not None:
        ctx.tainted = taint


def setting_taint(text: str) -> str | None:
    """For a SET/RESET statement: why it makes later cached reads go upstream, if it does."""
    words = text.strip().rstrip(";").split()
    if not words or words[0].upper() not in ("SET", "RESET"):
        return None
    rest = words[1:]
    if rest and rest[0].upper() in ("SESSION", "LOCAL"):
        rest = rest[1:]
    if not rest:
        return None
    name = rest[0].lower().strip('"')
    if rest[0].upper() == "ALL" or name in IDENTITY_FOLLOWED:
        return None
    if name in HARMLESS_SETTINGS:
        return None
    if name == "time" and len(rest) > 1 and rest[1].upper() == "ZONE":
        return None
    return f"the session changed setting {name}, which weir does not follow yet"


def wrote(ctx: SessionContext, status: str, tag: bytes = b"") -> None:
    """A statement of the session wrote (or may have; ``tag``: its CommandComplete tag):
    seen(s) moves (read-your-writes), and its transaction block reads upstream from now on
    (``proxy.transactions.note_write``). As after a miss (``Seen.missed``), the relay settles
    seen(s) as soon as the answer has come and asks for coverage then (``proxy.aftermiss``),
    one client round trip before the session's next read would, which hands the session back
    to its hit lane once covered: in the demo's news site (issue 24) every vote and comment
    was followed by a read that parked on the event loop for that coverage."""
    ctx.seen.pending = True
    ctx.seen.missed = True
    ctx.seen.wrote = True
    note_write(ctx.block, status, tag)
