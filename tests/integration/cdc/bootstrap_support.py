"""Shared by the bootstrap integration tests: a table with awkward values, a writer that
changes it while a load runs (inserts, updates, deletes and key changes across partitions),
and the exactness check (the load patched from the slot equals the upstream, row checksums of
every row)."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import psycopg

from cdc.bootstrap import replay

#: Modest on purpose (CI time): 200k rows still gives every partition tens of thousands.
ROWS = 200_000


def create_table(dsn: str, name: str, rows: int = ROWS) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {name} (id bigint PRIMARY KEY, v text, n numeric, f float8,"
            " b bool, ts timestamptz, small int2, j jsonb)")
        conn.execute(
            f"INSERT INTO {name} SELECT g, CASE WHEN g % 97 = 0 THEN E'tab\\there\\nnl\\\\'"
            " WHEN g % 89 = 0 THEN NULL ELSE 'v' || g END, g * 1.25, g / 3.0, g % 2 = 0,"
            " timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second', (g % 30000)::int2,"
            f" jsonb_build_object('g', g) FROM generate_series(1, {rows}) g")
        conn.execute(f"ANALYZE {name}")


class Writer:
    """Random single-row transactions on ``table`` in a thread until ``stop()``."""

    def __init__(self, dsn: str, table: str, rows: int = ROWS, seed: int = 7) -> None:
        self.dsn, self.table, self.rows = dsn, table, rows
        self.random = random.Random(seed)
        self.done = threading.Event()
        self.commits = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Writer:
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                next_id = self.rows * 10
                while not self.done.is_set():
                    next_id += 1
                    self._one(conn, next_id)
                    self.commits += 1
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def _one(self, conn: psycopg.Connection[Any], next_id: int) -> None:
        r, t = self.random, self.table
        k = r.randint(1, self.rows)
        op = r.random()
        if op < 0.3:
            conn.execute(f"INSERT INTO {t} (id, v, n, b) VALUES (%s, %s, %s, true)"
                         " ON CONFLICT (id) DO NOTHING",
                         (next_id if op < 0.2 else r.randint(1, self.rows), f"new{next_id}",
                          r.randint(0, 10**6)))
        elif op < 0.6:
            conn.execute(f"UPDATE {t} SET v = %s, f = f + 1 WHERE id = %s", (f"u{next_id}", k))
        elif op < 0.8:
            conn.execute(f"DELETE FROM {t} WHERE id = %s", (k,))
        else:  # moves a row to another partition (unless the target key exists)
            conn.execute(f"UPDATE {t} SET id = %s WHERE id = %s AND NOT EXISTS"
                         f" (SELECT 1 FROM {t} WHERE id = %s)",
                         (self.rows + 1 - k, k, self.rows + 1 - k))

    def stop(self) -> int:
        self.done.set()
        self.thread.join(30)
        if self.error is not None:
            raise self.error
        return self.commits


def assert_exact(out: str | Path, dsn: str) -> replay.Replica:
    """The load, patched with every change the slot holds now, equals the upstream tables."""
    replica = replay.Replica.load(out)
    replay.catch_up(replica, dsn)
    for table in replica.tables.values():
        assert table.checksum() == replay.upstream_checksum(dsn, table.spec), table.spec.name
    return replica
