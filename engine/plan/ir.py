"""The relational plan IR: what the SQL planner produces and the dataflow compiles.

Owns: frozen, slotted, hashable dataclasses for scalar expressions (``Expr``) and relational
operators (``Rel``), plus ``Reader``, the root of every cache's plan.

Conventions and invariants:
- Columns are addressed by position. ``ColumnRef(i)`` inside an expression refers to column
  ``i`` of the operator's (single) input; for ``Join`` the output is ``left columns + right
  columns`` and a predicate over the join output uses those positions.
- Every expression node carries (or computes) ``type_oid``: the PostgreSQL type of its result.
  ``Compare``/``BoolOp``/``Not``/``IsNull``/``Like``/``InList``/``Between`` are ``bool``.
- Every relational node exposes ``columns`` (name, type oid) - its output schema.
- Nodes are values: two structurally equal plans are equal and hash equally; the dataflow uses
  that to share nodes (and their state) between caches.
- Parameters (``$n``) never appear in a plan the dataflow compiles: the planner turns
  ``col = $n`` into a ``Reader`` key column. ``Param`` exists for the reference evaluator and
  for plans the planner rejects later.
- Values are the canonical Python values of DESIGN section 5 (int, Decimal, float, str, bytes,
  bool, date/time/datetime/timedelta, UUID, json as str); None is SQL NULL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.values import oids as T

# ----------------------------------------------------------------------------- scalars


@dataclass(frozen=True, slots=True)
class ColumnRef:
    """Column ``index`` of the input row."""

    index: int
    type_oid: int


@dataclass(frozen=True, slots=True)
class Const:
    """A constant; ``value`` is a canonical Python value (None = NULL)."""

    value: object
    type_oid: int


@dataclass(frozen=True, slots=True)
class Param:
    """Statement parameter ``$number`` (1-based)."""

    number: int
    type_oid: int


@dataclass(frozen=True, slots=True)
class BoolOp:
    """Three-valued AND / OR over two or more operands."""

    op: Literal["and", "or"]
    args: tuple[Expr, ...]

    @property
    def type_oid(self) -> int:
        return T.BOOL


@dataclass(frozen=True, slots=True)
class Not:
    arg: Expr

    @property
    def type_oid(self) -> int:
        return T.BOOL


CompareOp = Literal["=", "<>", "<", "<=", ">", ">="]


@dataclass(frozen=True, slots=True)
class Compare:
    """``left op right``; NULL if either side is NULL. ``collation``: the libc locale text
    is ordered under (``engine.values.collation``), None for byte order."""

    op: CompareOp
    left: Expr
    right: Expr
    collation: str | None = None

    @property
    def type_oid(self) -> int:
        return T.BOOL


@dataclass(frozen=True, slots=True)
class IsNull:
    """``arg IS NULL`` (or ``IS NOT NULL`` when negated); never NULL itself."""

    arg: Expr
    negated: bool = False

    @property
    def type_oid(self) -> int:
        return T.BOOL


ArithOp = Literal["+", "-", "*", "/", "%"]


@dataclass(frozen=True, slots=True)
class Arith:
    """Binary arithmetic with PostgreSQL's rules for ``type_oid`` (the result type):
    integer overflow raises, integer division truncates toward zero, division by zero raises,
    numeric division uses PostgreSQL's result scale. Operands are already of the types the
    operator resolves to (the planner inserts casts), except that date/timestamp +/- interval
    and date - date are accepted as PostgreSQL does."""

    op: ArithOp
    left: Expr
    right: Expr
    type_oid: int


@dataclass(frozen=True, slots=True)
class Negate:
    arg: Expr
    type_oid: int


@dataclass(frozen=True, slots=True)
class Cast:
    """``arg::type_oid`` with PostgreSQL's conversion rules (rounding, overflow errors)."""

    arg: Expr
    type_oid: int


@dataclass(frozen=True, slots=True)
class Case:
    """Searched CASE: the first ``when`` that is TRUE wins; else ``default`` (NULL if None).
    A simple ``CASE x WHEN v`` is expressed as ``Compare("=", x, v)`` conditions."""

    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr | None
    type_oid: int


@dataclass(frozen=True, slots=True)
class Coalesce:
    args: tuple[Expr, ...]
    type_oid: int


@dataclass(frozen=True, slots=True)
class NullIf:
    left: Expr
    right: Expr
    type_oid: int


