"""Set operations the host finishes: UNION [ALL] / INTERSECT / EXCEPT [ALL] whose operands
carry host steps, or whose rows several lookups of an ``= ANY`` key must combine.

Owns: ``needs_host`` (whether a top-level set operation's operands need it), ``host_setop``
(its Block's parts: the reader's rel is the UNION ALL of the operands, each marked with its side
and carrying the columns its steps read), ``SideStep`` / ``SetOpStep`` (what the host does
per operand, then over them), ``setop_reader`` (its Reader), ``setop_rows`` (doing it),
``setop_params_ok``, and ``setop_text`` / ``setop_state`` (EXPLAIN).

Operands served this way (the rest are planned by ``unions``): an operand with a range
parameter (``created_at > $1``, also the parameter ``<> ALL`` / ``NOT IN`` forms), with a
LIMIT / OFFSET parameter (or a constant LIMIT next to either), with an equality parameter
that not every operand shares (``author_id = $1 ... UNION ... user_id = $2``: ``$2`` is
that operand's own), and UNION / INTERSECT / EXCEPT keyed on an ``= ANY`` / IN-list key
(its lookups' rows are combined before the set operation, so a row two values share is
counted once).

How it is exact (the simplest state): the reader is keyed on the equality keys every
operand shares (or on nothing) and keeps every row of every operand for the key (no
range-partial state, no per-operand top-k). The host, over the rows of all lookups: keeps
each operand's rows that pass its cuts (PostgreSQL's comparison semantics,
``engine.plan.ranges``) and its own equality parameters (a NULL matches nothing), sorts and
pages an operand that has its own LIMIT / OFFSET, then computes the set operation on the
visible columns exactly as the dataflow's Distinct does (rows equal column by column, NULLs
equal; ``ir.setop_copies`` for INTERSECT / EXCEPT [ALL]), then the statement's ORDER BY and
LIMIT / OFFSET.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from engine.dataflow.ordering import order_key
from engine.plan import ir
from engine.plan.blocks import limit_param, union_operands
from engine.plan.planned import Block, Page, RetryPinned
from engine.plan.ranges import RangeCut, iter_cut, range_value_ok
from engine.plan.rules.keys import KeySource
from engine.plan.scope import PlanError
from engine.values import oids as T

Kind = Literal["union_all", "union", "intersect", "intersect_all", "except", "except_all"]
#: cut operators an operand may carry (``flag`` rewrites a visible column: not here)
_CUT_OPS = frozenset({"<", "<=", ">", ">=", "not_any", "not_in"})
#: types an operand's own equality parameter may compare (Python's ``==`` is PostgreSQL's
#: ``=`` on their canonical values; floats and numeric also compare NaN equal, below)
_EQUAL_TYPES = frozenset({T.INT2, T.INT4, T.INT8, T.NUMERIC, T.FLOAT4, T.FLOAT8, T.TEXT,
                          T.VARCHAR, T.NAME, T.BYTEA, T.UUID, T.BOOL, T.DATE, T.TIMESTAMP,
                          T.TIMESTAMPTZ})


@dataclass(frozen=True, slots=True)
class SideStep:
    """One operand's host steps (columns: reader output positions)."""

    cuts: tuple[RangeCut, ...] = ()
    #: (column, parameter): rows pass when ``row[column] = $parameter``
    equal: tuple[tuple[int, int, int], ...] = ()  # (column, parameter, type)
    #: the operand's own ORDER BY and LIMIT / OFFSET (constants or parameters)
    order: tuple[ir.SortKey, ...] = ()
    page: Page | None = None


@dataclass(frozen=True, slots=True)
class Combine:
    """One set operation of the statement: its kind over its operands (an operand's index
    in ``SetOpStep.sides``, or a nested set operation) and, nested, its own ORDER BY (over
    the visible columns) with its LIMIT / OFFSET."""

    kind: Kind
    operands: tuple[int | Combine, ...]
    order: tuple[ir.SortKey, ...] = ()
    page: Page | None = None

    def nested(self) -> list[Combine]:
        """The set operations nested in this one, at any depth."""
        out: list[Combine] = []
        for op in self.operands:
            if isinstance(op, Combine):
                out += [op, *op.nested()]
        return out


