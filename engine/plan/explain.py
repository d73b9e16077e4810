"""EXPLAIN: a stable text rendering of a plan (used by EXPLAIN CREATE CACHE and golden tests).

Owns: ``explain_reader`` (a Reader plan, one operator per line, children indented by two
spaces) and ``render_expr`` (an IR expression in SQL-like syntax, column references shown by
the input column's name, or ``#i`` when that name is ambiguous or synthetic).

Invariant: the text is a pure function of the plan (no ids, no addresses, no dict order),
so equal plans render identically and golden files stay stable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from engine.plan import ir, pgtypes
from engine.plan.rules.materialize import place
from engine.values import Interval, encode_text


def _ranged(r: ir.RangeFrame) -> str:
    def bound(n: int | None) -> str:
        return "UNBOUNDED" if n is None else f"{n:+d}" + ("us" if r.micros else "")
    return (f" {r.mode.upper()} {bound(r.start)}..{bound(r.end)}"
            + ("" if r.exclude is None else f" EXCLUDE {r.exclude.upper()}"))


def _colname(cols: Sequence[ir.Column], index: int) -> str:
    if index >= len(cols):
        return f"#{index}"
    name = cols[index].name
    if name.startswith("?") or sum(1 for c in cols if c.name == name) > 1:
        return f"#{index}"
    return name


def _const(value: object, type_oid: int) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | Decimal | float):
        return str(value)
    shown = encode_text(type_oid, value) if isinstance(value, Interval | tuple) else str(value)
    text = shown.replace("'", "''")
    return f"'{text}'::{pgtypes.type_name(type_oid)}"


def render_expr(expr: Any, cols: Sequence[ir.Column]) -> str:
    handler = _EXPR.get(type(expr))
    if handler is None:
        return repr(expr)
    return handler(expr, lambda e: render_expr(e, cols), cols)


R = Callable[[Any], str]

_EXPR: dict[type, Callable[[Any, R, Sequence[ir.Column]], str]] = {
    ir.ColumnRef: lambda e, r, c: _colname(c, e.index),
    ir.Const: lambda e, r, c: _const(e.value, e.type_oid),
    ir.Param: lambda e, r, c: f"${e.number}",
    ir.BoolOp: lambda e, r, c: "(" + f" {e.op.upper()} ".join(r(a) for a in e.args) + ")",
    ir.Not: lambda e, r, c: f"NOT {r(e.arg)}",
    ir.Compare: lambda e, r, c: f"{r(e.left)} {e.op} {r(e.right)}{_coll(e.collation)}",
    ir.IsNull: lambda e, r, c: f"{r(e.arg)} IS {'NOT ' if e.negated else ''}NULL",
    ir.Arith: lambda e, r, c: f"({r(e.left)} {e.op} {r(e.right)})",
    ir.Negate: lambda e, r, c: f"-{r(e.arg)}",
    ir.Cast: lambda e, r, c: f"{r(e.arg)}::{pgtypes.type_name(e.type_oid)}",
    ir.Case: lambda e, r, c: "CASE " + " ".join(f"WHEN {r(w)} THEN {r(t)}" for w, t in e.whens)
    + (f" ELSE {r(e.default)}" if e.default is not None else "") + " END",
    ir.Coalesce: lambda e, r, c: "coalesce(" + ", ".join(r(a) for a in e.args) + ")",
    ir.NullIf: lambda e, r, c: f"nullif({r(e.left)}, {r(e.right)})",
    ir.Like: lambda e, r, c: f"{r(e.arg)} {'NOT ' if e.negated else ''}"
    f"{'ILIKE' if e.case_insensitive else 'LIKE'} {r(e.pattern)}",
    ir.Regex: lambda e, r, c: f"{r(e.arg)} {'!' if e.negated else ''}~"
    f"{'*' if e.case_insensitive else ''} {r(ir.Const(e.pattern, e.arg.type_oid))}",
    ir.InList: lambda e, r, c: f"{r(e.arg)} {'NOT ' if e.negated else ''}IN ("
    + ", ".join(r(i) for i in e.items) + ")",
    ir.Between: lambda e, r, c: f"{r(e.arg)} {'NOT ' if e.negated else ''}BETWEEN "
    f"{r(e.low)} AND {r(e.high)}{_coll(e.collation)}",
    ir.Func: lambda e, r, c: f"{e.name}(" + ", ".join(r(a) for a in e.args) + ")",
}


def _coll(locale: str | None) -> str:
    """How a comparison or sort key under a libc collation is shown (nothing for bytes)."""
    return "" if locale is None else f" (collation {locale})"


def render_sort(keys: Sequence[ir.SortKey], cols: Sequence[ir.Column]) -> str:
    """ORDER BY ``keys`` over ``cols`` as EXPLAIN shows it."""
    return _sort(keys, cols)


def _sort(keys: Sequence[ir.SortKey], cols: Sequence[ir.Column]) -> str:
    parts = []
    for k in keys:
        text = _colname(cols, k.column) + _coll(k.collation) + (
            " DESC" if k.descending else "")
        if k.nulls_first is not None and k.nulls_first != k.descending:
            text += " NULLS FIRST" if k.nulls_first else " NULLS LAST"
        parts.append(text)
    return ", ".join(parts)


def _cols(indices: Sequence[int], cols: Sequence[ir.Column]) -> str:
    return ", ".join(_colname(cols, i) for i in indices)


def _typed(cols: Sequence[ir.Column]) -> str:
    return ", ".join(f"{c.name} {pgtypes.type_name(c.type_oid)}" for c in cols)


def _agg(call: ir.AggCall, cols: Sequence[ir.Column]) -> str:
    if call.arg is None:
        return "count(*)"
    func = {"count_distinct": "count(DISTINCT "}.get(call.func, f"{call.func}(")
    args = render_expr(call.arg, cols)
    if call.delimiter is not None:
        args += ", '" + call.delimiter.replace("'", "''") + "'"
    if call.order:
        args += " ORDER BY " + ", ".join(
            render_expr(s.expr, cols) + _coll(s.collation) + (
                " DESC" if s.descending else "") + (
                "" if s.nulls_first is None else
                " NULLS FIRST" if s.nulls_first else " NULLS LAST") for s in call.order)
    return f"{func}{args}){_coll(call.collation)} -> {pgtypes.type_name(call.type_oid)}"


def _line(rel: ir.Rel) -> str:
    if isinstance(rel, ir.Scan):
        t = rel.table
        return f"Scan {t.schema}.{t.name} ({_typed(t.columns)})"
    if isinstance(rel, ir.Filter):
        return f"Filter {render_expr(rel.predicate, rel.input.columns)}"
    if isinstance(rel, ir.Project):
        cols = rel.input.columns
        items = []
        for name, e in zip(rel.names, rel.exprs, strict=True):
            text = render_expr(e, cols)
            items.append(text if text == name else f"{text} AS {name}")
        return "Project " + ", ".join(items)
    if isinstance(rel, ir.Join):
        lc, rc = rel.left.columns, rel.right.columns
        on = " AND ".join(f"{_colname(lc, a)} = {_colname(rc, b)}"
                          for a, b in zip(rel.left_keys, rel.right_keys, strict=True))
        return f"{'LeftJoin' if rel.kind == 'left' else 'Join'} ON {on or 'TRUE (cross)'}"
    if isinstance(rel, ir.UnionAll):
        return "UnionAll"
    if isinstance(rel, ir.Aggregate):
        cols = rel.input.columns
        group = _cols(rel.group_by, cols)
        return (f"Aggregate GROUP BY ({group}) " + ", ".join(_agg(a, cols) for a in rel.aggs))
    if isinstance(rel, ir.Distinct):
        if rel.setop is not None:  # over the union of its sides, marked by ?side?
            return {"intersect": "Intersect", "intersect_all": "IntersectAll",
                    "except": "Except", "except_all": "ExceptAll"}[rel.setop]
        return "Distinct"
    cols = rel.input.columns
    return (f"TopK GROUP BY ({_cols(rel.group_by, cols)}) ORDER BY {_sort(rel.order_by, cols)}"
            f" LIMIT {rel.limit}" + (f" OFFSET {rel.offset}" if rel.offset else ""))


def _tree(rel: ir.Rel, depth: int, out: list[str], notes: dict[int, list[str]]) -> None:
    line = "  " * depth + _line(rel)
    if id(rel) in notes:
        line += "  [" + "; ".join(notes[id(rel)]) + "]"
    out.append(line)
    for child in ir.children(rel):
        _tree(child, depth + 1, out, notes)


def _notes(reader: ir.Reader) -> dict[int, list[str]]:
    notes: dict[int, list[str]] = {}
    for p in place(reader)[1:]:
        kind = "partial" if p.partial else "full"
        text = f"{p.role} state {kind} on ({_cols(p.key, p.node.columns)})"
        notes.setdefault(id(p.node), []).append(text)
    return notes


def explain_reader(reader: ir.Reader, key_labels: Sequence[str] = (),
                   empty_row: tuple[Any, ...] | None = None, page: str | None = None) -> str:
    """The plan as text; ``key_labels`` name where each key value comes from ($1, lit0...)."""
    cols = reader.input.columns
    keys = [_colname(cols, k) + (f"={key_labels[i]}" if i < len(key_labels) else "")
            for i, k in enumerate(reader.key)]
    state = "partial" if place(reader)[0].partial else "full"
    head = f"Reader KEY ({', '.join(keys)}) {state} OUTPUT ({_typed(reader.columns)})"
    if reader.windows:
        head += " WINDOW (" + ", ".join(
            f"{_colname(cols, w.column)} = "
            + ("count(*" if w.func == "count_star" else f"{w.func}(")
            + ("" if w.arg is None else _colname(cols, w.arg)
               + ("" if w.collation is None else f" COLLATE {w.collation}")
               + ("" if w.offset == 1 else f", {w.offset}"))
            + (") PARTITION BY " + ", ".join(_colname(cols, p) for p in w.partition)
               if w.partition else ")")
            + (f" ORDER BY {_sort(w.order, cols)}" if w.order else "")
            + (" ROWS" if w.rows and w.ranged is None else "")
            + ("" if w.frame is None else f" {w.frame[0]:+d}..{w.frame[1]:+d}")
            + ("" if w.ranged is None else _ranged(w.ranged))
            for w in reader.windows) + ")"
    if reader.order_by:
        head += f" ORDER BY {_sort(reader.order_by, cols)}"
    if reader.limit is not None:
        head += f" LIMIT {reader.limit}"
    if reader.offset and reader.windows:
        head += f" OFFSET {reader.offset}"
    if page:
        head += f" PAGE {page}"
    if empty_row is not None:
        shown = ", ".join(_const(v, c.type_oid) for v, c in zip(empty_row, reader.columns,
                                                                 strict=True))
        head += f" WHEN NO ROW ({shown})"
    out = [head]
    _tree(reader.input, 1, out, _notes(reader))
    return "\n".join(out)
