"""Parity: the compiled ``CollKey`` (``cython_ext.collation``) orders, equates and hashes as the
pure one (``engine.values.collation.CollKey_python``) on random strings under en_US.utf8."""

from __future__ import annotations

from functools import cmp_to_key

from hypothesis import given, settings
from hypothesis import strategies as st

import cython_ext
from engine.values import collation

fast = cython_ext.load_pair("collation")
HANDLE = collation._LIBC.handle("en_US.utf8")
TEXT = st.text(alphabet=st.sampled_from(list("aAbBeEéÉè zZ-_.,'019ßæÆøİ\u0131çÇ\u0301\u00a0")),
               max_size=6)


def test_twin_is_built() -> None:
    assert fast is not None, "cython_ext.collation is not built: run `make compile`"
    assert HANDLE is not None, "en_US.utf8 is not installed (the Makefile's locales-all)"


@settings(max_examples=200, deadline=None)
@given(st.lists(TEXT, max_size=25), st.integers(0, 24), st.integers(0, 24))
def test_order_equality_and_hash(words: list[str], i: int, j: int) -> None:
    assert fast is not None and HANDLE is not None
    pure = [collation.CollKey_python(w, HANDLE) for w in words]
    compiled = [fast.CollKey(w, HANDLE) for w in words]
    assert [k.text for k in sorted(pure)] == [k.text for k in sorted(compiled)]
    if words:
        a, b = i % len(words), j % len(words)
        for keys in (pure, compiled):
            assert (keys[a] < keys[b], keys[a] <= keys[b], keys[a] == keys[b],
                    keys[a] > keys[b], keys[a] >= keys[b], keys[a] != keys[b]) == (
                pure[a] < pure[b], pure[a] <= pure[b], words[a] == words[b],
                pure[a] > pure[b], pure[a] >= pure[b], words[a] != words[b])
            assert (hash(keys[a]) == hash(keys[b])) >= (words[a] == words[b])
    # a total order: sorting with the three-way comparison agrees with sorting by key
    three_way = sorted(words, key=cmp_to_key(lambda x, y: -1 if fast.CollKey(x, HANDLE)
                                             < fast.CollKey(y, HANDLE) else int(x != y)))
    assert three_way == [k.text for k in sorted(compiled)]
