"""Tables, cache plans and random change streams shared by the engine's tests.

Three tables in the seeds' Lobsters shape (stories, votes, users) and plans covering every
operator: filter, project, inner/left join (congruent, incongruent and keyed on the right
side), union all, grouped and global aggregates with every aggregate function, distinct and
top-k, with readers keyed on different columns.
"""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

from engine.changes import UNCHANGED_TOAST, ChangeKind, RowChange
from engine.plan import ir
from engine.values import oids as T

Row = tuple[Any, ...]
I4, I8, TX, NU = T.INT4, T.INT8, T.TEXT, T.NUMERIC


def col(i: int, t: int = I4) -> ir.ColumnRef:
    return ir.ColumnRef(i, t)


def const(v: object, t: int = I4) -> ir.Const:
    return ir.Const(v, t)


STORIES = ir.TableRef(1001, "public", "stories", (
    ir.Column("id", I4), ir.Column("author", I4), ir.Column("title", TX),
    ir.Column("score", I4)), (0,))
VOTES = ir.TableRef(1002, "public", "votes", (
    ir.Column("id", I4), ir.Column("story_id", I4), ir.Column("user_id", I4),
    ir.Column("weight", NU)), (0,))
USERS = ir.TableRef(1003, "public", "users", (ir.Column("id", I4), ir.Column("name", TX)), (0,))
TABLES = {t.oid: t for t in (STORIES, VOTES, USERS)}

S, V, U = ir.Scan(STORIES), ir.Scan(VOTES), ir.Scan(USERS)

VOTECOUNT = ir.Aggregate(V, (1,), (
    ir.AggCall("count_star", None, I8, "n"),
    ir.AggCall("count", col(3, NU), I8, "nw"),
    ir.AggCall("sum", col(3, NU), NU, "total"),
    ir.AggCall("avg", col(3, NU), NU, "mean"),
    ir.AggCall("min", col(2), I4, "lo"),
    ir.AggCall("max", col(3, NU), NU, "hi"),
    ir.AggCall("count_distinct", col(2), I8, "voters"),
))
STORY_VC = ir.Join(S, VOTECOUNT, (0,), (0,), "left")
STORY_USER = ir.Join(S, U, (1,), (0,), "inner")
TOP2 = ir.TopK(S, (1,), (ir.SortKey(3, descending=True, nulls_first=False),), 2)
HOT = ir.Filter(S, ir.Compare(">", col(3), const(5)))
UNION = ir.UnionAll((
    ir.Project(HOT, (col(0), col(1)), ("id", "author")),
    ir.Project(ir.Filter(S, ir.Compare("=", col(1), const(1))), (col(0), col(1)),
               ("id", "author")),
))
AUTHOR_WEIGHT = ir.Aggregate(ir.Join(V, S, (1,), (0,)), (5,), (
    ir.AggCall("sum", col(3, NU), NU, "w"), ir.AggCall("count_star", None, I8, "n")))
TITLE_EXPR = ir.Project(S, (
    col(0),
    ir.Func("upper", (col(2, TX),), TX),
    ir.Case(((ir.IsNull(col(3)), const("none", TX)),
             (ir.Compare(">", col(3), const(5)), const("hot", TX))), const("cold", TX), TX),
    ir.Coalesce((col(3), const(0)), I4),
), ("id", "title", "kind", "score"))