#: a set operation as parsed: (kind, operands: leaf indexes or nested ones, its statement)
Raw = tuple[Kind, list[Any], dict[str, Any]]
_KINDS: dict[tuple[str, bool], Kind] = {
    ("SETOP_UNION", True): "union_all", ("SETOP_UNION", False): "union",
    ("SETOP_INTERSECT", False): "intersect", ("SETOP_INTERSECT", True): "intersect_all",
    ("SETOP_EXCEPT", False): "except", ("SETOP_EXCEPT", True): "except_all"}


def raw_tree(stmt: dict[str, Any], leaves: list[dict[str, Any]], root: bool = True) -> Any:
    """The set operations of ``stmt`` as a ``Raw`` tree whose leaves (SELECT blocks, or
    set operations with their own WITH, planned on their own) are appended to ``leaves``;
    UNION ALL operands flattened as ``blocks.union_operands`` does."""
    kind = _KINDS.get((str(stmt.get("op")), bool(stmt.get("all"))))
    if kind is None or (not root and stmt.get("withClause")):
        leaves.append(stmt)
        return len(leaves) - 1
    children = [stmt["larg"], stmt["rarg"]]
    if kind == "union_all":
        children = [b for c in children for b in union_operands(c)]
    return (kind, [raw_tree(c, leaves, False) for c in children], stmt)


def raw_nested(tree: Raw) -> list[Raw]:
    """The set operations nested in ``tree``, at any depth."""
    out: list[Raw] = []
    for op in tree[1]:
        if isinstance(op, tuple):
            out += [op, *raw_nested(op)]
    return out


def tree_needs_host(blocks: Sequence[Block], tree: Raw) -> bool:
    """``needs_host`` for a tree of set operations: also a nested one with a LIMIT / OFFSET
    parameter, or with any LIMIT over an ``= ANY`` key (a page per value otherwise)."""
    nested = raw_nested(tree)
    kinds = {tree[0], *(n[0] for n in nested)}
    if needs_host(blocks, "union_all" if kinds == {"union_all"} else "union"):
        return True
    multi = any(src.multi for _, src, _ in blocks[0].keys)
    return any(limit_param(n[2].get("limitCount")) or limit_param(n[2].get("limitOffset"))
               or (multi and n[2].get("limitCount")) for n in nested)


@dataclass(frozen=True, slots=True)
class SetOpStep:
    """The host's set operation over the reader's rows: ``side`` is the output column of
    the side marker (the operand's index); ``visible`` columns are the result."""

    root: Combine
    side: int
    visible: int
    sides: tuple[SideStep, ...]
    #: the reader rel's columns it outputs (visible, the marker, the operands' columns)
    output: tuple[int, ...]
    #: the statement's constant LIMIT / OFFSET (after the set operation and ORDER BY)
    limit: int | None = None
    offset: int = 0

    def param_types(self) -> list[tuple[int, int]]:
        """(parameter, the type PostgreSQL infers for it) of every operand's steps."""
        out = []
        for side in self.sides:
            out += [(c.param, c.type_oid) for c in side.cuts]
            out += [(param, type_oid) for _, param, type_oid in side.equal]
        for page in [side.page for side in self.sides] + [c.page for c in self.root.nested()]:
            if page is not None:
                out += [(n, T.INT8) for n in (page.limit_param, page.offset_param)
                        if n is not None]
        return out


