"""FROM clauses -> IR: base tables, CTE and subquery references, explicit and implicit joins.

Owns: ``PlanContext`` (what planning one statement needs: catalog, search_path, CTEs in
scope, the subquery planner, the relations used) and ``bind_from`` (a FROM list plus the
WHERE conjuncts that connect its items -> one ``Bound`` relation and the conjuncts left over).

Invariants: the output columns of ``bind_from`` are the FROM items' columns in FROM order (as
``*`` expands), whatever order the joins were built in. Only inner and left equi-joins are
produced (a RIGHT JOIN becomes a LEFT JOIN with a column-restoring projection); a join with no
equality between its sides (CROSS JOIN, ON TRUE, non-equality conditions) is an equi-join on
no columns, its conditions a filter above it (or, for a LEFT JOIN, on the side they read); a
LEFT JOIN ON comparing both sides other than by equality is built by ``theta_joins``; any
other join shape (FULL, USING) raises ``PlanError``. A table with row-level security, a view,
or an unknown relation is a ``PlanError`` naming it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.plan import ir
from engine.plan.exprs import ExprBuilder, deterministic
from engine.plan.join_forms import Checker, Keys, full_join, swap_sides, using_join, using_names
from engine.plan.pgtypes import comparable
from engine.plan.scope import Bound, PlanError, Scope, ScopeCol
from engine.plan.theta_joins import theta_left_join
from engine.plan.values_items import is_values, times_values, values_item
from engine.sql.cacheable import Unsupported, check_statement
from engine.sql.catalog import RELKIND_NAMES, Catalog, Relation
from engine.sql.text import parse_query
from engine.values import oids as T

Node = dict[str, Any]


@dataclass
class PlanContext:
    catalog: Catalog
    search_path: tuple[str, ...]
    subquery: Callable[[PlanContext, Node], Bound]
    ctes: dict[str, Node] = field(default_factory=dict)
    relations: dict[int, Relation] = field(default_factory=dict)
    next_rte: int = 0
    #: ``$n`` equalities pulled out of FROM subqueries (``pullup``): (rte, index, ``$n``
    #: side); None where a subquery is on the NULL-padded side of an outer join.
    pulled: list[tuple[int, int, Node]] | None = None

    def new_rte(self) -> int:
        self.next_rte += 1
        return self.next_rte


def _alias(node: Node) -> tuple[str | None, list[str]]:
    alias = node.get("alias")
    if alias is None:
        return None, []
    names = [c["String"]["sval"] for c in alias.get("colnames", [])]
    return alias.get("aliasname"), names


def _requalify(bound: Bound, qualifier: str, colnames: list[str], rte: int) -> Bound:
    if len(colnames) > len(bound.scope.cols):
        raise PlanError(f"{qualifier} has {len(bound.scope.cols)} columns available but "
                        f"{len(colnames)} columns specified")
    cols = tuple(ScopeCol(qualifier, colnames[i] if i < len(colnames) else c.name, c.type_oid,
                          c.collation, rte if not c.table_pk else c.rte, c.table_pk)
                 for i, c in enumerate(bound.scope.cols))
    return Bound(bound.rel, Scope(cols))


def table_ref(rel: Relation) -> ir.TableRef:
    names = [c.name for c in rel.columns]
    return ir.TableRef(rel.oid, rel.schema, rel.name,
                       tuple(ir.Column(c.name, c.type_oid) for c in rel.columns),
                       tuple(names.index(k) for k in rel.primary_key),
                       frozenset(i for i, c in enumerate(rel.columns) if c.not_null))


def _range_var(ctx: PlanContext, node: Node) -> Bound:
    name, schema = node["relname"], node.get("schemaname")
    alias, colnames = _alias(node)
    if schema is None and name in ctx.ctes:
        sub = ctx.subquery(ctx, ctx.ctes[name])
        return _requalify(sub, alias or name, colnames, ctx.new_rte())
    rel = ctx.catalog.resolve(name, schema, ctx.search_path)
    if rel is None:
        shown = f"{schema}.{name}" if schema else name
        raise PlanError(f"relation {shown} is not a known table under search_path "
                        f"{','.join(ctx.search_path)}")
    if rel.row_security:
        raise PlanError(f"table with row-level security {rel.qualified}")
    if rel.kind == "v" and rel.view_sql is not None:
        return _view(ctx, rel, alias or name, colnames)
    if rel.kind != "r":
        missing = " (definition not in the catalog)" if rel.kind == "v" else ""
        raise PlanError(f"{RELKIND_NAMES.get(rel.kind, rel.kind)} {rel.qualified}{missing}")
    ctx.relations[rel.oid] = rel
    rte = ctx.new_rte()
    qualifier = alias or name
    pk = set(rel.primary_key)
    cols = tuple(ScopeCol(qualifier, colnames[i] if i < len(colnames) else c.name, c.type_oid,
                          c.collation, rte, c.name in pk, not_null=c.not_null)
                 for i, c in enumerate(rel.columns))
    return Bound(ir.Scan(table_ref(rel)), Scope(cols))


def _view(ctx: PlanContext, rel: Relation, qualifier: str, colnames: list[str]) -> Bound:
    """A view, inlined: its definition planned as a subquery under the search_path the
    catalog was read with (PostgreSQL resolved the view's names when it was created)."""
    parsed = parse_query(rel.view_sql or "")
    if parsed.stmt is None:
        raise PlanError(f"view {rel.qualified}: {parsed.error}")
    screened = check_statement(parsed.stmt)
    if isinstance(screened, Unsupported):
        raise PlanError(f"view {rel.qualified}: {screened.reason}")
    inner = PlanContext(ctx.catalog, ctx.catalog.load_search_path, ctx.subquery,
                        relations=ctx.relations, next_rte=ctx.next_rte)
    sub = ctx.subquery(inner, parsed.stmt)
    ctx.next_rte = inner.next_rte + 1
    ctx.relations[rel.oid] = rel
    names = colnames + [c.name for c in rel.columns][len(colnames):]
    return _requalify(sub, qualifier, names, ctx.new_rte())


def _range_subselect(ctx: PlanContext, node: Node) -> Bound:
    if node.get("lateral"):
        raise PlanError("LATERAL subquery")
    from engine.plan.pullup import pull_params  # it builds on this module's users

    alias, colnames = _alias(node)
    pending = ctx.pulled
    query, params = pull_params(node["subquery"]) if pending is not None else \
        (node["subquery"], [])
    sub = ctx.subquery(ctx, query)
    shown = len(sub.scope.cols) - len(params)
    if len(colnames) > shown:
        raise PlanError(f"{alias} has {shown} columns available but {len(colnames)} "
                        "columns specified")
    rte = ctx.new_rte()
    bound = _requalify(sub, alias or "unnamed_subquery", colnames, rte)
    if not params or pending is None:
        return bound
    pending.extend((rte, i, param) for i, param in enumerate(params))
    cols = tuple(dataclasses.replace(c, hidden=True) if i >= shown else c
                 for i, c in enumerate(bound.scope.cols))
    return Bound(bound.rel, Scope(cols))


def conjuncts(node: Node | None) -> list[Node]:
    """The top-level AND operands of a boolean expression."""
    if node is None:
        return []
    body = node.get("BoolExpr")
    if body is not None and body.get("boolop") == "AND_EXPR":
        return [c for arg in body["args"] for c in conjuncts(arg)]
    return [node]


def column_equality(node: Node) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """``(left fields, right fields)`` when ``node`` is ``colref = colref``."""
    body = node.get("A_Expr")
    if body is None or body.get("kind") != "AEXPR_OP":
        return None
    if [n.get("String", {}).get("sval") for n in body.get("name", [])][-1:] != ["="]:
        return None
    left, right = body.get("lexpr") or {}, body.get("rexpr") or {}
    if "ColumnRef" not in left or "ColumnRef" not in right:
        return None
    fields = []
    for side in (left, right):
        parts = side["ColumnRef"]["fields"]
        if any("String" not in p for p in parts):
            return None
        fields.append(tuple(p["String"]["sval"] for p in parts))
    return fields[0], fields[1]


def _join_keys(eqs: list[tuple[int, int]], left: Bound, right: Bound, catalog: Catalog) -> tuple[
        tuple[int, ...], tuple[int, ...]]:
    width = len(left.scope.cols)
    lk, rk = [], []
    for a, b in eqs:
        if a >= width:
            a, b = b, a
        lc, rc = left.scope.cols[a], right.scope.cols[b - width]
        if not comparable(lc.type_oid, rc.type_oid):
            raise PlanError(f"join of {lc.name} and {rc.name}: types differ")
        if not deterministic(lc.collation, catalog) or not deterministic(rc.collation, catalog):
            raise PlanError("join on text under a nondeterministic collation")
        lk.append(a)
        rk.append(b - width)
    return tuple(lk), tuple(rk)


def _combined(left: Bound, right: Bound) -> Scope:
    return Scope(left.scope.cols + right.scope.cols)


def _split_on(ctx: PlanContext, quals: Node | None, left: Bound, right: Bound,
              kind: str) -> tuple[list[tuple[int, int]], list[Node], list[Node], list[Node]]:
    """ON conjuncts -> (equi-join pairs, filters on the right input, filters on the join,
    and for a LEFT JOIN the conditions reading only the left side)."""
    scope = _combined(left, right)
    width = len(left.scope.cols)
    eqs: list[tuple[int, int]] = []
    right_only: list[Node] = []
    left_only: list[Node] = []
    rest: list[Node] = []
    for conj in conjuncts(quals):
        if conj.get("A_Const", {}).get("boolval", {}).get("boolval"):
            continue  # ON TRUE
        pair = column_equality(conj)
        if pair is not None:
            a, b = scope.lookup(pair[0]), scope.lookup(pair[1])
            if (a < width) != (b < width):
                eqs.append((a, b))
                continue
        if kind == "left":
            if _has_sublink(conj):
                raise PlanError("subquery in a LEFT JOIN ON condition")
            refs = [scope.lookup(f) for f in _column_refs(conj)]
            if refs and all(r >= width for r in refs):
                right_only.append(conj)
            elif all(r < width for r in refs):
                left_only.append(conj)
            else:
                rest.append(conj)  # both sides: a theta LEFT JOIN (theta_joins)
            continue
        rest.append(conj)
    return eqs, right_only, rest, left_only


def _has_sublink(tree: Any) -> bool:
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "SubLink" in node:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _gate_left(ctx: PlanContext, left: Bound, right: Bound, conds: list[Node],
               eqs: list[tuple[int, int]]) -> tuple[Bound, Bound, list[tuple[int, int]]]:
    """LEFT JOIN ON conditions reading only the left side: the first equality's left column
    is replaced by a hidden ``CASE WHEN conds THEN column END``, so a left row whose
    conditions are not true matches nothing (NULL equals nothing) and is padded, as in
    PostgreSQL. Right-side positions in ``eqs`` move up by the added column. Without an
    equality the join gets one: the left side's ``CASE WHEN conds THEN true END`` equal to a
    hidden ``true`` on the right side."""
    width = len(left.scope.cols)
    builder = ExprBuilder(left.scope, ctx.catalog, clause="JOIN/ON")
    preds = tuple(builder.boolean(c) for c in conds)
    pred = preds[0] if len(preds) == 1 else ir.BoolOp("and", preds)
    if not eqs:
        true = ir.Const(True, T.BOOL)
        gated: ir.Expr = ir.Case(((pred, true),), None, T.BOOL)
        name = "?on?"
        col = ScopeCol(None, name, T.BOOL, None, 0, False, hidden=True)
        right = _with_hidden(right, true, col)
        others: list[tuple[int, int]] = []
        b = width + len(right.scope.cols)  # its position after the left's added column
    else:
        (a, b), *others = [(x, y) if x < width else (y, x) for x, y in eqs]
        col = left.scope.cols[a]
        gated = ir.Case(((pred, ir.ColumnRef(a, col.type_oid)),), None, col.type_oid)
        name = f"?on.{col.name}?"
        col = dataclasses.replace(col, name=name, hidden=True, table_pk=False)
        b += 1
    bound = _with_hidden(left, gated, col)
    return bound, right, [(width, b)] + [(x, y + 1) for x, y in others]


def _with_hidden(bound: Bound, expr: ir.Expr, col: ScopeCol) -> Bound:
    """``bound`` with one more (hidden) column computed by ``expr``."""
    cols = bound.rel.columns
    rel = ir.Project(bound.rel, (*(ir.ColumnRef(i, c.type_oid) for i, c in enumerate(cols)),
                                 expr), (*(c.name for c in cols), col.name))
    return Bound(rel, Scope((*bound.scope.cols, col)))


def _column_refs(tree: Any) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("ColumnRef")
            if ref is not None:
                parts = ref.get("fields", [])
                if all("String" in p for p in parts):
                    out.append(tuple(p["String"]["sval"] for p in parts))
                continue
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return out


def _join_expr(ctx: PlanContext, node: Node) -> tuple[Bound, list[Node]]:
    """A JoinExpr -> the joined relation and the ON conjuncts that filter the join output."""
    if node.get("alias") is not None:
        raise PlanError("alias on a join")
    jointype = node.get("jointype", "JOIN_INNER")
    if jointype not in JOIN_KINDS:
        raise PlanError(str(jointype))
    kind = JOIN_KINDS[jointype]
    if is_values(node["larg"]) or is_values(node["rarg"]):
        return _join_values(ctx, node, kind)
    if kind != "inner" and ctx.pulled is not None:
        pending, ctx.pulled = ctx.pulled, None  # a filter above would drop padded rows
        try:
            return _join_expr(ctx, node)
        finally:
            ctx.pulled = pending
    left, lrest = bind_item(ctx, node["larg"])
    if _lateral(node["rarg"]):
        on = [c for c in conjuncts(node.get("quals"))
              if not c.get("A_Const", {}).get("boolval", {}).get("boolval")]
        if on and kind != "inner":
            raise PlanError("LEFT JOIN LATERAL ON conditions other than TRUE")
        return _lateral_join(ctx, left, node["rarg"], kind), lrest + on
    right, rrest = bind_item(ctx, node["rarg"])
    if (rrest and kind in ("left", "full")) or (lrest and kind in ("right", "full")):
        raise PlanError(f"{kind.upper()} JOIN whose NULL-padded side carries join "
                        "conditions of its own")
    if node.get("isNatural") or node.get("usingClause"):
        using = None if node.get("isNatural") else \
            [n["String"]["sval"] for n in node["usingClause"]]
        names = using_names(left, right, using)
        return using_join(left, right, names, kind, _checker(ctx)), lrest + rrest
    if kind == "full":
        eqs, _, rest, _ = _split_on(ctx, node.get("quals"), left, right, "full")
        if rest:
            raise PlanError("FULL JOIN ON conditions other than equalities between its sides")
        keys = _join_keys(eqs, left, right, ctx.catalog)
        return Bound(full_join(left, right, keys), _combined(left, right)), []
    if kind == "right":
        return _right_join(ctx, node, left, right), lrest + rrest
    eqs, right_only, rest, left_only = _split_on(ctx, node.get("quals"), left, right, kind)
    if right_only:
        right = _filter_input(ctx, right, right_only)
    if kind == "left" and rest:
        keys = _join_keys(eqs, left, right, ctx.catalog)
        rel = theta_left_join(ctx, left, right, keys, left_only + rest)
        return Bound(rel, _combined(left, right)), lrest + rrest
    if left_only:
        left, right, eqs = _gate_left(ctx, left, right, left_only, eqs)
    lk, rk = _join_keys(eqs, left, right, ctx.catalog)
    joined = Bound(ir.Join(left.rel, right.rel, lk, rk, kind), _combined(left, right))  # type: ignore[arg-type]
    return joined, lrest + rrest + rest


JOIN_KINDS = {"JOIN_INNER": "inner", "JOIN_LEFT": "left", "JOIN_RIGHT": "right",
              "JOIN_FULL": "full"}


def _checker(ctx: PlanContext) -> Checker:
    def check(eqs: list[tuple[int, int]], left: Bound, right: Bound) -> Keys:
        return _join_keys(eqs, left, right, ctx.catalog)
    return check


def _right_join(ctx: PlanContext, node: Node, left: Bound, right: Bound) -> Bound:
    eqs, right_only, rest, left_only = _split_on(ctx, node.get("quals"), right, left, "left")
    if right_only:
        left = _filter_input(ctx, left, right_only)
    join: ir.Rel
    if rest:
        keys = _join_keys(eqs, right, left, ctx.catalog)
        join = theta_left_join(ctx, right, left, keys, left_only + rest)
    else:
        if left_only:
            right, left, eqs = _gate_left(ctx, right, left, left_only, eqs)
        lk, rk = _join_keys(eqs, right, left, ctx.catalog)
        join = ir.Join(right.rel, left.rel, lk, rk, "left")
    return Bound(swap_sides(join, len(right.scope.cols)), _combined(left, right))


def _filter_input(ctx: PlanContext, bound: Bound, conds: list[Node]) -> Bound:
    builder = ExprBuilder(bound.scope, ctx.catalog, clause="JOIN/ON")
    preds = tuple(builder.boolean(c) for c in conds)
    pred = preds[0] if len(preds) == 1 else ir.BoolOp("and", preds)
    return Bound(ir.Filter(bound.rel, pred), bound.scope)


def _join_values(ctx: PlanContext, node: Node, kind: str) -> tuple[Bound, list[Node]]:
    """``x JOIN (VALUES ...) v ON conds`` (either side): ``x CROSS JOIN VALUES``, the ON conditions
    left to filter it (``values_items``)."""
    first = is_values(node["larg"])
    if kind != "inner" or node.get("usingClause") or node.get("isNatural") or \
            (first and is_values(node["rarg"])):
        raise PlanError("VALUES list in an outer, USING or NATURAL join, or joined with "
                        "another VALUES list")
    values = values_item(ctx.catalog, node["larg" if first else "rarg"], ctx.new_rte())
    other, rest = bind_item(ctx, node["rarg" if first else "larg"])
    return times_values(other, values, first), rest + conjuncts(node.get("quals"))


def _lateral(item: Node) -> bool:
    return bool(item.get("RangeSubselect", {}).get("lateral"))


def _lateral_join(ctx: PlanContext, left: Bound, item: Node, kind: str) -> Bound:
    from engine.plan.laterals import lateral_join  # it builds on this module
    return lateral_join(ctx, left, item["RangeSubselect"], kind)


def bind_item(ctx: PlanContext, node: Node) -> tuple[Bound, list[Node]]:
    kind, body = next(iter(node.items()))
    if kind == "RangeVar":
        return _range_var(ctx, body), []
    if kind == "RangeSubselect":
        return _range_subselect(ctx, body), []
    if kind == "JoinExpr":
        return _join_expr(ctx, body)
    raise PlanError(f"FROM item {kind}")


def bind_from(ctx: PlanContext, items: list[Node], where: list[Node]) -> tuple[Bound, list[Node]]:
    """Join the FROM items; implicit joins consume their connecting WHERE equalities.
    Returns the relation and the WHERE conjuncts still to apply."""
    if not items:
        raise PlanError("SELECT without FROM")
    if len(items) > 1 and (is_values(items[0]) or is_values(items[-1])):
        first = is_values(items[0])
        values = values_item(ctx.catalog, items[0 if first else -1], ctx.new_rte())
        other, rest = bind_from(ctx, items[1:] if first else items[:-1], where)
        return times_values(other, values, first), rest
    if any(is_values(item) for item in items):
        raise PlanError("VALUES list alone in FROM, or between other FROM items")
    if len(items) > 1 and _lateral(items[-1]):  # FROM a, b, LATERAL (...) x
        bound_rest = bind_from(ctx, items[:-1], where)
        return _lateral_join(ctx, bound_rest[0], items[-1], "inner"), bound_rest[1]
    bound: list[Bound] = []
    pending: list[Node] = []
    for item in items:
        b, rest = bind_item(ctx, item)
        bound.append(b)
        pending.extend(rest)
    if len(bound) == 1:
        return bound[0], pending + where
    return _implicit_joins(bound, pending + where, ctx.catalog)


def _implicit_joins(items: list[Bound], where: list[Node],
                    catalog: Catalog) -> tuple[Bound, list[Node]]:
    full = Scope(tuple(c for b in items for c in b.scope.cols))
    owner: list[int] = []
    offsets: list[int] = []
    for i, b in enumerate(items):
        offsets.append(len(owner))
        owner.extend([i] * len(b.scope.cols))
    edges: list[tuple[Node, int, int]] = []  # conjunct, global a, global b
    rest: list[Node] = []
    for conj in where:
        pair = column_equality(conj)
        if pair is not None:
            ga, gb = full.lookup(pair[0]), full.lookup(pair[1])
            if owner[ga] != owner[gb]:
                edges.append((conj, ga, gb))
                continue
        rest.append(conj)
    joined = [0]
    current = items[0]
    positions = list(range(offsets[0], offsets[0] + len(items[0].scope.cols)))
    while len(joined) < len(items):
        step = _next_join(items, joined, edges, owner)
        # an item no equality connects: a cross join (every row with every row)
        target, used = step if step is not None else (_unjoined(items, joined), [])
        other = items[target]
        local = {g: i for i, g in enumerate(positions)}
        base = len(positions)
        lk = tuple(local[a if owner[a] != target else b] for _, a, b in used)
        rk = tuple((b if owner[b] == target else a) - offsets[target] for _, a, b in used)
        _join_keys([(lk[i], base + rk[i]) for i in range(len(lk))], current, other, catalog)
        current = Bound(ir.Join(current.rel, other.rel, lk, rk), _combined(current, other))
        positions.extend(range(offsets[target], offsets[target] + len(other.scope.cols)))
        joined.append(target)
        edges = [e for e in edges if e not in used]
    for conj, _, _ in edges:  # equalities between already-joined items: plain filters
        rest.append(conj)
    return _restore_order(current, positions), rest


def _unjoined(items: list[Bound], joined: list[int]) -> int:
    return next(i for i in range(len(items)) if i not in joined)


def _next_join(items: list[Bound], joined: list[int], edges: list[tuple[Node, int, int]],
               owner: list[int]) -> tuple[int, list[tuple[Node, int, int]]] | None:
    for target in range(len(items)):
        if target in joined:
            continue
        used = [e for e in edges
                if (owner[e[1]] == target and owner[e[2]] in joined)
                or (owner[e[2]] == target and owner[e[1]] in joined)]
        if used:
            return target, used
    return None


def _restore_order(bound: Bound, positions: list[int]) -> Bound:
    if positions == sorted(positions):
        return bound
    order = sorted(range(len(positions)), key=lambda i: positions[i])
    cols = bound.rel.columns
    rel = ir.Project(bound.rel, tuple(ir.ColumnRef(i, cols[i].type_oid) for i in order),
                     tuple(cols[i].name for i in order))
    return Bound(rel, Scope(tuple(bound.scope.cols[i] for i in order)))