PLANS: dict[str, ir.Reader] = {
    "hot_by_author": ir.Reader(HOT, (1,), (0, 2, 3)),
    "votecount": ir.Reader(VOTECOUNT, (0,), (0, 1, 2, 3, 4, 5, 6, 7)),
    "story_vc": ir.Reader(STORY_VC, (0,), (0, 2, 5, 6)),
    "story_user": ir.Reader(STORY_USER, (0,), (2, 5)),
    "by_user_name": ir.Reader(STORY_USER, (5,), (0, 2)),
    "top2": ir.Reader(TOP2, (1,), (0, 3), (ir.SortKey(3, True, False), ir.SortKey(0))),
    "voters": ir.Reader(ir.Distinct(ir.Project(V, (col(1), col(2)), ("s", "u"))), (0,), (1,)),
    "union": ir.Reader(UNION, (1,), (0,)),
    "count_all": ir.Reader(ir.Aggregate(S, (), (
        ir.AggCall("count_star", None, I8, "n"), ir.AggCall("max", col(3), I4, "m"))), (), (0, 1)),
    "author_weight": ir.Reader(AUTHOR_WEIGHT, (0,), (0, 1, 2)),
    "titles": ir.Reader(TITLE_EXPR, (0,), (1, 2, 3)),
    "top_page": ir.Reader(S, (1,), (0,), (ir.SortKey(0),), limit=2, offset=1),
}
#: Key generator per cache: which values a read uses.
KEYS = {
    "hot_by_author": "author", "votecount": "story", "story_vc": "story",
    "story_user": "story", "by_user_name": "name", "top2": "author", "voters": "story",
    "union": "author", "count_all": "none", "author_weight": "author", "titles": "story",
    "top_page": "author",
}
NAMES = ("ann", "bob", "cy", None)


def key_for(cache: str, rng: random.Random) -> Row:
    kind = KEYS[cache]
    if kind == "none":
        return ()
    if kind == "name":
        return (rng.choice(NAMES[:3]),)
    return (rng.randint(0, 5),)


def initial_data(rng: random.Random) -> dict[int, dict[Row, Row]]:
    stories = {(i,): _story(i, rng) for i in range(rng.randint(0, 6))}
    votes = {(i,): _vote(i, rng) for i in range(rng.randint(0, 12))}
    users = {(i,): (i, rng.choice(NAMES)) for i in range(rng.randint(0, 4))}
    return {STORIES.oid: stories, VOTES.oid: votes, USERS.oid: users}


def _story(i: int, rng: random.Random) -> Row:
    return (i, rng.randint(0, 4), rng.choice(("a", "b", "c")), rng.choice((None, 1, 5, 6, 9)))


def _vote(i: int, rng: random.Random) -> Row:
    w = rng.choice((None, Decimal("1"), Decimal("2.5"), Decimal("-1")))
    return (i, rng.randint(0, 5), rng.randint(0, 3), w)


def random_changes(data: dict[int, dict[Row, Row]], rng: random.Random) -> list[RowChange]:
    """A transaction of 1-4 random changes valid against ``data`` (REPLICA IDENTITY DEFAULT)."""
    shadow = {oid: dict(rows) for oid, rows in data.items()}
    out: list[RowChange] = []
    for _ in range(rng.randint(1, 4)):
        t = rng.choice((STORIES, VOTES, VOTES, USERS))
        rows = shadow[t.oid]
        op = rng.random()
        if not rows or op < 0.4:
            i = max((k[0] for k in rows), default=-1) + 1 + rng.randint(0, 2)
            new = _fresh(t, i, rng)
            rows[(i,)] = new
            out.append(RowChange(t.oid, ChangeKind.INSERT, None, new))
            continue
        pk = rng.choice(sorted(rows))
        old = rows.pop(pk)
        old_key = (old[0],) + (UNCHANGED_TOAST,) * (len(old) - 1)
        if op < 0.65:
            out.append(RowChange(t.oid, ChangeKind.DELETE, old_key, None))
            continue
        new = _fresh(t, old[0], rng)
        new = tuple(old[c] if rng.random() < 0.5 else v for c, v in enumerate(new))
        rows[pk] = new
        sent = tuple(UNCHANGED_TOAST if (c == 2 and t is STORIES and new[c] == old[c]
                                          and rng.random() < 0.5) else v
                     for c, v in enumerate(new))
        out.append(RowChange(t.oid, ChangeKind.UPDATE, None, sent))
    return out


def _fresh(t: ir.TableRef, i: int, rng: random.Random) -> Row:
    if t is STORIES:
        return _story(i, rng)
    if t is VOTES:
        return _vote(i, rng)
    return (i, rng.choice(NAMES))
