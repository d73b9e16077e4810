"""The planner against PostgreSQL on a corpus of realistic SELECTs (news site, shop, forum).

Every statement of tests/corpus/queries.sql is classified. For each supported one, the planned
IR evaluated from scratch over the same random data (engine.plan.evaluate) must equal what
PostgreSQL returns for the statement (bags, or lists under ORDER BY). The fraction supported
is printed; the unsupported ones must each carry a reason.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from psycopg.types.string import TextLoader

from engine.plan.evaluate import evaluate_reader
from engine.plan.queries import INTERNAL_ERROR, QueryPlanner, merge_lookups
from engine.sql.cacheable import Unsupported
from engine.sql.catalog import CATALOG_QUERY, Catalog
from engine.values import Interval
from engine.values.oids import ARRAY_ELEMENT

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
WORDS = ["How", "rust", "python", "why", "a", "the", "Postgres", "cache", "fast", "?", "news",
         "shop", "pro", "mini", "deal", "help", "forum", "Ask", "show", "HN"]


def load_queries() -> list[tuple[str, list[Any]]]:
    out: list[tuple[str, list[Any]]] = []
    params: list[Any] = []
    buf: list[str] = []
    for line in (CORPUS / "queries.sql").read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("-- params:"):
            params = json.loads(stripped.removeprefix("-- params:"))
            continue
        if not stripped or stripped.startswith("--"):
            continue
        buf.append(stripped)
        if stripped.endswith(";"):
            out.append((" ".join(buf)[:-1], params))
            buf, params = [], []
    return out


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, n)))


def _ts(rng: random.Random) -> datetime:
    return datetime(2024, 1, 1) + timedelta(minutes=rng.randint(0, 60 * 24 * 100))


def _maybe(rng: random.Random, value: Any, p: float = 0.2) -> Any:
    return None if rng.random() < p else value


def generate(rng: random.Random) -> dict[str, list[tuple[Any, ...]]]:
    names = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy"]
    data: dict[str, list[tuple[Any, ...]]] = {}
    data["users"] = [(i, names[i - 1], _maybe(rng, f"{names[i - 1]}@example.com"),
                      rng.choice([0, 5, 50, 150, 500]), i in (1, 4), _ts(rng))
                     for i in range(1, 11)]
    data["stories"] = [(i, rng.randint(1, 8), _words(rng, 4), _maybe(rng, f"https://x/{i}"),
                        rng.randint(0, 60), rng.random() < 0.7, _ts(rng)) for i in range(1, 31)]
    data["comments"] = [(i, rng.randint(1, 12), rng.randint(1, 10),
                         _maybe(rng, rng.randint(1, 40), 0.6), _words(rng, 6),
                         _maybe(rng, rng.randint(-3, 20)), _ts(rng)) for i in range(1, 81)]
    data["votes"] = [(i, rng.randint(1, 12), rng.randint(1, 10), rng.choice([1, 1, 1, -1]))
                     for i in range(1, 151)]
    data["tags"] = [(i, n) for i, n in enumerate(["rust", "python", "db", "web", "ask", "show"], 1)]
    data["story_tags"] = sorted({(rng.randint(1, 20), rng.randint(1, 6)) for _ in range(40)})
    data["customers"] = [(i, names[i - 1].title(), _maybe(rng, rng.choice(["FR", "DE", "US"])),
                          rng.random() < 0.3) for i in range(1, 11)]
    data["categories"] = [(i, f"cat{i}", None if i <= 2 else rng.randint(1, 2))
                          for i in range(1, 7)]
    data["products"] = [(i, rng.randint(1, 6), _words(rng, 2) + f" {i}",
                         Decimal(rng.choice(["9.99", "19.99", "5.00", "49.50", "120.00", "0.99"])),
                         rng.choice([0, 3, 12, 40]), rng.random() < 0.2, _labels(rng))
                        for i in range(1, 26)]
    data["orders"] = [(i, rng.randint(1, 10), rng.choice(["paid", "shipped", "cancelled", "new"]),
                       _maybe(rng, Decimal(rng.randint(100, 30000)) / 100),
                       date(2024, 1, 1) + timedelta(days=rng.randint(0, 100)))
                      for i in range(1, 41)]
    items = sorted({(rng.randint(1, 40), rng.randint(1, 25)) for _ in range(80)})
    data["order_items"] = [(o, p, rng.randint(1, 5), Decimal(rng.choice(["9.99", "19.99", "5.00"])))
                           for o, p in items]
    data["reviews"] = [(i, rng.randint(1, 10), rng.randint(1, 10), rng.randint(1, 5),
                        _maybe(rng, _words(rng, 5), 0.3)) for i in range(1, 41)]
    data["forums"] = [(1, "General", "general"), (2, "Help", "help"), (3, "Off topic", "ot"),
                      (4, "Meta", "meta")]
    data["threads"] = [(i, rng.randint(1, 4), _words(rng, 4), rng.randint(1, 10),
                        rng.random() < 0.2, rng.randint(0, 8), _ts(rng)) for i in range(1, 21)]
    data["posts"] = [(i, rng.randint(1, 20), rng.randint(1, 10), _words(rng, 8) + " ",
                      rng.random() < 0.3, _ts(rng)) for i in range(1, 81)]
    data["activities"] = [(i, rng.randint(1, 10), _maybe(rng, Jsonb({
        "kind": rng.choice(["view", "vote", "comment"]), "n": rng.choice([1, 1.0, 2.50]),
        "tags": rng.sample(["rust", "db", "web"], rng.randint(0, 2)),
        "user": {"name": rng.choice([*names[:3], None])}}), 0.1), _raw_json(rng, i))
        for i in range(1, 41)]
    first = ["zoë", "Zoe", "émile", "Emile", "eve", "Ève", "o'brien", "OBrien", "jo", "Jo-Ann",
             "joann", "łukasz", "Luke", "ß", "ss", "æsa", "Aesa", "mia", "Mía", "noël"]
    data["contacts"] = [(i, rng.randint(1, 10), rng.choice(first) + rng.choice(["", " A.", "-b"]),
                         _maybe(rng, rng.choice(["Zürich", "zurich", "Åre", "are", "New York",
                                                 "newyork", "Köln", "koln", "Bogotá", "bogota"])),
                         rng.choice(first))
                        for i in range(1, 41)]
    return data


def _labels(rng: random.Random) -> list[str | None] | None:
    return _maybe(rng, [rng.choice(["new", "sale", "eco", None]) for _ in range(rng.randint(0, 3))])


def _raw_json(rng: random.Random, i: int) -> str | None:
    """A json document as an application might write it: odd spacing, a duplicate key,
    numbers and escapes as written (json keeps its text)."""
    spacing = rng.choice([(",", ":"), (", ", ": "), (" ,\n ", " : ")])
    doc = {"kind": rng.choice(["view", "vote", "comment"]), "n": rng.choice([1, 2.50, -0.0]),
           "tags": rng.sample(["rust", "db", "w\u00e9b"], rng.randint(0, 2)),
           "user": {"name": rng.choice(["al\"ice", "bob", None])}}
    text = json.dumps(doc, separators=spacing)
    if i % 3 == 0:
        text = '{"kind" : "old",' + text[1:]  # a duplicate key: the last one counts
    return _maybe(rng, text, 0.1)


def populate(conn: psycopg.Connection[Any], data: dict[str, list[tuple[Any, ...]]]) -> None:
    for type_name in ("json", "jsonb"):  # as the text PostgreSQL prints
        conn.adapters.register_loader(type_name, TextLoader)
    conn.execute((CORPUS / "schema.sql").read_text())
    for table, rows in data.items():
        marks = ", ".join(["%s"] * len(rows[0]))
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)


def run_pg(conn: psycopg.Connection[Any], sql: str, params: list[Any]) -> tuple[
        list[tuple[str, int]], list[tuple[Any, ...]]]:
    """PostgreSQL's result columns (name, type oid) and rows for ``sql``."""
    order = [int(n) for n in re.findall(r"\$(\d+)", sql)]
    text = re.sub(r"\$\d+", "%s", sql.replace("%", "%%"))
    cur = conn.execute(text, [params[n - 1] for n in order])
    columns = [(d.name, d.type_code) for d in cur.description or []]
    return columns, [tuple(_tuples(v) for v in r) for r in cur.fetchall()]


