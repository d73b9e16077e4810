"""Regenerate tests/unit/cdc/golden.json from a real PostgreSQL (run by hand, not a test).

    .venv/bin/python -m tests.unit.cdc.capture_golden

Starts a throw-away cluster, runs a scripted workload covering every pgoutput message type,
and stores each message's hex payload with a label, via pg_logical_slot_peek_binary_changes.
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg

from proxy import localpg

WORKLOAD = [
    "CREATE TABLE pk (id int PRIMARY KEY, name text, big text, n numeric, ts timestamptz)",
    "ALTER TABLE pk ALTER COLUMN big SET STORAGE EXTERNAL",
    "CREATE TABLE nopk (a int, b text)",
    "CREATE TABLE full_ (id int PRIMARY KEY, v text)",
    "ALTER TABLE full_ REPLICA IDENTITY FULL",
    "CREATE TYPE mood AS ENUM ('sad', 'ok')",
    "CREATE TABLE typed (id int PRIMARY KEY, m mood)",
    "CREATE PUBLICATION golden_pub FOR ALL TABLES",
    "SELECT pg_create_logical_replication_slot('golden', 'pgoutput')",
    "INSERT INTO pk VALUES (1, 'one', repeat('x', 5000), 1.50, '2020-01-02 03:04:05+00'),"
    " (2, NULL, 'small', 'NaN', NULL)",
    "UPDATE pk SET name = 'uno' WHERE id = 1",
    "UPDATE pk SET id = 10 WHERE id = 2",
    "DELETE FROM pk WHERE id = 10",
    "INSERT INTO nopk VALUES (1, 'a')",
    "INSERT INTO full_ VALUES (1, 'v1')",
    "UPDATE full_ SET v = 'v2' WHERE id = 1",
    "DELETE FROM full_ WHERE id = 1",
    "INSERT INTO typed VALUES (1, 'ok')",
    "TRUNCATE pk, full_ RESTART IDENTITY CASCADE",
    "SELECT pg_logical_emit_message(true, 'weir', 'barrier-1')",
    "SELECT pg_logical_emit_message(false, 'other', '\\x00ff'::bytea)",
    "ALTER TABLE pk ADD COLUMN extra int",
    "INSERT INTO pk (id, name, big, extra) VALUES (3, 'héllo', 'b', 7)",
]

PEEK = (
    "SELECT data FROM pg_logical_slot_peek_binary_changes('golden', NULL, NULL,"
    " 'proto_version', '1', 'publication_names', 'golden_pub', 'messages', 'true')"
)


def capture() -> list[str]:
    with localpg.running() as cluster, psycopg.connect(cluster.dsn(), autocommit=True) as conn:
        for sql in WORKLOAD:
            conn.execute(sql)
        rows = conn.execute(PEEK).fetchall()
        conn.execute("SELECT pg_drop_replication_slot('golden')")
    return [bytes(row[0]).hex() for row in rows]


def main() -> None:
    out = Path(__file__).with_name("golden.json")
    out.write_text(json.dumps({"workload": WORKLOAD, "messages": capture()}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
