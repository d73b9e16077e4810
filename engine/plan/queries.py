"""The planner's public entry point: query text -> identity, lookup key and plan, with caches.

Owns: ``QueryPlanner`` (one per catalog version), ``CachedQuery`` (what a text means: its
identity, plan and how to build its lookup key) and ``Classified`` (one text's answer).

Query identity = the shape (literal-insensitive normalized text) + the literals pinned into
the plan + the OIDs of the relations its names resolve to under the session's search_path.
Two texts with one identity share one cache; lifted literals and ``$n`` parameters are the
lookup key. Caches: exact (text, search_path) -> answer (a repeat costs one dict lookup);
identity -> plan (a new text of a known shape costs a parse but no planning).

Invariants: ``classify`` never raises for any text; Unsupported answers are cached like
plans; lifting decisions depend only on the shape and the literal kinds, never on values;
every cache is a bounded LRU (``capacity`` entries each), so memory stays bounded whatever
texts arrive.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.dataflow.ordering import order_key
from engine.plan import ir
from engine.plan.explain import explain_reader
from engine.plan.literals import LiteralError, literal_value_in_zone
from engine.plan.planner import PlannedQuery, plan_select
from engine.plan.range_aggs import aggregate_groups, aggregates_text, computed_columns
from engine.plan.range_state import lookup_span, state_line, with_span
from engine.plan.ranges import cut_rows, iter_cut, narrow, range_value_ok
from engine.plan.rules.keys import KeySource
from engine.plan.setops import page_values, setop_params_ok, setop_rows, setop_state, setop_text
from engine.sql.cacheable import Unsupported, check_statement
from engine.sql.catalog import Catalog
from engine.sql.text import ParsedQuery, parse_query


@dataclass(frozen=True, slots=True)
class QueryIdentity:
    shape: str
    pinned: tuple[tuple[str, str | None], ...]
    relations: tuple[int, ...]
    #: the session TimeZone the plan computes in (None: it reads none)
    timezone: str | None = None

    @property
    def query_id(self) -> str:
        """A stable name for the identity (``q_`` + 16 hex digits), for SHOW/CREATE CACHE."""
        parts: tuple[Any, ...] = (self.shape, self.pinned, self.relations)
        if self.timezone is not None:
            parts += (self.timezone,)
        digest = hashlib.sha256(repr(parts).encode())
        return "q_" + digest.hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class CachedQuery:
    """A supported query shape with its pinned literals: the plan a cache serves."""

    identity: QueryIdentity
    fingerprint: str
    plan: PlannedQuery

    @property
    def state(self) -> str | None:
        """For a range query: which state its reader keeps, and why (EXPLAIN CREATE CACHE)."""
        if self.plan.setop is not None:
            return setop_state(self.plan.setop)
        return state_line(self.plan)

    @property
    def explain(self) -> str:
        labels = [_label(s) for s in self.plan.key_sources]
        page = self.plan.page
        text = None
        if page is not None:
            limit = f"${page.limit_param}" if page.limit_param else page.limit
            offset = f"${page.offset_param}" if page.offset_param else page.offset
            text = f"LIMIT {'ALL' if limit is None else limit} OFFSET {offset}"
        if self.plan.cuts:
            cols = self.plan.reader.columns
            cuts = " AND ".join(
                f"${c.param} <> ALL({cols[c.column].name})" if c.op == "not_any" else
                f"${c.param} NOT IN ({cols[c.column].name})" if c.op == "not_in" else
                f"{cols[c.target].name} := ${c.param} = ANY({cols[c.column].name})"
                if c.op == "flag" else
                f"{cols[c.column].name} {c.op} ${c.param}" + (
                    "" if c.collation is None else f" (collation {c.collation})")
                for c in self.plan.cuts)
            text = f"WHERE {cuts}" + (f" {text}" if text else "")
        if self.plan.setop is not None:
            ops = setop_text(self.plan.setop, self.plan.reader.columns)
            text = ops + (f" {text}" if text else "")
        if self.plan.aggregates:
            text = f"{text} THEN {aggregates_text(self.plan, cols)}"
        state = self.state
        return explain_reader(self.plan.reader, labels, self.plan.empty_row, text) + (
            "" if state is None else f"\n{state}")


@dataclass(frozen=True, slots=True)
class Classified:
    """One text under one search_path: its cache (or why not) and its literal values."""

    query: CachedQuery | Unsupported
    parsed: ParsedQuery

    @property
    def query_id(self) -> str:
        """The cache identity's id, or for an unsupported text an id of its shape (so SHOW
        PROXIED QUERIES can group texts that differ only in literals and layout)."""
        if isinstance(self.query, CachedQuery):
            return self.query.identity.query_id
        return "q_" + hashlib.sha256(self.parsed.shape.encode()).hexdigest()[:16]

    def key(self, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The reader lookup key of a plan whose answer is exactly that lookup's rows (or
        ``empty_row``); None for plans that need ``keys`` + ``merge_lookups`` (IN lists,
        LIMIT/OFFSET parameters) and wherever ``keys`` is None."""
        query = self.query
        if isinstance(query, Unsupported) or query.plan.page is not None or query.plan.cuts \
                or query.plan.hidden:
            return None
        keys = self.keys(params)
        return keys[0] if keys is not None and len(keys) == 1 else None

    def keys(self, params: Sequence[Any] = ()) -> list[tuple[Any, ...]] | None:
        """Every reader lookup key the statement needs (one unless it has an IN-list key:
        then one per distinct combination, to be combined with ``merge_lookups``).
        ``params`` are the statement's decoded ``$n`` values. None when a lifted literal is
        not a valid value of its column's type (PostgreSQL would raise or coerce
        differently), a parameter is missing, or there are more than ``MAX_LOOKUPS``
        combinations: forward the statement upstream."""
        query = self.query
        if isinstance(query, Unsupported):
            return None
        plan = query.plan
        choices: list[list[Any]] = []
        for src, type_oid in zip(plan.key_sources, plan.key_types, strict=True):
            options: list[Any] = []
            for alt in src.alternatives or (src,):
                value = self._value(alt, type_oid, params, query.identity.timezone)
                if value is _INVALID:
                    return None
                for item in _elements(value) if alt.array else (value,):
                    if item is _INVALID:
                        return None
                    if item is not None and item not in options:
                        options.append(item)  # NULL never matches; duplicates match once
            choices.append(options)
        for cut in plan.cuts:
            if cut.param > len(params) or not range_value_ok(params[cut.param - 1]):
                return None
        if plan.setop is not None and not setop_params_ok(plan.setop, params):
            return None
        combos = 1
        for options in choices:
            combos *= len(options)
        bounds = page_bounds(plan, params)
        if combos > MAX_LOOKUPS or bounds is None \
                or page_bounds(plan, params, agg=True) is None:
            return None
        if plan.reader.span is not None:  # range-partial state: the key ends with the span
            limit, offset = bounds
            span = lookup_span(plan, params, None if limit is None else offset + limit)
            return [(*c, span) for c in itertools.product(*choices)]
        return [tuple(c) for c in itertools.product(*choices)]

    def _value(self, src: KeySource, type_oid: int, params: Sequence[Any],
               zone: str | None) -> Any:
        if src.param is not None:
            return params[src.param - 1] if src.param <= len(params) else _INVALID
        text = self.parsed.literals[src.literal or 0].text
        if text is None:
            return None
        try:
            return literal_value_in_zone(type_oid, text, zone)
        except LiteralError:
            return _INVALID


