"""PostgreSQL's type rules for the planner's supported surface: result type oids and names.

Owns: the operator/function/aggregate result-type tables (what ``pg_typeof`` would say for the
planner's supported operators), the typing of literals, common-type resolution for CASE and
COALESCE, and PostgreSQL's output-column type names (``int4``, ``text``...).

Invariant: every function returns None when PostgreSQL's answer is not known exactly; the
planner turns None into Unsupported rather than guessing.
"""

from __future__ import annotations

from engine.values import oids as T

INTEGER_TYPES = (T.INT2, T.INT4, T.INT8)
NUMERIC_TYPES = (T.INT2, T.INT4, T.INT8, T.NUMERIC, T.FLOAT4, T.FLOAT8)
TEXT_TYPES = (T.TEXT, T.VARCHAR, T.BPCHAR, T.NAME)
#: Types whose equality and ordering agree with Python's on the canonical values.
ORDERABLE_TYPES = frozenset({
    T.BOOL, T.INT2, T.INT4, T.INT8, T.NUMERIC, T.FLOAT4, T.FLOAT8, T.TEXT, T.VARCHAR, T.NAME,
    T.DATE, T.TIMESTAMP, T.TIMESTAMPTZ, T.UUID, T.BYTEA, T.TIME,
})
#: Types the planner lets through as column values (equality on their canonical values is
#: PostgreSQL's equality).
#: bpchar is excluded from comparisons: PostgreSQL ignores its trailing blanks, Python does not.
SUPPORTED_TYPES = ORDERABLE_TYPES | {T.JSON, T.JSONB, T.INTERVAL, T.BPCHAR}

#: Types whose PostgreSQL equality is not equality of the engine's canonical values (what
#: GROUP BY, DISTINCT and UNION would compare): why, for the reason shown.
NOT_EQUAL_BY_VALUE = {
    T.JSONB: "jsonb equality compares numbers by value (1.0 = 1), their printed text does not",
    T.JSON: "json has no equality operator",
    T.BPCHAR: "bpchar equality ignores trailing blanks",
}
NOT_EQUAL_BY_VALUE.update({  # arrays pass as values and operands of the array operators only
    array: "equality of whole arrays is not planned" for array, element in T.ARRAY_ELEMENT.items()
    if element in ORDERABLE_TYPES})

TYPE_NAMES = {
    T.BOOL: "bool", T.BYTEA: "bytea", T.CHAR: "char", T.NAME: "name", T.INT8: "int8",
    T.INT2: "int2", T.INT4: "int4", T.TEXT: "text", T.OID: "oid", T.JSON: "json",
    T.FLOAT4: "float4", T.FLOAT8: "float8", T.BPCHAR: "bpchar", T.VARCHAR: "varchar",
    T.DATE: "date", T.TIME: "time", T.TIMESTAMP: "timestamp", T.TIMESTAMPTZ: "timestamptz",
    T.INTERVAL: "interval", T.TIMETZ: "timetz", T.NUMERIC: "numeric", T.UUID: "uuid",
    T.JSONB: "jsonb", T.UNKNOWN: "unknown",
}

#: SQL type names as written in casts (pg_catalog names and grammar aliases) -> oid.
CAST_TYPES = {
    "bool": T.BOOL, "boolean": T.BOOL, "int2": T.INT2, "smallint": T.INT2, "int4": T.INT4,
    "int": T.INT4, "integer": T.INT4, "int8": T.INT8, "bigint": T.INT8, "numeric": T.NUMERIC,
    "decimal": T.NUMERIC, "float4": T.FLOAT4, "real": T.FLOAT4, "float8": T.FLOAT8,
    "double precision": T.FLOAT8, "text": T.TEXT, "varchar": T.VARCHAR, "bpchar": T.BPCHAR,
    "date": T.DATE, "timestamp": T.TIMESTAMP, "uuid": T.UUID, "bytea": T.BYTEA,
    "timestamptz": T.TIMESTAMPTZ, "interval": T.INTERVAL,
}

_NUMERIC_RANK = {T.INT2: 0, T.INT4: 1, T.INT8: 2, T.NUMERIC: 3, T.FLOAT4: 4, T.FLOAT8: 5}


def type_name(oid: int) -> str:
    if oid in T.ARRAY_ELEMENT and oid not in TYPE_NAMES:
        return type_name(T.ARRAY_ELEMENT[oid]) + "[]"
    return TYPE_NAMES.get(oid, f"oid {oid}")


def integer_literal_type(text: str) -> int:
    """int4 when it fits, else int8, else numeric (PostgreSQL's lexer rule)."""
    value = int(text)
    if -(2**31) <= value < 2**31:
        return T.INT4
    if -(2**63) <= value < 2**63:
        return T.INT8
    return T.NUMERIC


