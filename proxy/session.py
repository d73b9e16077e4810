"""What a client session looks like, derived from the messages that pass through it (sans-I/O).

Owns: the transaction status, the server-reported parameters (ParameterStatus), and the
prepared statements and portals the upstream really holds (settings the client changes with
SET are followed by ``proxy.router.observe_set``). It observes frontend messages as they are
forwarded and backend messages as they come back, and matches each response to the request
it answers with a queue of outstanding requests, the way the server processes them:

- a Parse/Bind/Close takes effect only when its ParseComplete/BindComplete/CloseComplete
  arrives; an ErrorResponse in an extended-protocol batch cancels the failing request and
  every request up to the next Sync (the server skips them);
- ReadyForQuery answers a Sync or a simple Query; it carries the transaction status; when the
  status returns to idle, portals are gone (holdable cursors are not tracked: weir never
  serves a portal it did not see bound);
- simple-query ``DEALLOCATE``/``DISCARD`` are honoured on their CommandComplete.

The hot path is cheap by construction: requests whose success changes nothing here share one
queue item per kind (:meth:`expect`), a Parse or Bind repeated as the same message object
reuses its item, and a run of responses that ends with ReadyForQuery and holds no
ErrorResponse or ParameterStatus is observed in one step (:meth:`ready`): without an error
every request up to that Sync or Query succeeded, so their effects apply in order, exactly
as one-by-one observation would apply them.

Routing (a later layer) reads this state; it never changes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.errors import ErrorResponse
from proxy.metrics import UPSTREAM_STATEMENTS, count_error
from proxy.session_core import SessionCore


@dataclass(frozen=True, slots=True)
class PreparedStatement:
    """A statement the upstream holds under ``name`` (``""`` is the unnamed one)."""

    name: str
    query: str
    param_types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class _Pending:
    """An outstanding request: what it was, and the effect to apply on success."""

    kind: str  # "parse", "bind", "close", "describe", "execute", "sync", "query"
    #: the effect, bound to the session state's own tables (for Parse, Bind and Close a
    #: ``functools.partial`` of a dict method: applying it runs no Python frame)
    apply: Callable[[], object] | None = None
    #: weir sent this request itself (a statement or portal it had answered for locally is
    #: being recreated upstream): its answer must not reach the client.
    swallow: bool = False
    #: what the client gets instead of the swallowed answer: weir's own answer to a client
    #: request, placed by a request of weir's whose answer comes in the right order
    replace: bytes = b""
    #: called when PostgreSQL skips the request (an error earlier in its batch), and when
    #: the request itself fails
    skipped: Callable[[], object] | None = None
    failed: Callable[[], object] | None = None

    @property
    def watched(self) -> bool:
        """Its outcome matters to weir (:attr:`SessionState.uncertain`)."""
        return self.skipped is not None or self.failed is not None


#: requests answered by ReadyForQuery (the end of a batch)
_BARRIERS = ("sync", "query")
#: one shared item per kind, for requests whose success has no effect here
_PLAIN = {kind: _Pending(kind) for kind in ("describe", "execute", "sync", "query")}
#: the shared items by kind, for the relay core (``cython_ext/relay_scan.pyx``), which
#: queues and answers them as :meth:`SessionState.expect` and :meth:`SessionState.ready` do
PLAIN_REQUESTS = _PLAIN
_STATUS = {ord(s): s for s in "ITE"}


class SessionState(SessionCore):
    """The request ledger of one session, fed by :meth:`frontend` and :meth:`backend`; its
    fields are the session core's (``proxy.session_core``), its rules are here."""

    __slots__ = ()

    @property
    def in_transaction(self) -> bool:
        """True inside an explicit transaction block (including a failed one)."""
        return self.transaction_status != "I"

    @property
    def idle(self) -> bool:
        """No request is outstanding (nor a failed batch waiting for its Sync)."""
        return not self.pending and not self.skipping

    @property
    def caught_up(self) -> bool:
        """Every answer the client waits for has come: what is still outstanding upstream,
        if anything, is requests weir sent on its own whose answers it discards (e.g. its
        Close of the unnamed statement after answering a query locally) — they do not hold
        up a local answer, which the client gets in the same order either way."""
        return len(self.pending) == self.discarded and not self.skipping

    # -- frontend ---------------------------------------------------------------------------

    def expect(self, kind: str) -> None:
        """A request of ``kind`` whose success changes nothing here went upstream (``""``:
        one that gets no answer, e.g. Flush)."""
        if kind:
            self.pending.append(_PLAIN[kind])

    def frontend(self, msg: object) -> None:
        """Observe a message the client sent (before it is forwarded)."""
        handler = _FRONTEND.get(type(msg))
        if handler is not None:
            handler(self, msg)

    def _on_parse(self, msg: fe.Parse) -> None:
        last = self.last_parse
        if last is not None and last[0] is msg:
            self.pending.append(last[1])
            return
        stmt = PreparedStatement(msg.name, msg.query, msg.param_types)
        item = _Pending("parse", partial(self.statements.__setitem__, stmt.name, stmt))
        self.last_parse = (msg, item)
        self.pending.append(item)

    def _on_bind(self, msg: fe.Bind) -> None:
        last = self.last_bind
        if last is not None and last[0] is msg:
            self.pending.append(last[1])
            return
        item = _Pending("bind", partial(self.portals.__setitem__, msg.portal, msg.statement))
        self.last_bind = (msg, item)
        self.pending.append(item)

    def _on_close(self, msg: fe.Close) -> None:
        table: dict[str, Any] = self.statements if msg.kind == "S" else self.portals
        self.pending.append(_Pending("close", partial(table.pop, msg.name, None)))

    def _on_query(self, msg: fe.Query) -> None:
        effect = _simple_query_effect(msg.query)
        self.pending.append(_PLAIN["query"] if effect is None
                             else _Pending("query", partial(effect, self)))

    def injected(self, msg: fe.Parse | fe.Bind | fe.Close, replace: bytes = b"",
                 skipped: Callable[[], object] | None = None) -> None:
        """weir sends ``msg`` upstream on its own: track it, and swallow its answer (the
        client gets ``replace`` in its place); ``skipped`` runs if it does not succeed."""
        self.frontend(msg)
        item = self.pending.pop()
        self.pending.append(_Pending(item.kind, item.apply, swallow=True, replace=replace,
                                      skipped=skipped, failed=skipped))
        self.swallowing += 1
        if skipped is not None:
            self.uncertain += 1
        elif not replace:
            self.discarded += 1

    def attach(self, skipped: Callable[[], object] | None = None,
               failed: Callable[[], object] | None = None) -> None:
        """Give the request observed last what to do if PostgreSQL skips it, or if it
        fails (weir's own bookkeeping that must follow what the upstream really did)."""
        item = self.pending.pop()
        self.pending.append(_Pending(item.kind, item.apply, item.swallow, item.replace,
                                      skipped, failed))
        self.uncertain += 1
        if not item.swallow:
            self.swallowing += 1  # (its outcome is seen message by message)

    # -- backend ----------------------------------------------------------------------------

    def backend(self, msg: object) -> None:
        """Observe a message the upstream sent (before it is relayed)."""
        handler = _BACKEND.get(type(msg))
        if handler is not None:
            handler(self, msg)

    def answer(self, mtype: int) -> bool:
        """Observe a backend message by its type byte alone (content not needed); True when
        the message answers a request weir injected and must not be relayed (the client
        gets :attr:`replacement` instead).

        The relay calls this for the completion messages (``1 2 3 n T C I s``) so that it
        never decodes them on the hot path; other types are ignored.
        """
        kind = _ANSWER_BY_TYPE.get(mtype)
        return kind is not None and self._complete(kind)

    def ready(self, statuses: bytes) -> None:
        """Observe a run of backend messages holding one ReadyForQuery per byte of
        ``statuses`` (its status), ending with the last of them, and no ErrorResponse or
        ParameterStatus: every outstanding request up to as many Syncs/Queries succeeded.

        Equivalent to observing the run message by message; only for runs with no swallowed
        request outstanding (:attr:`swallowing`), whose answers must be cut out one by one.
        """
        pending = self.pending
        for status in statuses:
            while pending:
                item = pending.popleft()
                if item.apply is not None:
                    item.apply()
                if item.kind in _BARRIERS:
                    break
            if status == 73:  # "I": the transaction ended, and its portals with it
                self.portals.clear()
        if statuses:
            self.transaction_status = _STATUS[statuses[-1]]
        if self.upstream_since:
            self.answered()

    def answered(self) -> None:
        """A ReadyForQuery came from the upstream: observe how long the oldest request
        waited for it (``metrics.UPSTREAM_STATEMENTS``); the next one is timed from now if
        requests are still outstanding."""
        now = time.monotonic()
        UPSTREAM_STATEMENTS.observe(now - self.upstream_since)
        self.upstream_since = now if self.pending else 0.0

    def _pop(self) -> _Pending:
        item: _Pending = self.pending.popleft()
        if item.swallow:
            self.swallowing -= 1
            if not item.replace and not item.watched:
                self.discarded -= 1
        if item.watched:
            if not item.swallow:
                self.swallowing -= 1
            self.uncertain -= 1
            if not self.uncertain and self.on_settled is not None:
                self.on_settled()
        return item

    def _complete(self, kind: str) -> bool:
        """Pop the oldest outstanding request of ``kind`` (skipping describe-like ones)."""
        pending = self.pending
        while pending:
            item: _Pending = pending[0]
            if item.kind == kind:
                self._pop()
                if item.apply is not None:
                    item.apply()
                self.replacement = item.replace
                return item.swallow
            if item.kind in _BARRIERS:
                return False
            self._pop()
        return False

    def _on_error(self, msg: ErrorResponse) -> None:
        count_error(msg.sqlstate)
        pending = self.pending
        if not pending:
            return
        if pending[0].kind == "query":
            pending[0] = _PLAIN["query"]  # the statement's effect did not happen
            return
        if pending[0].kind not in _BARRIERS:  # the request that failed
            item = self._pop()
            if item.failed is not None:
                item.failed()
        self._skip()
        if not pending and not self.skipping:
            self.skipping = True  # what comes before the next Sync is skipped too
            self.swallowing += 1

    def _skip(self) -> None:
        """Drop the outstanding requests PostgreSQL skips, up to the next barrier."""
        pending = self.pending
        while pending and pending[0].kind not in _BARRIERS:
            item = self._pop()
            if item.skipped is not None:
                item.skipped()

    def _on_ready(self, msg: be.ReadyForQuery) -> None:
        pending = self.pending
        if self.skipping:  # the Sync that ends the failed batch: all before it was skipped
            self.skipping = False
            self.swallowing -= 1
            while pending and pending[0].kind != "sync":
                item = self._pop()
                if item.skipped is not None:
                    item.skipped()
        if pending and pending[0].kind in _BARRIERS:
            item = pending.popleft()
            if item.apply is not None:
                item.apply()
        self.transaction_status = msg.status
        if msg.status == "I":
            self.portals.clear()
        if self.upstream_since:
            self.answered()

    def _on_parameter_status(self, msg: be.ParameterStatus) -> None:
        self.parameters[msg.name] = msg.value
        self.parameters_version += 1