def _elements(value: Any) -> list[Any]:
    """The elements ``= ANY(array)`` compares with: nested arrays flattened; a NULL array
    matches nothing; a value that is not an array is ``_INVALID``."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        return [_INVALID]
    out: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
        else:
            out.append(item)
    return out


def _label(src: KeySource) -> str:
    if src.array:
        return f"ANY(${src.param})"
    if src.alternatives:
        return "IN(" + ", ".join(_label(a) for a in src.alternatives) + ")"
    return f"${src.param}" if src.param is not None else f"literal{src.literal}"


#: Prefix of the reason given when the planner itself failed (a bug, reported as data).
INTERNAL_ERROR = "internal planner error"

#: Most lookups one statement with IN-list keys may expand to before it is forwarded.
MAX_LOOKUPS = 1000
_INVALID = object()


def page_bounds(plan: PlannedQuery, params: Sequence[Any],
                agg: bool = False) -> tuple[int | None, int] | None:
    """(limit, offset) of a parameter Page (``plan.page``, or with ``agg`` the one over the
    host aggregates' result rows, ``plan.agg_page``) for these parameter values; None when a
    value is missing, not an integer or negative (PostgreSQL raises: forward upstream)."""
    page = plan.agg_page if agg else plan.page
    return (None, 0) if page is None else page_values(page, params)


def merge_lookups(plan: PlannedQuery, results: Sequence[Sequence[tuple[Any, ...]]],
                  params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """The statement's rows from the rows of each of its lookups (``Classified.keys``
    order): concatenated, sorted when the query has ORDER BY, cut to its LIMIT, and to its
    parameter Page (``params`` are the statement's ``$n`` values). The planner only makes
    such plans when the sort columns are in the output. For a single lookup without a Page,
    the rows as they are (or ``empty_row``). No lookup at all (a NULL key value, which
    matches nothing) is one lookup without rows: an aggregate without GROUP BY still gives
    ``empty_row``, as PostgreSQL's ``count(*) ... WHERE column = NULL`` gives 0."""
    if not results:
        results = [()]
    if len(results) == 1 and plan.page is None and not plan.cuts and not plan.hidden:
        rows = list(results[0])
        if not rows and plan.empty_row is not None:
            return [plan.empty_row]
        return rows
    reader = plan.reader
    out = {col: i for i, col in enumerate(reader.output)}
    keys = tuple(ir.SortKey(out[k.column], k.descending, k.nulls_first, k.collation)
                 for k in reader.order_by if k.column in out)
    bounds = page_bounds(plan, params)
    if bounds is None:
        raise ValueError("invalid LIMIT/OFFSET parameter (Classified.keys returns None)")
    limit, offset = bounds
    if plan.setop is not None:  # the host finishes the set operation, then pages it
        rows = setop_rows(plan.setop, [row for part in results for row in part], params, keys)
        return rows[offset:] if limit is None else rows[offset: offset + limit]
    if plan.cuts and len(results) == 1:  # sorted already: bisect, then a lazy page
        lead = keys[0] if reader.order_by and reader.order_by[0].column in out else None
        part, rest = narrow(results[0], plan.cuts, params, lead)
        end = None if limit is None else offset + limit
        rows = list(itertools.islice(iter_cut(part, rest, params), offset, end))
    else:
        rows = [row for part in results for row in part]
        if plan.cuts:
            rows = cut_rows(rows, plan.cuts, params)
        if reader.order_by and len(results) > 1:
            rows.sort(key=order_key(keys))
        if reader.limit is not None:
            rows = rows[: reader.limit]
        rows = rows[offset:] if limit is None else rows[offset: offset + limit]
    if plan.aggregates:  # aggregates over the cut rows (without GROUP BY: even of none)
        results = aggregate_groups(rows, plan.aggregates, plan.grouped, plan.agg_having,
                                   plan.agg_hidden, plan.agg_order, plan.agg_limit,
                                   plan.agg_offset)
        if plan.agg_page is not None:
            agg_bounds = page_bounds(plan, params, agg=True)
            if agg_bounds is None:
                raise ValueError("invalid LIMIT/OFFSET parameter (Classified.keys returns None)")
            end = None if agg_bounds[0] is None else agg_bounds[1] + agg_bounds[0]
            results = results[agg_bounds[1]:end]
        return computed_columns(results, plan.agg_exprs) if plan.agg_exprs else results
    if plan.hidden:
        rows = [row[: -plan.hidden] for row in rows]
    return rows


class QueryPlanner:
    """Classify and plan query texts against one catalog snapshot."""

    def __init__(self, catalog: Catalog, capacity: int = 10_000) -> None:
        self.catalog = catalog
        self.capacity = capacity
        self._texts: OrderedDict[tuple[str, tuple[str, ...], str | None], Classified] = (
            OrderedDict())
        self._shapes: OrderedDict[
            tuple[Any, ...],
            tuple[frozenset[int], tuple[int, ...], str | None] | Unsupported] = OrderedDict()
        self._plans: OrderedDict[tuple[QueryIdentity, tuple[str, ...]], CachedQuery] = (
            OrderedDict())

    def classify(self, text: str, search_path: Sequence[str] = ("public",),
                 timezone: str | None = None) -> Classified:
        """``text`` under ``search_path`` in a session whose TimeZone is ``timezone`` (None:
        unknown; forms that read it are then refused)."""
        path = tuple(search_path)
        memo = (text, path, timezone)
        hit = self._texts.get(memo)
        if hit is not None:
            self._texts.move_to_end(memo)
            return hit
        answer = self._classify(parse_query(text), path, timezone)
        # keep the literals, not the parse tree (planning is done; trees are large)
        answer = Classified(answer.query, dataclasses.replace(answer.parsed, stmt=None))
        _put(self._texts, memo, answer, self.capacity)
        return answer

    def _classify(self, parsed: ParsedQuery, path: tuple[str, ...],
                  timezone: str | None) -> Classified:
        if parsed.error is not None or parsed.stmt is None:
            return Classified(Unsupported(parsed.error or "empty statement"), parsed)
        shape_key = (parsed.shape, path, tuple(lit.kind for lit in parsed.literals), timezone)
        known = self._shapes.get(shape_key)
        if isinstance(known, Unsupported):
            return Classified(known, parsed)
        if known is not None:
            # one identity, several plans: ``... = 5`` and ``... = $1`` share the identity (a
            # cache made from either serves both) but not their key sources
            cached = self._plans.get((_identity(parsed, *known), shape_key[2]))
            if cached is not None:
                return Classified(cached, parsed)
        screened = check_statement(parsed.stmt)
        if isinstance(screened, Unsupported):
            _put(self._shapes, shape_key, screened, self.capacity)
            return Classified(screened, parsed)
        try:
            planned = plan_select(parsed.stmt, self.catalog, path, parsed.literals,
                                  timezone=timezone)
        except Exception as exc:  # a planner bug must cost a forward, never the session
            planned = Unsupported(f"{INTERNAL_ERROR} ({type(exc).__name__}: {exc})")
        if isinstance(planned, Unsupported):
            return Classified(planned, parsed)
        planned = with_span(planned) if planned.setop is None else planned
        _put(self._shapes, shape_key, (planned.lifted, planned.relations, planned.timezone),
             self.capacity)
        identity = _identity(parsed, planned.lifted, planned.relations, planned.timezone)
        cached = CachedQuery(identity, parsed.fingerprint, planned)
        _put(self._plans, (identity, shape_key[2]), cached, self.capacity)
        return Classified(cached, parsed)


def _put(cache: OrderedDict[Any, Any], key: Any, value: Any, capacity: int) -> None:
    """Insert into a bounded LRU map, dropping the least recently inserted/used entry."""
    cache[key] = value
    cache.move_to_end(key)
    if len(cache) > capacity:
        cache.popitem(last=False)


def _identity(parsed: ParsedQuery, lifted: frozenset[int], relations: tuple[int, ...],
              timezone: str | None) -> QueryIdentity:
    pinned = tuple((lit.kind, lit.text) for i, lit in enumerate(parsed.literals)
                   if i not in lifted)
    return QueryIdentity(parsed.shape, pinned, relations, timezone)
