"""A write's commit position read on the session's own upstream connection, in the same round
trip as the write (issue 24, session 19).

Owns: :func:`writes` (whether a client chunk is one run of such a statement, ending with its
Sync) and :func:`append` (that chunk, going upstream, with the batch of
``proxy.missfast_position`` after it: the upstream's WAL insert and flush positions read
right after the write's commit, on the same backend).

Which statements write is learnt by ``aftermiss.learn`` when a write's answer came (each
remembered, in ``Session.writers``, with the upstream's record of it,
``SessionState.statements``, so one prepared again under its name is not one).

Why: after a write, the session's next cached read must wait until the applier has applied
the write's commit (read-your-writes, ``proxy.seen``). That was a probe sent on weir's own
connection once the write's answer was relayed (``aftermiss.answered``, ``Coverage.when``):
a second backend woken, and the event loop reaching that socket, while the stream brings
the commit. In the demo's news site every vote and comment paid it, and about half of the
reads after them parked for it (issue 24). Read on the session's own backend, the position
comes right behind the write's answer, with no second backend and no second socket.

Exactness: the write's implicit transaction committed before its ReadyForQuery (the chunk is
one statement's run ending with Sync, the session idle outside a transaction block before it),
so its commit record ended at or before the insert position read after it; every earlier
answer of the session was received before the batch was sent (``proxy.missfast_position``'s
rule). The statement is learnt from its answer (its CommandComplete had a write's tag:
``router.wrote``), a guess only about cost: a learnt statement that later does not write
costs the read and nothing else (``missfast_position.arrived`` does nothing for a session
that neither missed nor wrote), and a write that is not learnt is covered by the probe, as
before. A statement prepared again under a learnt name (``DEALLOCATE`` and ``PREPARE``, a
Parse of it) is another statement upstream, and not a learnt one until its own run wrote: so
the read never follows a run that may leave a transaction block open (``BEGIN`` prepared
under that name). Invisible to the client as the miss's read is (``proxy.missfast_position``); the
same ``--miss-position`` setting governs it.
"""

from __future__ import annotations

from typing import Any

from proxy import missfast_position

_T_BIND, _T_DESCRIBE, _T_EXECUTE, _T_SYNC = ord("B"), ord("D"), ord("E"), ord("S")


def writes(session: Any, raw: bytes, index: list[tuple[int, int, int]]) -> bool:
    """Whether ``raw`` (framed in ``index``) is one run of a statement that writes:
    ``Bind`` of a learnt statement, ``Describe`` or ``Execute`` messages, one ``Sync``, last."""
    if len(index) < 3 or index[0][0] != _T_BIND or index[-1][0] != _T_SYNC:
        return False
    for mtype, _, _ in index[1:-1]:
        if mtype != _T_EXECUTE and mtype != _T_DESCRIBE:
            return False
    _, start, end = index[0]
    portal_end = raw.find(b"\x00", start, end)
    name_end = raw.find(b"\x00", portal_end + 1, end) if portal_end >= 0 else -1
    if name_end <= portal_end + 1:  # (malformed, or the unnamed statement: never learnt)
        return False
    name = raw[portal_end + 1 : name_end].decode("utf-8", "replace")
    learnt = session.writers.get(name)  # (as prepared then: not one prepared again since)
    return learnt is not None and session.state.statements.get(name) is learnt


def after_cached_read(last: tuple[str, str] | None) -> bool:
    """Whether the session's statement before the write (``SessionContext.last``, as it was
    before the write's run was observed) was answered from a cache: only then is the read
    worth a statement on its backend. A session that writes after a write (or after reads
    upstream) likely does not read from a cache next, and the probe it takes instead is
    coalesced with other sessions' (``Coverage.request``); a write-heavy mix (``python -m
    bench.demo_cost --mix writes``) spent about a third more of weir's CPU per operation
    reading every write's position."""
    return last is not None and last[0] == "cache"


def append(session: Any, raw: bytes, index: list[tuple[int, int, int]],
           last: tuple[str, str] | None) -> bytes:
    """``raw`` (already observed, going upstream) with the position read after it when it is
    one run of a statement that writes, after a cached read (``last``: the session's previous
    statement, :func:`after_cached_read`), and the session may have the read; ``raw`` as it
    is otherwise."""
    if not session.writers or session.server.service.host is None or session.state.swallowing \
            or not after_cached_read(last) or not writes(session, raw, index):
        return raw
    return missfast_position.append(session, raw, write=True)