def _tuples(value: Any) -> Any:
    """psycopg's lists as the engine's arrays (nested tuples), its timedeltas as the
    engine's intervals (psycopg has no months: PostgreSQL's month-free intervals only)."""
    if isinstance(value, timedelta):
        return Interval(0, value.days, value.seconds * 1_000_000 + value.microseconds)
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def same_ordered(reader: Any, got: list[Any], expected: list[Any], cut: bool = False) -> bool:
    """Ordered results are equal up to the order among rows tied on every sort key (and,
    at a LIMIT/OFFSET boundary, which tied rows made the cut): any such answer is one
    PostgreSQL may give. Needs the sort columns in the output; otherwise exact equality.
    ``cut``: the host cut a page (a parameter Page), as a LIMIT does."""
    if got == expected:
        return True
    try:
        cols = [reader.output.index(k.column) for k in reader.order_by]
    except ValueError:
        return False
    if any(c >= len(row) for row in got + expected for c in cols):
        return False  # a sort column the host dropped (hidden)

    def runs(rows: list[Any]) -> list[tuple[tuple[Any, ...], list[Any]]]:
        out: list[tuple[tuple[Any, ...], list[Any]]] = []
        for row in rows:
            key = tuple(row[c] for c in cols)
            if out and out[-1][0] == key:
                out[-1][1].append(row)
            else:
                out.append((key, [row]))
        return out

    a, b = runs(got), runs(expected)
    if [k for k, _ in a] != [k for k, _ in b]:
        return False
    cut = cut or reader.limit is not None
    offset = reader.offset or getattr(reader.input, "offset", 0)
    for i, ((_, ra), (_, rb)) in enumerate(zip(a, b, strict=True)):
        boundary = cut and (i == len(a) - 1 or (i == 0 and offset > 0))
        if len(ra) != len(rb) or (not boundary and Counter(ra) != Counter(rb)):
            return False
    return True


