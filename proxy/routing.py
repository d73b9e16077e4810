"""Routing statements: which ones weir answers itself, and the state that decides it.

Owns: :class:`Routing` (``CacheService.routing``) — the per-statement decision
(:meth:`Routing.route`: weir's commands, then ``proxy.router.route_query``'s rules, with a
cheap pre-filter while no cache could match) and the routing state it reads, which the relay
core, the forwarding memos and the lanes read too (``proxy.roles.RoutingState``): the
registry once caching runs, the relation names caches read (``cached_names``: a new tuple
whenever the caches change, which is how the memos notice), the functions that may write or
change a session's identity and the words that make a statement hide a write
(:meth:`Routing.hides_write`, :meth:`Routing.plain_text`); and recording each statement that
goes upstream (:meth:`Routing.note_upstream`: the forwards' metric, SHOW PROXIED QUERIES, auto
mode's cache creations, which the service performs).
"""

from __future__ import annotations

from collections.abc import Callable

from proxy import transactions
from proxy.admin import parse_admin
from proxy.metrics import count_forward
from proxy.registry import Registry
from proxy.router import Route, SessionContext, query_zone, route_query
from proxy.rules import hides_write, hiding_words, plain_text
from proxy.session import SessionState
from proxy.settings import Settings

#: what auto mode does with a query due for a cache: (query text, search_path)
AutoCreate = Callable[[str, tuple[str, ...], str | None], None]


class Routing:
    """The routing of one service's sessions (see the module docstring)."""

    def __init__(self, settings: Settings, auto_create: AutoCreate) -> None:
        self.settings = settings
        self.replicated_db = settings.upstream_address.dbname \
            or settings.upstream_address.user or "postgres"
        self.registry: Registry | None = None  # set once caching runs (``CacheService.ensure``)
        self.cached_names: tuple[str, ...] = ()  # relation names used by caches (pre-filter)
        #: functions that may write (volatile, outside the system schemas; lower case) and
        #: the words that make a statement hide a write (``rules.hides_write``)
        self.writers: tuple[str, ...] = ()
        self.hiding = hiding_words(())
        #: user functions that may change a session's role or search_path (``identity``)
        self.identity_functions: tuple[str, ...] = ()
        self._auto_create = auto_create

    def functions(self, writers: tuple[str, ...], identity_functions: tuple[str, ...]) -> bool:
        """The functions that may write, and those that may change a session's identity, as
        read upstream; True when they changed (then so did the hiding words)."""
        if writers == self.writers and identity_functions == self.identity_functions:
            return False
        # a call of a function that may change a session's identity is never plain either
        self.writers, self.identity_functions = writers, identity_functions
        self.hiding = hiding_words(tuple(sorted({*writers, *identity_functions})))
        return True

    def refresh_names(self) -> None:
        """After caches changed: the relation names of the pre-filter (a new tuple)."""
        names: set[str] = set()
        if self.registry is not None:
            for entry in self.registry.caches.values():
                for oid in entry.query.plan.relations:
                    rel = self.registry.planner.catalog.by_oid(oid)
                    if rel is not None:
                        names.add(rel.name.lower())
        self.cached_names = tuple(sorted(names))

    # -- the decision -------------------------------------------------------------------------

    def route(self, text: str, state: SessionState, ctx: SessionContext) -> Route:
        registry = self.registry
        # inside a block, or maybe (requests pending: a BEGIN may be among them)
        maybe = state.transaction_status != "I" or not state.idle
        transactions.observe(text, maybe, ctx.block, ctx.isolation,
                             maybe and self.hides_write(text))
        auto = self.settings.caching == "auto"
        if registry is None or (not auto and not self._mentions_cached_table(text)):
            admin = parse_admin(text)
            if admin is not None:
                return Route("admin", "weir command", admin=admin)
            return Route("upstream", "no cache for this query")
        return route_query(text, state, ctx, registry, self.replicated_db)

    def _mentions_cached_table(self, text: str) -> bool:
        if not self.cached_names:
            return False
        lowered = text.lower()
        return any(name in lowered for name in self.cached_names)

    def hides_write(self, text: str) -> bool:
        """Whether a statement may write while its CommandComplete tag says it cannot (only
        while caching runs: read-your-writes has nothing to do otherwise)."""
        return hides_write(text.lower(), self.hiding_now())

    def hiding_now(self) -> tuple[str, ...]:
        """The words that make a statement hide a write (or change the session's identity,
        ``proxy.identity``) while caching runs (a hidden write only counts with
        read-your-writes on)."""
        return self.hiding if self.registry is not None else ()

    def plain_text(self, text: str) -> bool:
        """Whether a Query text needs no look while caching runs: it names no cached
        relation and hides no write (``forwarding.plain_query``, ``rules.plain_text``)."""
        return plain_text(text.lower(), self.cached_names, self.hiding_now())

    def note_upstream(self, route: Route, ctx: SessionContext, times: int = 1) -> None:
        """Record a query that goes upstream (``times`` runs of it); in auto mode, have its
        cache created when due."""
        count_forward(route.reason, times)
        if self.registry is None or route.classified is None:
            return
        text = self.registry.note_proxied(route.classified, ctx.search_path, times, ctx.user)
        if text is not None:
            self._auto_create(text, ctx.search_path, query_zone(route.classified))

