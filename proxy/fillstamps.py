"""Answers remembered when a fill installs: a key that missed is answered from the memos (and
by the hit lanes) at its next read, not only after the general path answered it once.

Owns: :class:`FillStamps`, what a local portal's read that missed leaves behind for its key
(the statement's memo and Bind tail, its RowDescription, the encoders of the session's output
settings and result formats, the route: :meth:`FillStamps.missed`), and what is done with
it when the engine reports the key's fill installed (``EngineHost.on_ready``,
:meth:`FillStamps.ready`): the answer is encoded as the general path would encode it
(``portal_reads.encode``, ``held.next_rows`` for a whole Execute) and remembered in that
memo (``HitMemos.remember``), and stamped into the lanes (``HitLanes.stamp``) when they run.

Why it answers right: the Hit names the engine answer it was encoded from, and both who
use it check that answer against the reader first (the hit path: ``Engine.current``; the
lanes: ``HitLanes.stamp`` registers the stamp only if it is the reader's current answer,
and the reader reports it before replacing or dropping it, ``Runtime.watched``); a fill
installs the applied state, so the answer is as fresh as any hit's; the memo is the one
the general path would remember the answer in (statement and output settings), of a cache
that is still the one the read missed in, and every
gate of a session (privileges, transaction state, seen(s)) is still checked where the memo
is used. What is left behind is bounded (:data:`MAX_KEYS` keys, the oldest forgotten, and
:data:`MAX_PER_KEY` memos per key); a key never filled (not admitted) is forgotten in turn.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine import merge_lookups
from pgwire import backend as be
from proxy.hitpath import Hit, HitMemos
from proxy.results import encode_rows
from proxy.router import Route

#: keys whose missed reads are remembered until their fill installs (the oldest go first)
MAX_KEYS = 4096
#: memos (statement, output settings, Bind tail) remembered per key
MAX_PER_KEY = 4


@dataclass(frozen=True, slots=True)
class Missed:
    """A local portal's read of one key that went upstream as a miss."""

    memo: dict[bytes, Hit]
    rest: bytes  # the Bind tail the memo is keyed by
    description: bytes  # the RowDescription of the statement with its result formats
    encoders: Any  # (``ReadPath.output_plan``)
    route: Route


class FillStamps:
    """See the module docstring."""

    def __init__(self, hits: HitMemos, is_current: Callable[[Any], bool],
                 stamp: Callable[[dict[bytes, Hit], bytes, Hit], bool] | None = None) -> None:
        self.hits = hits
        #: whether a cache entry is still the cache of its name (``CacheService.is_current``:
        #: a cache dropped and created again for another query is not the one a read missed)
        self.is_current = is_current
        #: the lanes' ``HitLanes.stamp`` (None: no lanes)
        self.stamp = stamp
        self._missed: OrderedDict[tuple[str, tuple[Any, ...]], list[Missed]] = OrderedDict()

    def missed(self, miss: Missed) -> None:
        """A read of ``miss.route``'s one key went upstream as a miss."""
        route = miss.route
        if route.keys is None or len(route.keys) != 1 or route.cache is None:
            return
        key = (route.cache.name, tuple(route.keys[0]))
        known = self._missed.get(key)
        if known is None:
            if len(self._missed) >= MAX_KEYS:
                self._missed.popitem(last=False)
            self._missed[key] = [miss]
            return
        if len(known) < MAX_PER_KEY and all(m.memo is not miss.memo or m.rest != miss.rest
                                            for m in known):
            known.append(miss)

    def ready(self, cache: str, key: tuple[Any, ...], answer: tuple[Any, ...]) -> None:
        """The engine installed ``key`` of ``cache`` with ``answer`` (the reader's answer
        object): remember (and stamp) it for every read of it that missed."""
        missed = self._missed.pop((cache, tuple(key)), None)
        if not missed:
            return
        for miss in missed:
            route = miss.route
            if not self.is_current(route.cache):
                continue
            plan = route.classified.query.plan  # type: ignore[union-attr]
            try:
                rows = tuple(merge_lookups(plan, [answer], route.params))
                data = [encode_rows([row], miss.encoders) for row in rows]
            except Exception:  # (the general path answers it upstream, and says why)
                continue
            body = b"".join(data) + be.CommandComplete(f"SELECT {len(data)}").encode()
            hit = Hit(((cache, tuple(key), answer),), miss.description, body,
                      ("cache", f"served by cache {cache}"))
            self.hits.remember(miss.memo, miss.rest, hit)
            if miss.memo.get(miss.rest) is not hit:
                continue  # (not remembered: too large, or the memo was dropped)
            self.hits.from_fills += 1
            if self.stamp is not None:
                self.stamp(miss.memo, miss.rest, hit)

    def clear(self) -> None:
        self._missed.clear()