@dataclass(frozen=True, slots=True)
class Regex:
    """``arg [!]~[*] 'pattern'``: a POSIX regular expression match whose constant ``pattern``
    ``engine.plan.regex`` translated to ``python`` (for ``re.search`` with ``DOTALL``, plus
    ``IGNORECASE | ASCII`` when ``case_insensitive``)."""

    arg: Expr
    pattern: str
    python: str
    case_insensitive: bool = False
    negated: bool = False

    @property
    def type_oid(self) -> int:
        return T.BOOL


@dataclass(frozen=True, slots=True)
class Like:
    """``arg [NOT] LIKE|ILIKE pattern`` with backslash as the default escape."""

    arg: Expr
    pattern: Expr
    case_insensitive: bool = False
    negated: bool = False

    @property
    def type_oid(self) -> int:
        return T.BOOL


@dataclass(frozen=True, slots=True)
class InList:
    """``arg [NOT] IN (items...)`` with SQL NULL semantics."""

    arg: Expr
    items: tuple[Expr, ...]
    negated: bool = False

    @property
    def type_oid(self) -> int:
        return T.BOOL


@dataclass(frozen=True, slots=True)
class Between:
    """``arg [NOT] BETWEEN low AND high`` (= ``arg >= low AND arg <= high``)."""

    arg: Expr
    low: Expr
    high: Expr
    negated: bool = False
    collation: str | None = None  # as in ``Compare``

    @property
    def type_oid(self) -> int:
        return T.BOOL


#: Functions ``Func`` supports (see ``engine.dataflow.expr.FUNCTIONS``): lower, upper, length
#: (char_length), substr (2 or 3 args), concat (NULLs ignored), textcat (the ``||`` operator,
#: NULL-propagating), btrim/ltrim/rtrim (1 or 2 args), abs, round (1 arg, or numeric + int),
#: replace, left, right, position (strpos).
@dataclass(frozen=True, slots=True)
class Func:
    name: str
    args: tuple[Expr, ...]
    type_oid: int


Expr = (
    ColumnRef | Const | Param | BoolOp | Not | Compare | IsNull | Arith | Negate | Cast | Case
    | Coalesce | NullIf | Like | Regex | InList | Between | Func
)

# ----------------------------------------------------------------------------- relations


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type_oid: int


@dataclass(frozen=True, slots=True)
class TableRef:
    """An upstream table: its relation oid, qualified name, columns in table order, the
    positions of its primary-key columns (the replica identity; may be empty) and of its
    NOT NULL columns (the catalog's ``attnotnull``; the planner's top-k state reads it)."""

    oid: int
    schema: str
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[int, ...]
    not_null: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class Scan:
    """All rows of a base table; output columns are the table's columns."""

    table: TableRef

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.table.columns


@dataclass(frozen=True, slots=True)
class Filter:
    """Rows of ``input`` for which ``predicate`` is TRUE (NULL and FALSE drop the row)."""

    input: Rel
    predicate: Expr

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.input.columns


@dataclass(frozen=True, slots=True)
class Project:
    """One output column per expression (``names[i]`` is column i's name)."""

    input: Rel
    exprs: tuple[Expr, ...]
    names: tuple[str, ...]

    @property
    def columns(self) -> tuple[Column, ...]:
        return tuple(Column(n, e.type_oid) for n, e in zip(self.names, self.exprs, strict=True))


@dataclass(frozen=True, slots=True)
class Join:
    """Equi-join: ``left[left_keys[i]] = right[right_keys[i]]`` for all i (NULL never joins).
    Output is left columns then right columns. ``kind="left"`` keeps left rows without a
    match, extended with NULLs."""

    left: Rel
    right: Rel
    left_keys: tuple[int, ...]
    right_keys: tuple[int, ...]
    kind: Literal["inner", "left"] = "inner"

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.left.columns + self.right.columns


@dataclass(frozen=True, slots=True)
class UnionAll:
    """Bag union; every input has the same number of columns (types of the first win)."""

    inputs: tuple[Rel, ...]

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.inputs[0].columns


AggFunc = Literal["count_star", "count", "count_distinct", "sum", "avg", "min", "max",
                  "string_agg", "array_agg", "json_agg", "jsonb_agg"]


@dataclass(frozen=True, slots=True)
class AggSort:
    """One ``ORDER BY`` item inside an aggregate call (string_agg, array_agg)."""

    expr: Expr
    descending: bool = False
    nulls_first: bool | None = None
    collation: str | None = None  # as in ``SortKey``


