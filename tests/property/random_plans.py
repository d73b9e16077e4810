"""Random schemas, random plans over them, random data and random change streams.

Tables have an integer primary key in column 0 and 1-3 nullable small-domain integer columns
(small domains make joins, groups and ties frequent). Plans compose every operator up to a
depth; every column is an integer (aggregates add int8 and numeric), so that keys and
comparisons are well defined.
"""

from __future__ import annotations

import random
from typing import Any

from engine.changes import UNCHANGED_TOAST, ChangeKind, RowChange
from engine.plan import ir
from engine.values import oids as T

Row = tuple[Any, ...]
INTS = (T.INT4, T.INT8)


def random_tables(rng: random.Random) -> dict[int, ir.TableRef]:
    tables = {}
    for n in range(rng.randint(1, 3)):
        width = rng.randint(2, 4)
        cols = (ir.Column("id", T.INT4), *(ir.Column(f"c{i}", T.INT4) for i in range(1, width)))
        oid = 5000 + n
        tables[oid] = ir.TableRef(oid, "public", f"t{n}", cols, (0,))
    return tables


def _value(rng: random.Random) -> int | None:
    return None if rng.random() < 0.15 else rng.randint(0, 3)


def random_row(t: ir.TableRef, pk: int, rng: random.Random) -> Row:
    return (pk, *(_value(rng) for _ in t.columns[1:]))


def random_data(tables: dict[int, ir.TableRef], rng: random.Random) -> dict[int, dict[Row, Row]]:
    return {oid: {(i,): random_row(t, i, rng) for i in range(rng.randint(0, 8))}
            for oid, t in tables.items()}


def random_changes(tables: dict[int, ir.TableRef], data: dict[int, dict[Row, Row]],
                   rng: random.Random) -> list[RowChange]:
    shadow = {oid: dict(rows) for oid, rows in data.items()}
    out: list[RowChange] = []
    for _ in range(rng.randint(1, 4)):
        t = tables[rng.choice(sorted(tables))]
        rows = shadow[t.oid]
        if rng.random() < 0.03:
            rows.clear()
            out.append(RowChange(t.oid, ChangeKind.TRUNCATE, None, None))
            continue
        if not rows or rng.random() < 0.4:
            pk = max((k[0] for k in rows), default=-1) + 1
            rows[(pk,)] = new = random_row(t, pk, rng)
            out.append(RowChange(t.oid, ChangeKind.INSERT, None, new))
            continue
        key = rng.choice(sorted(rows))
        old = rows.pop(key)
        if rng.random() < 0.4:
            out.append(RowChange(t.oid, ChangeKind.DELETE,
                                 (old[0],) + (UNCHANGED_TOAST,) * (len(old) - 1), None))
            continue
        new = tuple(v if c == 0 or rng.random() < 0.5 else _value(rng) for c, v in enumerate(old))
        rows[key] = new
        out.append(RowChange(t.oid, ChangeKind.UPDATE, None, new))
    return out