def test_corpus_matches_postgres(pg: Any, dbname: str) -> None:
    rng = random.Random(20261121)
    with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as conn:
        populate(conn, generate(rng))
        catalog = Catalog.from_rows(conn.execute(CATALOG_QUERY).fetchall())
        tables = {rel.oid: [tuple(map(_tuples, r)) for r in conn.execute(
            f'SELECT * FROM "{rel.schema}"."{rel.name}"').fetchall()]
            for rel in catalog.relations}
        planner = QueryPlanner(catalog)
        queries = load_queries()
        supported, nonempty, failures, reasons = 0, 0, [], Counter[str]()
        # statements that read the session TimeZone are planned in it (a DST zone)
        conn.execute("SET TimeZone = 'America/New_York'")
        for sql, params in queries:
            answer = planner.classify(sql, ("public",), "America/New_York")
            if isinstance(answer.query, Unsupported):
                assert answer.query.reason
                assert not answer.query.reason.startswith(INTERNAL_ERROR), sql
                reasons[answer.query.reason] += 1
                continue
            supported += 1
            reader = answer.query.plan.reader
            columns, expected = run_pg(conn, sql, params)
            ours = [(c.name, c.type_oid) for c in answer.query.plan.columns]
            if ours != columns:
                failures.append(f"{sql}\n  pg columns:   {columns}\n  weir columns: {ours}")
            nonempty += bool(expected)
            keys = answer.keys(params)
            assert keys is not None, sql
            try:
                got = merge_lookups(answer.query.plan,
                                    [evaluate_reader(reader, tables, k) for k in keys], params)
            except Exception as exc:  # report every failing query at once
                failures.append(f"{sql}\n  evaluator raised {exc!r}")
                continue
            same = same_ordered(reader, got, expected,
                                answer.query.plan.page is not None) if reader.order_by else (
                Counter(got) == Counter(expected))
            if not same:
                failures.append(f"{sql}\n  pg:   {expected[:6]}\n  weir: {got[:6]}\n"
                                f"{answer.query.explain}")
        print(f"\ncorpus: {supported}/{len(queries)} supported "
              f"({100 * supported / len(queries):.0f}%), {nonempty} with a non-empty result")
        for reason, n in reasons.most_common():
            print(f"  unsupported x{n}: {reason}")
        assert not failures, "\n\n".join(failures)
        assert supported >= len(queries) * 0.6
        assert nonempty >= supported * 0.8  # the comparisons are not vacuous