def arithmetic_type(op: str, left: int, right: int) -> int | None:
    """Result type of ``left op right`` for + - * / % on numeric types."""
    if left not in _NUMERIC_RANK or right not in _NUMERIC_RANK:
        return None
    if op == "%" and (left in (T.FLOAT4, T.FLOAT8) or right in (T.FLOAT4, T.FLOAT8)):
        return None  # no float modulo operator in PostgreSQL
    if left == right:
        return left
    if left in (T.FLOAT4, T.FLOAT8) or right in (T.FLOAT4, T.FLOAT8):
        return T.FLOAT8  # float8 is the preferred type of the numeric category
    return left if _NUMERIC_RANK[left] > _NUMERIC_RANK[right] else right


def comparable(left: int, right: int) -> bool:
    """Whether ``left = right`` (and < etc.) exists and compares the canonical values exactly."""
    if left == right:
        # not jsonb: its equality compares numbers by value ('1.0' = '1'), its text does not
        return left in ORDERABLE_TYPES or left == T.INTERVAL
    if left in _NUMERIC_RANK and right in _NUMERIC_RANK:
        floats = (T.FLOAT4, T.FLOAT8)
        # numeric vs float compares after a cast to float8 in PostgreSQL; Python compares the
        # exact values, which differs (0.1::numeric = 0.1::float8 is true in PostgreSQL).
        return not ((left == T.NUMERIC and right in floats)
                    or (right == T.NUMERIC and left in floats)
                    or (left in floats) != (right in floats))
    text_like = (T.TEXT, T.VARCHAR, T.NAME)
    if left in text_like and right in text_like:
        return True
    return {left, right} == {T.TIMESTAMP, T.DATE}


#: Implicit casts between the types common_type handles (source -> targets).
_IMPLICIT = {
    T.INT2: {T.INT4, T.INT8, T.NUMERIC, T.FLOAT4, T.FLOAT8},
    T.INT4: {T.INT8, T.NUMERIC, T.FLOAT4, T.FLOAT8},
    T.INT8: {T.NUMERIC, T.FLOAT4, T.FLOAT8},
    T.NUMERIC: {T.FLOAT4, T.FLOAT8},
    T.FLOAT4: {T.FLOAT8},
    T.VARCHAR: {T.TEXT},
    T.TEXT: {T.VARCHAR},
}
_PREFERRED = {T.FLOAT8, T.TEXT}
_CATEGORY = {T.INT2: "N", T.INT4: "N", T.INT8: "N", T.NUMERIC: "N", T.FLOAT4: "N",
             T.FLOAT8: "N", T.TEXT: "S", T.VARCHAR: "S"}


def common_type(types: list[int]) -> int | None:
    """The type CASE/COALESCE resolve their branches to (PostgreSQL's select_common_type:
    unknown literals excluded; a later type wins only if the current one casts to it
    implicitly but not back, and never over a preferred type)."""
    known = [t for t in types if t != T.UNKNOWN]
    if not known:
        return T.TEXT
    ptype = known[0]
    for t in known[1:]:
        if t == ptype:
            continue
        if _CATEGORY.get(t) is None or _CATEGORY.get(t) != _CATEGORY.get(ptype):
            return None
        if ptype in _PREFERRED:
            continue
        if t in _IMPLICIT.get(ptype, ()) and ptype not in _IMPLICIT.get(t, ()):
            ptype = t
    return ptype


def sum_type(arg: int) -> int | None:
    return {T.INT2: T.INT8, T.INT4: T.INT8, T.INT8: T.NUMERIC, T.NUMERIC: T.NUMERIC,
            T.FLOAT4: T.FLOAT4, T.FLOAT8: T.FLOAT8, T.INTERVAL: T.INTERVAL}.get(arg)


def avg_type(arg: int) -> int | None:
    return {T.INT2: T.NUMERIC, T.INT4: T.NUMERIC, T.INT8: T.NUMERIC, T.NUMERIC: T.NUMERIC,
            T.FLOAT4: T.FLOAT8, T.FLOAT8: T.FLOAT8}.get(arg)


def minmax_type(arg: int) -> int | None:
    if arg == T.VARCHAR:
        return T.TEXT  # min(varchar) resolves to min(text)
    return arg if arg in _MINMAX else None


#: Types with min()/max() in PostgreSQL 15 whose order Python reproduces (no bool, uuid, bytea).
_MINMAX = frozenset({T.INT2, T.INT4, T.INT8, T.NUMERIC, T.FLOAT4, T.FLOAT8, T.TEXT, T.DATE,
                     T.TIME, T.TIMESTAMP, T.TIMESTAMPTZ})
