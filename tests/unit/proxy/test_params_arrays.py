"""Array parameters (``column = ANY($1)``): text and binary Bind values -> nested tuples."""

from __future__ import annotations

import struct

import pytest

from proxy.params import ParamError, decode_param


def _binary(element_oid: int, dims: list[int], items: list[bytes | None]) -> bytes:
    out = struct.pack("!iiI", len(dims), any(i is None for i in items), element_oid)
    out += b"".join(struct.pack("!ii", d, 1) for d in dims)
    for item in items:
        out += struct.pack("!i", -1) if item is None else struct.pack("!i", len(item)) + item
    return out


def test_text_arrays_in_postgres_output_form() -> None:
    assert decode_param(b"{1,2,NULL}", 0, 0, 1007) == (1, 2, None)
    assert decode_param(b"{}", 0, 0, 1007) == ()
    assert decode_param(b'{a,"b c",NULL,"NULL"}', 0, 1009, 1009) == ("a", "b c", None, "NULL")
    assert decode_param(b"{{1,2},{3,4}}", 0, 0, 1016) == ((1, 2), (3, 4))
    assert decode_param(b"{1,2}", 0, 1016, 1007) == (1, 2)  # int8[] declared: same family
    for other in (b"{1, 2}", b"[0:1]={1,2}", b"{a, b}", b"{1_0}", b"{1.5}", b"1"):
        with pytest.raises(ParamError):
            decode_param(other, 0, 0, 1007 if b"a" not in other else 1009)
    with pytest.raises(ParamError):
        decode_param(b"{1}", 0, 1009, 1007)  # text[] declared against int4[]


def test_binary_arrays() -> None:
    ints = [struct.pack("!i", v) for v in (5, -1, 7)]
    assert decode_param(_binary(23, [3], [*ints[:2], None]), 1, 1007, 1007) == (5, -1, None)
    assert decode_param(_binary(23, [2, 2], [*ints, None]), 1, 0, 1007) == ((5, -1), (7, None))
    assert decode_param(_binary(20, [1], [struct.pack("!q", 2**40)]), 1, 1016, 1007) == (2**40,)
    assert decode_param(_binary(23, [], []), 1, 1007, 1007) == ()
    assert decode_param(_binary(25, [2], [b"x", "é".encode()]), 1, 1009, 1009) == ("x", "é")
    with pytest.raises(ParamError):
        decode_param(_binary(25, [1], [b"x"]), 1, 0, 1007)  # text elements for an int4[]
    with pytest.raises(ParamError):
        decode_param(_binary(23, [2], ints[:1]), 1, 1007, 1007)  # truncated
    with pytest.raises(ParamError):
        decode_param(_binary(23, [1], ints[:2]), 1, 1007, 1007)  # junk after the elements
    with pytest.raises(ParamError):
        decode_param(_binary(23, [1], [b"\x00\x01"]), 1, 1007, 1007)  # a bad element
