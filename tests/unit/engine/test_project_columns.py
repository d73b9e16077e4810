"""``ProjectNode``: a projection of input columns only maps each row with one C call
(``operator.itemgetter``), and a pull whose key columns are all input columns returns the
mapped rows without filtering them again (the input's pull returned exactly the rows with
those values, as ``count`` already relies on). Replays of the demo's fills (issue 24) spent
about a third of their time in the per-column closures and that filter."""

from __future__ import annotations

import operator
import random

from engine.dataflow.node import Node, PullCtx
from engine.dataflow.ops.project import ProjectNode
from engine.dataflow.records import Row
from engine.plan import ir

INT, TEXT = 23, 25


class Rows(Node):
    """An input holding fixed rows; its pull returns those whose ``cols`` equal ``key``."""

    def __init__(self, rows: list[Row]) -> None:
        super().__init__(0, (), 3)
        self.rows = rows
        self.pulls = 0

    def pull(self, cols: tuple[int, ...], key: Row, ctx: PullCtx) -> list[Row] | None:
        self.pulls += 1
        return [r for r in self.rows if all(r[c] == v for c, v in zip(cols, key, strict=True))]


def _rows(n: int) -> list[Row]:
    rng = random.Random(n)
    return [(rng.randrange(5), f"t{i}", rng.choice([None, rng.randrange(100)])) for i in range(n)]


def test_a_column_projection_maps_with_one_itemgetter() -> None:
    source = Rows(_rows(50))
    cols = [ir.ColumnRef(2, INT), ir.ColumnRef(0, INT), ir.ColumnRef(1, TEXT)]
    node = ProjectNode(1, source, cols)
    assert isinstance(node._map, operator.itemgetter)
    general = ProjectNode(2, source, [*cols, ir.Const(1, INT)])  # a computed column
    assert not isinstance(general._map, operator.itemgetter)
    for row in source.rows:
        assert node._map(row) == general._map(row)[:3] == (row[2], row[0], row[1])


def test_pulls_give_the_same_rows_with_and_without_computed_columns() -> None:
    source = Rows(_rows(200))
    plain = ProjectNode(1, source, [ir.ColumnRef(1, TEXT), ir.ColumnRef(0, INT),
                                    ir.ColumnRef(0, INT)])
    computed = ProjectNode(2, source, [ir.ColumnRef(1, TEXT), ir.ColumnRef(0, INT),
                                       ir.ColumnRef(0, INT), ir.Const(7, INT)])
    for k in range(6):
        want = [(r[1], r[0], r[0]) for r in source.rows if r[0] == k]
        assert plain.pull((1,), (k,), PullCtx()) == want
        assert plain.pull((1, 2), (k, k), PullCtx()) == want
        assert plain.pull((1, 2), (k, k + 1), PullCtx()) == []  # one input column, two values
        assert [r[:3] for r in computed.pull((1, 3), (k, 7), PullCtx()) or []] == want
        assert computed.pull((1, 3), (k, 8), PullCtx()) == []  # the filter on the computed one
    assert plain.pull((0,), (None,), PullCtx()) == []