GOLDEN_SCHEMA = """
CREATE TABLE users (id int4 PRIMARY KEY, username text, email varchar, karma int4,
                    is_admin bool, created_at timestamp);
CREATE TABLE stories (id int8 PRIMARY KEY, author_id int4, title text, url text, score int4,
                      published bool, created_at timestamp);
CREATE TABLE votes (id int8 PRIMARY KEY, story_id int8, user_id int4, value int2);
CREATE TABLE comments (id int8 PRIMARY KEY, story_id int8, author_id int4, body text,
                       score int4, price numeric, rating float8);
CREATE SCHEMA app;
CREATE TABLE app.users (id int4 PRIMARY KEY, handle text);
"""


def describe(conn: psycopg.Connection[Any], sql: str) -> list[tuple[str, int]]:
    """Result columns PostgreSQL reports for ``sql`` (prepared and described, not run)."""
    pgconn = conn.pgconn
    result = pgconn.prepare(b"", sql.encode())
    assert result.error_message == b"", (sql, result.error_message)
    desc = pgconn.describe_prepared(b"")
    return [(desc.fname(i).decode(), desc.ftype(i)) for i in range(desc.nfields)]


def test_golden_plans_report_postgres_columns(pg: Any, dbname: str) -> None:
    """Every supported golden case: the plan's output names and types are PostgreSQL's."""
    golden = Path(__file__).resolve().parent.parent / "golden" / "plan"
    with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as conn:
        conn.execute(GOLDEN_SCHEMA)
        catalog = Catalog.from_rows(conn.execute(CATALOG_QUERY).fetchall())
        planner = QueryPlanner(catalog)
        checked = 0
        for path in sorted(golden.glob("*.txt")):
            head = path.read_text().partition("----\n")[0]
            sql = "\n".join(x for x in head.splitlines() if not x.startswith("--")).strip()
            answer = planner.classify(sql, ("public",))
            if isinstance(answer.query, Unsupported):
                continue
            ours = [(c.name, c.type_oid) for c in answer.query.plan.columns]
            assert ours == describe(conn, sql), path.name
            checked += 1
        assert checked >= 50


