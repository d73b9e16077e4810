"""Window functions in the select list: which ones are planned, and how.

Owns: ``extract_windows`` (select-list items ``row_number() / rank() / dense_rank() /
lag(x [, n]) / lead(x [, n]) / count(*) / count(x) / sum(x) / avg(x) / min(x) / max(x)
OVER (PARTITION BY ... ORDER BY ... [frame])`` -> placeholders plus ``WindowSpec``),
``check_partitions`` and ``window_calls`` (the specs -> ``ir.Window``).

A window's value is computed by the reader per lookup (``engine.dataflow.windows``): every
IN-list / ``= ANY`` key column must be partitioned on (one lookup per value); PARTITION BY
lookup key columns are constant over a lookup, and the other PARTITION BY columns (plain columns
whose type's equality is the values', under a deterministic collation) split the lookup's rows
into partitions (``ir.Window.partition``). The select list keeps a NULL placeholder column where
the window's value goes; its ORDER BY and lag/lead argument become hidden columns. row_number,
lag and lead number tied rows arbitrarily in PostgreSQL: they are only planned over one table
with an ORDER BY containing its whole primary key (less the PARTITION BY and lookup key columns,
constant over the partition). The running aggregates take PostgreSQL's aggregate result types
(``pgtypes.sum_type``...; min/max of text under a libc collation pick in its order, as GROUP
BY's do), and one of the frames the reader maintains: the default (RANGE/GROUPS UNBOUNDED
PRECEDING .. CURRENT ROW: peers share a value), UNBOUNDED PRECEDING .. UNBOUNDED FOLLOWING (the
whole partition, as without ORDER BY), and ROWS UNBOUNDED PRECEDING .. CURRENT ROW (only with an
ORDER BY that cannot tie, like row_number). Sliding ROWS frames (``ROWS BETWEEN n PRECEDING |
CURRENT ROW | n FOLLOWING AND n PRECEDING | CURRENT ROW | n FOLLOWING``, literal offsets up to
``MAX_OFFSET``) are planned the same way (an ORDER BY that cannot tie). Other frames are
``ir.RangeFrame``s, recomputed whole at the read after a change: RANGE offsets over one integer
ORDER BY key (PostgreSQL's in_range answers as unbounded integers do), GROUPS offsets, EXCLUDE
CURRENT ROW / GROUP / TIES in any mode, and ROWS frames with a larger offset or an offset paired
with UNBOUNDED (ROWS still over an ORDER BY that cannot tie), and RANGE offsets over one date /
timestamp / timestamptz key by a constant interval without months (days: not over
timestamptz), measured in microseconds. A RANGE offset over another type and other offsets
(negative, not constant, an integer over a date) go upstream.
Float sum/avg (``dataflow.window_floats``: PostgreSQL's additions, in window order) are planned
over an ORDER BY that cannot tie, never over the whole partition nor a RANGE/GROUPS frame
(PostgreSQL adds those rows, or peers, in its input order).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.plan import ir, pgtypes
from engine.plan.exprs import ExprBuilder, deterministic
from engine.plan.names import figure_colname
from engine.plan.scope import PlanError, Scope
from engine.values import oids as T
from engine.values.types import Interval

Node = dict[str, Any]

_RANKING = ("row_number", "rank", "dense_rank")
_OFFSET = ("lag", "lead")
_AGGREGATES = ("count", "sum", "avg", "min", "max")

# frameOptions bits (PostgreSQL's FRAMEOPTION_*): the shape without NONDEFAULT and BETWEEN
_FRAME_IGNORED = 0x1 | 0x10
_RANGE, _ROWS, _GROUPS = 0x2, 0x4, 0x8
_FROM_START, _TO_CURRENT, _TO_END = 0x20, 0x400, 0x100
_START_CURRENT, _START_PRECEDING, _START_FOLLOWING = 0x200, 0x800, 0x2000
_END_PRECEDING, _END_FOLLOWING = 0x1000, 0x4000
_EXCLUDE = 0x8000 | 0x10000 | 0x20000
#: sliding ROWS frame bounds -> the sign of the offset (0: CURRENT ROW)
_STARTS = {_START_CURRENT: 0, _START_PRECEDING: -1, _START_FOLLOWING: 1}
_ENDS = {_TO_CURRENT: 0, _END_PRECEDING: -1, _END_FOLLOWING: 1}
#: the largest literal offset of a sliding frame (each change recomputes the frames around it)
MAX_OFFSET = 100
#: frame shape -> (rows frame, whole partition)
_FRAMES = {_RANGE | _FROM_START | _TO_CURRENT: (False, False),
           _GROUPS | _FROM_START | _TO_CURRENT: (False, False),
           _ROWS | _FROM_START | _TO_CURRENT: (True, False),
           **{kind | _FROM_START | _TO_END: (False, True) for kind in (_RANGE, _ROWS, _GROUPS)}}


@dataclass(frozen=True)
class WindowSpec:
    func: str
    partition: tuple[int, ...]  # scope positions
    order: list[Node] = field(default_factory=list)  # SortBy nodes
    arg: Node | None = None
    offset: int = 1
    type_oid: int = T.INT8  # the value's type
    arg_oid: int | None = None
    rows: bool = False  # ROWS UNBOUNDED PRECEDING .. CURRENT ROW (running aggregates)
    frame: tuple[int, int] | None = None  # a sliding ROWS frame (ir.Window.frame)
    ranged: ir.RangeFrame | None = None  # a RANGE/GROUPS offset or EXCLUDE frame
    collation: str | None = None  # min/max: the libc locale of a text argument
    extra: tuple[int, ...] = ()  # PARTITION BY scope positions that are not lookup keys


def extract_windows(stmt: Node, scope: Scope, builder: ExprBuilder) -> tuple[
        Node, list[WindowSpec]]:
    """Replace each supported window call of the select list with a placeholder."""
    targets = stmt.get("targetList", [])
    if not any("over" in (t["ResTarget"].get("val") or {}).get("FuncCall", {})
               for t in targets):
        return stmt, []
    specs: list[WindowSpec] = []
    new_targets = []
    for target in targets:
        res = dict(target["ResTarget"])
        call = (res.get("val") or {}).get("FuncCall")
        if call is None or call.get("over") is None:
            new_targets.append(target)
            continue
        spec, type_oid = _spec(call, scope, builder)
        res["name"] = res.get("name") or figure_colname(res["val"])
        res["val"] = {"WeirWindow": {"index": len(specs), "type_oid": type_oid}}
        specs.append(spec)
        new_targets.append({"ResTarget": res})
    stmt = dict(stmt)
    stmt["targetList"] = new_targets
    return stmt, specs


def _spec(call: Node, scope: Scope, builder: ExprBuilder) -> tuple[WindowSpec, int]:
    parts = [p["String"]["sval"] for p in call.get("funcname", []) if "String" in p]
    name = parts[-1].lower() if parts else "?"
    over = call["over"]
    if name not in _RANKING + _OFFSET + _AGGREGATES:
        raise PlanError(f"window function {name}()")
    if over.get("refname") or over.get("name"):
        raise PlanError("named window (WINDOW w AS ...)")
    if call.get("agg_filter") or call.get("agg_distinct") or (
            call.get("agg_star") and name != "count"):
        raise PlanError(f"{name}() with FILTER, * or DISTINCT")
    partition = []
    for item in over.get("partitionClause", []):
        fields = item.get("ColumnRef", {}).get("fields", [])
        if not fields or any("String" not in f for f in fields):
            raise PlanError("PARTITION BY an expression")
        partition.append(scope.lookup(tuple(f["String"]["sval"] for f in fields)))
    order = list(over.get("orderClause", []))
    args = call.get("args", [])
    if name in _AGGREGATES:
        return _aggregate(name, call, tuple(partition), order, builder)
    if name in _RANKING:
        if args:
            raise PlanError(f"{name}() with arguments")
        return WindowSpec(name, tuple(partition), order), T.INT8
    if not 1 <= len(args) <= 2:
        raise PlanError(f"{name}() with {len(args)} arguments (a default is not supported)")
    offset = 1
    if len(args) == 2:
        const = args[1].get("A_Const", {})
        if "ival" not in const:
            raise PlanError(f"{name}() with an offset that is not an integer constant")
        offset = int(const["ival"].get("ival", 0))
        if offset < 0:
            raise PlanError(f"{name}() with a negative offset")
    arg = builder.build(args[0])
    if arg.type_oid not in pgtypes.SUPPORTED_TYPES:
        raise PlanError(f"{name}() of {pgtypes.type_name(arg.type_oid)}")
    return WindowSpec(name, tuple(partition), order, args[0], offset), arg.type_oid


def _aggregate(name: str, call: Node, partition: tuple[int, ...], order: list[Node],
               builder: ExprBuilder) -> tuple[WindowSpec, int]:
    """A running aggregate's spec and result type (as ``grouping`` types GROUP BY's)."""
    options = call["over"].get("frameOptions", 0)
    shape = _FRAMES.get(options & ~_FRAME_IGNORED)
    ranged, sliding = None, None
    if shape is not None:
        pass
    elif options & _ROWS and not options & _EXCLUDE:
        try:  # maintained frame by frame when both ends are small offsets or CURRENT ROW
            sliding = _sliding(name, call["over"])
        except PlanError:  # UNBOUNDED on one side, or a larger offset: recomputed
            ranged = _ranged(name, call["over"], order, builder)
    else:
        ranged = _ranged(name, call["over"], order, builder)
    # (ROWS frames, EXCLUDE or not, need an ORDER BY that cannot tie: ``check_partitions``)
    rows, whole = shape or (ranged is None or ranged.mode == "rows", False)
    if whole:
        order = []  # every row is a peer: the same value as without ORDER BY
    if call.get("agg_star"):
        return WindowSpec("count_star", partition, order, rows=rows, frame=sliding,
                          ranged=ranged), T.INT8
    args = call.get("args", [])
    if len(args) != 1:
        raise PlanError(f"{name}() with {len(args)} arguments")
    arg = builder.build(args[0])
    if name == "count":
        return WindowSpec(name, partition, order, args[0], arg_oid=arg.type_oid,
                          rows=rows, frame=sliding, ranged=ranged), T.INT8
    result = {"sum": pgtypes.sum_type, "avg": pgtypes.avg_type, "min": pgtypes.minmax_type,
              "max": pgtypes.minmax_type}[name](arg.type_oid)
    if result is None or arg.type_oid == T.INTERVAL:
        raise PlanError(f"{name}() of {pgtypes.type_name(arg.type_oid)} in a window")
    if name in ("sum", "avg") and arg.type_oid in (T.FLOAT4, T.FLOAT8):
        # a float sum depends on the order of additions: PostgreSQL's is the window order
        # (from each frame's first row), so the order must not tie (``check_partitions``)
        if whole or not order:
            raise PlanError(f"{name}() of {pgtypes.type_name(arg.type_oid)} over the whole "
                            "partition (PostgreSQL adds the rows in its input order)")
        if ranged is not None and ranged.mode != "rows":
            raise PlanError(f"{name}() of {pgtypes.type_name(arg.type_oid)} over a RANGE or "
                            "GROUPS frame (PostgreSQL adds peers in its input order)")
        rows = True  # with no ties the default frame's peers are single rows, as in ROWS
    # min/max of text under a libc collation pick in its order (None: byte order)
    locale = builder.order_locale((arg,), f"{name}()") if name in ("min", "max") else None
    return WindowSpec(name, partition, order, args[0], type_oid=result, arg_oid=arg.type_oid,
                      rows=rows, frame=sliding, ranged=ranged, collation=locale), result


_RANGE_STARTS = {_FROM_START: None, _START_CURRENT: 0, _START_PRECEDING: -1,
                 _START_FOLLOWING: 1}
_RANGE_ENDS = {_TO_END: None, _TO_CURRENT: 0, _END_PRECEDING: -1, _END_FOLLOWING: 1}
_EXCLUDES = {0x8000: "current", 0x10000: "group", 0x20000: "ties"}
#: integer ORDER BY types a RANGE offset measures exactly (PostgreSQL's in_range answers as
#: with unbounded integers, as Python's do)
_RANGE_KEY_TYPES = (T.INT2, T.INT4, T.INT8)
#: date and time ORDER BY types a RANGE offset (an interval) measures exactly in microseconds
_RANGE_TIME_TYPES = (T.DATE, T.TIMESTAMP, T.TIMESTAMPTZ)


def _ranged(name: str, over: Node, order: list[Node], builder: ExprBuilder) -> ir.RangeFrame:
    """A RANGE or GROUPS frame with an offset or EXCLUDE, or a ROWS frame with EXCLUDE
    (``ir.RangeFrame``), or PlanError."""
    options = over.get("frameOptions", 0) & ~_FRAME_IGNORED
    mode: Literal["rows", "range", "groups"] = (
        "rows" if options & _ROWS else "groups" if options & _GROUPS else "range")
    excludes = [v for bit, v in _EXCLUDES.items() if options & bit]
    starts = [bit for bit in _RANGE_STARTS if options & bit]
    ends = [bit for bit in _RANGE_ENDS if options & bit]
    if len(starts) != 1 or len(ends) != 1 or len(excludes) > 1:
        raise PlanError(f"{name}() OVER a frame of options {options:#x}")
    offsets = bool(options & (_START_PRECEDING | _START_FOLLOWING | _END_PRECEDING
                              | _END_FOLLOWING))
    if mode == "groups" and not order:
        raise PlanError(f"{name}() OVER a GROUPS frame without ORDER BY (an error)")
    timed = False  # a RANGE offset over a date / timestamp key: interval offsets
    if mode == "range" and not offsets:  # CURRENT ROW is the row's peers, as in GROUPS
        mode = "groups"
    elif mode == "range":
        if len(order) != 1:
            raise PlanError(f"{name}() OVER a RANGE offset frame without exactly one ORDER BY "
                            "column")
        key = builder.build(order[0]["SortBy"]["node"])
        if key.type_oid not in _RANGE_KEY_TYPES + _RANGE_TIME_TYPES:
            raise PlanError(f"{name}() OVER a RANGE offset frame ordered by "
                            f"{pgtypes.type_name(key.type_oid)} (only integer, date and "
                            "timestamp keys are cached)")
        timed = key.type_oid in _RANGE_TIME_TYPES
    bounds: list[int | None] = []
    for table, bit, node in ((_RANGE_STARTS, starts[0], over.get("startOffset")),
                             (_RANGE_ENDS, ends[0], over.get("endOffset"))):
        sign = table[bit]
        if not sign:
            bounds.append(sign)
            continue
        if mode == "range" and timed:
            bounds.append(sign * _interval_offset(name, node or {}, key.type_oid, builder))
            continue
        const = (node or {}).get("A_Const", {})
        if "ival" not in const:
            raise PlanError(f"{name}() OVER a frame whose offset is not an integer literal")
        n = int(const["ival"].get("ival", 0))
        if n < 0:
            raise PlanError(f"{name}() OVER a frame with a negative offset (an error)")
        bounds.append(sign * n)
    return ir.RangeFrame(mode, bounds[0], bounds[1], excludes[0] if excludes else None,
                         micros=mode == "range" and timed)


def _interval_offset(name: str, node: Node, key_oid: int, builder: ExprBuilder) -> int:
    """A RANGE offset over a date / timestamp / timestamptz key: a constant interval without
    months (calendar arithmetic), without days over timestamptz (a day there depends on the
    session TimeZone), not negative; in microseconds (``ir.RangeFrame.micros``)."""
    offset = builder.build(node)
    if offset.type_oid == T.UNKNOWN:
        offset = builder.coerce(offset, T.INTERVAL)
    if not isinstance(offset, ir.Const) or not isinstance(offset.value, Interval):
        raise PlanError(f"{name}() OVER a RANGE frame over {pgtypes.type_name(key_oid)} whose "
                        "offset is not an interval constant")
    value = offset.value
    if value.months:
        raise PlanError(f"{name}() OVER a RANGE frame offset with months or years (calendar "
                        "arithmetic)")
    if value.days and key_oid == T.TIMESTAMPTZ:
        raise PlanError(f"{name}() OVER a RANGE frame offset in days over timestamptz (a day "
                        "depends on the session TimeZone)")
    total = value.days * 86_400_000_000 + value.microseconds
    if total < 0:
        raise PlanError(f"{name}() OVER a frame with a negative offset (an error)")
    return total


def _sliding(name: str, over: Node) -> tuple[int, int]:
    """A sliding ROWS frame's (start, end) offsets from the current row, or PlanError."""
    options = over.get("frameOptions", 0) & ~_FRAME_IGNORED
    starts = [bit for bit in _STARTS if options & bit]
    ends = [bit for bit in _ENDS if options & bit]
    rest = options & ~(_ROWS | sum(_STARTS) | sum(_ENDS))
    if options & _EXCLUDE:
        raise PlanError(f"{name}() OVER a ROWS frame with EXCLUDE")
    if rest or len(starts) != 1 or len(ends) != 1:
        raise PlanError(f"{name}() OVER a frame with an offset on one side and UNBOUNDED on "
                        "the other")
    bounds = []
    for sign, node in ((_STARTS[starts[0]], over.get("startOffset")),
                       (_ENDS[ends[0]], over.get("endOffset"))):
        if not sign:
            bounds.append(0)
            continue
        const = (node or {}).get("A_Const", {})
        if "ival" not in const:
            raise PlanError(f"{name}() OVER a frame whose offset is not an integer literal")
        n = int(const["ival"].get("ival", 0))
        if not 0 <= n <= MAX_OFFSET:
            raise PlanError(f"{name}() OVER a frame offset above {MAX_OFFSET} rows")
        bounds.append(sign * n)
    return bounds[0], bounds[1]


