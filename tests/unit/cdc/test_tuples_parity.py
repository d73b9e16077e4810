"""Parity of the pure-Python and Cython TupleData decoders on the same random inputs."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

import cython_ext
from cdc.pgoutput import tuples

FAST = cython_ext.load_pair("pgoutput")
REF = tuples.decode_tuple_data_python
MARK = object()


def test_twin_is_built() -> None:
    assert FAST is not None, "cython_ext.pgoutput is not built: run `make compile`"


column = st.one_of(
    st.just(b"n"), st.just(b"u"),
    st.text(max_size=20).map(lambda s: b"t" + struct.pack("!i", len(s.encode())) + s.encode()),
    st.binary(max_size=20).map(lambda b: b"b" + struct.pack("!i", len(b)) + b),
)


def _outcome(fn, buf: bytes, pos: int):  # type: ignore[no-untyped-def]
    try:
        return ("ok", fn(buf, pos, MARK))
    except ValueError as exc:
        return ("error", type(exc).__name__)


@settings(max_examples=200, deadline=None)
@given(st.lists(column, max_size=8), st.binary(max_size=4))
def test_parity_on_valid_tuples(cols: list[bytes], prefix: bytes) -> None:
    buf = prefix + struct.pack("!H", len(cols)) + b"".join(cols)
    assert FAST is not None
    assert _outcome(REF, buf, len(prefix)) == _outcome(FAST.decode_tuple_data, buf, len(prefix))
    assert _outcome(REF, buf, len(prefix))[0] == "ok"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40))
def test_parity_on_garbage(buf: bytes) -> None:
    assert FAST is not None
    assert _outcome(REF, buf, 0) == _outcome(FAST.decode_tuple_data, buf, 0)
