"""Parity of ``proxy.rules`` (the pure references) and ``cython_ext/rules.pyx`` (the C rules of
``rules_kernel.pxd`` that the relay core and the lanes run) on generated inputs."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import cython_ext
from pgwire import classes
from proxy import rules

RULES = cython_ext.load_pair("rules")
if RULES is not None:
    RULES.configure(rules.hides_write_python, rules.plain_text_python, rules.WRITE_WORDS)


def test_twin_is_built() -> None:
    assert RULES is not None, "cython_ext.rules is not built: run `make compile`"


_WORDS = ["SELECT", "select", "set", "Reset", "DEALLOCATE", "dealloc", "show", "SHOWN", "x",
          "CREATE", "discarD", "\u017fet", "\xe9", "1", ";", "", "\0", "\x1cSET"]
query_text = st.tuples(
    st.sampled_from(["", " ", "\t\n ", "\x0b\x0c\r", "\x1c", "\xa0"]),
    st.sampled_from(_WORDS),
    st.sampled_from(["", " 1", " \xe9", ";", "\0x", "abcdefghijkl", " set_config(", "SET_CONFIG",
                     " Set_Confi", "set_confi\xe9g", "\xe9 sEt_CoNfIg", "; ", " ;;\t\n",
                     "; SET ROLE b", ";x", "1;\x0b", "';' x"]),
).map("".join)


def test_a_second_statement_is_never_plain() -> None:
    """``SELECT 1; SET ROLE bob`` must reach the identity rules (``proxy.identity``)."""
    assert RULES is not None
    for text in (b"SELECT 1; SET ROLE b\0", b"select 1;reset all\0", b"SELECT ';' x\0"):
        for twin in (rules.query_head_python, RULES.query_head):
            assert twin(text, 0, len(text), rules.WATCHED_WORDS) == 0, (twin, text)
    for text in (b"SELECT 1;\0", b"SELECT 1 ; ;\n\0"):
        for twin in (rules.query_head_python, RULES.query_head):
            assert twin(text, 0, len(text), rules.WATCHED_WORDS) == 1, (twin, text)


def test_query_head_scans_every_position() -> None:
    """The C scans that skip ahead (``memchr`` for ``_`` and ``;``, the ASCII check eight
    bytes at a time) against the reference at every position of a longer text."""
    assert RULES is not None
    texts = []
    for at in range(0, 24):
        filler = b"abcdefghij klmnopqrstuvwxyz_0123"[:at]
        texts += [b"SELECT " + filler + tail for tail in
                  (b"\xc3\xa9", b"set_config", b"SET_CONFIG(1)", b"_set_confi", b";", b"; x",
                   b"\xc3\xa9;", b"_", b"_\xc3\xa9")]
        texts.append(b"select " + b"x" * at + b"\xc3\xa9" + b"y" * (23 - at))
    for text in texts:
        raw = text + b"\0"
        want = rules.query_head_python(raw, 0, len(raw), rules.WATCHED_WORDS)
        assert RULES.query_head(raw, 0, len(raw), rules.WATCHED_WORDS) == want, text


@settings(max_examples=200, deadline=None)
@given(query_text, st.booleans(), st.binary(max_size=3), st.data())
def test_query_head_parity(text: str, terminated: bool, junk: bytes, data: st.DataObject) -> None:
    assert RULES is not None
    payload = text.encode("utf-8", "surrogatepass") + (b"\0" if terminated else b"")
    raw = junk + payload + junk
    start = data.draw(st.integers(0, len(raw)))
    end = data.draw(st.integers(start, len(raw)))
    for s_, e_ in ((len(junk), len(junk) + len(payload)), (start, end)):
        expected = rules.query_head_python(raw, s_, e_, rules.WATCHED_WORDS)
        assert RULES.query_head(raw, s_, e_, rules.WATCHED_WORDS) == expected


_TAGS = [t.decode() for t in rules.READ_ONLY_TAGS] + ["INSERT 0 1", "UPDATE 3", "DELETE 0",
                                                      "SELEC", "COPY 2", "MERGE 1", "CALL"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_TAGS), st.sampled_from(["", " 12", "\0", "X", "ABCDEFGH"]),
       st.integers(0, 12))
def test_read_only_tag_parity(tag: str, tail: str, cut: int) -> None:
    assert RULES is not None
    payload = (tag + tail).encode()
    for data in (payload, payload[:cut]):
        want = rules.read_only_tag_python(data, rules.READ_ONLY_TAGS)
        assert RULES.read_only_tag(data, rules.READ_ONLY_TAGS) == want, data


_PIECES = ["select", "insert", "update", "delete", "merge", "execute", "bump", "bumpy", "x_bump",
           "$bump", "bump$", "with", "explain", "analyze", "from", "t", "(", ")", ",", ";", " ",
           "  ", "\t", "\n", "1", "_", "ünsert", "é", "stories", "story_tags", "'", "Update"]
statement = st.lists(st.sampled_from(_PIECES), max_size=10).map("".join)
hiding = st.sampled_from([(), rules.hiding_words(()), rules.hiding_words(("bump",)),
                          rules.hiding_words(("bump", "é"))])
names = st.sampled_from([(), ("stories",), ("stories", "story_tags"), ("t",), ("",)])


@settings(max_examples=500, deadline=None)
@given(statement, hiding)
def test_hides_write_parity(text: str, words: tuple[str, ...]) -> None:
    assert RULES is not None
    lowered = text.lower()
    assert RULES.hides_write(lowered, words) == rules.hides_write_python(lowered, words), lowered


@settings(max_examples=500, deadline=None)
@given(statement, names, hiding)
def test_plain_text_parity(text: str, relations: tuple[str, ...], words: tuple[str, ...]) -> None:
    assert RULES is not None
    lowered = text.lower()
    want: Any = rules.plain_text_python(lowered, relations, words)
    assert RULES.plain_text(lowered, relations, words) == want, (lowered, relations, words)


def test_the_rules_say_what_they_are_meant_to() -> None:
    """A few fixed cases, so that both twins being wrong the same way would show."""
    words = rules.hiding_words(("bump",))
    for impl in (rules.hides_write_python, *([RULES.hides_write] if RULES else [])):
        assert impl("select bump(1)", words)
        assert impl("with d as (delete from t returning *) select 1", words)
        assert not impl("select bumpy(1)", words)
        assert not impl("update t set a = 1", words)  # its tag tells
        assert not impl("select 1", words)
        assert not impl("select bump(1)", ())
    assert rules.read_only_tag_python(b"SELECT 1\0", rules.READ_ONLY_TAGS)
    assert not rules.read_only_tag_python(b"INSERT 0 1\0", rules.READ_ONLY_TAGS)


def test_request_classes_parity() -> None:
    """Every client message type is classed alike by both twins."""
    assert RULES is not None
    for mtype in range(256):
        assert RULES.request_class(mtype) == rules.request_class_python(mtype), chr(mtype)
    free = {t for t, c in classes.REQUEST_CLASSES.items()
            if c in (classes.REQUEST_FREE, classes.REQUEST_FLUSH, classes.REQUEST_SYNC)}
    assert free == set(rules.CONTENT_FREE)  # the content-free ones, and no other


_PAYLOADS = [b"", b"I", b"T", b"E", b"X", b"II", b"SELECT 1\0", b"INSERT 0 1\0", b"SHOW\0",
             b"UPDATE 3\0", b"BEGIN\0", b"SELEC", b"\0", b"MERGE 1\0"]


def test_answer_classes_parity() -> None:
    """Every backend message type, with payloads that tell ReadyForQuery's status and a
    CommandComplete's tag apart, is classed alike by both twins; the quiet sets agree."""
    assert RULES is not None
    for mtype in range(256):
        for payload in _PAYLOADS:
            want = rules.answer_class_python(mtype, payload, rules.READ_ONLY_TAGS)
            got = RULES.answer_class(mtype, payload, rules.READ_ONLY_TAGS)
            assert got == want, (chr(mtype), payload)
    assert RULES.quiet_classes() == (rules.RELAY_QUIET, rules.LANE_QUIET)