def test_fill_queries_fetch_exactly_the_keyed_rows(pg: Any, dbname: str) -> None:
    """Fill SQL for each corpus table, keyed on each column and on the primary key, returns
    exactly the rows whose key columns equal the key (NULL keys match nothing)."""
    from engine.dataflow.fills import FillRequest
    from engine.plan.fill_sql import fill_query
    from engine.plan.from_clause import table_ref

    rng = random.Random(7)
    with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as conn:
        populate(conn, generate(rng))
        catalog = Catalog.from_rows(conn.execute(CATALOG_QUERY).fetchall())
        checked = 0
        for rel in catalog.relations:
            if rel.kind != "r":
                continue
            ref = table_ref(rel)
            rows = [tuple(map(_tuples, r)) for r in conn.execute(
                f'SELECT * FROM "{rel.schema}"."{rel.name}"').fetchall()]
            keyings = [(i,) for i, c in enumerate(rel.columns)  # no keys on json or arrays
                       if c.type_oid != 114 and c.type_oid not in ARRAY_ELEMENT] + [
                ref.primary_key, ()]
            for cols in keyings:
                key = tuple(rows[rng.randrange(len(rows))][i] for i in cols)
                sql, params = fill_query(FillRequest(ref, cols, key))
                text = re.sub(r"\$\d+", "%s", sql)  # asyncpg's $n, psycopg's %s (in order)
                got = Counter(tuple(map(_tuples, r))
                              for r in conn.execute(text, params).fetchall())
                want = Counter(r for r in rows if all(
                    r[i] is not None and r[i] == v for i, v in zip(cols, key, strict=True)))
                assert got == want, (sql, params)
                checked += 1
        checked += _check_prefetch(conn, catalog, rng)
        assert checked > 80


# --------------------------------------------------------------------- random queries
EDGES = [("stories", "author_id", "users", "id"), ("comments", "story_id", "stories", "id"),
         ("votes", "story_id", "stories", "id"), ("orders", "customer_id", "customers", "id"),
         ("order_items", "order_id", "orders", "id"),
         ("order_items", "product_id", "products", "id"),
         ("products", "category_id", "categories", "id"), ("threads", "forum_id", "forums", "id"),
         ("posts", "thread_id", "threads", "id"), ("reviews", "product_id", "products", "id"),
         ("comments", "author_id", "users", "id"), ("posts", "author_id", "users", "id")]
INT_TYPES = {20, 21, 23}


def _predicate(rng: random.Random, cols: list[tuple[str, int]]) -> str:
    name, oid = rng.choice(cols)
    if oid in INT_TYPES:
        n = rng.randint(0, 12)
        return rng.choice([f"{name} {rng.choice(['=', '<>', '<', '>', '<=', '>='])} {n}",
                           f"{name} BETWEEN {n} AND {n + rng.randint(0, 6)}",
                           f"{name} IN ({n}, {n + 2}, {n + 5})", f"{name} IS NULL",
                           f"{name} IS NOT NULL", f"{name} + 1 > {n}"])
    if oid == 16:
        return rng.choice([name, f"NOT {name}", f"{name} IS NOT TRUE"])
    if oid == 25:
        word = rng.choice(WORDS)
        return rng.choice([f"{name} = '{word}'", f"{name} LIKE '%{word[:2]}%'",
                           f"{name} ILIKE '{word[:1]}%'", f"{name} IS NULL",
                           f"{name} > '{word}'"])
    return f"{name} IS NOT NULL"


#: (table, column) -> (child table, child column) the child references it by.
CHILDREN = [(parent, pcol, child, ccol) for child, ccol, parent, pcol in EDGES]


def _subquery_predicates(rng: random.Random, edge: tuple[str, str, str, str],
                         tables: list[tuple[str, str]]) -> list[str]:
    """Sometimes an EXISTS or IN (SELECT ...) conjunct over a related table."""
    if rng.random() > 0.25:
        return []
    table, alias = rng.choice(tables)
    related = [c for c in CHILDREN if c[0] == table]
    if not related:
        return []
    _, pcol, child, ccol = rng.choice(related)
    extra = rng.choice(["", f" AND x.{ccol} > 3", f" AND x.{ccol} % 2 = 0"])
    if rng.random() < 0.5:
        return [f"EXISTS (SELECT 1 FROM {child} x WHERE x.{ccol} = {alias}.{pcol}{extra})"]
    return [f"{alias}.{pcol} IN (SELECT x.{ccol} FROM {child} x WHERE x.{ccol} > 0{extra})"]