@dataclass(frozen=True, slots=True)
class AggCall:
    """One aggregate: ``func(arg)`` (``arg`` None only for count_star); ``type_oid`` is the
    result type as PostgreSQL resolves it (e.g. sum(int4) -> int8, avg(int) -> numeric).
    ``order``: the call's own ORDER BY (string_agg, array_agg: required); ``delimiter``:
    string_agg's constant separator."""

    func: AggFunc
    arg: Expr | None
    type_oid: int
    name: str
    order: tuple[AggSort, ...] = ()
    delimiter: str | None = None
    collation: str | None = None  # min/max of text: as in ``SortKey``

    @property
    def exprs(self) -> tuple[Expr, ...]:
        """Every expression the call reads (its argument, then its ORDER BY items)."""
        head = () if self.arg is None else (self.arg,)
        return head + tuple(s.expr for s in self.order)


@dataclass(frozen=True, slots=True)
class Aggregate:
    """GROUP BY ``group_by`` (input positions) computing ``aggs``. Output: the group columns
    then one column per aggregate. With no group columns there is always exactly one output
    row (COUNT of nothing is 0, other aggregates NULL); otherwise an empty group has no row."""

    input: Rel
    group_by: tuple[int, ...]
    aggs: tuple[AggCall, ...]

    @property
    def columns(self) -> tuple[Column, ...]:
        cols = self.input.columns
        return tuple(cols[i] for i in self.group_by) + tuple(
            Column(a.name, a.type_oid) for a in self.aggs
        )


SetOpKind = Literal["intersect", "intersect_all", "except", "except_all"]


@dataclass(frozen=True, slots=True)
class Distinct:
    """SELECT DISTINCT: each distinct row once (rows equal column by column, NULLs equal).

    ``setop`` set: INTERSECT / EXCEPT [ALL]. The input's last column is then a side marker
    (0: the left operand's rows, 1: the right's; not an output column), and a row that the
    left side has ``l`` times and the right side ``r`` times is output ``min(l, r)`` times
    (intersect_all), ``max(l - r, 0)`` times (except_all), or once if ``l > 0 and r > 0``
    (intersect) / ``l > 0 and r == 0`` (except), as PostgreSQL's set operations."""

    input: Rel
    setop: SetOpKind | None = None

    @property
    def columns(self) -> tuple[Column, ...]:
        cols = self.input.columns
        return cols if self.setop is None else cols[:-1]


def setop_copies(kind: SetOpKind, left: int, right: int) -> int:
    """How many times INTERSECT / EXCEPT [ALL] outputs a row that its left operand has
    ``left`` times and its right operand ``right`` times (PostgreSQL's semantics); a count
    below zero (a batch revoking a row before adding it) counts as zero."""
    left, right = max(left, 0), max(right, 0)
    if kind == "intersect_all":
        return min(left, right)
    if kind == "except_all":
        return max(left - right, 0)
    if kind == "intersect":
        return 1 if left > 0 and right > 0 else 0
    return 1 if left > 0 and right == 0 else 0


@dataclass(frozen=True, slots=True)
class SortKey:
    """ORDER BY ``column`` [DESC] [NULLS FIRST|LAST]; ``nulls_first`` None means
    PostgreSQL's default (NULLS LAST for ASC, NULLS FIRST for DESC); ``collation`` the libc
    locale a text column sorts under (None: byte order)."""

    column: int
    descending: bool = False
    nulls_first: bool | None = None
    collation: str | None = None

    @property
    def effective_nulls_first(self) -> bool:
        return self.descending if self.nulls_first is None else self.nulls_first


@dataclass(frozen=True, slots=True)
class TopK:
    """Per group of ``group_by`` columns, the rows at positions ``offset .. offset+limit-1``
    in ``order_by`` order. Rows tied on every sort key are ordered by the whole row, which is
    one of the orders PostgreSQL may produce."""

    input: Rel
    group_by: tuple[int, ...]
    order_by: tuple[SortKey, ...]
    limit: int
    offset: int = 0

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.input.columns


Rel = Scan | Filter | Project | Join | UnionAll | Aggregate | Distinct | TopK