def needs_host(blocks: Sequence[Block], kind: Kind) -> bool:
    """Whether a top-level set operation of these planned operands needs the host: an
    operand with host steps, equality keys not all operands share, or an ``= ANY`` /
    IN-list key under a set operation other than UNION ALL or over an operand with its own
    LIMIT (a top-k per value would keep a page per value). Literal keys that differ
    between operands make the statement plan again with them pinned (``RetryPinned``)."""
    keysets = [{(src, t) for _, src, t in b.keys} for b in blocks]
    if any(ks != keysets[0] for ks in keysets[1:]):
        shared = set.intersection(*keysets)
        if any(src.param is None for ks in keysets for src, _ in ks - shared):
            raise RetryPinned
        return True
    if any(b.cuts or b.page is not None for b in blocks):
        return True
    # (an operand's own LIMIT is over the rows of every value of the list, not per value)
    return any(src.multi for src, _ in keysets[0]) and (
        kind != "union_all" or any(b.limit is not None for b in blocks))


def host_setop(blocks: Sequence[Block]) -> tuple[
        list[ir.Rel], list[tuple[KeySource, int]], list[str], SetOpStep]:
    """The operands as relations for the reader's UNION ALL (visible columns, the shared
    keys, the side marker, then each operand's step columns, NULL in the other operands'
    rows), the shared keys, the column names and the step (its kind, limit and offset set
    by the caller; output positions assume the reader outputs ``step.output``)."""
    keysets = [[(src, t) for _, src, t in b.keys] for b in blocks]
    shared = [k for k in dict.fromkeys(keysets[0]) if all(k in ks for ks in keysets[1:])]
    visible = blocks[0].visible
    extras: list[list[int]] = []  # per operand: its block positions the host reads
    for block in blocks:
        if block.setop is not None:  # its rel is the UNION ALL its own step reads
            raise PlanError("set operation with parameter steps inside another set operation")
        if block.windows or block.empty_row is not None or block.aggregates:
            raise PlanError("window function or aggregate over a range parameter in a "
                            "set-operation operand")
        if any(c.op not in _CUT_OPS for c in block.cuts):
            raise PlanError("EXISTS with a parameter as a select-list value in a "
                            "set-operation operand")
        own = [(pos, src, t) for pos, src, t in block.keys if (src, t) not in shared]
        if any(src.multi for _, src, _ in own):
            raise PlanError("= ANY / IN-list key that not every set-operation operand has")
        if any(t not in _EQUAL_TYPES for _, _, t in own):
            raise PlanError("equality parameter of a set-operation operand of type "
                            + ", ".join(str(t) for _, _, t in own))
        paged = block.page is not None or block.limit is not None or block.offset
        cols = [c.column for c in block.cuts] + [pos for pos, _, _ in own] + (
            [k.column for k in block.order] if paged else [])
        extras.append(list(dict.fromkeys(cols)))
    types = [[block.rel.columns[pos].type_oid for pos in cols]
             for block, cols in zip(blocks, extras, strict=True)]
    names = list(blocks[0].names[:visible]) + [f"?key{j}?" for j in range(len(shared))] + [
        "?side?"] + [f"?op{s}.{i}?" for s, cols in enumerate(extras) for i in range(len(cols))]
    marker = visible + len(shared)
    rels: list[ir.Rel] = []
    sides: list[SideStep] = []
    base = visible + 1  # reader output position of the operand's first column
    for s, (block, cols) in enumerate(zip(blocks, extras, strict=True)):
        bcols = block.rel.columns
        at = {(src, t): pos for pos, src, t in block.keys}
        exprs: list[ir.Expr] = [ir.ColumnRef(i, bcols[i].type_oid) for i in range(visible)]
        exprs += [ir.ColumnRef(at[k], bcols[at[k]].type_oid) for k in shared]
        exprs.append(ir.Const(s, T.INT4))
        for other, other_types in enumerate(types):
            exprs += [ir.ColumnRef(pos, t) for pos, t in zip(cols, other_types, strict=True)
                      ] if other == s else [ir.Const(None, t) for t in other_types]
        out = {pos: base + i for i, pos in enumerate(cols)}
        base += len(cols)
        cuts = tuple(_moved(c, out[c.column]) for c in block.cuts)
        equal = tuple((out[pos], src.param, t) for pos, src, t in block.keys
                      if (src, t) not in shared and src.param is not None)
        page = block.page
        if page is None and (block.limit is not None or block.offset):
            page = Page(block.limit, None, block.offset, None)
        order = tuple(ir.SortKey(out[k.column], k.descending, k.nulls_first, k.collation)
                      for k in block.order) if page is not None else ()
        rels.append(ir.Project(block.rel, tuple(exprs), tuple(names)))
        sides.append(SideStep(cuts, equal, order, page))
    output = (*range(visible), marker, *range(marker + 1, len(names)))
    root = Combine("union_all", tuple(range(len(blocks))))
    return rels, shared, names, SetOpStep(root, visible, visible, tuple(sides), output)