def _scalar_subquery(rng: random.Random, edge: tuple[str, str, str, str],
                     tables: list[tuple[str, str]]) -> str:
    table, alias = rng.choice(tables)
    related = [c for c in CHILDREN if c[0] == table]
    if not related:
        return "1"
    _, pcol, child, ccol = rng.choice(related)
    agg = rng.choice(["count(*)", f"max(x.{ccol})", f"sum(x.{ccol})", f"count(x.{ccol})"])
    return f"(SELECT {agg} FROM {child} x WHERE x.{ccol} = {alias}.{pcol})"


def random_query(rng: random.Random, catalog: Catalog) -> str:
    edge = rng.choice(EDGES)
    tables = [(edge[0], "a")]
    join = ""
    if rng.random() < 0.6:
        kind = rng.choice(["JOIN", "LEFT JOIN"])
        join = f" {kind} {edge[2]} b ON b.{edge[3]} = a.{edge[1]}"
        tables.append((edge[2], "b"))
    cols: list[tuple[str, int]] = []
    for table, alias in tables:
        rel = catalog.get("public", table)
        assert rel is not None
        cols += [(f"{alias}.{c.name}", c.type_oid) for c in rel.columns
                 if c.type_oid in (16, 20, 21, 23, 25, 1700)]
    preds = [_predicate(rng, cols) for _ in range(rng.randint(0, 3))]
    preds += _subquery_predicates(rng, edge, tables)
    where = ""
    if preds:
        glue = " OR " if rng.random() < 0.25 else " AND "
        where = " WHERE " + glue.join(f"({p})" for p in preds)
    ints = [c for c, o in cols if o in INT_TYPES]
    if rng.random() < 0.4 and ints:
        groups = rng.sample([c for c, _ in cols], rng.randint(1, 2))
        nums = [c for c, o in cols if o in INT_TYPES or o == 1700]
        texts = [c for c, o in cols if o == 25] or ints
        aggs = rng.sample(["count(*)", f"sum({rng.choice(nums)})", f"max({rng.choice(ints)})",
                           f"count(DISTINCT {rng.choice(ints)})", f"min({rng.choice(texts)})",
                           f"avg({rng.choice(nums)})", f"count({rng.choice(texts)})"],
                          rng.randint(1, 3))
        select = ", ".join(groups + aggs)
        tail = f" GROUP BY {', '.join(groups)}"
        if rng.random() < 0.3:
            tail += " HAVING count(*) > 1"
        width = len(groups) + len(aggs)
    else:
        picked = rng.sample(cols, rng.randint(1, min(4, len(cols))))
        items = [c for c, _ in picked]
        texts = [c for c, o in cols if o == 25]
        extras = [f"coalesce({rng.choice(ints)}, 0) * 2" if ints else "1",
                  f"CASE WHEN {_predicate(rng, cols)} THEN 'y' ELSE 'n' END"]
        if texts:
            t = rng.choice(texts)
            extras += [f"lower({t})", f"length({t})", f"substr({t}, 2, 3)", f"{t} || '!'",
                       f"upper(btrim({t}))", f"nullif({t}, 'a')"]
        if rng.random() < 0.5:
            items.append(rng.choice(extras))
        if rng.random() < 0.2:
            items.append(_scalar_subquery(rng, edge, tables))
        select = ("DISTINCT " if rng.random() < 0.2 else "") + ", ".join(items)
        tail = ""
        width = len(items)
    if rng.random() < 0.4:
        order = ", ".join(f"{i} {rng.choice(['ASC', 'DESC'])}" for i in range(1, width + 1))
        tail += f" ORDER BY {order} LIMIT {rng.randint(1, 8)}"
        if rng.random() < 0.3:
            tail += f" OFFSET {rng.randint(1, 4)}"
    return f"SELECT {select} FROM {edge[0]} a{join}{where}{tail}"


