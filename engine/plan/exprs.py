"""SQL scalar expressions (libpg_query JSON) -> IR expressions typed as PostgreSQL types them.

Owns: ``ExprBuilder`` — translation of one expression against a scope, with PostgreSQL's
literal typing (an untyped string literal takes the type of what it is compared with), the
supported operators and functions, and the collation screen for text ordering. Aggregate
calls are delegated to a hook (``on_agg``) so that the same builder serves WHERE (no hook:
an aggregate there is an error) and the select list of a grouped query.

Invariant: every returned expression only uses operators whose PostgreSQL result (value and
type) the evaluator reproduces exactly; anything else raises ``PlanError`` with a reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.dataflow import pgtime
from engine.plan import arrayops, collations, datetimes, ir, jsonops, pgtypes, regex
from engine.plan.literals import LiteralError, literal_value
from engine.plan.scope import PlanError, Scope, column_refs
from engine.sql.catalog import BYTE_ORDER_COLLATIONS, Catalog
from engine.values import oids as T

Node = dict[str, Any]
AggHook = Callable[[Node], ir.Expr]
ColHook = Callable[[int], ir.Expr]

AGGREGATES = frozenset({"count", "sum", "avg", "min", "max"})
#: Aggregates whose result depends on the order of their input: planned with their ORDER BY.
ORDERED_AGGREGATES = {"string_agg": 2, "array_agg": 1, "json_agg": 1, "jsonb_agg": 1}
#: Aggregates PostgreSQL has that the planner does not support (named in the reason).
KNOWN_AGGREGATES = frozenset({
    "string_agg", "array_agg", "json_agg", "jsonb_agg", "json_object_agg", "bool_and",
    "bool_or", "every", "bit_and", "bit_or", "stddev", "stddev_pop", "stddev_samp",
    "variance", "var_pop", "var_samp", "corr", "covar_pop", "covar_samp", "percentile_cont",
    "percentile_disc", "mode", "xmlagg", "range_agg", "any_value",
} | AGGREGATES)
_TEMPORAL = frozenset({T.DATE, T.TIMESTAMP, T.TIMESTAMPTZ, T.INTERVAL})
_COMPARE = {"=": "=", "<>": "<>", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_ARITH = {"+", "-", "*", "/", "%"}
_TEXT_FUNCS: dict[str, tuple[str, tuple[tuple[int, ...], ...], int]] = {
    # sql name: (IR name, accepted argument type lists, result type)
    "lower": ("lower", ((T.TEXT,),), T.TEXT),
    "upper": ("upper", ((T.TEXT,),), T.TEXT),
    "length": ("length", ((T.TEXT,),), T.INT4),
    "char_length": ("length", ((T.TEXT,),), T.INT4),
    "substr": ("substr", ((T.TEXT, T.INT4), (T.TEXT, T.INT4, T.INT4)), T.TEXT),
    "substring": ("substr", ((T.TEXT, T.INT4), (T.TEXT, T.INT4, T.INT4)), T.TEXT),
    "btrim": ("btrim", ((T.TEXT,), (T.TEXT, T.TEXT)), T.TEXT),
    "ltrim": ("ltrim", ((T.TEXT,), (T.TEXT, T.TEXT)), T.TEXT),
    "rtrim": ("rtrim", ((T.TEXT,), (T.TEXT, T.TEXT)), T.TEXT),
    "replace": ("replace", ((T.TEXT, T.TEXT, T.TEXT),), T.TEXT),
    "left": ("left", ((T.TEXT, T.INT4),), T.TEXT),
    "right": ("right", ((T.TEXT, T.INT4),), T.TEXT),
    "strpos": ("strpos", ((T.TEXT, T.TEXT),), T.INT4),
    "position": ("strpos", ((T.TEXT, T.TEXT),), T.INT4),  # POSITION(s IN t) = strpos(t, s)
}
_TEXTISH = (T.TEXT, T.VARCHAR, T.NAME, T.UNKNOWN)


def _name(parts: list[Node]) -> str:
    names = [p["String"]["sval"] for p in parts if "String" in p]
    return names[-1] if names else "?"


def is_aggregate_call(call: Node) -> bool:
    """A FuncCall the grouping plans (the others are refused by name in ``func_call``)."""
    parts = [p["String"]["sval"] for p in call.get("funcname", []) if "String" in p]
    name = parts[-1].lower() if parts else ""
    if name in ORDERED_AGGREGATES:
        return len(call.get("args", [])) == ORDERED_AGGREGATES[name]
    return name in AGGREGATES and bool(call.get("agg_star") or call.get("agg_distinct")
                                       or len(call.get("args", [])) == 1)


def deterministic(collation: str | None, catalog: Catalog) -> bool:
    """Whether equality under ``collation`` is byte equality (the catalog lists the
    nondeterministic collations, from ``pg_collation.collisdeterministic``)."""
    return collation is None or collation not in catalog.nondeterministic


class ExprBuilder:
    """Translate expressions over ``scope``; ``on_agg`` handles aggregate calls and
    ``on_column`` maps a scope position to the expression that stands for it."""

    def __init__(self, scope: Scope, catalog: Catalog, *, on_agg: AggHook | None = None,
                 on_column: ColHook | None = None, clause: str = "WHERE",
                 on_node: Callable[[Node], ir.Expr | None] | None = None) -> None:
        self.scope = scope
        self.catalog = catalog
        self.on_agg = on_agg
        self.on_column = on_column
        self.on_node = on_node
        self.clause = clause
        #: collation of each ColumnRef index this builder produced (None: not text).
        self.colls: dict[int, str | None] = {}

    # ------------------------------------------------------------------ entry points
    def build(self, node: Node) -> ir.Expr:
        if self.on_node is not None:
            found = self.on_node(node)
            if found is not None:
                return found
        kind, body = next(iter(node.items()))
        handler = _HANDLERS.get(kind)
        if handler is None:
            raise PlanError(_describe(kind, body))
        return handler(self, body)

    def boolean(self, node: Node) -> ir.Expr:
        expr = self.coerce(self.build(node), T.BOOL)
        if expr.type_oid != T.BOOL:
            raise PlanError(f"argument of {self.clause} must be type boolean")
        return expr

    # ------------------------------------------------------------------ typing helpers
    def coerce(self, expr: ir.Expr, target: int) -> ir.Expr:
        """``expr`` as ``target``: types an untyped literal, widens numerics."""
        if expr.type_oid == target:
            return expr
        if isinstance(expr, ir.Const) and expr.type_oid == T.UNKNOWN:
            if expr.value is None:
                return ir.Const(None, target)
            try:
                return ir.Const(literal_value(target, str(expr.value)), target)
            except LiteralError as exc:
                if target == T.TIMESTAMPTZ:  # without an offset: in the session TimeZone
                    return datetimes.zoned_literal(str(expr.value), str(exc))
                raise PlanError(str(exc)) from exc
        if expr.type_oid in pgtypes.INTEGER_TYPES and target in pgtypes.NUMERIC_TYPES and \
                pgtypes.arithmetic_type("+", expr.type_oid, target) == target:
            return ir.Cast(expr, target)
        if expr.type_oid == T.NUMERIC and target in (T.FLOAT4, T.FLOAT8):
            return ir.Cast(expr, target)
        if expr.type_oid in (T.VARCHAR, T.NAME) and target == T.TEXT:
            return ir.Cast(expr, T.TEXT)  # PostgreSQL's implicit binary coercion
        if expr.type_oid == T.TEXT and target == T.VARCHAR:
            return ir.Cast(expr, T.VARCHAR)
        return expr

    def collation(self, expr: ir.Expr) -> str | None:
        """The collation a text expression compares under (None for non-text)."""
        if expr.type_oid not in (T.TEXT, T.VARCHAR, T.NAME, T.UNKNOWN, T.BPCHAR):
            return None
        found = [c for c in (self.colls.get(i) for i in _text_columns(expr)) if c is not None]
        if len(set(found)) > 1:
            raise PlanError("comparison of text under two different collations")
        return found[0] if found else self.catalog.default_collation

    def check_ordering(self, exprs: tuple[ir.Expr, ...], what: str) -> None:
        collations.check_ordering(self, exprs, what)

    def order_locale(self, exprs: tuple[ir.Expr, ...], what: str) -> str | None:
        return collations.order_locale(self, exprs, what)

    def check_equality(self, exprs: tuple[ir.Expr, ...]) -> None:
        for expr in exprs:
            coll = self.collation(expr)
            if not deterministic(coll, self.catalog):
                raise PlanError(f"text comparison under nondeterministic collation {coll}")

    # ------------------------------------------------------------------ leaves
    def column(self, body: Node) -> ir.Expr:
        fields = body.get("fields", [])
        if any("A_Star" in f for f in fields):
            raise PlanError("* in an expression")
        pos = self.scope.lookup(tuple(f["String"]["sval"] for f in fields))
        col = self.scope.cols[pos]
        if col.type_oid not in pgtypes.SUPPORTED_TYPES and col.type_oid not in arrayops.ARRAY_TYPES:
            raise PlanError(f"column {col.name} of type {pgtypes.type_name(col.type_oid)}")
        expr = self.on_column(pos) if self.on_column is not None else ir.ColumnRef(
            pos, col.type_oid)
        if isinstance(expr, ir.ColumnRef):
            self.colls[expr.index] = col.collation
        return expr

    def const(self, body: Node) -> ir.Expr:
        if body.get("isnull"):
            return ir.Const(None, T.UNKNOWN)
        if "ival" in body:
            value = int(body["ival"].get("ival", 0))
            return ir.Const(value, T.INT4)
        if "fval" in body:
            text = str(body["fval"]["fval"])
            if text.lstrip("-").isdigit():
                oid = pgtypes.integer_literal_type(text)
                return ir.Const(int(text) if oid != T.NUMERIC else literal_value(oid, text),
                                oid)
            return ir.Const(literal_value(T.NUMERIC, text), T.NUMERIC)
        if "sval" in body:
            return ir.Const(str(body["sval"].get("sval", "")), T.UNKNOWN)
        if "boolval" in body:
            return ir.Const(bool(body["boolval"].get("boolval", False)), T.BOOL)
        raise PlanError("bit-string literal")

    # ------------------------------------------------------------------ operators
    def a_expr(self, body: Node) -> ir.Expr:
        kind = body.get("kind", "AEXPR_OP")
        handler = _AEXPR.get(kind)
        if handler is None:
            raise PlanError(_AEXPR_NAMES.get(kind, f"operator kind {kind}"))
        return handler(self, body)

    def op(self, body: Node) -> ir.Expr:
        name = _name(body.get("name", []))
        if body.get("lexpr") is None:
            if name != "-":
                raise PlanError(f"prefix operator {name}")
            arg = self.build(body["rexpr"])
            if arg.type_oid not in pgtypes.NUMERIC_TYPES:
                raise PlanError(f"operator does not exist: - {pgtypes.type_name(arg.type_oid)}")
            return ir.Negate(arg, arg.type_oid)
        left, right = self.build(body["lexpr"]), self.build(body["rexpr"])
        if name in _COMPARE:
            return self.compare(_COMPARE[name], left, right)
        if name in _ARITH:
            return self.arith(name, left, right)
        if name == "||":
            return self.textcat(left, right)
        if arrayops.applies(name, left, right):
            return arrayops.array_operator(self, name, left, right)
        if name in jsonops.JSON_OPERATORS:
            return jsonops.json_operator(self, name, left, right)
        if name in regex.REGEX_OPERATORS:
            return regex.regex_match(self, name, left, right)
        raise PlanError(f"operator {name}")

    def pair(self, left: ir.Expr, right: ir.Expr) -> tuple[ir.Expr, ir.Expr]:
        """Resolve an untyped literal against the other side."""
        if left.type_oid == T.UNKNOWN and right.type_oid != T.UNKNOWN:
            left = self.coerce(left, right.type_oid)
        elif right.type_oid == T.UNKNOWN and left.type_oid != T.UNKNOWN:
            right = self.coerce(right, left.type_oid)
        elif left.type_oid == T.UNKNOWN and right.type_oid == T.UNKNOWN:
            left, right = self.coerce(left, T.TEXT), self.coerce(right, T.TEXT)
        return left, right

    def compare(self, op: str, left: ir.Expr, right: ir.Expr) -> ir.Expr:
        left, right = self.pair(left, right)
        if not pgtypes.comparable(left.type_oid, right.type_oid):
            raise PlanError(f"comparison {pgtypes.type_name(left.type_oid)} {op} "
                            f"{pgtypes.type_name(right.type_oid)}")
        if op in ("=", "<>"):
            self.check_equality((left, right))
            return ir.Compare(op, left, right)  # type: ignore[arg-type]
        locale = self.order_locale((left, right), f"comparison {op}")
        return ir.Compare(op, left, right, locale)  # type: ignore[arg-type]

    def arith(self, op: str, left: ir.Expr, right: ir.Expr) -> ir.Expr:
        if {left.type_oid, right.type_oid} & _TEMPORAL:
            return self.temporal_arith(op, left, right)
        left, right = self.pair(left, right)
        result = pgtypes.arithmetic_type(op, left.type_oid, right.type_oid)
        if result is None:
            raise PlanError(f"operator {pgtypes.type_name(left.type_oid)} {op} "
                            f"{pgtypes.type_name(right.type_oid)}")
        if left.type_oid != right.type_oid:
            left, right = self.coerce(left, result), self.coerce(right, result)
        return ir.Arith(op, left, right, result)  # type: ignore[arg-type]

    def temporal_arith(self, op: str, left: ir.Expr, right: ir.Expr) -> ir.Expr:
        return datetimes.temporal_arith(self, op, left, right)

    def textcat(self, left: ir.Expr, right: ir.Expr) -> ir.Expr:
        left, right = self.pair(left, right)
        for side in (left, right):
            if side.type_oid not in _TEXTISH:
                raise PlanError(f"|| on {pgtypes.type_name(side.type_oid)}")
        return ir.Func("textcat", (left, right), T.TEXT)

    def in_list(self, body: Node) -> ir.Expr:
        arg = self.build(body["lexpr"])
        items = [self.build(i) for i in body["rexpr"]["List"]["items"]] \
            if "List" in body["rexpr"] else None
        if items is None:
            raise PlanError("IN with a subquery")
        typed = []
        for item in items:
            a, b = self.pair(arg, item)
            if not pgtypes.comparable(a.type_oid, b.type_oid):
                raise PlanError(f"IN list comparing {pgtypes.type_name(a.type_oid)} with "
                                f"{pgtypes.type_name(b.type_oid)}")
            typed.append(b)
            arg = a
        self.check_equality((arg, *typed))
        return ir.InList(arg, tuple(typed), negated=_name(body["name"]) == "<>")

    def like(self, body: Node, case_insensitive: bool) -> ir.Expr:
        arg, pattern = self.pair(self.build(body["lexpr"]), self.build(body["rexpr"]))
        for side in (arg, pattern):
            if side.type_oid not in _TEXTISH:
                raise PlanError(f"LIKE on {pgtypes.type_name(side.type_oid)}")
        if case_insensitive:
            coll = self.collation(arg)
            if coll not in BYTE_ORDER_COLLATIONS:
                raise PlanError(f"ILIKE under collation {coll}")
        return ir.Like(arg, pattern, case_insensitive, negated=_name(body["name"]).startswith("!"))

    def between(self, body: Node) -> ir.Expr:
        if body["kind"] in ("AEXPR_BETWEEN_SYM", "AEXPR_NOT_BETWEEN_SYM"):
            raise PlanError("BETWEEN SYMMETRIC")
        arg = self.build(body["lexpr"])
        low, high = (self.build(i) for i in body["rexpr"]["List"]["items"])
        arg, low = self.pair(arg, low)
        arg, high = self.pair(arg, high)
        for bound in (low, high):
            if not pgtypes.comparable(arg.type_oid, bound.type_oid):
                raise PlanError(f"BETWEEN on {pgtypes.type_name(arg.type_oid)}")
        locale = self.order_locale((arg, low, high), "BETWEEN")
        return ir.Between(arg, low, high, negated=body["kind"] == "AEXPR_NOT_BETWEEN",
                          collation=locale)

    def nullif(self, body: Node) -> ir.Expr:
        left, right = self.pair(self.build(body["lexpr"]), self.build(body["rexpr"]))
        if not pgtypes.comparable(left.type_oid, right.type_oid):
            raise PlanError("NULLIF of incomparable types")
        self.check_equality((left, right))
        return ir.NullIf(left, right, left.type_oid)

    def _datetime_func(self, name: str, body: Node) -> ir.Expr:
        return datetimes.datetime_func(self, name, body)

    # ------------------------------------------------------------------ other nodes
    def sublink(self, body: Node) -> ir.Expr:
        kind = body.get("subLinkType", "")
        what = _SUBLINKS.get(kind, "subquery")
        if kind in ("EXISTS_SUBLINK", "ANY_SUBLINK"):
            raise PlanError(f"{what} inside an expression (only IN/EXISTS in WHERE "
                            "conditions of AND, OR and NOT become joins)")
        if correlated(self.scope, body):
            raise PlanError(f"correlated {what}")
        if kind == "EXPR_SUBLINK":
            raise PlanError("scalar subquery other than one aggregate without GROUP BY")
        raise PlanError(f"{what} in an expression (only subqueries in FROM are supported)")

    def bool_expr(self, body: Node) -> ir.Expr:
        args = tuple(self.boolean(a) for a in body.get("args", []))
        op = body.get("boolop")
        if op == "NOT_EXPR":
            return ir.Not(args[0])
        return ir.BoolOp("and" if op == "AND_EXPR" else "or", args)

    def boolean_test(self, body: Node) -> ir.Expr:
        """``x IS [NOT] TRUE|FALSE|UNKNOWN``: never NULL, built from 3VL pieces."""
        arg = self.boolean(body["arg"])
        false = ir.Const(False, T.BOOL)
        kind = body.get("booltesttype", "")
        if kind in ("IS_UNKNOWN", "IS_NOT_UNKNOWN"):
            return ir.IsNull(arg, negated=kind == "IS_NOT_UNKNOWN")
        subject = arg if kind in ("IS_TRUE", "IS_NOT_TRUE") else ir.Not(arg)
        test = ir.Coalesce((subject, false), T.BOOL)
        return ir.Not(test) if kind.startswith("IS_NOT") else test

    def distinct_from(self, body: Node) -> ir.Expr:
        """``a IS [NOT] DISTINCT FROM b``: NULLs compare as equal values, never NULL."""
        left, right = self.pair(self.build(body["lexpr"]), self.build(body["rexpr"]))
        if not pgtypes.comparable(left.type_oid, right.type_oid):
            raise PlanError(f"IS DISTINCT FROM on {pgtypes.type_name(left.type_oid)} and "
                            f"{pgtypes.type_name(right.type_oid)}")
        self.check_equality((left, right))
        distinct = ir.Case((
            (ir.IsNull(left), ir.IsNull(right, negated=True)),
            (ir.IsNull(right), ir.Const(True, T.BOOL)),
        ), ir.Compare("<>", left, right), T.BOOL)
        return ir.Not(distinct) if body["kind"] == "AEXPR_NOT_DISTINCT" else distinct

    def weir_column(self, body: Node) -> ir.Expr:
        """A hidden column the planner joined in for a subquery (``subqueries``)."""
        pos = int(body["position"])
        col = self.scope.cols[pos]
        expr: ir.Expr = ir.ColumnRef(pos, col.type_oid)
        self.colls[pos] = col.collation
        if body.get("zero"):
            expr = ir.Coalesce((expr, ir.Const(0, col.type_oid)), col.type_oid)
        return expr

    def null_test(self, body: Node) -> ir.Expr:
        return ir.IsNull(self.build(body["arg"]), negated=body["nulltesttype"] == "IS_NOT_NULL")

    def case(self, body: Node) -> ir.Expr:
        subject = self.build(body["arg"]) if body.get("arg") is not None else None
        conds: list[ir.Expr] = []
        results: list[ir.Expr] = []
        for when in body.get("args", []):
            w = when["CaseWhen"]
            if subject is None:
                conds.append(self.boolean(w["expr"]))
            else:
                conds.append(self.compare("=", subject, self.build(w["expr"])))
            results.append(self.build(w["result"]))
        default = self.build(body["defresult"]) if body.get("defresult") is not None else None
        branch_types = [r.type_oid for r in results] + ([default.type_oid] if default else [])
        result_type = pgtypes.common_type(branch_types)
        if result_type is None:
            raise PlanError("CASE branches of different types")
        results = [self.coerce(r, result_type) for r in results]
        if default is not None:
            default = self.coerce(default, result_type)
        if any(r.type_oid != result_type for r in results):
            raise PlanError("CASE branches of different types")
        return ir.Case(tuple(zip(conds, results, strict=True)), default, result_type)

    def coalesce(self, body: Node) -> ir.Expr:
        args = [self.build(a) for a in body["args"]]
        result_type = pgtypes.common_type([a.type_oid for a in args])
        if result_type is None:
            raise PlanError("COALESCE of different types")
        args = [self.coerce(a, result_type) for a in args]
        if any(a.type_oid != result_type for a in args):
            raise PlanError("COALESCE of different types")
        return ir.Coalesce(tuple(args), result_type)

    def type_cast(self, body: Node) -> ir.Expr:
        type_name = body["typeName"]
        names = [n["String"]["sval"] for n in type_name.get("names", []) if "String" in n]
        if type_name.get("typmods") or type_name.get("arrayBounds"):
            raise PlanError(f"cast to {'.'.join(names)} with a type modifier or array")
        target = pgtypes.CAST_TYPES.get(names[-1]) if names else None
        if target is None:
            raise PlanError(f"cast to {'.'.join(names)}")
        arg = self.build(body["arg"])
        if isinstance(arg, ir.Const) and arg.type_oid == T.UNKNOWN:
            return self.coerce(arg, target)
        if arg.type_oid == target:
            return arg
        if arg.type_oid in pgtypes.NUMERIC_TYPES and target in pgtypes.NUMERIC_TYPES:
            return ir.Cast(arg, target)
        if arg.type_oid in (T.TEXT, T.VARCHAR) and target in (T.TEXT, T.VARCHAR):
            return ir.Cast(arg, target)
        if arg.type_oid in pgtypes.INTEGER_TYPES and target == T.TEXT:
            return ir.Cast(arg, target)
        if (arg.type_oid, target) in pgtime.CASTS:
            return ir.Cast(arg, target)
        zoned = datetimes.zoned_cast(arg, target)
        if zoned is not None:
            return zoned
        raise PlanError(f"cast from {pgtypes.type_name(arg.type_oid)} to "
                        f"{pgtypes.type_name(target)}")

    def func_call(self, body: Node) -> ir.Expr:
        name = _name(body.get("funcname", [])).lower()
        if is_aggregate_call(body):
            if self.on_agg is None:
                raise PlanError(f"aggregate {name}() in {self.clause}")
            return self.on_agg(body)
        if name in KNOWN_AGGREGATES or body.get("agg_star") or body.get("agg_distinct"):
            raise PlanError(f"aggregate {name}()")
        if name in ("date_trunc", "extract"):
            return self._datetime_func(name, body)
        if name == "timezone":
            return datetimes.at_time_zone(self, body)
        if name in arrayops.ARRAY_FUNCTIONS:
            return arrayops.array_func(self, name, body)
        if name not in _TEXT_FUNCS and name not in ("concat", "abs", "round"):
            raise PlanError(f"function {name}()")
        args = [self.build(a) for a in body.get("args", [])]
        if name == "concat":
            return ir.Func("concat", tuple(self._text_arg(a, name) for a in args), T.TEXT)
        if name in ("abs", "round"):
            return self._numeric_func(name, args)
        spec = _TEXT_FUNCS.get(name)
        if spec is None:
            raise PlanError(f"function {name}()")
        ir_name, signatures, result = spec
        if ir_name in ("lower", "upper") and args:
            coll = self.collation(args[0])
            if coll is not None and coll not in BYTE_ORDER_COLLATIONS:
                raise PlanError(f"{name}() under collation {coll}")
        for sig in signatures:
            if len(sig) == len(args):
                typed = tuple(self._text_arg(a, name) if t == T.TEXT else self._int_arg(a, name)
                              for a, t in zip(args, sig, strict=True))
                return ir.Func(ir_name, typed, result)
        raise PlanError(f"function {name}() with {len(args)} arguments")

    def _text_arg(self, arg: ir.Expr, fn: str) -> ir.Expr:
        if arg.type_oid not in _TEXTISH:
            raise PlanError(f"{fn}() of {pgtypes.type_name(arg.type_oid)}")
        return self.coerce(arg, T.TEXT)

    def _int_arg(self, arg: ir.Expr, fn: str) -> ir.Expr:
        arg = self.coerce(arg, T.INT4)
        if arg.type_oid not in (T.INT2, T.INT4):
            raise PlanError(f"{fn}() with a {pgtypes.type_name(arg.type_oid)} argument")
        return arg

    def _numeric_func(self, name: str, args: list[ir.Expr]) -> ir.Expr:
        if name == "abs" and len(args) == 1 and args[0].type_oid in pgtypes.NUMERIC_TYPES:
            return ir.Func("abs", (args[0],), args[0].type_oid)
        if name == "round" and len(args) == 1 and args[0].type_oid in (T.NUMERIC, T.FLOAT8):
            return ir.Func("round", (args[0],), args[0].type_oid)
        if name == "round" and len(args) == 2 and args[0].type_oid == T.NUMERIC:
            return ir.Func("round", (args[0], self._int_arg(args[1], name)), T.NUMERIC)
        raise PlanError(f"function {name}() on these argument types")


def _text_columns(expr: Any) -> list[int]:
    if isinstance(expr, ir.ColumnRef):
        return [expr.index]
    return sorted(column_refs(expr))


def range_names(select: Any) -> set[str]:
    """Range names (aliases and relation names) a subquery defines, at any depth."""
    names: set[str] = set()
    stack = [select]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in ("RangeVar", "RangeSubselect"):
                body = node.get(key)
                if body is not None:
                    alias = (body.get("alias") or {}).get("aliasname")
                    names.add(alias or body.get("relname", ""))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return names


def correlated(scope: Scope, body: Node) -> bool:
    """Does a subquery reference a range of the enclosing query by its qualifier?"""
    inner = range_names(body.get("subselect"))
    stack: list[Any] = [body.get("subselect")]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("ColumnRef")
            if ref is not None:
                fields = ref.get("fields", [])
                if len(fields) == 2 and "String" in fields[0]:
                    qual = fields[0]["String"]["sval"]
                    if qual not in inner and scope.has_qualifier(qual):
                        return True
                continue
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


_SUBLINKS = {"EXISTS_SUBLINK": "EXISTS subquery", "ANY_SUBLINK": "IN/ANY subquery",
             "ALL_SUBLINK": "ALL subquery", "EXPR_SUBLINK": "scalar subquery",
             "ARRAY_SUBLINK": "ARRAY subquery"}


def _describe(kind: str, body: Node) -> str:
    if kind == "SubLink":
        return _SUBLINKS.get(body.get("subLinkType", ""), "subquery in an expression")
    if kind == "MinMaxExpr":
        return "GREATEST/LEAST"
    if kind == "ParamRef":
        return f"parameter ${body.get('number', '?')} outside an equality with a column"
    return f"expression {kind}"


_AEXPR_NAMES = {"AEXPR_OP_ANY": ("op ANY (array) other than a lookup key column = ANY($n) of "
                                 "the column's type (grouped on, if aggregated)"),
                "AEXPR_OP_ALL": "op ALL (array)"}

_AEXPR: dict[str, Callable[[ExprBuilder, Node], ir.Expr]] = {
    "AEXPR_OP": ExprBuilder.op,
    "AEXPR_OP_ANY": arrayops.any_op,
    "AEXPR_IN": ExprBuilder.in_list,
    "AEXPR_LIKE": lambda b, n: b.like(n, False),
    "AEXPR_ILIKE": lambda b, n: b.like(n, True),
    "AEXPR_SIMILAR": regex.similar_to,
    "AEXPR_BETWEEN": ExprBuilder.between,
    "AEXPR_NOT_BETWEEN": ExprBuilder.between,
    "AEXPR_BETWEEN_SYM": ExprBuilder.between,
    "AEXPR_NOT_BETWEEN_SYM": ExprBuilder.between,
    "AEXPR_NULLIF": ExprBuilder.nullif,
    "AEXPR_DISTINCT": ExprBuilder.distinct_from,
    "AEXPR_NOT_DISTINCT": ExprBuilder.distinct_from,
}

_HANDLERS: dict[str, Callable[[ExprBuilder, Node], ir.Expr]] = {
    "ColumnRef": ExprBuilder.column,
    "A_Const": ExprBuilder.const,
    "A_Expr": ExprBuilder.a_expr,
    "BoolExpr": ExprBuilder.bool_expr,
    "NullTest": ExprBuilder.null_test,
    "BooleanTest": ExprBuilder.boolean_test,
    "WeirColumn": ExprBuilder.weir_column,
    "CaseExpr": ExprBuilder.case,
    "CoalesceExpr": ExprBuilder.coalesce,
    "TypeCast": ExprBuilder.type_cast,
    "FuncCall": ExprBuilder.func_call,
    "SubLink": ExprBuilder.sublink,
    "WeirWindow": lambda b, n: ir.Const(ir.WindowSlot(int(n["index"])), int(n["type_oid"])),
    "A_Indirection": arrayops.subscript,
    "A_ArrayExpr": arrayops.array_constructor,
    "WeirParamFlag": arrayops.param_flag,
}