def deallocation(query: str) -> tuple[str, str] | None:
    """What a simple query deallocates: ``("name", statement)`` for ``DEALLOCATE [PREPARE]
    name``, ``("all", "")`` for ``DEALLOCATE [PREPARE] ALL``, ``("discard", "")`` for
    ``DISCARD ALL`` (statements and portals), or None."""
    words = query.strip().rstrip(";").split()
    if not words:
        return None
    head = words[0].upper()
    if head == "DISCARD":
        return ("discard", "") if len(words) == 2 and words[1].upper() == "ALL" else None
    if head != "DEALLOCATE":
        return None
    rest = words[2:] if len(words) > 1 and words[1].upper() == "PREPARE" else words[1:]
    if len(rest) != 1:
        return None
    name = rest[0]
    if name.upper() == "ALL":
        return ("all", "")
    return "name", name[1:-1].replace('""', '"') if name.startswith('"') else name.lower()


def _simple_query_effect(query: str) -> Callable[[SessionState], None] | None:
    """The statement-cache effect of a simple query, if it is DEALLOCATE or DISCARD."""
    found = deallocation(query)
    if found is None:
        return None
    kind, name = found
    if kind == "discard":
        return _discard_all
    if kind == "all":
        return lambda s: s.statements.clear()
    return lambda s: _forget_statement(s, name)