def test_random_queries_match_postgres(pg: Any, dbname: str) -> None:
    """Generated joins/filters/aggregates/top-k over the corpus schema: every supported one
    returns PostgreSQL's columns and rows."""
    rng = random.Random(99)
    with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as conn:
        populate(conn, generate(random.Random(5)))
        catalog = Catalog.from_rows(conn.execute(CATALOG_QUERY).fetchall())
        tables = {rel.oid: [tuple(map(_tuples, r)) for r in conn.execute(
            f'SELECT * FROM "{rel.schema}"."{rel.name}"').fetchall()]
            for rel in catalog.relations}
        planner = QueryPlanner(catalog)
        failures: list[str] = []
        supported = 0
        total = 400
        for _ in range(total):
            sql = random_query(rng, catalog)
            answer = planner.classify(sql)
            if isinstance(answer.query, Unsupported):
                assert not answer.query.reason.startswith(INTERNAL_ERROR), sql
                continue
            supported += 1
            columns, expected = run_pg(conn, sql, [])
            reader = answer.query.plan.reader
            keys = answer.keys()
            assert keys is not None, sql
            got = merge_lookups(answer.query.plan,
                                [evaluate_reader(reader, tables, k) for k in keys])
            ours = [(c.name, c.type_oid) for c in answer.query.plan.columns]
            same = same_ordered(reader, got, expected,
                                answer.query.plan.page is not None) if reader.order_by else (
                Counter(got) == Counter(expected))
            if ours != columns or not same:
                failures.append(f"{sql}\n  pg:   {columns} {expected[:5]}\n"
                                f"  weir: {ours} {got[:5]}")
        print(f"\nrandom: {supported}/{total} supported")
        assert not failures, "\n\n".join(failures[:10])
        assert supported >= total * 0.9


@dataclass(frozen=True)
class _Via:
    """The shape of the engine's prefetch source (``FillRequest.via``)."""

    table: Any
    columns: tuple[int, ...]
    key: tuple[Any, ...]
    join_columns: tuple[int, ...]


@dataclass(frozen=True)
class _Prefetch:
    table: Any
    columns: tuple[int, ...]
    key: tuple[Any, ...]
    via: _Via


def _check_prefetch(conn: Any, catalog: Catalog, rng: random.Random) -> int:
    """Prefetch SQL (rows of a table joining the rows another table has for a key) returns
    exactly those rows, for every corpus join edge."""
    from engine.plan.fill_sql import fill_query
    from engine.plan.from_clause import table_ref

    checked = 0
    for child, ccol, parent, pcol in EDGES:
        crel, prel = catalog.get("public", child), catalog.get("public", parent)
        assert crel is not None and prel is not None
        cref, pref = table_ref(crel), table_ref(prel)
        ci = [c.name for c in crel.columns].index(ccol)
        pi = [c.name for c in prel.columns].index(pcol)
        child_rows = [tuple(r) for r in conn.execute(f"SELECT * FROM {child}").fetchall()]
        key = (child_rows[rng.randrange(len(child_rows))][cref.primary_key[0]],)
        request = _Prefetch(pref, (pi,), (), _Via(cref, (cref.primary_key[0],), key, (ci,)))
        sql, params = fill_query(request)  # type: ignore[arg-type]
        got = Counter(tuple(map(_tuples, r))
                      for r in conn.execute(re.sub(r"\$\d+", "%s", sql), params))
        values = {r[ci] for r in child_rows if r[cref.primary_key[0]] == key[0]}
        want = Counter(tuple(map(_tuples, r)) for r in conn.execute(f"SELECT * FROM {parent}")
                       if r[pi] in values and r[pi] is not None)
        assert got == want, sql
        checked += 1
        # a join on no columns (CROSS JOIN): every row, when the source has one for the key
        for probe in (key, (-1,)):
            request = _Prefetch(pref, (), (), _Via(cref, (cref.primary_key[0],), probe, ()))
            sql, params = fill_query(request)  # type: ignore[arg-type]
            got = Counter(tuple(map(_tuples, r))
                      for r in conn.execute(re.sub(r"\$\d+", "%s", sql), params))
            present = any(r[cref.primary_key[0]] == probe[0] for r in child_rows)
            want = Counter(tuple(map(_tuples, r)) for r in conn.execute(f"SELECT * FROM {parent}")
                           if present)
            assert got == want, sql
            checked += 1
    return checked