def check_partitions(specs: list[WindowSpec], scope: Scope, key_positions: set[int],
                     multi_positions: set[int], order_positions: list[set[int]]
                     ) -> list[WindowSpec]:
    """Each window's partition must be one lookup or split one (see the module docstring);
    ``order_positions[i]``: the scope columns window i's ORDER BY names plainly. Returns the
    specs with their non-key PARTITION BY columns (``extra``)."""
    out = []
    for spec, ordered in zip(specs, order_positions, strict=True):
        extra = tuple(dict.fromkeys(p for p in spec.partition if p not in key_positions))
        for pos in extra:
            col = scope.cols[pos]
            why = pgtypes.NOT_EQUAL_BY_VALUE.get(col.type_oid)
            if why is not None:
                raise PlanError(f"{_label(spec)}() partitioned on a "
                                f"{pgtypes.type_name(col.type_oid)} value ({why})")
        out.append(dataclasses.replace(spec, extra=extra))
        if not multi_positions <= set(spec.partition):
            raise PlanError(f"{spec.func}() over several IN-list lookups (partition by the "
                            "IN-list column)")
        if spec.func in _RANKING[1:] or (spec.func not in _RANKING + _OFFSET
                                          and not spec.rows):
            continue
        rtes = {c.rte for c in scope.cols}
        pk = {i for i, c in enumerate(scope.cols) if c.table_pk}
        # a lookup's key columns are constant over its rows, as the partition's columns are
        if len(rtes) != 1 or not pk or not pk <= ordered | set(spec.partition) | key_positions:
            raise PlanError(f"{spec.func}() whose ORDER BY may tie (PostgreSQL orders tied "
                            "rows arbitrarily): order by the table's primary key")
    return out


