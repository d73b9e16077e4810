"""SQLAlchemy ORM benchmark: a read-heavy ORM workload in default settings (every session a
transaction block) directly against PostgreSQL and through weir (``--caching auto
--auto-after 1``), in one invocation. Reports reads per second, the ratio to direct, and
weir's hit rate (the share of ORM reads EXPLAIN LAST STATEMENT says the cache served,
measured in a pass of its own). Writes
``docs/benchmarks/orm.md``.

    .venv/bin/python bench/orm.py [--seconds 10] [--rows 1000]

The workload: each ORM session (``with Session(engine)``) reads 10 items by primary key
(``session.get``, Zipf-like keys) and every 20th session also updates one and commits, so
19 of 20 blocks only read (they end with ROLLBACK, as SQLAlchemy's Session does) and 1 in
20 writes.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import orm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from demo.procs import Weir  # noqa: E402
from proxy import localpg  # noqa: E402


class Base(orm.DeclarativeBase):
    pass


class Item(Base):
    __tablename__ = "items"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    name: orm.Mapped[str]
    n: orm.Mapped[int]


def workload(url: str, seconds: float, rows: int, seed: int = 1,
             explain: bool = False) -> tuple[int, int]:
    """Run the ORM workload for ``seconds``; returns the number of ORM reads and, with
    ``explain`` (through weir), how many of them weir's EXPLAIN LAST STATEMENT says the
    cache served."""
    rng = random.Random(seed)
    engine = sa.create_engine(url)
    reads = sessions = cached = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            sessions += 1
            with orm.Session(engine) as session:
                for _ in range(10):
                    key = min(rows, int(rng.paretovariate(1.2)))
                    item = session.get(Item, key, populate_existing=True)
                    assert item is not None
                    reads += 1
                    if explain:
                        last = session.connection().exec_driver_sql(
                            "EXPLAIN LAST STATEMENT").one()
                        cached += last[0] == "cache"
                if sessions % 20 == 0:
                    item.n += 1
                    session.commit()
    finally:
        engine.dispose()
    return reads, cached


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=ROOT / "docs/benchmarks/orm.md")
    args = parser.parse_args()
    cluster = localpg.start()
    weir: Weir | None = None
    try:
        cluster.psql("CREATE DATABASE orm")
        cluster.psql("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, "
                     "n int NOT NULL); INSERT INTO items SELECT g, 'item ' || g, g "
                     f"FROM generate_series(1, {args.rows}) g", "orm")
        weir = Weir(cluster.dsn(dbname="orm"), "--caching", "auto", "--auto-after", "1")
        through = weir.dsn("orm")
        direct_url = cluster.dsn(dbname="orm").replace("postgresql://", "postgresql+psycopg://")
        through_url = through.replace("postgresql://", "postgresql+psycopg://")
        workload(through_url, 3.0, args.rows, seed=7)  # warm: caches made and filled
        direct, _ = workload(direct_url, args.seconds, args.rows)
        served, _ = workload(through_url, args.seconds, args.rows)
        # the hit rate from a pass of its own (asking after every read costs a round trip)
        sampled, cached = workload(through_url, args.seconds / 2, args.rows, seed=3,
                                   explain=True)
        hit_rate = cached / sampled
    finally:
        if weir is not None:
            weir.stop()
        cluster.stop()
    direct_rate, weir_rate = direct / args.seconds, served / args.seconds
    table = ("| | ORM reads/s | ratio to direct | hit rate |\n|---|---:|---:|---:|\n"
             f"| PostgreSQL directly | {direct_rate:,.0f} | 1.00 | |\n"
             f"| through weir (auto) | {weir_rate:,.0f} | {weir_rate / direct_rate:.2f} | "
             f"{hit_rate:.1%} |\n")
    print(table)
    args.out.write_text(
        "# SQLAlchemy ORM, read-heavy, default settings\n\n"
        f"`.venv/bin/python bench/orm.py --seconds {args.seconds:g} --rows {args.rows}` "
        "(one client thread; PostgreSQL and weir on the same 2-CPU machine, shared with "
        "other work while it ran; one short run, so figures move by ±10% or more).\n\n"
        "Every ORM session is a transaction block (SQLAlchemy always begins one): 10 "
        "`session.get` by primary key (Zipf-like keys), and every 20th session updates one "
        "item and commits. weir serves the READ COMMITTED blocks that have not written from "
        "its caches (`proxy/transactions.py`); the hit rate is the share of ORM reads that "
        "`EXPLAIN LAST STATEMENT` says the cache served (a separate pass).\n\n"
        + table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