class PlanGen:
    def __init__(self, tables: dict[int, ir.TableRef], rng: random.Random) -> None:
        self.tables = tables
        self.rng = rng

    def rel(self, depth: int) -> ir.Rel:
        rng = self.rng
        if depth <= 0 or rng.random() < 0.25:
            return ir.Scan(self.tables[rng.choice(sorted(self.tables))])
        make = rng.choice((self.filter, self.project, self.join, self.join, self.union,
                           self.aggregate, self.distinct, self.topk))
        return make(depth - 1)

    def _col(self, rel: ir.Rel) -> ir.ColumnRef:
        i = self.rng.randrange(len(rel.columns))
        return ir.ColumnRef(i, rel.columns[i].type_oid)

    def _int_col(self, rel: ir.Rel) -> ir.ColumnRef | None:
        ints = [i for i, c in enumerate(rel.columns) if c.type_oid in INTS]
        if not ints:
            return None
        i = self.rng.choice(ints)
        return ir.ColumnRef(i, rel.columns[i].type_oid)

    def predicate(self, rel: ir.Rel) -> ir.Expr:
        rng = self.rng
        c = self._col(rel)
        choice = rng.random()
        if choice < 0.5:
            rhs: ir.Expr = ir.Const(rng.randint(0, 3), c.type_oid)
            if rng.random() < 0.3:
                rhs = self._col(rel)
            return ir.Compare(rng.choice(("=", "<>", "<", "<=", ">", ">=")), c, rhs)
        if choice < 0.7:
            return ir.IsNull(c, negated=rng.random() < 0.5)
        if choice < 0.85:
            values = (0, 2, None)[:rng.randint(1, 3)]
            return ir.InList(c, tuple(ir.Const(v, c.type_oid) for v in values))
        return ir.BoolOp(rng.choice(("and", "or")), (self.predicate(rel), self.predicate(rel)))

    def filter(self, depth: int) -> ir.Rel:
        inner = self.rel(depth)
        return ir.Filter(inner, self.predicate(inner))

    def project(self, depth: int) -> ir.Rel:
        inner = self.rel(depth)
        exprs: list[ir.Expr] = []
        for _ in range(self.rng.randint(1, 3)):
            c = self._int_col(inner)
            if c is not None and self.rng.random() < 0.3:
                exprs.append(ir.Arith("+", c, ir.Const(1, c.type_oid), c.type_oid))
            elif c is not None and self.rng.random() < 0.2:
                exprs.append(ir.Coalesce((c, ir.Const(0, c.type_oid)), c.type_oid))
            else:
                exprs.append(self._col(inner))
        return ir.Project(inner, tuple(exprs), tuple(f"p{i}" for i in range(len(exprs))))

    def join(self, depth: int) -> ir.Rel:
        left, right = self.rel(depth), self.rel(depth)
        lc, rc = self._int_col(left), self._int_col(right)
        if lc is None or rc is None or lc.type_oid != rc.type_oid:
            return left
        kind = "left" if self.rng.random() < 0.4 else "inner"
        return ir.Join(left, right, (lc.index,), (rc.index,), kind)  # type: ignore[arg-type]

    def union(self, depth: int) -> ir.Rel:
        a, b = self.rel(depth), self.rel(depth)
        ca, cb = self._int_col(a), self._int_col(b)
        if ca is None or cb is None:
            return a
        ta = ir.Cast(ca, T.INT8) if ca.type_oid != T.INT8 else ca
        tb = ir.Cast(cb, T.INT8) if cb.type_oid != T.INT8 else cb
        return ir.UnionAll((ir.Project(a, (ta,), ("u",)), ir.Project(b, (tb,), ("u",))))

    def aggregate(self, depth: int) -> ir.Rel:
        inner = self.rel(depth)
        n = len(inner.columns)
        group = tuple(sorted(self.rng.sample(range(n), self.rng.randint(0, min(2, n)))))
        c = self._int_col(inner)
        aggs = [ir.AggCall("count_star", None, T.INT8, "n")]
        if c is not None:
            func = self.rng.choice(("count", "count_distinct", "sum", "avg", "min", "max"))
            oid = {"count": T.INT8, "count_distinct": T.INT8, "avg": T.NUMERIC,
                   "sum": T.INT8 if c.type_oid == T.INT4 else T.NUMERIC}.get(func, c.type_oid)
            if oid not in INTS and func not in ("avg", "sum"):
                oid = c.type_oid
            aggs.append(ir.AggCall(func, c, oid, "a"))  # type: ignore[arg-type]
        return ir.Aggregate(inner, group, tuple(aggs))

    def distinct(self, depth: int) -> ir.Rel:
        if self.rng.random() < 0.5:
            return ir.Distinct(self.rel(depth))
        union = self.union(depth)  # INTERSECT / EXCEPT [ALL] of two int8 columns
        if not isinstance(union, ir.UnionAll):
            return ir.Distinct(union)
        marked = tuple(ir.Project(b, (ir.ColumnRef(0, T.INT8), ir.Const(side, T.INT4)),
                                  ("u", "?side?")) for side, b in enumerate(union.inputs))
        kind = self.rng.choice(("intersect", "intersect_all", "except", "except_all"))
        return ir.Distinct(ir.UnionAll(marked), kind)  # type: ignore[arg-type]

    def topk(self, depth: int) -> ir.Rel:
        inner = self.rel(depth)
        n = len(inner.columns)
        group = tuple(sorted(self.rng.sample(range(n), self.rng.randint(0, min(1, n)))))
        order = tuple(ir.SortKey(self.rng.randrange(n), self.rng.random() < 0.5,
                                 self.rng.choice((None, True, False)))
                      for _ in range(self.rng.randint(1, 2)))
        return ir.TopK(inner, group, order, self.rng.randint(1, 3), self.rng.choice((0, 0, 1)))

    def reader(self, depth: int) -> ir.Reader:
        rel = self.rel(depth)
        n = len(rel.columns)
        key = tuple(self.rng.sample(range(n), self.rng.randint(0, min(2, n))))
        order: tuple[ir.SortKey, ...] = ()
        limit = None
        if self.rng.random() < 0.3:
            order = tuple(ir.SortKey(i) for i in range(n))
            limit = self.rng.randint(1, 3)
        return ir.Reader(rel, key, tuple(range(n)), order, limit)


def random_key(plan: ir.Reader, rng: random.Random) -> Row:
    return tuple(rng.randint(0, 3) if rng.random() < 0.9 else None for _ in plan.key)