def _discard_all(state: SessionState) -> None:
    state.statements.clear()
    state.portals.clear()


def _forget_statement(state: SessionState, name: str) -> None:
    state.statements.pop(name, None)


def _expect(kind: str) -> Callable[[SessionState, object], None]:
    item = _PLAIN[kind]
    return lambda s, _msg: s.pending.append(item)


def _answer(kind: str) -> Callable[[SessionState, object], None]:
    def observe(state: SessionState, _msg: object) -> None:
        state._complete(kind)

    return observe


_FRONTEND: dict[type, Callable[[SessionState, object], None]] = {
    fe.Parse: SessionState._on_parse,  # type: ignore[dict-item]
    fe.Bind: SessionState._on_bind,  # type: ignore[dict-item]
    fe.Close: SessionState._on_close,  # type: ignore[dict-item]
    fe.Query: SessionState._on_query,  # type: ignore[dict-item]
    fe.Describe: _expect("describe"),
    fe.Execute: _expect("execute"),
    fe.Sync: _expect("sync"),
}

_ANSWER_BY_TYPE: dict[int, str] = {
    ord("1"): "parse",
    ord("2"): "bind",
    ord("3"): "close",
    ord("n"): "describe",
    ord("T"): "describe",
    ord("C"): "execute",
    ord("I"): "execute",
    ord("s"): "execute",
}

_BACKEND: dict[type, Callable[[SessionState, object], None]] = {
    be.ParseComplete: _answer("parse"),
    be.BindComplete: _answer("bind"),
    be.CloseComplete: _answer("close"),
    be.NoData: _answer("describe"),
    be.RowDescription: _answer("describe"),
    be.CommandComplete: _answer("execute"),
    be.EmptyQueryResponse: _answer("execute"),
    be.PortalSuspended: _answer("execute"),
    ErrorResponse: SessionState._on_error,  # type: ignore[dict-item]
    be.ReadyForQuery: SessionState._on_ready,  # type: ignore[dict-item]
    be.ParameterStatus: SessionState._on_parameter_status,  # type: ignore[dict-item]
}


def has_effect(query: str) -> bool:
    """Whether a simple query changes the statements or portals held (DEALLOCATE, DISCARD)."""
    return _simple_query_effect(query) is not None
