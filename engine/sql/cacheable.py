"""Cacheability of a statement's parse tree, with a human-readable reason when it is not.

Owns: ``Unsupported`` (a reason as data), ``Supported``, and ``check_statement`` — the
syntactic screen run before planning. It is a pure function of the parse tree (libpg_query
JSON dicts) and never raises: whatever it does not recognise is Unsupported with a reason.
The planner adds the reasons that need the catalog (unknown relation, row-level security,
collation, correlated subquery, column types); both end up as the same ``Unsupported``.

Invariant: only SELECTs whose result weir can compute exactly as PostgreSQL would may pass;
when in doubt the answer is Unsupported (correctness beats coverage).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Node = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Unsupported:
    """Why a statement is not served from a cache (shown by SHOW PROXIED QUERIES)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Supported:
    """The statement passed the syntactic screen."""


SUPPORTED = Supported()

#: Functions whose result may differ between two executions of the same statement text.
VOLATILE_FUNCTIONS = frozenset({
    "now", "random", "random_normal", "setseed", "clock_timestamp", "statement_timestamp",
    "transaction_timestamp", "timeofday", "nextval", "currval", "lastval", "setval",
    "gen_random_uuid", "uuid_generate_v1", "uuid_generate_v4", "txid_current",
    "pg_current_snapshot", "pg_current_xact_id", "pg_backend_pid", "current_setting",
    "set_config", "pg_sleep", "inet_client_addr", "inet_server_addr", "version",
    "current_database", "current_schema", "current_schemas", "pg_postmaster_start_time",
    "age", "to_timestamp", "pg_try_advisory_lock", "pg_advisory_lock", "dblink",
    "pg_read_file", "lo_import", "pg_notify", "txid_current_snapshot",
})

_SQL_VALUE_FUNCTIONS = {
    "SVFOP_CURRENT_DATE": "current_date", "SVFOP_CURRENT_TIME": "current_time",
    "SVFOP_CURRENT_TIME_N": "current_time", "SVFOP_CURRENT_TIMESTAMP": "current_timestamp",
    "SVFOP_CURRENT_TIMESTAMP_N": "current_timestamp", "SVFOP_LOCALTIME": "localtime",
    "SVFOP_LOCALTIME_N": "localtime", "SVFOP_LOCALTIMESTAMP": "localtimestamp",
    "SVFOP_LOCALTIMESTAMP_N": "localtimestamp", "SVFOP_CURRENT_ROLE": "current_role",
    "SVFOP_CURRENT_USER": "current_user", "SVFOP_USER": "user",
    "SVFOP_SESSION_USER": "session_user", "SVFOP_CURRENT_CATALOG": "current_catalog",
    "SVFOP_CURRENT_SCHEMA": "current_schema",
}

_LOCKING = {"LCS_FORUPDATE": "FOR UPDATE", "LCS_FORNOKEYUPDATE": "FOR NO KEY UPDATE",
            "LCS_FORSHARE": "FOR SHARE", "LCS_FORKEYSHARE": "FOR KEY SHARE"}

_STATEMENT_NAMES = {
    "InsertStmt": "INSERT", "UpdateStmt": "UPDATE", "DeleteStmt": "DELETE",
    "MergeStmt": "MERGE", "ExplainStmt": "EXPLAIN", "TransactionStmt": "transaction control",
    "VariableSetStmt": "SET", "CopyStmt": "COPY", "CallStmt": "CALL",
}


def _func_name(call: Node) -> str:
    parts = [p["String"]["sval"] for p in call.get("funcname", []) if "String" in p]
    return parts[-1].lower() if parts else "?"


_WINDOW_FUNCTIONS = frozenset({"row_number", "rank", "dense_rank", "lag", "lead", "count", "sum",
                               "avg", "min", "max"})


