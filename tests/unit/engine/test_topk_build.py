"""Top-k install: building a group's state keeps exactly the ``cap`` smallest rows in the full
sort order (ties on the ORDER BY broken by the whole row), whatever the values (NULLs, NaN,
numerics of several Python types, text) and the DESC / NULLS options; and the DESC key of a
number (its negation) orders as the generic reversed key does."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

from engine.dataflow.node import Node, Runtime
from engine.dataflow.ops.topk import TopKNode
from engine.dataflow.ordering import Desc, desc_key, order_key, value_key
from engine.plan.ir import SortKey
from engine.values.types import FLOAT_NAN, NUMERIC_NAN


def _value(rng: random.Random, kind: int) -> Any:
    if rng.random() < 0.1:
        return None
    if kind == 0:
        return rng.randint(-3, 3)  # many ties
    if kind == 1:
        return FLOAT_NAN if rng.random() < 0.1 else rng.choice([-1.5, 0.0, 2.25, 7.0])
    if kind == 2:
        return NUMERIC_NAN if rng.random() < 0.1 else Decimal(rng.choice(["1.50", "-2", "3.1"]))
    return rng.choice(["a", "b", "ab", ""])


def test_build_keeps_the_cap_smallest_rows_in_the_full_order() -> None:
    rng = random.Random(7)
    for _ in range(300):
        kinds = [rng.randrange(4) for _ in range(3)]
        rows = [(rng.randrange(2), *(_value(rng, k) for k in kinds))
                for _ in range(rng.randint(0, 60))]
        order = [SortKey(rng.randint(1, 3), rng.random() < 0.5,
                         rng.choice([None, True, False])) for _ in range(rng.randint(1, 2))]
        limit, offset = rng.randint(0, 6), rng.randint(0, 3)
        node = TopKNode(1, Node(0, (), 4), (0,), order, limit, offset, (0,), Runtime())
        built = node.build(rows)
        key = order_key(order)
        for g in {r[:1] for r in rows}:
            members = sorted((r for r in rows if r[:1] == g), key=key)
            top = built[g]
            assert top.rows == members[:node.cap]  # type: ignore[attr-defined]
            assert top.keys == [key(r) for r in members[:node.cap]]  # type: ignore[attr-defined]
            assert top.complete == (len(members) <= node.cap)  # type: ignore[attr-defined]


def test_desc_key_of_numbers_orders_as_the_reversed_key() -> None:
    values: list[Any] = [-3, 0, 5, 10**30, -2.5, 0.0, float("inf"), float("-inf"), FLOAT_NAN,
                         Decimal("1.50"), Decimal("-7"), Decimal("Infinity"), NUMERIC_NAN]
    floats = [v for v in values if isinstance(v, float)]
    for group in ([v for v in values if type(v) is not Decimal or v == v], floats,
                  [v for v in values if type(v) is Decimal]):
        fast = sorted(group, key=desc_key)
        slow = sorted(group, key=lambda v: Desc(value_key(v)))
        assert [repr(v) for v in fast] == [repr(v) for v in slow]
