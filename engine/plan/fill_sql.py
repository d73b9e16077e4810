"""Fill SQL: the parameterized statement that fetches exactly the base rows a fill needs.

Owns: ``fill_query`` (the engine's ``FillRequest`` -> SQL text and parameters), ``fill_sql``
(one base table + equality on some of its columns, or TRUE, for one or several keys) and
``FillStatement`` (the text plus the order in which key values bind to
``$n``). Built as a sqlglot expression tree and rendered in the postgres dialect: identifiers
are always quoted, values never appear in the text (they are bound as parameters).

Invariant: for keys k1..kn, the statement returns exactly the rows of the table whose key
columns equal one of the keys (SQL equality: a NULL key value matches nothing, as in the
dataflow's lookups), with the requested columns in the requested order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from engine.dataflow.state.intervals import Span, span_of
from engine.values import TextValue
from engine.values import oids as T

#: the types whose values the codecs may keep as text (``TextValue``), by name
_TEXT_CASTS = {T.DATE: "date", T.TIMESTAMP: "timestamp", T.TIMESTAMPTZ: "timestamptz"}

if TYPE_CHECKING:  # only its fields are read; no import-time tie to the dataflow
    from engine.dataflow.fills import FillRequest


@dataclass(frozen=True, slots=True)
class FillStatement:
    """SQL text with ``$1..$m``; parameter ``$i`` is ``keys[i // width][i % width]``."""

    sql: str
    key_count: int
    width: int

    def bind(self, keys: Sequence[Sequence[object]]) -> tuple[object, ...]:
        """The flat parameter tuple for ``keys`` (one tuple of key values per key)."""
        if len(keys) != self.key_count or any(len(k) != self.width for k in keys):
            raise ValueError(f"expected {self.key_count} keys of width {self.width}")
        return tuple(v for key in keys for v in key)


def _param(n: int) -> exp.Expression:
    return exp.Parameter(this=exp.Var(this=str(n)))


def _ident(name: str) -> exp.Column:
    return exp.column(name, quoted=True)


def fill_sql(schema: str, table: str, columns: Sequence[str], key_columns: Sequence[str],
             key_count: int = 1) -> FillStatement:
    """SELECT ``columns`` FROM ``schema.table`` WHERE the key columns equal one of
    ``key_count`` parameter tuples; with no key columns the predicate is TRUE (whole table)."""
    if not columns:
        raise ValueError("a fill selects at least one column")
    query = exp.select(*(_ident(c) for c in columns)).from_(
        exp.table_(table, db=schema, quoted=True))
    width = len(key_columns)
    if width:
        disjuncts = []
        for k in range(key_count):
            conj = [exp.EQ(this=_ident(c), expression=_param(k * width + i + 1))
                    for i, c in enumerate(key_columns)]
            disjuncts.append(exp.and_(*conj) if len(conj) > 1 else conj[0])
        query = query.where(exp.or_(*disjuncts) if len(disjuncts) > 1 else disjuncts[0])
    else:
        key_count = 1
    return FillStatement(query.sql(dialect="postgres"), key_count, width)


_CACHE: dict[tuple[Any, tuple[int, ...]], FillStatement] = {}


def fill_query(request: FillRequest) -> tuple[str, tuple[object, ...]]:
    """SQL and parameters fetching the rows ``request`` asks for: every column of the table
    in table order, where the key columns equal the key (all rows when it has no columns),
    or - for a prefetch (``request.via``) - where they equal the join columns of the rows
    the ``via`` table has for its own key (a semi-join under the same snapshot)."""
    via = getattr(request, "via", None)
    if via is not None:
        return _prefetch_query(request, via)
    span = span_of(request.key)
    if span is not None:
        return span_query(request.table, request.columns[-1], span,
                          tuple(zip(request.columns[:-1], request.key[:-1], strict=True)))
    table = request.table
    cache_key = (table, request.columns)  # the whole table ref: names change with DDL
    stmt = _CACHE.get(cache_key)
    if stmt is None:
        names = [c.name for c in table.columns]
        stmt = fill_sql(table.schema, table.name, names, [names[i] for i in request.columns])
        _CACHE[cache_key] = stmt
    return stmt.sql, stmt.bind([request.key]) if stmt.width else ()


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def span_query(table: Any, col: int, span: Span, equal: tuple[tuple[int, Any], ...] = ()
               ) -> tuple[str, tuple[object, ...]]:
    """The rows of an interval fill: ``col`` between the span's bounds with its own
    operators (NULL matches nothing unless the span has ``nulls``: ``OR col IS NULL``;
    ``only_nulls``: ``col IS NULL``), and each ``(column, value)`` of ``equal`` (the
    equality key of per-key range-partial state) ``column = value``. With ``first = k``:
    only up to the k-th smallest value of the interval, with all its ties (``COALESCE``
    keeps every row when there are fewer than k; NULL counts as the largest value, so a
    NULL k-th keeps every row ascending and only the NULLs descending);
    ``fills.filled_span`` tells which interval that filled."""
    name = _quoted(table.columns[col].name)
    params: list[object] = [value for _, value in equal]
    conds = [f"{_quoted(table.columns[c].name)} = ${i + 1}" for i, (c, _) in enumerate(equal)]
    for value, op in ((span.lo, ">=" if span.lo_incl else ">"),
                      (span.hi, "<=" if span.hi_incl else "<")):
        if value is None:
            continue
        if isinstance(value, TextValue):  # infinity, BC years: bound as PostgreSQL's text
            params.append(value.text)
            conds.append(f"{name} {op} ${len(params)}::text::{_TEXT_CASTS[span.type_oid]}")
        else:
            params.append(value)
            conds.append(f"{name} {op} ${len(params)}")
    if span.only_nulls:  # (the NULL point alone: no value bound)
        del conds[len(equal):], params[len(equal):]
        conds.append(f"{name} IS NULL")
    elif span.nulls:  # (the values in the bounds, and the NULL point past them)
        values = conds[len(equal):]
        del conds[len(equal):]
        if values:
            conds.append(f"({' AND '.join(values)} OR {name} IS NULL)")
    elif len(conds) == len(equal):
        conds.append(f"{name} IS NOT NULL")
    where = " AND ".join(conds) or "TRUE"
    source = f"{_quoted(table.schema)}.{_quoted(table.name)}"
    if span.first is not None:  # (from_top: the k-th largest value, and every row above)
        desc, op = (" DESC", ">=") if span.from_top else ("", "<=")
        nth = (f"(SELECT {name} FROM {source} WHERE {where} ORDER BY {name}{desc} "
               f"OFFSET {int(span.first) - 1} LIMIT 1)")
        if not span.nulls:
            where = f"{where} AND {name} {op} COALESCE({nth}, {name})"
        elif not span.from_top:  # NULLs last: a NULL k-th (or none) keeps every row
            where = f"{where} AND ({nth} IS NULL OR {name} <= {nth})"
        else:  # NULLs first: every NULL, and the values down to a non-NULL k-th
            null_nth = nth.replace(f"(SELECT {name} FROM", f"(SELECT {name} IS NULL FROM", 1)
            where = (f"{where} AND ({name} IS NULL OR ({null_nth} IS NOT TRUE AND "
                     f"{name} >= COALESCE({nth}, {name})))")
    columns = ", ".join(_quoted(c.name) for c in table.columns)
    return f"SELECT {columns} FROM {source} WHERE {where}", tuple(params)


_PREFETCH: dict[tuple[Any, tuple[int, ...], Any, tuple[int, ...], tuple[int, ...]], str] = {}


def _prefetch_query(request: FillRequest, via: Any) -> tuple[str, tuple[object, ...]]:
    """``SELECT * FROM t WHERE (cols) IN (SELECT join_cols FROM via WHERE via_cols = $n)``;
    with no join columns ``WHERE EXISTS (SELECT 1 FROM via WHERE via_cols = $n)``. The text
    depends on the shape only (the tables, their columns and the key values are parameters),
    so it is built once per shape: building it with sqlglot took about as long as the fetch
    (the demo's cold run, issue 24)."""
    shape = (request.table, request.columns, via.table, via.columns, via.join_columns)
    sql = _PREFETCH.get(shape)
    if sql is None:
        sql = _PREFETCH[shape] = _prefetch_sql(request, via)
    return sql, tuple(via.key)


def _prefetch_sql(request: FillRequest, via: Any) -> str:
    table, source = request.table, via.table
    names = [c.name for c in table.columns]
    source_names = [c.name for c in source.columns]
    picked: list[exp.Expression] = [_ident(source_names[i]) for i in via.join_columns]
    inner = exp.select(*(picked or [exp.Literal.number(1)])).from_(
        exp.table_(source.name, db=source.schema, quoted=True))
    conds = [exp.EQ(this=_ident(source_names[c]), expression=_param(i + 1))
             for i, c in enumerate(via.columns)]
    if conds:
        inner = inner.where(exp.and_(*conds) if len(conds) > 1 else conds[0])
    cols = [_ident(names[i]) for i in request.columns]
    if not cols:  # a join on no columns (CROSS JOIN): every row, if the source has one
        test: exp.Expression = exp.Exists(this=inner)
    else:
        target = cols[0] if len(cols) == 1 else exp.Tuple(expressions=cols)
        test = exp.In(this=target, query=exp.Subquery(this=inner))
    query = exp.select(*(_ident(n) for n in names)).from_(
        exp.table_(table.name, db=table.schema, quoted=True)).where(test)
    return query.sql(dialect="postgres")