def setop_reader(block: Block) -> tuple[ir.Reader, list[tuple[int, KeySource, int]],
                                         tuple[RangeCut, ...], int]:
    """``readers.block_reader`` for a block the host finishes: the Reader (keyed on the
    shared keys, no top-k), its keys, no cuts of its own, and its hidden output count."""
    step = block.setop
    assert step is not None
    group = tuple(pos for pos, _, _ in block.keys)
    reader = ir.Reader(block.rel, group, step.output, block.order, None, 0, ())
    return reader, block.keys, (), len(step.output) - step.visible


def _moved(cut: RangeCut, column: int) -> RangeCut:
    return RangeCut(column, cut.op, cut.param, cut.type_oid, cut.target, cut.collation)


def page_values(page: Page, params: Sequence[Any]) -> tuple[int | None, int] | None:
    """(limit, offset) of a Page for these parameter values; None when a value is missing,
    not an integer or negative (PostgreSQL raises: forward upstream)."""
    bounds: list[int | None] = [page.limit, page.offset]
    for i, number in ((0, page.limit_param), (1, page.offset_param)):
        if number is None:
            continue
        if number > len(params):
            return None
        value = params[number - 1]
        if value is None:  # LIMIT NULL is no limit, OFFSET NULL is 0
            bounds[i] = None if i == 0 else 0
        elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return None
        else:
            bounds[i] = value
    return bounds[0], bounds[1] or 0


def setop_params_ok(step: SetOpStep, params: Sequence[Any]) -> bool:
    """Whether the host can apply the step for these parameter values."""
    for side in step.sides:
        for cut in side.cuts:
            if cut.param > len(params) or not range_value_ok(params[cut.param - 1]):
                return False
        if any(param > len(params) for _, param, _ in side.equal):
            return False
        if side.page is not None and page_values(side.page, params) is None:
            return False
    return all(c.page is None or page_values(c.page, params) is not None
               for c in step.root.nested())


def _equal(value: Any, bound: Any) -> bool:
    return value is not None and (value == bound or (value != value and bound != bound))


def setop_rows(step: SetOpStep, rows: Sequence[tuple[Any, ...]], params: Sequence[Any],
               order: Sequence[ir.SortKey]) -> list[tuple[Any, ...]]:
    """The statement's rows (visible columns, before its parameter page) from its
    lookups' rows; ``order``: the statement's ORDER BY over the reader's output."""
    parts: list[list[tuple[Any, ...]]] = [[] for _ in step.sides]
    for row in rows:
        parts[row[step.side]].append(row)
    kept: list[list[tuple[Any, ...]]] = []
    for side, part in zip(step.sides, parts, strict=True):
        if side.cuts:
            part = list(iter_cut(part, side.cuts, params))
        for column, param, _ in side.equal:
            bound = params[param - 1]
            part = [r for r in part if _equal(r[column], bound)]
        if side.page is not None:
            part = _paged(part, side.order, side.page, params)
        kept.append([r[: step.visible] for r in part])
    out = _combined(step.root, kept, params)
    if order:
        out.sort(key=order_key(order))
    if step.limit is not None or step.offset:
        end = None if step.limit is None else step.offset + step.limit
        out = out[step.offset: end]
    return out


Rows = list[tuple[Any, ...]]


