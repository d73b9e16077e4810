"""TupleData decoding: the per-row hot path of pgoutput (Cython twin in cython_ext/pgoutput.pyx).

Owns: ``decode_tuple_data(buf, pos, unchanged)`` -> ``(values, end)``. Contract shared with the
twin: ``buf`` is ``bytes``; values are ``None`` ('n'), ``unchanged`` ('u'), ``str`` ('t',
UTF-8) or ``bytes`` ('b'); any malformed input (truncation, unknown kind, bad UTF-8, negative
length) raises ``ValueError`` with the offset; never reads past ``len(buf)``.
"""

from __future__ import annotations

from typing import Any

import cython_ext


def decode_tuple_data(buf: bytes, pos: int, unchanged: Any) -> tuple[tuple[Any, ...], int]:
    n = len(buf)
    if pos + 2 > n:
        raise ValueError(f"truncated TupleData column count at offset {pos}")
    ncols = int.from_bytes(buf[pos : pos + 2], "big")
    pos += 2
    out: list[Any] = []
    for _ in range(ncols):
        if pos >= n:
            raise ValueError(f"truncated TupleData at offset {pos}")
        kind = buf[pos]
        pos += 1
        if kind == 0x6E:  # 'n'
            out.append(None)
        elif kind == 0x75:  # 'u'
            out.append(unchanged)
        elif kind == 0x74 or kind == 0x62:  # 't' or 'b'
            if pos + 4 > n:
                raise ValueError(f"truncated TupleData value length at offset {pos}")
            length = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
            pos += 4
            if length < 0 or pos + length > n:
                raise ValueError(f"TupleData value of length {length} overruns at offset {pos}")
            raw = buf[pos : pos + length]
            pos += length
            out.append(raw.decode("utf-8") if kind == 0x74 else raw)
        else:
            raise ValueError(f"unknown TupleData column kind {kind:#04x} at offset {pos - 1}")
    return tuple(out), pos


#: The pure-Python reference, whatever ``WEIR_IMPL`` selects (for parity tests).
decode_tuple_data_python = decode_tuple_data

_fast = cython_ext.load("pgoutput")
if _fast is not None:
    decode_tuple_data = _fast.decode_tuple_data
