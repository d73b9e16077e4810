"""Range-partial state: which range queries get it, and the ``Span`` of one lookup.

Owns: ``span_choice`` (a planned query -> the reader input column whose filled intervals
its reader keeps, or why its state stays every row of its key), ``with_span`` (the plan
with that choice made), ``lookup_span`` (the statement's parameters -> the ``Span`` its
lookup key ends with) and ``state_line`` (EXPLAIN's ``state:`` line). The design is
``docs/architecture.md``, "Engine: range-partial state".

Which queries: every cut a comparison (``<``, ``<=``, ``>``, ``>=``; BETWEEN is two) on
the same column, of a type whose order the engine reproduces and whose values bind as fill
parameters unchanged; that column and every equality key column (if any: the filled
intervals are then kept per value of the equality key) plain columns of one scan of a
table with a primary key under filters, projections and equi-joins (either side of an
inner join, the left of a LEFT JOIN) - or every equality key column of one other scan,
under inner joins only (``_keys_elsewhere``: the range's base keeps its pieces per join
value); no window, no reader LIMIT. Everything else keeps the full-state path, with the
reason.

Top-k state for a LIMIT parameter (``_top_choice``): a statement without range cuts whose
page is set by a parameter and whose ORDER BY starts with a plain column of such a type that
is NOT NULL or whose NULLs a filter on the way to its scan rejects (``col IS NOT NULL``, a
strict comparison) gets the same state on that column, unbounded: its lookups ask for the
first OFFSET + LIMIT rows, so the reader keeps the top of the largest page asked (per
equality key). A nullable column no filter rejects the NULLs of gets it too, in
PostgreSQL's default NULL order (last ascending, first descending): its spans reach past
every value to the NULL point (``Reader.span_nulls``, ``Span.nulls``); an explicit ``ASC
NULLS FIRST`` / ``DESC NULLS LAST`` keeps every row of the key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.dataflow.state.intervals import HIGH, LOW, Span
from engine.plan import ir
from engine.plan.rules.outer_joins import rejects_nulls
from engine.values import TextValue
from engine.values import oids as T

if TYPE_CHECKING:
    from engine.plan.planned import PlannedQuery

#: Column types of range-partial state (integers, byte-order text, dates and timestamps).
SPAN_TYPES = frozenset({T.INT2, T.INT4, T.INT8, T.TEXT, T.VARCHAR, T.DATE, T.TIMESTAMP,
                        T.TIMESTAMPTZ})
_COMPARE = frozenset({"<", "<=", ">", ">="})
#: A ``first`` above this asks for every row of the interval (the fill's OFFSET is an int8).
_ALL_ROWS = 2**62


def _base(rel: ir.Rel, col: int) -> tuple[ir.TableRef, int, tuple[int, ...]] | str:
    """(table, column, the join sides taken to reach it) when ``col`` of ``rel`` is a plain
    column of one table with a primary key under filters, projections and joins (the right
    side of an inner join only: a LEFT JOIN's right columns may be padding); else why not
    (starting with a space)."""
    path: list[int] = []
    while True:
        if isinstance(rel, ir.Filter):
            rel = rel.input
        elif isinstance(rel, ir.Project):
            expr = rel.exprs[col]
            if not isinstance(expr, ir.ColumnRef):
                return " the range column is computed"
            col, rel = expr.index, rel.input
        elif isinstance(rel, ir.Join):
            nl = len(rel.left.columns)
            if col < nl:
                rel = rel.left
                path.append(0)
            elif rel.kind == "inner":
                col, rel = col - nl, rel.right
                path.append(1)
            else:
                return " the range column is on the right side of a LEFT JOIN"
        elif isinstance(rel, ir.Scan):
            if not rel.table.primary_key:
                return " the table has no primary key"
            return rel.table, col, tuple(path)
        else:
            return f" the plan has an operator other than filters, projections and joins " \
                   f"of tables ({type(rel).__name__})"


def _nulls_rejected(rel: ir.Rel, col: int) -> bool:
    """Whether a filter on the way from ``rel`` down to the scan of its column ``col`` (as
    :func:`_base` follows it) drops every row whose ``col`` is NULL."""
    while True:
        if isinstance(rel, ir.Filter):
            if col in rejects_nulls(rel.predicate):
                return True
            rel = rel.input
        elif isinstance(rel, ir.Project):
            expr = rel.exprs[col]
            if not isinstance(expr, ir.ColumnRef):
                return False
            col, rel = expr.index, rel.input
        elif isinstance(rel, ir.Join):
            nl = len(rel.left.columns)
            if col < nl:
                rel = rel.left
            elif rel.kind == "inner":
                col, rel = col - nl, rel.right
            else:
                return False
        else:
            return False


def _trace(rel: ir.Rel, col: int) -> str:
    """``table.column`` when ``col`` of ``rel`` is a plain column of one table with a
    primary key under filters, projections and joins; else why not (starting with a
    space)."""
    found = _base(rel, col)
    if isinstance(found, str):
        return found
    return f"{found[0].name}.{found[0].columns[found[1]].name}"


def _same_base(rel: ir.Rel, a: int, b: int) -> bool:
    """Whether columns ``a`` and ``b`` of ``rel`` trace to the same scan (not just the same
    table: a self-join scans it twice)."""
    fa, fb = _base(rel, a), _base(rel, b)
    return not isinstance(fa, str) and not isinstance(fb, str) and fa[0] == fb[0] \
        and fa[2] == fb[2]


def _keys_traced(reader: ir.Reader, col: int, found: str) -> tuple[int | None, str]:
    """(col, its description with the equality key's columns), or why the equality key
    keeps the full state."""
    for key in reader.key:  # (each equality key a plain column of the same scan)
        traced = _trace(reader.input, key)
        if traced.startswith(" "):
            return None, "the equality key:" + traced
    if reader.key and not all(_same_base(reader.input, k, col) for k in reader.key):
        return _keys_elsewhere(reader, col, found)
    if reader.key:
        names = ", ".join(_trace(reader.input, k).partition(".")[2] for k in reader.key)
        return col, f"{found} per value of {names}"
    return col, found


def _inner_only(rel: ir.Rel) -> bool:
    """Whether every join under ``rel`` (through filters and projections) is inner."""
    while isinstance(rel, (ir.Filter, ir.Project)):
        rel = rel.input
    if isinstance(rel, ir.Join):
        return rel.kind == "inner" and _inner_only(rel.left) and _inner_only(rel.right)
    return True


def _keys_elsewhere(reader: ir.Reader, col: int, found: str) -> tuple[int | None, str]:
    """The equality key on another table of the join than the range (``WHERE u.name = $1
    AND s.id > $2``): every key column of one scan, not the range's, and inner joins only
    (the replay drives from the key's table and pulls the range's per join value, whose
    pieces the range's base keeps per join value)."""
    first = reader.key[0]
    if not all(_same_base(reader.input, k, first) for k in reader.key):
        return None, "the equality key is on several tables of the join"
    if not _inner_only(reader.input):
        return None, "the equality key is on another table of the join than the range, " \
            "under a LEFT JOIN"
    names = ", ".join(_trace(reader.input, k) for k in reader.key)
    return col, f"{found} per value of {names} (another table of the join: pieces per " \
        "join value)"


def _top_choice(plan: PlannedQuery) -> tuple[int | None, str]:
    """Top-k state for a LIMIT parameter without range cuts (``WHERE author_id = $1 ORDER
    BY score DESC LIMIT $2``): the leading ORDER BY column as an unbounded span whose
    lookups ask for their first OFFSET + LIMIT rows, so the reader keeps (per equality key)
    the top rows of the largest page asked, with the ties of the last, and a larger page
    fills on from where they end. A nullable column whose NULLs no filter rejects
    (``_nulls_rejected``) must sort them in PostgreSQL's default place (above every value:
    the NULL point past ``HIGH``)."""
    page, reader = plan.page, plan.reader
    if page is None or plan.aggregates:
        return None, ""
    if page.limit is None and page.limit_param is None:
        return None, "OFFSET without LIMIT reads every row"
    if reader.windows or reader.limit is not None or reader.offset:
        return None, "window functions or a LIMIT inside the reader"
    lead = reader.order_by[0]
    if reader.input.columns[lead.column].type_oid not in SPAN_TYPES:
        return None, "the ORDER BY column's type (integers, text, dates and timestamps only)"
    if lead.collation is not None:
        return None, f"ORDER BY text under collation {lead.collation} (filled intervals are " \
            "in byte order)"
    span, shifted = lead.column, ""
    found = _base(reader.input, span)
    if isinstance(found, str):
        source = _shift_source(reader.input, lead)
        if isinstance(source, str):
            why = source or found.replace(" range column", " column")
            return None, "the ORDER BY column:" + why
        span, shifted = source, " (the ORDER BY shifts it by a constant)"
        found = _base(reader.input, span)
        if isinstance(found, str):
            return None, "the ORDER BY column:" + found.replace(" range column", " column")
    table, col, _ = found
    if any(_base(reader.input, k) == found for k in reader.key):
        return None, "the ORDER BY starts with the equality key (one value per lookup)"
    name = f"{table.name}.{table.columns[col].name}{shifted}"
    if col not in table.not_null:
        if _nulls_rejected(reader.input, span):
            name += " (its NULLs filtered out)"
        elif lead.nulls_first is not None and lead.nulls_first != lead.descending:
            return None, f"{name} may be NULL and the ORDER BY puts NULLs " \
                f"{'first' if lead.nulls_first else 'last'} (the NULL rows are kept as " \
                "the point past every value: PostgreSQL's default order only)"
        else:
            name += " (its NULLs as the top value)"
    return _keys_traced(reader, span, name)


_INTEGERS = frozenset({T.INT2, T.INT4, T.INT8})


def _shifted(expr: ir.Expr, descending: bool) -> ir.ColumnRef | str:
    """The integer column ``x`` of ``x + c`` / ``c + x`` ordered descending or ``x - c``
    ascending (``c`` a constant >= 0): strictly increasing in ``x``, so the order is
    ``x``'s and ties are ``x``'s ties; NULL stays NULL. The only errors (an integer
    overflow) are on the rows with the largest ``x`` for ``+`` and the smallest for ``-``:
    the first rows of the order, in every non-empty page (``LIMIT 0`` reads no row in
    PostgreSQL either), so a row that fails is evaluated by weir as by PostgreSQL. Else why
    not (``""``: not such an expression)."""
    if not isinstance(expr, ir.Arith) or expr.op not in ("+", "-") \
            or expr.type_oid not in _INTEGERS:
        return ""
    pairs = [(expr.left, expr.right)] + ([(expr.right, expr.left)] if expr.op == "+" else [])
    for x, c in pairs:
        if isinstance(c, ir.Cast) and c.type_oid in _INTEGERS:  # (``1::int8``: the literal
            c = c.arg                                           # widened, never failing)
        if isinstance(x, ir.ColumnRef) and x.type_oid in _INTEGERS \
                and isinstance(c, ir.Const) and type(c.value) is int and 0 <= c.value < 2**15:
            if descending != (expr.op == "+"):
                return " the ORDER BY expression may fail (an integer overflow) on a row " \
                    "past the page (x + c descending and x - c ascending only)"
            return x
    return ""


def _shift_source(rel: ir.Rel, lead: ir.SortKey) -> int | str:
    """The reader input column holding ``x`` when the ORDER BY's lead is ``x + c`` / ``x -
    c`` computed by the reader input's top projection (:func:`_shifted`), else why not."""
    if not isinstance(rel, ir.Project):
        return ""
    x = _shifted(rel.exprs[lead.column], lead.descending)
    if isinstance(x, str):
        return x
    for i, expr in enumerate(rel.exprs):
        if isinstance(expr, ir.ColumnRef) and expr.index == x.index:
            return i
    return " the column it shifts is not an input column of the reader"


def _with_shift_source(plan: PlannedQuery) -> PlannedQuery:
    """A LIMIT parameter over ``x + c`` (``_shifted``) whose ``x`` the reader's input does
    not carry: the plan with ``x`` as a hidden trailing input column (the span's)."""
    reader = plan.reader
    if plan.cuts or plan.page is None or not reader.order_by \
            or not isinstance(reader.input, ir.Project):
        return plan
    top = reader.input
    x = _shifted(top.exprs[reader.order_by[0].column], reader.order_by[0].descending)
    if isinstance(x, str) or not isinstance(_shift_source(top, reader.order_by[0]), str):
        return plan
    wider = ir.Project(top.input, (*top.exprs, x), (*top.names, "?span0?"))
    return dataclasses.replace(plan, reader=dataclasses.replace(reader, input=wider))


def _span_nulls(plan: PlannedQuery, col: int) -> bool:
    """Whether the top-k state on ``col`` keeps the NULL point (nullable, not filtered)."""
    if plan.cuts:
        return False
    found = _base(plan.reader.input, col)
    return not isinstance(found, str) and found[1] not in found[0].not_null \
        and not _nulls_rejected(plan.reader.input, col)


def span_choice(plan: PlannedQuery) -> tuple[int | None, str]:
    """(the reader input column of range-partial state or None, the reason)."""
    cuts = plan.cuts
    if not cuts:
        return _top_choice(plan)
    reader = plan.reader
    if any(c.op not in _COMPARE for c in cuts):
        return None, "a parameter in EXISTS, NOT EXISTS or NOT IN"
    if len({c.column for c in cuts}) != 1:
        return None, "range parameters on several columns"
    if cuts[0].type_oid not in SPAN_TYPES:
        return None, "the range column's type (integers, text, dates and timestamps only)"
    if any(c.collation is not None for c in cuts):
        return None, f"text under collation {cuts[0].collation} (filled intervals are in " \
            "byte order)"
    if reader.windows or reader.limit is not None or reader.offset:
        return None, "window functions or a LIMIT inside the reader"
    col = reader.output[cuts[0].column]
    found = _trace(reader.input, col)
    if found.startswith(" "):
        return None, found[1:]
    lead = reader.order_by[0].column if reader.order_by else None
    if lead is not None and lead != col and _same_base(reader.input, lead, col) \
            and _trace(reader.input, lead) == found:
        col = lead  # (a hidden ORDER BY copy of the column: the span's, so pages use it)
    return _keys_traced(reader, col, found)


def _padding_cut(rel: ir.Rel, col: int) -> ir.Rel:
    """``rel`` with every LEFT JOIN whose right side the path to ``col``'s scan enters made
    inner (through filters, plain-column projections and joins; anything else unchanged).
    Sound under range cuts on ``col``: a NULL-extended row has NULL there, which no
    comparison passes, so the host's cut drops exactly the rows the LEFT JOIN adds."""
    if isinstance(rel, ir.Filter):
        return dataclasses.replace(rel, input=_padding_cut(rel.input, col))
    if isinstance(rel, ir.Project):
        expr = rel.exprs[col]
        if not isinstance(expr, ir.ColumnRef):
            return rel
        return dataclasses.replace(rel, input=_padding_cut(rel.input, expr.index))
    if isinstance(rel, ir.Join):
        nl = len(rel.left.columns)
        if col < nl:
            return dataclasses.replace(rel, left=_padding_cut(rel.left, col))
        return dataclasses.replace(rel, kind="inner", right=_padding_cut(rel.right, col - nl))
    return rel


def _cut_padding(plan: PlannedQuery) -> PlannedQuery:
    """A range on the right side of a LEFT JOIN (``users u LEFT JOIN stories s ... WHERE
    s.id > $1``): the host's cut rejects the NULL-extended rows (a comparison with NULL is
    never true), so the joins on the way to the range's scan are inner for this statement
    - the plan with them inner when that gives range-partial state, else ``plan``."""
    cuts, reader = plan.cuts, plan.reader
    if not cuts or any(c.op not in _COMPARE for c in cuts) \
            or len({c.column for c in cuts}) != 1:
        return plan
    inner = _padding_cut(reader.input, reader.output[cuts[0].column])
    if inner == reader.input:
        return plan
    candidate = dataclasses.replace(plan, reader=dataclasses.replace(reader, input=inner))
    return candidate if span_choice(candidate)[0] is not None else plan


def with_span(plan: PlannedQuery) -> PlannedQuery:
    """``plan`` with range-partial state when :func:`span_choice` allows it (a range on the
    right side of a LEFT JOIN with those joins inner, ``_cut_padding``)."""
    plan = _cut_padding(plan)
    wider = _with_shift_source(plan)
    if wider is not plan and span_choice(wider)[0] is not None:
        plan = wider
    col, _ = span_choice(plan)
    if col is None:
        return plan
    return dataclasses.replace(plan, reader=dataclasses.replace(
        plan.reader, span=col, span_nulls=_span_nulls(plan, col)))


def state_line(plan: PlannedQuery) -> str | None:
    """EXPLAIN's ``state:`` line of a range query or a LIMIT parameter page (None for other
    queries)."""
    reader = plan.reader
    if not plan.cuts:
        if plan.page is None or plan.aggregates:
            return None
        _, why = span_choice(plan)
        if reader.span is not None:
            return f"state: top rows on {why}: the first OFFSET + LIMIT rows of the largest " \
                "page asked (with the ties of the last), a larger page fills on"
        return f"state: every row of the key, the host cuts the page: {why}"
    _, why = span_choice(plan)
    if reader.span is not None:
        lead = reader.order_by[0] if reader.order_by else None
        page = "; a LIMIT fills only the page's stretch" if plan.page is not None \
            and lead is not None and lead.column == reader.span else ""
        return f"state: range-partial on {why}: filled intervals, holes filled by " \
               f"interval upqueries{page}"
    return f"state: every row of the key, cut by the host: {why}"


def lookup_span(plan: PlannedQuery, params: Sequence[Any],
                first: int | None) -> Span:
    """The interval a lookup needs: the tightest bound on each side (a NULL bound: empty; a
    bound kept as text, such as ``infinity``, leaves its side unbounded - the host's cut
    stays exact), and ``first`` rows when the ORDER BY starts with the column ascending."""
    reader = plan.reader
    col = reader.span
    assert col is not None
    span = Span(col, plan.cuts[0].type_oid if plan.cuts
                else reader.input.columns[col].type_oid)
    start, lo, lo_incl = LOW, None, False
    end, hi, hi_incl = HIGH, None, False
    for cut in plan.cuts:
        value = params[cut.param - 1]
        if value is None:
            return dataclasses.replace(span, empty=True)
        if isinstance(value, TextValue):
            continue
        one = Span(col, cut.type_oid, lo=value, lo_incl=cut.op == ">=") if cut.op[0] == ">" \
            else Span(col, cut.type_oid, hi=value, hi_incl=cut.op == "<=")
        if cut.op[0] == ">" and one.start > start:
            start, lo, lo_incl = one.start, value, one.lo_incl
        elif cut.op[0] == "<" and one.end < end:
            end, hi, hi_incl = one.end, value, one.hi_incl
    lead = reader.order_by[0] if reader.order_by else None
    if lead is not None and lead.column != col and not plan.cuts \
            and _shift_source(reader.input, lead) == col:
        lead = dataclasses.replace(lead, column=col)  # (ordered by ``col + c``: its order)
    if lead is None or lead.column != col or (first is not None and first > _ALL_ROWS):
        first = None  # (a page past any table's rows: all of them; OFFSET stays in int8)
    top = first is not None and lead is not None and lead.descending
    return Span(col, span.type_oid, lo, lo_incl, hi, hi_incl, first, from_top=top,
                nulls=reader.span_nulls)