def _paged(rows: Rows, order: Sequence[ir.SortKey], page: Page, params: Sequence[Any]) -> Rows:
    """``rows`` sorted by ``order``, then cut to the page."""
    bounds = page_values(page, params)
    if bounds is None:
        raise ValueError("invalid LIMIT/OFFSET parameter (Classified.keys returns None)")
    rows = sorted(rows, key=order_key(order))
    limit, offset = bounds
    return rows[offset:] if limit is None else rows[offset: offset + limit]


def _combined(node: Combine, kept: list[Rows], params: Sequence[Any]) -> Rows:
    """The rows of one set operation from its operands' rows (``kept``: per operand)."""
    parts = [kept[op] if isinstance(op, int) else _combined(op, kept, params)
             for op in node.operands]
    out: Rows
    if node.kind == "union_all":
        out = [r for part in parts for r in part]
    elif node.kind == "union":
        out = list(dict.fromkeys(r for part in parts for r in part))
    else:
        counts: dict[tuple[Any, ...], list[int]] = {}
        for index, rows_of in enumerate(parts):
            for r in rows_of:
                counts.setdefault(r, [0, 0])[index] += 1
        out = [g for g, (left, right) in counts.items()
               for _ in range(ir.setop_copies(node.kind, left, right))]
    return out if node.page is None else _paged(out, node.order, node.page, params)


def _tree_text(node: Combine, cols: Sequence[ir.Column]) -> str:
    ops = [str(op) if isinstance(op, int) else _tree_text(op, cols) for op in node.operands]
    text = f" {node.kind.replace('_', ' ').upper()} ".join(ops)
    if node.page is not None:
        text += " " + _page_text(node.page, node.order, cols)
    return f"({text})"


def _page_text(page: Page, order: Sequence[ir.SortKey], cols: Sequence[ir.Column]) -> str:
    limit = f"${page.limit_param}" if page.limit_param else page.limit
    offset = f"${page.offset_param}" if page.offset_param else page.offset
    sort = ", ".join(cols[k.column].name + (" DESC" if k.descending else "") for k in order)
    return f"ORDER BY {sort} LIMIT {'ALL' if limit is None else limit} OFFSET {offset}"


def setop_text(step: SetOpStep, cols: Sequence[ir.Column]) -> str:
    """EXPLAIN's text of the host steps (on the Reader line after PAGE)."""
    parts = []
    for s, side in enumerate(step.sides):
        conds = [f"{cols[c.column].name} {c.op} ${c.param}" if c.op not in (
            "not_any", "not_in") else f"${c.param} {c.op.replace('_', ' ').upper()} "
            f"({cols[c.column].name})" for c in side.cuts]
        conds += [f"{cols[col].name} = ${param}" for col, param, _ in side.equal]
        text = f"WHERE {' AND '.join(conds)}" if conds else ""
        if side.page is not None:
            text += " " + _page_text(side.page, side.order, cols)
        parts.append(f"{s}: {text.strip() or 'every row'}")
    root = step.root
    name = root.kind.replace("_", " ").upper() if not root.nested() else _tree_text(root, cols)
    tail = "" if step.limit is None else f" LIMIT {step.limit} OFFSET {step.offset}"
    return f"OPERANDS ({'; '.join(parts)}) THEN {name}{tail}"


def setop_state(step: SetOpStep) -> str:
    """EXPLAIN's ``state:`` line of a set operation the host finishes."""
    why = []
    if any(side.cuts for side in step.sides):
        why.append("range parameters")
    if any(side.equal for side in step.sides):
        why.append("equality parameters not every operand shares")
    if any(side.page is not None for side in step.sides) or any(
            c.page is not None for c in step.root.nested()):
        why.append("an operand's own LIMIT/OFFSET")
    reason = " and ".join(why) or "lookups of an = ANY key combined before the set operation"
    return f"state: every row of the key for every operand, the host cuts each operand " \
        f"then computes the set operation: {reason} in set-operation operands"