def _check_func(node: Node) -> str | None:
    name = _func_name(node)
    if name in VOLATILE_FUNCTIONS:
        return f"volatile function {name}()"
    if node.get("over") is not None and name not in _WINDOW_FUNCTIONS:
        return f"window function {name}() OVER (...)"
    if node.get("agg_within_group"):
        return f"ordered-set aggregate {name}() WITHIN GROUP"
    if node.get("agg_order") and name not in ("string_agg", "array_agg", "json_agg",
                                              "jsonb_agg"):
        return f"ORDER BY inside aggregate {name}()"
    return None


def _check_select(node: Node) -> str | None:
    for clause in node.get("lockingClause", []):
        strength = clause.get("LockingClause", {}).get("strength", "")
        return _LOCKING.get(strength, "row locking clause")
    if node.get("intoClause") is not None:
        return "SELECT INTO"
    with_clause = node.get("withClause")
    if with_clause is not None and with_clause.get("recursive"):
        return "recursive CTE (WITH RECURSIVE)"
    if node.get("valuesLists"):
        return "VALUES list"
    distinct = node.get("distinctClause")
    if distinct and any(d for d in distinct):
        return "DISTINCT ON"
    if node.get("groupDistinct"):
        return "GROUP BY DISTINCT"
    if node.get("windowClause"):
        return "WINDOW clause"
    if node.get("limitOption") == "LIMIT_OPTION_WITH_TIES":
        return "FETCH ... WITH TIES"
    return None


def _check_cte(node: Node) -> str | None:
    if node.get("ctematerialized") == "CTEMaterializeAlways":
        return "MATERIALIZED CTE"
    query = node.get("ctequery", {})
    if "SelectStmt" not in query:
        return "data-modifying statement in WITH"
    return None


def _check_range_var(node: Node) -> str | None:
    if not node.get("inh", False):
        return "ONLY (inheritance control)"
    return None


def _reason(text: str) -> Callable[[Node], str | None]:
    return lambda _node: text


#: Node type -> check returning a reason or None. Node types absent here are walked into.
_CHECKS: dict[str, Callable[[Node], str | None]] = {
    "SelectStmt": _check_select,
    "FuncCall": _check_func,
    "CommonTableExpr": _check_cte,
    "RangeVar": _check_range_var,
    "SQLValueFunction": lambda n: (
        f"volatile function {_SQL_VALUE_FUNCTIONS.get(n.get('op', ''), 'current_*')}"),
    "RangeFunction": _reason("function in FROM"),
    "RangeTableSample": _reason("TABLESAMPLE"),
    "RangeTableFunc": _reason("XMLTABLE"),
    "JsonTable": _reason("JSON_TABLE"),
    "GroupingSet": _reason("GROUPING SETS / ROLLUP / CUBE"),
    "GroupingFunc": _reason("GROUPING()"),
    "WindowDef": _reason("window function"),
    "CurrentOfExpr": _reason("WHERE CURRENT OF"),
    "XmlExpr": _reason("XML expression"),
    "XmlSerialize": _reason("XML expression"),
    "A_Indirection": lambda n: None if all(
        "A_Indices" in i for i in n.get("indirection", [])) else "field selection",
    "RowExpr": _reason("row constructor"),
    "CollateClause": _reason("explicit COLLATE"),
    "MultiAssignRef": _reason("multiple assignment"),
}


def check_statement(stmt: Node) -> Supported | Unsupported:
    """Screen one statement's tree; the first problem found (in tree order) is the reason."""
    if "SelectStmt" not in stmt:
        kind = next(iter(stmt), "?")
        return Unsupported(f"not a SELECT ({_STATEMENT_NAMES.get(kind, kind)})")
    reason = _walk(stmt)
    return SUPPORTED if reason is None else Unsupported(reason)


def _walk(tree: Any) -> str | None:
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                check = _CHECKS.get(key)
                if check is not None and isinstance(value, dict):
                    reason = check(value)
                    if reason is not None:
                        return reason
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))
    return None
