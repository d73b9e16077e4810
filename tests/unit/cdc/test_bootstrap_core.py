"""The bootstrap's sans-I/O parts: COPY text lines, row checksums, partitioning, the plan's
JSON, the progress line, applying streamed changes per partition snapshot, and layering (what
executors import)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc.bootstrap import copytext
from cdc.bootstrap.plan import Column, Partitioning, Plan, TableSpec, even_bounds
from cdc.bootstrap.progress import Progress, render
from cdc.bootstrap.replay import LoadedTable, Replica
from cdc.pgoutput import Begin, Commit, Delete, Insert, Relation, Truncate, Update
from cdc.pgoutput import Column as PgColumn
from engine.changes import Snapshot

ROOT = Path(__file__).resolve().parents[3]

texts = st.one_of(st.none(), st.text(alphabet=st.characters(blacklist_categories=["Cs"])))


@given(st.lists(texts, min_size=1, max_size=6))
def test_copy_lines_round_trip(values: list[str | None]) -> None:
    line = copytext.format_line(values)
    assert b"\n" not in line
    assert copytext.parse_line(line) == tuple(values)
    assert copytext.row_hash(values) == copytext.line_hash(line)


def test_unescape_covers_postgres_escapes() -> None:
    assert copytext.parse_line(b"a\\tb\\\\c\\101\\x41\\q\t\\N\t") == ("a\tb\\cAAq", None, "")
    assert copytext.unescape(b"\\n\\r\\b\\f\\v") == b"\n\r\b\f\v"


def test_split_lines_keeps_the_incomplete_tail() -> None:
    lines, rest = copytext.split_lines(b"ab", b"c\nde\nf")
    assert (lines, rest) == ([b"abc", b"de"], b"f")


def test_checksum_is_order_independent_and_additive() -> None:
    rows = [("1", "x"), ("2", None), ("3", "z\t")]
    hashes = [copytext.row_hash(r) for r in rows]
    whole = copytext.checksum(hashes)
    assert whole == copytext.checksum(reversed(hashes))
    assert whole == copytext.combine([copytext.checksum(hashes[:1]), copytext.checksum(hashes[1:])])
    assert whole != copytext.checksum(hashes[:2])
    assert whole == copytext.lines_checksum(copytext.format_line(r) for r in rows)


def test_even_bounds_cover_the_range() -> None:
    assert even_bounds(1, 100, 4) == (26, 51, 76)
    assert even_bounds(5, 5, 4) == ()
    assert even_bounds(1, 3, 10) == (2, 3)


def test_range_partitions_agree_with_their_predicates() -> None:
    p = Partitioning("range", 3, "id", (10, 20))
    assert p.predicate(0, ("id",)) == '"id" < 10'
    assert p.predicate(1, ("id",)) == '"id" >= 10 AND "id" < 20'
    assert p.predicate(2, ("id",)) == '"id" >= 20'
    assert [p.partition_of((str(v),)) for v in (-5, 9, 10, 19, 20, 99)] == [0, 0, 1, 1, 2, 2]
    assert Partitioning("hash", 1).predicate(0, ("k",)) == "TRUE"


def _spec(count: int = 2) -> TableSpec:
    cols = (Column("id", "bigint", "int64"), Column("v", "text", "text"))
    return TableSpec("public", "t", cols, ("id",), Partitioning("range", count, "id", (100,)),
                     1000)


def test_plan_json_round_trip() -> None:
    plan = Plan("123", "db", "weir_bootstrap_x", "pub", 0x16B3748, "00000003-2", "10:12:11",
                (_spec(), TableSpec("s", "h", _spec().columns, ("v",), Partitioning("hash", 4),
                                    -1)))
    assert Plan.from_json(plan.to_json()) == plan
    assert plan.tasks() == [("public.t", 0), ("public.t", 1)] + [("s.h", i) for i in range(4)]
    assert plan.table("s.h").select_sql(3).endswith("% 4 = 3")


def test_progress_rate_eta_and_text() -> None:
    p = Progress(50_000, 200_000, 1, 4, 2.0)
    assert p.rate == 25_000 and p.eta == 6.0 and p.fraction == 0.25
    line = render(p)
    assert "25.0%" in line and "25,000 rows/s" in line and "ETA 6s" in line and "(1/4" in line
    assert Progress(10, 5, 4, 4, 1.0).fraction == 1.0 and render(Progress(0, 0, 0, 2, 0.0))


def _replica(first: Snapshot, second: Snapshot) -> Replica:
    table = LoadedTable(_spec(), [first, second])
    table.rows = {("1",): ("1", "a"), ("150",): ("150", "b")}
    return Replica({"public.t": table}, "slot", "pub", 0, first.xmin)


REL = Relation(16384, "public", "t", "d", (PgColumn(1, "id", 20, -1), PgColumn(0, "v", 25, -1)))


def _tx(replica: Replica, xid: int, *changes: object, end: int | None = None) -> None:
    end = replica.lsn + 10 if end is None else end
    replica.feed(REL)
    replica.feed(Begin(end, 0, xid))
    for c in changes:
        replica.feed(c)  # type: ignore[arg-type]
    replica.feed(Commit(0, end, end, 0))


def test_changes_apply_only_to_partitions_whose_snapshot_missed_them() -> None:
    # partition 0 (id < 100) was read at a snapshot that saw xid 20; partition 1 did not
    replica = _replica(Snapshot(25, 25), Snapshot(15, 15))
    _tx(replica, 20, Insert(16384, ("2", "seen")), Insert(16384, ("200", "new")))
    rows = replica.tables["public.t"].rows
    assert ("2",) not in rows and rows[("200",)] == ("200", "new")
    # a key change moving a row from partition 1 to 0, by a transaction neither saw
    _tx(replica, 30, Update(16384, "K", ("150", None), ("50", "moved")))
    assert ("150",) not in rows and rows[("50",)] == ("50", "moved")
    # a key change by a transaction partition 0 saw: only the delete in partition 1 applies
    _tx(replica, 21, Update(16384, "K", ("200", None), ("3", "x")))
    assert ("200",) not in rows and ("3",) not in rows
    _tx(replica, 31, Delete(16384, "K", ("1", None)))
    assert ("1",) not in rows and replica.applied == 4
    _tx(replica, 32, Insert(16384, ("1", "again")), end=replica.lsn)  # re-sent after a restart
    assert ("1",) not in rows and replica.skipped == 1
    _tx(replica, 40, Truncate(0, (16384,)))
    assert replica.tables["public.t"].rows == {}


def test_unchanged_toast_values_come_from_the_loaded_row() -> None:
    from cdc.pgoutput import UNCHANGED_TOAST

    replica = _replica(Snapshot(15, 15), Snapshot(15, 15))
    _tx(replica, 20, Update(16384, "", None, ("150", UNCHANGED_TOAST)))  # type: ignore[arg-type]
    assert replica.tables["public.t"].rows[("150",)] == ("150", "b")


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module if node.module.startswith("cdc") else
                      node.module.split(".")[0])
    return found


@pytest.mark.parametrize("module", ["reader", "copytext", "plan", "errors"])
def test_executor_modules_need_only_psycopg_pyarrow_and_each_other(module: str) -> None:
    imports = _imports(ROOT / "cdc" / "bootstrap" / f"{module}.py")
    bad = {m for m in imports if m.startswith(("proxy", "engine", "pyspark"))
           or (m.startswith("cdc") and m not in {
               "cdc.bootstrap", "cdc.bootstrap.copytext", "cdc.bootstrap.plan",
               "cdc.bootstrap.errors"})}
    assert bad == set()


@pytest.mark.parametrize("module", ["copytext", "plan", "progress"])
def test_sans_io_modules_import_no_io(module: str) -> None:
    imports = _imports(ROOT / "cdc" / "bootstrap" / f"{module}.py")
    assert imports & {"asyncio", "socket", "ssl", "time", "psycopg", "os", "pyarrow"} == set()