@dataclass(frozen=True, slots=True)
class RangeFrame:
    """A RANGE or GROUPS frame with an offset or an EXCLUDE, or a ROWS frame with an EXCLUDE
    (``Window.ranged``). Positions are measured along the window's ORDER BY (``mode``): for
    "range" its one integer key (negated under DESC), for "groups" the number of the row's
    peer group, for "rows" the row's position. A row's frame holds the rows whose
    measure is within [its own + ``start``, its own + ``end``] (None: unbounded; CURRENT ROW
    is 0, ``n PRECEDING`` -n, ``n FOLLOWING`` n); under RANGE, rows whose key is NULL are only
    in the frames of NULL rows (all of them) and in unbounded ends. ``exclude``: "current"
    (the row itself), "group" (its peers and itself), "ties" (its peers, not itself) or
    None. ``micros``: a RANGE key of type date, timestamp or timestamptz, measured in
    microseconds (a date at its midnight; a timestamp since 2000-01-01, a timestamptz's
    instant; ``infinity`` stays infinite), and ``start``/``end`` are interval offsets in
    microseconds (intervals without months: their days are 24 hours there)."""

    mode: Literal["rows", "range", "groups"]
    start: int | None
    end: int | None
    exclude: str | None = None
    micros: bool = False


WindowFunc = Literal["row_number", "rank", "dense_rank", "lag", "lead", "count_star", "count",
                     "sum", "avg", "min", "max"]


@dataclass(frozen=True, slots=True)
class WindowSlot:
    """While planning: the value of the select-list placeholder of window ``index``."""

    index: int


@dataclass(frozen=True, slots=True)
class Window:
    """A window function over one lookup's rows (or each ``partition`` of them): its value is
    written into input column ``column`` (a NULL placeholder the plan selects), computed in
    ``order`` (input positions); lag/lead read input column ``arg`` ``offset`` rows back/ahead
    (NULL past the ends). A running aggregate (count_star, count, sum, avg, min, max of ``arg``,
    typed ``arg_oid``, result ``type_oid``) covers the rows from the partition's start to the
    current row's last peer on ``order`` (``rows``: to the current row itself); without
    ``order``, the whole partition. ``frame`` (start, end): a sliding ROWS frame, the rows at
    positions current+start .. current+end (negative: PRECEDING; ``order`` cannot tie).
    ``partition``: input positions of PARTITION BY columns that are not lookup keys: the
    lookup's rows split into one partition per value of those columns (equal as ``=`` says:
    1.0 = 1.00, NaN = NaN). ``ranged``: a RANGE/GROUPS frame with offsets or EXCLUDE.
    ``collation``: min/max of text pick in that libc locale's order (None: byte order)."""

    func: WindowFunc
    column: int
    order: tuple[SortKey, ...]
    arg: int | None = None
    offset: int = 1
    type_oid: int = 0
    arg_oid: int | None = None
    rows: bool = False
    frame: tuple[int, int] | None = None
    partition: tuple[int, ...] = ()
    ranged: RangeFrame | None = None
    collation: str | None = None


@dataclass(frozen=True, slots=True)
class Reader:
    """A cache's view: rows of ``input`` whose ``key`` columns equal the lookup values
    (``key[i]`` is bound to parameter ``$i+1``), returned as the ``output`` columns, sorted
    by ``order_by`` (positions in ``input``) and cut to ``limit`` / ``offset`` when given.
    An empty ``key`` means a parameterless query (one lookup, key ``()``)."""

    input: Rel
    key: tuple[int, ...]
    output: tuple[int, ...]
    order_by: tuple[SortKey, ...] = ()
    limit: int | None = None
    offset: int = 0
    #: window functions computed per lookup, before ORDER BY / LIMIT (``Window``)
    windows: tuple[Window, ...] = ()
    #: range-partial state: the ``input`` column whose filled intervals the reader keeps
    #: (its lookup keys end with a ``Span``; ``engine.plan.range_state``); None: keys only
    span: int | None = None
    #: the span column may be NULL in a page (top-k state over a nullable column): its
    #: lookups' spans reach past every value to the NULL point (``Span.nulls``)
    span_nulls: bool = False

    @property
    def columns(self) -> tuple[Column, ...]:
        cols = self.input.columns
        return tuple(cols[i] for i in self.output)


def children(rel: Rel) -> tuple[Rel, ...]:
    """The input relations of ``rel`` (left before right)."""
    if isinstance(rel, Scan):
        return ()
    if isinstance(rel, Join):
        return (rel.left, rel.right)
    if isinstance(rel, UnionAll):
        return rel.inputs
    return (rel.input,)


def tables(rel: Rel | Reader) -> tuple[TableRef, ...]:
    """Every base table the plan reads (each once, in first-seen order)."""
    seen: dict[int, TableRef] = {}
    stack: list[Rel] = [rel.input if isinstance(rel, Reader) else rel]
    while stack:
        node = stack.pop()
        if isinstance(node, Scan):
            seen.setdefault(node.table.oid, node.table)
        stack.extend(reversed(children(node)))
    return tuple(seen.values())