def _dataflow_read(engine: Any, tables: dict[int, list[tuple[Any, ...]]], name: str,
                   key: tuple[Any, ...]) -> list[tuple[Any, ...]] | str:
    """One read through the dataflow, fills answered from the full data at once (a snapshot
    that sees everything, the marker passed immediately)."""
    from engine.api import ReadFailed, ReadReady
    from engine.changes import Snapshot
    from engine.dataflow.fills import RunFill

    def matching(oid: int, cols: tuple[int, ...], key: tuple[Any, ...]) -> list[Any]:
        return [r for r in tables[oid] if all(
            r[c] is not None and r[c] == v for c, v in zip(cols, key, strict=True))]

    def answer(q: Any) -> tuple[Any, ...]:
        via = getattr(q, "via", None)
        if via is None:
            return tuple(matching(q.table.oid, q.columns, q.key))
        values = {tuple(r[c] for c in via.join_columns)
                  for r in matching(via.table.oid, via.columns, via.key)}
        return tuple(r for r in tables[q.table.oid]
                     if tuple(r[c] for c in q.columns) in values
                     and all(r[c] is not None for c in q.columns))

    res = engine.read(name, key)
    if res.rows is not None:
        return list(res.rows)
    pending = list(res.effects)
    while pending:
        new: list[Any] = []
        for eff in pending:
            if isinstance(eff, RunFill):
                rows = tuple(answer(q) for q in eff.requests)
                new += engine.fill_response(eff.fill_id, Snapshot(10, 10), rows)
                new += engine.position_reached(eff.fill_id)
            elif isinstance(eff, ReadReady) and eff.cache == name and tuple(eff.key) == key:
                return list(eff.rows)
            elif isinstance(eff, ReadFailed):
                return f"read failed: {eff.message}"
        pending = new
    return "no answer"


def test_corpus_plans_run_in_the_dataflow(pg: Any, dbname: str) -> None:
    """Every supported corpus plan compiles into the engine's dataflow, and reads through it
    (partial state, fills) return PostgreSQL's rows."""
    from engine.api import Engine

    with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as conn:
        populate(conn, generate(random.Random(20261121)))
        catalog = Catalog.from_rows(conn.execute(CATALOG_QUERY).fetchall())
        tables = {rel.oid: [tuple(map(_tuples, r)) for r in conn.execute(
            f'SELECT * FROM "{rel.schema}"."{rel.name}"').fetchall()]
            for rel in catalog.relations}
        planner = QueryPlanner(catalog)
        engine = Engine()
        failures: list[str] = []
        for i, (sql, params) in enumerate(load_queries()):
            answer = planner.classify(sql)
            if isinstance(answer.query, Unsupported):
                continue
            engine.add_cache(f"c{i}", answer.query.plan.reader)
            keys = answer.keys(params)
            assert keys is not None, sql
            parts = [_dataflow_read(engine, tables, f"c{i}", k) for k in keys]
            if any(isinstance(p, str) for p in parts):
                failures.append(f"{sql}\n  {parts}")
                continue
            got = merge_lookups(answer.query.plan, parts, params)  # type: ignore[arg-type]
            expected = run_pg(conn, sql, params)[1]
            reader = answer.query.plan.reader
            if not (same_ordered(reader, got, expected, answer.query.plan.page is not None)
                    if reader.order_by else Counter(got) == Counter(expected)):
                failures.append(f"{sql}\n  pg:       {expected[:5]}\n  dataflow: {got[:5]}")
        assert not failures, "\n\n".join(failures[:10])
