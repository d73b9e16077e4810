"""The upstream's copies of what weir holds: held statements and local portals recreated
upstream, and deallocated there.

Owns: :class:`UpstreamCopies` — when a statement weir holds (``proxy.held``) or a portal it
bound locally must be used upstream after all (the session entered a transaction block, the
cache declined the read, a schema change, the batch already went upstream...), it is first
recreated there from the client's own Parse/Bind bytes, the upstream's ParseComplete /
BindComplete swallowed (``Session.inject``, ``SessionState.injected``); a statement
recreated upstream stays held (later runs outside a transaction block are answered by weir
again). A DEALLOCATE / DISCARD ALL of held statements releases them (weir answers one naming
a statement only it holds). ``proxy.extended.Extended`` holds one per session.
"""

from __future__ import annotations

import dataclasses
from functools import partial

from pgwire import backend as be
from pgwire import frontend as fe
from proxy.held import PLACEHOLDER_STATEMENT, HeldStatement, LocalPortal, opens_block
from proxy.roles import ExtendedSession
from proxy.session import SessionState, deallocation
from proxy.transactions import isolation_named


class UpstreamCopies:
    """The upstream's copies of one session's held statements and portals."""

    __slots__ = ("core", "session")

    def __init__(self, session: ExtendedSession) -> None:
        self.session = session
        self.core: SessionState = session.state

    def releases(self, query: str) -> bool:
        """Whether a simple query deallocates a statement weir holds (see :meth:`release`)."""
        found = deallocation(query) if self.core.held else None
        return found is not None and (found[0] != "name" or found[1] in self.core.held)

    def release(self, query: str) -> bytes | None:
        """A DEALLOCATE/DISCARD ALL of statements weir holds goes upstream next: they stop
        being held, and the upstream deallocates its own copies. Returns weir's own answer
        (CommandComplete) when the command names a statement only weir holds and the session
        is idle — then the query must not go upstream, which would say it does not exist."""
        found = deallocation(query) if self.core.held else None
        state = self.core
        if found is None or state.transaction_status == "E":  # PostgreSQL refuses it there
            return None
        kind, name = found
        if kind != "name":
            if not (kind == "discard" and state.in_transaction):
                self.core.held.clear()  # (DISCARD ALL fails inside a transaction block)
            return None
        held = self.core.held.get(name)
        if held is None:
            return None
        if not held.upstream and not (state.caught_up and not self.core.batch_upstream):
            self.materialize(name)  # requests are pending upstream: answer in their order
        del self.core.held[name]
        return None if held.upstream else be.CommandComplete("DEALLOCATE").encode()

    def switch(self) -> None:
        """The first message of the batch goes upstream: every local portal that has not
        run yet is created upstream now, so that PostgreSQL holds it from this point of the
        batch as it would have (later in the batch, a statement it was bound from may be
        closed or replaced). Portals that ran keep their rows: what they still owe is
        answered in order through ``Extended._placeholder``."""
        for name in [n for n, p in self.core.held_portals.items()
                     if p.rows is None and p.result is None
                     and p.statement.route.destination != "admin"]:
            self.materialize_portal(name)

    def before_statement(self, text: str) -> None:
        """A statement goes upstream: one that opens a transaction block first makes every
        statement weir alone holds exist upstream too. Inside the block their runs go
        upstream, and once it fails PostgreSQL refuses to parse them (so weir could not
        recreate them) while a Bind must still find its statement to fail as it does. Not
        before a BEGIN naming an isolation level (a Parse first takes a snapshot: PostgreSQL
        would refuse the level); those are recreated at their first use in the block."""
        if not self.core.held or not opens_block(text) or isolation_named(text):
            return
        for name, held in list(self.core.held.items()):
            # weir's own commands never exist upstream (PostgreSQL cannot parse them: its
            # error would make it skip the statement that opens the block)
            if name and not held.upstream and held.route.destination != "admin":
                self.recreate(held)

    def materialize(self, statement: str) -> None:
        """Recreate a held statement upstream (its ParseComplete is swallowed). It stays
        held: later runs outside a transaction block are answered by weir again."""
        held = self.core.held.get(statement)
        if held is not None and not held.upstream:
            self.recreate(held)

    def materialize_portal(self, portal: str) -> None:
        """Recreate a local portal (and its statement) upstream, answers swallowed."""
        local: LocalPortal | None = self.core.held_portals.pop(portal, None)
        if local is None:
            return
        held = local.statement
        if self.core.held.get(held.parse.name) is held:
            if not held.upstream:
                self.recreate(held)
            self.session.inject(local.bind)
            return
        # the client closed or replaced the statement since (its portal lives on): bound
        # from a statement of weir's own, closed again at once
        parse = held.parse
        self.session.inject(fe.Parse(PLACEHOLDER_STATEMENT, parse.query, parse.param_types))
        self.session.inject(dataclasses.replace(local.bind, statement=PLACEHOLDER_STATEMENT))
        self.session.inject(fe.Close("S", PLACEHOLDER_STATEMENT))

    def recreate(self, held: HeldStatement) -> None:
        """Send a held statement's Parse upstream (answer swallowed); it counts as held
        upstream unless PostgreSQL skips it (an error earlier in the batch) or refuses it."""
        held.upstream = self.core.transaction_status != "E"  # (else it fails)
        self.session.inject(held.parse, skipped=partial(setattr, held, "upstream", False))
