"""Parity of the pure-Python and Cython wire kernels on the same random inputs."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import cython_ext
from pgwire import backend as be
from pgwire import framing
from pgwire import frontend as fe
from pgwire.framing import ProtocolViolation
from tests.unit.wire import strategies as s

FRAMING = cython_ext.load_pair("framing")
CODEC = cython_ext.load_pair("wire_codec")
if FRAMING is not None:
    FRAMING.set_error_class(ProtocolViolation)


def test_twins_are_built() -> None:
    assert FRAMING is not None, "cython_ext.framing is not built: run `make compile`"
    assert CODEC is not None, "cython_ext.wire_codec is not built: run `make compile`"


def _outcome(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    try:
        return ("ok", fn(*args))
    except ProtocolViolation as exc:
        return ("violation", exc.message)
    except (ValueError, TypeError) as exc:
        return ("error", type(exc).__name__)


message = st.tuples(st.integers(0, 255), st.binary(max_size=30)).map(
    lambda t: bytes((t[0],)) + struct.pack("!I", len(t[1]) + 4) + t[1]
)
header = st.tuples(st.integers(0, 255), st.integers(0, 2**32 - 1)).map(
    lambda t: bytes((t[0],)) + struct.pack("!I", t[1])
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(message, max_size=6),
    st.binary(max_size=12) | header,
    st.integers(0, 40),
    st.sampled_from([bytes, bytearray]),
    st.data(),
)
def test_scan_messages_parity(
    msgs: list[bytes], tail: bytes, limit: int, kind: type, data: st.DataObject
) -> None:
    assert FRAMING is not None
    buf = b"".join(msgs) + tail
    pos = data.draw(st.integers(0, len(buf)))
    expected = _outcome(framing.scan_messages_python, kind(buf), pos, limit)
    assert _outcome(FRAMING.scan_messages, kind(buf), pos, limit) == expected


values = st.lists(st.none() | st.binary(max_size=20) | st.binary(max_size=5).map(bytearray))


@settings(max_examples=200, deadline=None)
@given(values | st.lists(st.text(max_size=3) | st.integers(), min_size=1, max_size=3))
def test_encode_data_row_parity(row: list[Any]) -> None:
    assert CODEC is not None
    expected = _outcome(be.encode_data_row_python, tuple(row))
    assert _outcome(CODEC.encode_data_row, tuple(row)) == expected
    if expected[0] == "ok":
        decoded = be.decode_backend(ord("D"), expected[1][5:])
        assert decoded == be.DataRow(tuple(None if v is None else bytes(v) for v in row))


wide = st.integers(-(2**33), 2**33)
fields = st.lists(
    st.builds(be.FieldDescription, s.text, wide, s.i16 | wide, s.u32, s.i16, s.i32, s.i16)
    | s.field_descriptions
    | st.builds(be.FieldDescription, st.just("a\x00b")),
    max_size=5,
).map(tuple)


@settings(max_examples=200, deadline=None)
@given(fields)
def test_encode_row_description_parity(descs: tuple[be.FieldDescription, ...]) -> None:
    assert CODEC is not None
    expected = _outcome(be.encode_row_description_python, descs)
    assert _outcome(CODEC.encode_row_description, descs) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_encode_command_complete_parity(tag: str) -> None:
    assert CODEC is not None
    expected = _outcome(be.encode_command_complete_python, tag)
    assert _outcome(CODEC.encode_command_complete, tag) == expected


def test_oversized_rows_are_refused_by_both() -> None:
    assert CODEC is not None
    row = (None,) * 32768
    assert _outcome(CODEC.encode_data_row, row) == _outcome(be.encode_data_row_python, row)
    assert _outcome(be.encode_data_row_python, row)[0] == "error"


def _decoded(fn: Callable[..., Any], payload: bytes) -> tuple[str, Any]:
    try:
        return ("ok", fn(payload))
    except ProtocolViolation:
        return ("violation", None)


@settings(max_examples=200, deadline=None)
@given(values, st.data())
def test_decode_data_row_values_parity(row: list[Any], data: st.DataObject) -> None:
    assert CODEC is not None
    CODEC.set_error_class(ProtocolViolation)
    payload = bytearray(be.encode_data_row_python(tuple(row))[5:])
    if data.draw(st.booleans()):
        payload = payload[: data.draw(st.integers(0, len(payload)))]
    if payload and data.draw(st.booleans()):
        payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
    expected = _decoded(be.decode_data_row_values_python, bytes(payload))
    assert _decoded(CODEC.decode_data_row_values, bytes(payload)) == expected


@settings(max_examples=200, deadline=None)
@given(
    s.frontend_messages.filter(lambda m: isinstance(m, fe.Bind)) | s.frontend_messages, st.data()
)
def test_decode_bind_fields_parity(msg: fe.FrontendMessage, data: st.DataObject) -> None:
    assert CODEC is not None
    CODEC.set_error_class(ProtocolViolation)
    payload = bytearray(msg.encode()[5:])
    if data.draw(st.booleans()):
        payload = payload[: data.draw(st.integers(0, len(payload)))]
    if payload and data.draw(st.booleans()):
        payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
    expected = _decoded(fe.decode_bind_fields_python, bytes(payload))
    assert _decoded(CODEC.decode_bind_fields, bytes(payload)) == expected