def test_the_message_classes_say_what_they_are_meant_to() -> None:
    tags = rules.READ_ONLY_TAGS
    for impl in (rules.answer_class_python, *([RULES.answer_class] if RULES else [])):
        assert impl(ord("D"), b"", tags) == classes.ANSWER_ROW
        assert impl(ord("C"), b"SELECT 3\0", tags) == classes.ANSWER_READ
        assert impl(ord("C"), b"INSERT 0 1\0", tags) == classes.ANSWER_WRITE
        assert impl(ord("Z"), b"I", tags) == classes.ANSWER_IDLE
        assert impl(ord("Z"), b"T", tags) == classes.ANSWER_BLOCK
        assert impl(ord("Z"), b"TT", tags) == classes.ANSWER_STATE
        assert impl(ord("E"), b"SERROR\0", tags) == classes.ANSWER_STATE
        assert impl(ord("S"), b"a\0b\0", tags) == classes.ANSWER_STATE
        assert impl(ord("G"), b"", tags) == classes.ANSWER_OTHER
    assert classes.ANSWER_WRITE not in rules.RELAY_QUIET
    assert classes.ANSWER_BLOCK in rules.RELAY_QUIET
    assert classes.ANSWER_BLOCK not in rules.LANE_QUIET
    assert classes.ANSWER_OTHER not in rules.LANE_QUIET
