"""Misses of a held statement at pass-through cost: the client's own batch forwarded as it is.

Owns: :func:`try_forward`, which the relay calls for a chunk the hit path declined. When the
chunk is the batch drivers send to run a prepared statement (``Bind`` of a statement weir
holds to the unnamed portal, optionally ``Describe`` of that portal, ``Execute`` of all rows,
``Sync``), the statement (a named one) also exists upstream as the client parsed it, and a
key of the read is missing from its cache, the batch goes upstream byte for byte: PostgreSQL
answers all of it (BindComplete, RowDescription, rows, ReadyForQuery), nothing is recreated
nor swallowed, and the read itself (``ReadPath.read_rows_now``) queues the key's fill in the
background exactly as the general path's miss does (``proxy.misses``), and the answer is
remembered for the hit path and the lanes when that fill installs (``proxy.fillstamps``).

Why this is the general path's answer: there a miss makes the local portal exist upstream
(the held statement's Parse, sent once, and the Bind, their answers swallowed) and forwards
the Execute, so the client gets PostgreSQL's rows either way; the RowDescription a Describe
gets here is PostgreSQL's own. The first miss of a statement weir alone holds still takes the
general path, which prepares it upstream (``Extended._recreate``); from then on, while the
upstream holds that statement (``SessionState.statements``, as PostgreSQL confirmed it), its
misses come here. Anything else (a hit, a gate that needs a wait, a parameter that is not a
key, a transaction block, another shape) returns False having changed nothing, and the
general path handles the chunk.

Also :func:`count` (the misses pass lanes forwarded, read as this module reads its own) and
:func:`loop_miss` (a miss read here goes by the lanes' doorkeeper too, ``proxy.lane_misses``).
"""

from __future__ import annotations

from typing import Any

from pgwire import frontend as fe
from pgwire.framing import scan_messages
from proxy import missfast_position, portal_reads
from proxy.held import LocalPortal, bind_keys
from proxy.hitpath import _tail as batch_tail
from proxy.hitpath import session_settings_id
from proxy.misses import MISS
from proxy.rules import CONTENT_FREE

_T_BIND = ord("B")
_T_SYNC = ord("S")
_SYNC = fe.Sync()


def try_forward(session: Any, raw: bytes, index: list[tuple[int, int, int]]) -> bool:
    """Forward ``raw`` (whole messages, framed in ``index``) upstream as a miss of a held
    statement and return True, or return False with nothing done (module docstring)."""
    if index[0][0] != _T_BIND or batch_tail(raw, index, 1) is None:
        return False
    _, bs, be_ = index[0]
    if raw[bs] != 0:  # not the unnamed portal
        return False
    state, ctx = session.state, session.ctx
    name_end = raw.find(b"\x00", bs + 1, be_)
    if name_end < 0 or ctx is None:
        return False
    if name_end == bs + 1:
        # the unnamed statement: drivers parse it in the same batch, and the upstream drops
        # it at any simple Query (which ``SessionState.statements`` does not follow)
        return False
    name = raw[bs + 1 : name_end].decode("utf-8", "replace")
    held = state.held.get(name)
    if held is None or not held.upstream or held.route.cache is None \
            or session.extended.wait_settle or not upstream_holds(state, held.parse):
        return False
    service = session.server.service
    if service.host is None or service.settings.misses != "upstream" \
            or state.batch_upstream or state.batch_local or state.batch_failed \
            or not state.caught_up or state.transaction_status != "I" \
            or not ctx.defaults_applied or ctx.tainted is not None or name in ctx.hiding:
        return False  # (``hiding``: a write behind a read-only tag, ``Session._note_hidden``)
    bind = fe.decode_frontend(_T_BIND, raw[bs:be_])
    assert isinstance(bind, fe.Bind)
    why = _read(session, held, bind, raw[name_end + 1 : be_])
    if why is None:
        return False
    _observe(session, bind, raw, index)
    session.upstream_write(missfast_position.append(session, raw))
    ctx.last = ("upstream", why)
    session.lane_recent = (session.lane_recent << 1 | 1) & 0xFF  # (a miss: proxy.lanes)
    return True


def _read(session: Any, held: Any, bind: fe.Bind, rest: bytes) -> str | None:
    """Read ``bind`` of ``held`` as a miss (counted, its fill queued when admitted, what
    its fill's install needs left behind) and say why it goes upstream; None when it is
    not one (a hit, a gate that needs a wait, a parameter that is not a key: nothing
    counted)."""
    state, ctx, service = session.state, session.ctx, session.server.service
    lookup = bind_keys(held, bind)
    if lookup is None:
        return None
    local = LocalPortal(held, bind, *lookup, rest=rest)
    prepared = portal_reads.prepare(service, state, ctx, local)
    if prepared is None:
        return None
    route = prepared[0]
    if service.gates.granted(ctx.user, route.cache.name) is None \
            or not _missing(service.host.engine, route.cache.name, route.keys):
        return None  # a check upstream first, or a hit: the general path
    loop_miss(session, held, rest, route.cache.name, route.keys or [])
    read = service.reads.read_rows_now(route, ctx, None)
    if not isinstance(read, tuple) or read[0] is not None:  # (cannot happen: nothing ran
        # in between, and the gates that wait were checked above)
        return None
    portal_reads.note_miss(service, state, ctx, local, read, prepared)  # (its fill's answer)
    why: str = read[1]
    return why


