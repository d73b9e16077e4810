"""Planner benchmark: time to classify and plan a query text (no database needed).

    .venv/bin/python bench/plan.py [--repeat 5] [--out docs/benchmarks/plan.md]

The catalog is built from tests/corpus/schema.sql (parsed with pglast), the statements are
the corpus of tests/corpus/queries.sql. Three cases, each timed per statement, medians over
all statements and repeats:
- new shape: a fresh QueryPlanner each time (parse, screen, plan, rules, identity);
- new text of a known identity: another text of the same shape and pinned literals (parse +
  shape/identity lookup, no planning), as for a statement whose lifted literals changed;
- repeated text: the exact-text cache (one dict lookup).
Goal: a new shape plans in under 5 ms (median).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pglast import parse_sql
from pglast.stream import RawStream

from engine.plan.queries import QueryPlanner
from engine.sql.cacheable import Unsupported
from engine.sql.catalog import Catalog, Column, Relation
from engine.values import oids as T

ROOT = Path(__file__).resolve().parents[1]
TYPES = {"int4": T.INT4, "int8": T.INT8, "int2": T.INT2, "text": T.TEXT, "varchar": T.VARCHAR,
         "bool": T.BOOL, "timestamp": T.TIMESTAMP, "numeric": T.NUMERIC, "date": T.DATE}


def catalog_from_ddl(ddl: str) -> Catalog:
    """User tables of a CREATE TABLE script as a Catalog (C collation, made-up oids)."""
    relations: list[Relation] = []
    for oid, raw in enumerate(parse_sql(ddl), start=20000):
        stmt: Any = raw.stmt
        if type(stmt).__name__ == "ViewStmt":
            relations.append(_view(Catalog(tuple(relations)), oid, stmt))
            continue
        cols, pk = [], []
        for elt in stmt.tableElts:
            if type(elt).__name__ == "Constraint":
                pk = [k.sval for k in elt.keys]
                continue
            type_oid = TYPES[elt.typeName.names[-1].sval]
            constraints = [c.contype.name for c in (elt.constraints or ())]
            if "CONSTR_PRIMARY" in constraints:
                pk = [elt.colname]
            cols.append(Column(elt.colname, type_oid,
                               collation="C" if type_oid in (T.TEXT, T.VARCHAR) else None,
                               not_null="CONSTR_NOTNULL" in constraints))
        relations.append(Relation(oid, "public", stmt.relation.relname, tuple(cols), tuple(pk)))
    return Catalog(tuple(relations))


def _view(catalog: Catalog, oid: int, stmt: Any) -> Relation:
    """A view of the DDL: its SELECT as text, its columns as the planner types them."""
    sql = RawStream()(stmt.query)
    answer = QueryPlanner(catalog).classify(sql)
    assert not isinstance(answer.query, Unsupported), answer.query
    cols = tuple(Column(c.name, c.type_oid, collation="C" if c.type_oid == T.TEXT else None)
                 for c in answer.query.plan.reader.columns)
    return Relation(oid, "public", stmt.view.relname, cols, kind="v", view_sql=sql)


def corpus() -> list[str]:
    text = "\n".join(x for x in (ROOT / "tests/corpus/queries.sql").read_text().splitlines()
                     if not x.startswith("--"))
    return [q.strip() for q in text.split(";") if q.strip()]


def _variant(planner: QueryPlanner, q: str) -> str:
    """``q`` with its lifted integer literals changed (same identity, new exact text)."""
    answer = planner.classify(q)
    lifted = getattr(answer.query, "plan", None)
    out = q
    for i in sorted(lifted.lifted if lifted else (), reverse=True):
        lit = answer.parsed.literals[i]
        if lit.kind == "int" and lit.text is not None:
            out = out[:lit.location] + str(int(lit.text) + 100) + out[lit.location + len(lit.text):]
    return out


def _time(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def run(repeat: int) -> dict[str, float]:
    catalog = catalog_from_ddl((ROOT / "tests/corpus/schema.sql").read_text())
    queries = [q for q in corpus()
               if not isinstance(QueryPlanner(catalog).classify(q).query, Unsupported)]
    new_shape: list[float] = []
    known_shape: list[float] = []
    repeated: list[float] = []
    for _ in range(repeat):
        for q in queries:
            planner = QueryPlanner(catalog)
            new_shape.append(_time(lambda q=q, p=planner: p.classify(q)))
            variant = _variant(planner, q)
            if variant != q:  # only statements with a lifted integer literal
                known_shape.append(_time(lambda v=variant, p=planner: p.classify(v)))
            repeated.append(_time(lambda q=q, p=planner: p.classify(q)))
    return {"statements": float(len(queries)),
            "new_shape_ms": statistics.median(new_shape) * 1e3,
            "new_shape_p90_ms": statistics.quantiles(new_shape, n=10)[-1] * 1e3,
            "known_shape_us": statistics.median(known_shape) * 1e6,
            "repeated_text_us": statistics.median(repeated) * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks/plan.md"))
    args = ap.parse_args()
    r = run(args.repeat)
    table = (
        "| case | median |\n|---|---:|\n"
        f"| new query shape (parse + screen + plan + rules) | {r['new_shape_ms']:.2f} ms |\n"
        f"| new query shape, p90 | {r['new_shape_p90_ms']:.2f} ms |\n"
        f"| new text of a known identity | {r['known_shape_us']:.0f} µs |\n"
        f"| repeated text (exact-text cache) | {r['repeated_text_us']:.2f} µs |\n")
    doc = ("# Planner benchmark\n\n"
           f"Command: `.venv/bin/python bench/plan.py --repeat {args.repeat}` "
           f"({int(r['statements'])} supported corpus statements, each timed {args.repeat}x; "
           "one run on the shared 2-core machine).\n\n"
           "Goal: a new query shape plans in under 5 ms (median).\n\n" + table)
    Path(args.out).write_text(doc)
    print(table)
    print(f"new_shape_ms={r['new_shape_ms']:.3f} known_shape_us={r['known_shape_us']:.1f} "
          f"repeated_text_us={r['repeated_text_us']:.2f}")


if __name__ == "__main__":
    main()