def _label(spec: WindowSpec) -> str:
    return "count" if spec.func == "count_star" else spec.func


def window_calls(specs: list[WindowSpec], builder: ExprBuilder, exprs: list[ir.Expr],
                 hidden: list[ir.Expr]) -> tuple[ir.Window, ...]:
    """The windows of a select list whose placeholders ``exprs`` holds (replaced by NULLs
    here); their ORDER BY and arguments are found in ``exprs`` or appended to ``hidden``."""
    slots: dict[int, int] = {}
    for j, e in enumerate(exprs):
        if isinstance(e, ir.Const) and isinstance(e.value, ir.WindowSlot):
            slots[e.value.index] = j
            exprs[j] = ir.Const(None, e.type_oid)

    def position(expr: ir.Expr) -> int:
        if expr in exprs:
            return exprs.index(expr)
        if expr not in hidden:
            hidden.append(expr)
        return len(exprs) + hidden.index(expr)

    out = []
    for i, spec in enumerate(specs):
        order = []
        for item in spec.order:
            sort = item["SortBy"]
            if sort.get("useOp"):
                raise PlanError("ORDER BY ... USING in a window")
            expr = builder.build(sort["node"])
            if expr.type_oid not in pgtypes.ORDERABLE_TYPES:
                raise PlanError(f"window ORDER BY a value of type "
                                f"{pgtypes.type_name(expr.type_oid)}")
            locale = builder.order_locale((expr,), "window ORDER BY")
            nulls = sort.get("sortby_nulls", "SORTBY_NULLS_DEFAULT")
            order.append(ir.SortKey(position(expr), sort.get("sortby_dir") == "SORTBY_DESC",
                                    None if nulls == "SORTBY_NULLS_DEFAULT"
                                    else nulls == "SORTBY_NULLS_FIRST", locale))
        arg = None if spec.arg is None else position(builder.build(spec.arg))
        parts = []
        for pos in spec.extra:
            col = builder.scope.cols[pos]
            if not deterministic(col.collation, builder.catalog):
                raise PlanError(f"{_label(spec)}() partitioned on text under nondeterministic "
                                f"collation {col.collation}")
            parts.append(position(ir.ColumnRef(pos, col.type_oid)))
        out.append(ir.Window(spec.func, slots[i], tuple(order), arg,  # type: ignore[arg-type]
                             spec.offset, spec.type_oid, spec.arg_oid, spec.rows, spec.frame,
                             tuple(parts), spec.ranged, spec.collation))
    return tuple(out)


def plain_order_positions(spec: WindowSpec, scope: Scope) -> set[int]:
    """The scope columns a window's ORDER BY names as plain columns."""
    out = set()
    for item in spec.order:
        fields = item["SortBy"]["node"].get("ColumnRef", {}).get("fields", [])
        if fields and all("String" in f for f in fields):
            out.add(scope.lookup(tuple(f["String"]["sval"] for f in fields)))
    return out