def count(session: Any, raw: bytes, seen_before: int = 0) -> int:
    """The Bind messages ``raw`` of held statements a pass lane forwarded for ``session``
    (``proxy.lanes``: reads it had no stamped answer for) read as :func:`try_forward`
    reads its misses, behind the same gates (``ReadPath.read_rows_now``'s, in its order):
    each counted, its key's fill queued when admitted (``EngineHost.read_or_fill``), and
    what the fill's install needs left behind when a fill of the key is pending. A read
    that is not a miss (its key present, a gate that answers upstream or needs a wait, a
    parameter that is not a key) is not counted; PostgreSQL answered it either way.
    ``seen_before``: the reads of each key the lanes' doorkeeper counted and kept before
    passing this one (``proxy.lane_misses``: admission's ``keep`` as last told to the lanes,
    1 while fills pay: the first). Returns how many were read as misses."""
    ctx, held_all = session.ctx, session.state.held
    service = session.server.service
    host = service.host
    if ctx is None or host is None or not ctx.defaults_applied:
        return 0
    engine = host.engine
    # the gates of a cache, checked once per call (nothing runs in between that could
    # change them): current, its role's privilege, the stream up, within the staleness bound
    open_: dict[int, str | None] = {}
    up = host.connected and host.staleness() <= service.settings.staleness_bound
    found, _ = scan_messages(raw, 0, len(raw))
    counted = 0
    for mtype, start, end in found:
        name_end = raw.find(b"\x00", start + 1, end)
        held = held_all.get(raw[start + 1 : name_end].decode("utf-8", "replace")) \
            if mtype == _T_BIND and raw[start] == 0 and name_end > 0 else None
        if held is None or held.route.cache is None:
            continue
        entry = held.route.cache
        cache = open_.get(id(entry), "")
        if cache == "":
            cache = open_[id(entry)] = entry.name if up and service.is_current(entry) \
                and service.gates.granted(ctx.user, entry.name) else None
        if cache is None:
            continue
        bind = fe.decode_frontend(_T_BIND, raw[start:end])
        lookup = bind_keys(held, bind) if isinstance(bind, fe.Bind) else None
        if lookup is None or not _missing(engine, cache, lookup[0]):
            continue
        ctx.seen.missed = True  # (as ``read_rows_now`` marks a miss)
        for key in lookup[0]:
            k = tuple(key)
            if host.read_or_fill(cache, k, seen_before=seen_before) is None \
                    and engine.filling(cache, k) \
                    and len(lookup[0]) == 1:  # (what its fill's install needs)
                assert isinstance(bind, fe.Bind)
                local = LocalPortal(held, bind, *lookup, rest=raw[name_end + 1 : end])
                prepared = portal_reads.prepare(service, session.state, ctx, local)
                portal_reads.note_miss(service, session.state, ctx, local, (None, MISS),
                                       prepared)
        counted += 1
    return counted


def loop_miss(session: Any, held: Any, rest: bytes, cache: str, keys: list[Any]) -> None:
    """A held statement's miss read on the event loop (:func:`try_forward`; ``rest``: its
    Bind after the names) goes by the lanes' doorkeeper too (``proxy.lane_misses``), so that
    a key read first on one side and then on the other is admitted on its second read all
    the same: when the doorkeeper saw the read before, admission takes its ``keys`` as read
    once (``Admission.vouch``)."""
    service = session.server.service
    lanes = service.lanes
    if lanes is None or service.settings.lane_misses != "on" \
            or not lanes._pace.screens(service, lanes.core):
        return
    memo = service.hits.statement_memo(held, session_settings_id(session))
    if lanes.core.seen_read(lanes._table(memo), rest):
        admission = service.host.fills.admission
        for key in keys:
            admission.vouch((cache, tuple(key)))


def upstream_holds(state: Any, parse: fe.Parse) -> bool:
    """Whether PostgreSQL holds the statement ``parse`` prepared (confirmed by its answer)."""
    stmt = state.statements.get(parse.name)
    return stmt is not None and stmt.query == parse.query \
        and tuple(stmt.param_types) == tuple(parse.param_types)


def _missing(engine: Any, cache: str, keys: list[tuple[Any, ...]] | None) -> bool:
    """Whether a key of the read is missing now; counts nothing (a present key's lookup is
    taken back from the hit counters: the read that follows counts it)."""
    if not keys:
        return False
    try:
        for key in keys:
            k = tuple(key)
            if engine.lookup(cache, k) is None:
                return True
            engine.stats.hits -= 1
            engine.hits_by_cache[cache] -= 1
    except Exception:  # a dropped cache, an engine failure: the general path decides
        return False
    return False


def _observe(session: Any, bind: fe.Bind, raw: bytes, index: list[tuple[int, int, int]]
             ) -> None:
    """What ``Session.forward_client`` observes for these messages going upstream."""
    state, ext = session.state, session.extended
    state.frontend(bind)
    ext.observe_forwarded(bind)
    for mtype, _, _ in index[1:]:
        state.expect(CONTENT_FREE[mtype])
        if mtype == _T_SYNC:
            ext.observe_forwarded(_SYNC)
