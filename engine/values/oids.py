"""PostgreSQL built-in type OIDs (from ``pg_type.dat``) that weir's codecs know.

Owns: the numeric constants and the array-oid -> element-oid map. No behaviour.
"""

from __future__ import annotations

BOOL = 16
BYTEA = 17
CHAR = 18
NAME = 19
INT8 = 20
INT2 = 21
INT4 = 23
TEXT = 25
OID = 26
XID = 28
CID = 29
JSON = 114
XML = 142
FLOAT4 = 700
FLOAT8 = 701
UNKNOWN = 705
BPCHAR = 1042
VARCHAR = 1043
DATE = 1082
TIME = 1083
TIMESTAMP = 1114
TIMESTAMPTZ = 1184
INTERVAL = 1186
TIMETZ = 1266
NUMERIC = 1700
UUID = 2950
JSONB = 3802
STRING_TYPES = frozenset({TEXT, VARCHAR, BPCHAR, NAME, CHAR, UNKNOWN, XML})

#: array type oid -> element type oid (one-dimensional or nested arrays of the element).
ARRAY_ELEMENT: dict[int, int] = {
    1000: BOOL,
    1001: BYTEA,
    1002: CHAR,
    1003: NAME,
    1016: INT8,
    1005: INT2,
    1007: INT4,
    1009: TEXT,
    1028: OID,
    199: JSON,
    1021: FLOAT4,
    1022: FLOAT8,
    1014: BPCHAR,
    1015: VARCHAR,
    1182: DATE,
    1183: TIME,
    1115: TIMESTAMP,
    1185: TIMESTAMPTZ,
    1187: INTERVAL,
    1270: TIMETZ,
    1231: NUMERIC,
    2951: UUID,
    3807: JSONB,
}

#: element type oid -> its array type oid.
ARRAY_OF: dict[int, int] = {element: array for array, element in ARRAY_ELEMENT.items()}
